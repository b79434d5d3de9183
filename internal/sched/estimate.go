package sched

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
	"github.com/gavel-slurm/gavel-slurm/rounds"
)

// rates is a job's estimate (see estimate) limited to the types it can
// run on: its typed request's type, or the types with a node that has its
// own constraint features.
func (c *Core) rates(j bridge.Job) (model string, rates map[string]float64, source string) {
	model, rates, source = c.estimate(j.Tag.Model, j.GPUs)
	if t := j.RequestedGPUType; t != "" {
		// A typed request (--gres=gpu:v100:N) can only run on its type,
		// and its request is never rewritten: the job takes part in the
		// policy pinned there.
		for other := range rates {
			if other != t {
				rates[other] = 0
			}
		}
		return model, rates, source + "; pinned to " + t + " by its typed request"
	}
	if own, _ := ownFeatures(j.Constraints, c.isGPUType); len(own) > 0 {
		fit := c.typesWithFeatures(own)
		for t := range rates {
			if !slices.Contains(fit, t) {
				rates[t] = 0
			}
		}
		source += "; only " + strings.Join(fit, ", ") + " have nodes with its features " + strings.Join(own, "&")
	}
	return model, rates, source
}

// refreshRates recomputes the rates of the jobs in the mechanism when the
// known GPU types or the nodes' features changed since they were
// estimated: a job that arrived while its type had no node can then run
// there.
func (c *Core) refreshRates(snap *bridge.Snapshot) {
	if c.typesSig == c.ratesSig {
		return
	}
	c.ratesSig = c.typesSig
	changed := false
	for _, id := range c.order {
		js := c.jobs[id]
		jid, err := parseJobID(id)
		if js == nil || js.scale == 0 || err != nil {
			continue
		}
		j, ok := snap.Job(jid)
		if !ok {
			continue
		}
		_, rates, source := c.rates(j)
		if maps.Equal(rates, js.throughputs) {
			continue
		}
		if err := c.mech.SetThroughputs(id, rates); err != nil {
			continue
		}
		js.throughputs, js.source, changed = rates, source, true
	}
	if changed {
		c.mech.NoteEvent(rounds.EventThroughputChange)
	}
}

// Estimator gives a job's step rate on each GPU type and says where the
// figures come from. The reference table is one; measurements from the
// node collectors are another.
type Estimator interface {
	// Estimate returns the model's resolved name, its rate on each of
	// types at scale GPUs, and the source of the figures.
	Estimate(model string, scale int, types []string) (name string, rates map[string]float64, source string)
}

// TableEstimator estimates from a throughput table: the entry for the
// tagged model at the job's GPU count, or, when the table does not know
// it, the same rate on every type (a conservative default that treats the
// types as interchangeable rather than guessing a speed-up). Types the
// table lacks get the model's slowest known rate.
type TableEstimator struct {
	Table *throughputs.Table
}

// Estimate implements Estimator.
func (e TableEstimator) Estimate(model string, scale int, types []string) (string, map[string]float64, string) {
	out := make(map[string]float64, len(types))
	name, ok := bridge.ResolveModel(model, e.Table.Models())
	if ok && e.Table.Has(name, scale) {
		rates, _ := e.Table.IsolatedRates(name, scale)
		slowest := 0.0
		for _, r := range rates {
			if r > 0 && (slowest == 0 || r < slowest) {
				slowest = r
			}
		}
		source := fmt.Sprintf("reference table: %s x%d", name, scale)
		filled := false
		tableTypes := e.Table.Types()
		for _, t := range types {
			if i := indexOf(tableTypes, t); i >= 0 {
				out[t] = rates[i]
			} else {
				out[t] = slowest
				filled = true
			}
		}
		if filled {
			source += " (types outside the table assumed as slow as its slowest)"
		}
		return name, out, source
	}
	for _, t := range types {
		out[t] = 1
	}
	why := "model not in the reference table"
	if model == "" {
		why = "no model in the tag"
	} else if ok {
		why = fmt.Sprintf("%s has no entry for %d GPUs", name, scale)
		model = name
	}
	return model, out, "default: equal on every type (" + why + ")"
}

// estimate is the estimator's answer for every known GPU type.
func (c *Core) estimate(model string, scale int) (string, map[string]float64, string) {
	return c.est.Estimate(model, scale, c.knownTypes())
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}
