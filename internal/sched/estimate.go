package sched

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
	"github.com/gavel-slurm/gavel-slurm/rounds"
)

// rates is a job's estimate on every known type, limited to the types it
// can run on: its typed request's type, or the types with a node that has
// its own constraint features.
func (c *Core) rates(j bridge.Job, now time.Time) (model string, rates map[string]float64, per map[string]Rate, source string) {
	model, per = c.est.Rates(JobQuery{ID: j.ID.String(), Model: j.Tag.Model, Scale: j.GPUs}, c.knownTypes(), now)
	rates = make(map[string]float64, len(per))
	for t, r := range per {
		rates[t] = r.StepsPerSecond
	}
	source = summarize(per)
	if t := j.RequestedGPUType; t != "" {
		// A typed request (--gres=gpu:v100:N) can only run on its type,
		// and its request is never rewritten: the job takes part in the
		// policy pinned there.
		for other := range rates {
			if other != t {
				rates[other] = 0
			}
		}
		return model, rates, per, source + "; pinned to " + t + " by its typed request"
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
	return model, rates, per, source
}

// summarize is one line on where a job's rates come from: the detail
// they share, or each type's source.
func summarize(per map[string]Rate) string {
	types := slices.Sorted(maps.Keys(per))
	same := true
	for _, t := range types {
		same = same && per[t].Detail == per[types[0]].Detail
	}
	if same && len(types) > 0 {
		return per[types[0]].Detail
	}
	parts := make([]string, len(types))
	for i, t := range types {
		parts[i] = t + ": " + per[t].Source
	}
	return strings.Join(parts, ", ")
}

// refreshRates recomputes the rates of the jobs in the mechanism when the
// known GPU types or the nodes' features changed since they were
// estimated (a job that arrived while its type had no node can then run
// there), or when the estimator learned something (new measurements).
func (c *Core) refreshRates(snap *bridge.Snapshot, now time.Time) {
	version := uint64(0)
	if v, ok := c.est.(Versioned); ok {
		version = v.Version()
	}
	if c.typesSig == c.ratesSig && version == c.estVersion {
		return
	}
	c.ratesSig, c.estVersion = c.typesSig, version
	changed := false
	// Jobs measured for the first time that have no partner yet: what the
	// estimator now knows of them may pair them (a model the table lacks
	// is matched to the one it computes like).
	type reoffer struct {
		js *jobState
		j  bridge.Job
	}
	var again []reoffer
	for _, key := range c.order {
		js := c.jobs[key]
		if js == nil || js.scale == 0 {
			continue
		}
		j, ok := jobOf(snap, key)
		if !ok && js.arrayOf != 0 {
			j, ok = snap.Job(js.arrayOf) // a job array's waiting task: its array's record
		}
		if !ok {
			continue
		}
		_, rates, per, source := c.rates(j, now)
		if js.canShare && len(js.partners) == 0 && !anyMeasured(js.perType) && anyMeasured(per) {
			again = append(again, reoffer{js, j})
		}
		js.perType = per
		if maps.Equal(rates, js.throughputs) {
			js.source = source
			continue
		}
		if err := c.mech.SetThroughputs(js.name, rates); err != nil {
			continue
		}
		js.throughputs, js.source, changed = rates, source, true
	}
	if c.refreshPairs(now) {
		changed = true
	}
	for _, r := range again {
		c.offerPairs(r.js, r.j, now)
		changed = changed || len(r.js.partners) > 0
	}
	if changed {
		c.mech.NoteEvent(rounds.EventThroughputChange)
	}
}

// JobQuery names the job an estimate is for.
type JobQuery struct {
	ID string
	// Model is the model the job's tag names, as written ("" if none).
	Model string
	// Scale is the number of GPUs the job asks for.
	Scale int
}

// Rate is one job's step rate on one GPU type and where it comes from.
type Rate struct {
	StepsPerSecond float64
	// Source is "measured", "estimated", "table" or "default".
	Source string
	// Detail explains the figure for status.
	Detail string
}

// Estimator gives a job's step rate on each GPU type and says where the
// figures come from. The reference table is one (TableEstimator);
// measurements from the node collectors are another.
type Estimator interface {
	// Rates returns the job's model as the estimator resolved it (for
	// status) and its rate on each of types.
	Rates(job JobQuery, types []string, now time.Time) (model string, rates map[string]Rate)
}

// Progress is an Estimator that also hears how far jobs have come: the
// cumulative steps they report (through the collectors' progress files).
// A job's remaining steps are then its tag's total less what it reported,
// rather than the whole total, which is all the tag alone can say.
type Progress interface {
	// StepsDone is the job's latest reported cumulative step count;
	// false when it reported none.
	StepsDone(job bridge.JobID) (int64, bool)
}

// Versioned is an Estimator whose answers change as it learns: Version
// changes whenever they may have, so the step asks again only then.
type Versioned interface {
	Version() uint64
}

// TableEstimator estimates from a throughput table: the entry for the
// tagged model at the job's GPU count, or, when the table does not know
// it, the same rate on every type (a conservative default that treats the
// types as interchangeable rather than guessing a speed-up). Types the
// table lacks get the model's slowest known rate.
type TableEstimator struct {
	Table *throughputs.Table
}

// Rates implements Estimator.
func (e TableEstimator) Rates(job JobQuery, types []string, _ time.Time) (string, map[string]Rate) {
	name, rates, source := e.Estimate(job.Model, job.Scale, types)
	kind := "table"
	if strings.HasPrefix(source, "default") {
		kind = "default"
	}
	out := make(map[string]Rate, len(rates))
	for t, v := range rates {
		out[t] = Rate{StepsPerSecond: v, Source: kind, Detail: source}
	}
	return name, out
}

// Estimate is the table's answer for a model at scale GPUs on types, and
// its source.
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

// estimate is the estimator's answer for a model on every known type, as
// the table would give it to a job that has no measurements.
func (c *Core) estimate(model string, scale int) (string, map[string]float64, string) {
	name, per := c.est.Rates(JobQuery{Model: model, Scale: scale}, c.knownTypes(), time.Time{})
	rates := make(map[string]float64, len(per))
	for t, r := range per {
		rates[t] = r.StepsPerSecond
	}
	return name, rates, summarize(per)
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

// anyMeasured reports whether any of a job's rates was measured.
func anyMeasured(per map[string]Rate) bool {
	for _, r := range per {
		if r.Source == "measured" {
			return true
		}
	}
	return false
}
