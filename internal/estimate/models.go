package estimate

import (
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// ModelRates estimates the rate on each of types of a job of the given
// model at scale GPUs, from every job of that model at that scale: their
// fresh measurements are pooled per type (geometric mean), and the other
// types are estimated from the pool as for one job. It returns the table's
// name for the model ("" if the table lacks it).
func (e *Estimator) ModelRates(model string, scale int, types []string, now time.Time) (string, map[string]Estimate) {
	e.mu.Lock()
	defer e.mu.Unlock()
	l := e.learn()
	p := e.poolProbe(l, model, scale, now)
	out := make(map[string]Estimate, len(types))
	for _, t := range types {
		out[t] = inPolicyRange(e.rate(l, p, t, now))
	}
	return p.name, out
}

// poolProbe builds the probe of all jobs of model at scale, from their
// fresh measurements only: a stale one still informs the learned rows,
// but the pool answers for the model as it runs now.
func (e *Estimator) poolProbe(l *learned, model string, scale int, now time.Time) *probe {
	p := e.newProbe(l, model, scale)
	id := e.ref.identity(model)
	if id == "none" {
		return p
	}
	sums := map[string]*measured{}
	logSum := map[string]float64{}
	// In job order: the sums must not depend on the map's order, or the
	// same jobs would give rates that differ in their last bits.
	for _, jid := range slices.Sorted(maps.Keys(e.jobs)) {
		j := e.jobs[jid]
		if j.identity != id || j.scale != scale {
			continue
		}
		for t, c := range j.cells {
			if c.accepted == 0 || now.Sub(c.last) > e.opts.StaleAfter {
				continue
			}
			s := sums[t]
			if s == nil {
				s = &measured{}
				sums[t] = s
			}
			logSum[t] += math.Log(c.rate)
			s.intervals += c.accepted
			s.outliers += c.outliers
			s.jobs++
			if c.last.After(s.last) {
				s.last = c.last
			}
		}
	}
	for t, s := range sums {
		y := logSum[t] / float64(s.jobs)
		s.rate = math.Exp(y)
		p.measured[t] = *s
		p.known[l.col[t]] = y
	}
	return p
}

// Models adapts an Estimator to the scheduling step's per-model question
// (sched.Estimator): the model's resolved name, its rate on each type and
// where the figures come from, in one line.
type Models struct {
	Estimator *Estimator
	// Now gives the time against which measurements go stale; nil takes
	// the time of the newest measurement, so that nothing goes stale
	// while the collectors are silent.
	Now func() time.Time
}

// Estimate implements sched.Estimator.
func (m Models) Estimate(model string, scale int, types []string) (string, map[string]float64, string) {
	e := m.Estimator
	now := e.latestTime()
	if m.Now != nil {
		now = m.Now()
	}
	name, est := e.ModelRates(model, scale, types, now)
	if name == "" {
		name = model
	}
	return name, StepsPerSecond(est), Summary(est, types)
}

func (e *Estimator) latestTime() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.latest
}

// Summary says in one line where a job's rates come from: the detail when
// every type shares it, else each type's detail in the order of types.
func Summary(est map[string]Estimate, types []string) string {
	if len(types) == 0 {
		return ""
	}
	same := true
	for _, t := range types {
		if est[t].Detail != est[types[0]].Detail {
			same = false
			break
		}
	}
	if same {
		return est[types[0]].Detail
	}
	parts := make([]string, 0, len(types))
	for _, t := range types {
		parts = append(parts, t+": "+est[t].Detail)
	}
	return strings.Join(parts, "; ")
}
