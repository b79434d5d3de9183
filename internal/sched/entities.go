package sched

import (
	"fmt"
	"maps"
	"slices"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// EntityView is one entity's line in status: its weight in the policy,
// what the allocation gives its jobs and what they received since they
// arrived, by GPU type and in effective throughput.
type EntityView struct {
	Name   string
	Weight float64
	Jobs   int
	// Allocated is the GPUs the allocation gives the entity's jobs, by
	// type; Received the GPU-seconds they ran, by type.
	Allocated map[string]float64
	Received  map[string]float64
	// EffectiveAllocated and EffectiveReceived weigh each type by how
	// fast each job runs there against its fastest type: GPUs (and
	// GPU-seconds) at the speed of each job's best GPU, so that entities
	// whose jobs gain differently from newer GPUs compare.
	EffectiveAllocated, EffectiveReceived float64
}

// entityViews sums the scheduled jobs by entity, in name order; nil when
// no job names one.
func (c *Core) entityViews() []EntityView {
	alloc := map[string]map[string]float64{}
	if c.allocation != nil {
		alloc = c.allocation.Map()
	}
	byName := map[string]*EntityView{}
	for _, js := range c.jobs {
		if js.scale == 0 || js.entity == "" {
			continue
		}
		e := byName[js.entity]
		if e == nil {
			e = &EntityView{Name: js.entity, Weight: c.entityWeight(js.entity),
				Allocated: map[string]float64{}, Received: map[string]float64{}}
			byName[js.entity] = e
		}
		e.Jobs++
		best := 0.0
		for _, r := range js.throughputs {
			best = max(best, r)
		}
		scale := float64(js.scale)
		for t, f := range alloc[js.name] {
			e.Allocated[t] += f * scale
			if best > 0 {
				e.EffectiveAllocated += f * scale * js.throughputs[t] / best
			}
		}
		for t, sec := range js.received {
			e.Received[t] += sec * scale
			if best > 0 {
				e.EffectiveReceived += sec * scale * js.throughputs[t] / best
			}
		}
	}
	if len(byName) == 0 {
		return nil
	}
	out := make([]EntityView, 0, len(byName))
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		out = append(out, *byName[name])
	}
	return out
}

// accountingNote says what of slurmdbd the round had.
func accountingNote(snap *bridge.Snapshot) string {
	if snap.Accounting == nil {
		if snap.AccountingError != "" {
			return "no limits from slurmdbd: " + snap.AccountingError
		}
		return ""
	}
	return fmt.Sprintf("limits from slurmdbd: %d QOS, %d associations, %d running GPU jobs elsewhere",
		len(snap.Accounting.QOS), len(snap.Accounting.Associations), len(snap.RunningOutside))
}
