package policy

import (
	"fmt"
	"math"
)

// Space sharing for the max-min policies (Gavel §3.1): besides one row per
// job, the allocation has one row per co-located pair. A job's level sums
// its rate alone and its rate inside every pair that contains it; its time
// alone plus its time in all its pairs is at most 1; a pair of scale factor
// sf occupies sf GPUs of the type it runs on. Pairs of jobs with different
// scale factors cannot run and are ignored, as are types on which either
// member's co-located rate is 0.

func init() {
	register("max_min_fairness_packed", func(Options) Policy {
		return &maxMinPolicy{name: "max_min_fairness_packed", packed: true}
	})
}

// addPairs validates p.Pairs and keeps the usable ones, in normalized units
// (each side's rate divided by that job's own normalizer).
func (m *mmModel) addPairs(p *Problem, agnostic bool) error {
	if len(p.Pairs) == 0 {
		return nil
	}
	index := make(map[string]int, len(p.Jobs))
	for j := range p.Jobs {
		if _, dup := index[p.Jobs[j].ID]; dup {
			return fmt.Errorf("job id %q appears twice", p.Jobs[j].ID)
		}
		index[p.Jobs[j].ID] = j
	}
	for i := range p.Pairs {
		pair := &p.Pairs[i]
		var jobs [2]int
		for side, id := range pair.Jobs {
			j, ok := index[id]
			if !ok {
				return fmt.Errorf("pair %d (%s+%s): unknown job %q", i, pair.Jobs[0], pair.Jobs[1], id)
			}
			jobs[side] = j
		}
		if jobs[0] == jobs[1] {
			return fmt.Errorf("pair %d pairs job %q with itself", i, pair.Jobs[0])
		}
		for t, v := range pair.Throughputs {
			for _, r := range v {
				if !(r >= 0) || math.IsInf(r, 0) {
					return fmt.Errorf("pair %d (%s+%s): throughput %v on %q, want finite non-negative numbers", i, pair.Jobs[0], pair.Jobs[1], v, t)
				}
			}
		}
		a, b := &m.jobs[jobs[0]], &m.jobs[jobs[1]]
		if !a.runnable || !b.runnable || a.sf != b.sf {
			continue
		}
		mp := mmPair{problemIndex: i, jobs: jobs, sf: a.sf}
		usable := false
		for side := range mp.rate {
			mp.rate[side] = make([]float64, len(m.types))
		}
		for t, name := range m.types {
			v := pair.Throughputs[name]
			if m.capacity[t] < a.sf || v[0] <= 0 || v[1] <= 0 {
				continue
			}
			for side, job := range [2]*mmJob{a, b} {
				r := v[side]
				if agnostic {
					r = 1
				}
				mp.rate[side][t] = job.sf * r / job.normalizer
			}
			usable = true
		}
		if !usable {
			continue
		}
		m.pairs = append(m.pairs, mp)
		m.links = append(m.links, pairLink{
			Jobs: jobs,
			Side: [2][]byte{classKey(nil).floats(mp.rate[0]), classKey(nil).floats(mp.rate[1])},
		})
	}
	return nil
}

// pairsByJob lists, for every job, the indices of the usable pairs that
// contain it.
func (m *mmModel) pairsByJob() [][]int {
	out := make([][]int, len(m.jobs))
	for i := range m.pairs {
		for _, j := range m.pairs[i].jobs {
			out[j] = append(out[j], i)
		}
	}
	return out
}
