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
//
// A problem of n jobs may list every pair, n²/2 of them, most alike (jobs
// of a few dozen types): the rate vectors and their class descriptions are
// interned, so that a pair costs a few map lookups and no allocation of its
// own.
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
	m.pairs = make([]mmPair, 0, len(p.Pairs))
	m.links = make([]pairLink, 0, len(p.Pairs))
	in := newRateInterner(len(m.types))
	// Callers list pairs grouped by one member (every pair of a new job,
	// or of job 0, then job 1, ...): the last id of each side is kept, so
	// that most pairs need one map lookup, not two.
	lastID, lastJob := [2]string{}, [2]int{-1, -1}
	for i := range p.Pairs {
		pair := &p.Pairs[i]
		var jobs [2]int
		for side, id := range pair.Jobs {
			if lastJob[side] >= 0 && id == lastID[side] {
				jobs[side] = lastJob[side]
				continue
			}
			j, ok := index[id]
			if !ok {
				return fmt.Errorf("pair %d (%s+%s): unknown job %q", i, pair.Jobs[0], pair.Jobs[1], id)
			}
			jobs[side], lastID[side], lastJob[side] = j, id, j
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
		clear(in.scratch[0])
		clear(in.scratch[1])
		usable := false
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
				in.scratch[side][t] = job.sf * r / job.normalizer
			}
			usable = true
		}
		if !usable {
			continue
		}
		mp := mmPair{problemIndex: i, jobs: jobs, sf: a.sf}
		var link pairLink
		link.Jobs = jobs
		for side := range mp.rate {
			mp.rate[side], link.Side[side] = in.intern(in.scratch[side])
		}
		m.pairs = append(m.pairs, mp)
		m.links = append(m.links, link)
	}
	return nil
}

// rateInterner hands out one shared copy of every distinct rate vector,
// with its class description (the bytes of its floats). The copies are
// read-only.
type rateInterner struct {
	scratch [2][]float64
	key     classKey
	ids     map[string]int
	rates   [][]float64
	keys    [][]byte
}

func newRateInterner(types int) *rateInterner {
	return &rateInterner{scratch: [2][]float64{make([]float64, types), make([]float64, types)}, ids: map[string]int{}}
}

// intern returns the shared copy of rate and its description.
func (in *rateInterner) intern(rate []float64) ([]float64, []byte) {
	in.key = in.key[:0].floats(rate)
	id, ok := in.ids[string(in.key)]
	if !ok {
		id = len(in.rates)
		key := append([]byte(nil), in.key...)
		in.ids[string(key)] = id
		in.rates = append(in.rates, append([]float64(nil), rate...))
		in.keys = append(in.keys, key)
	}
	return in.rates[id], in.keys[id]
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
