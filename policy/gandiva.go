package policy

import (
	"math/rand"
)

// gandiva is the "LAS with Gandiva space sharing" baseline: a
// heterogeneity-agnostic equal time split in which, while the jobs ask for
// more GPUs than the cluster has, randomly drawn waiting jobs of equal scale
// factor are paired to share GPUs. A drawn pair is kept only if sharing
// helps: its normalized throughput (each member's co-located rate over its
// rate alone, averaged over the types where both can share) must be at
// least 1. Pairs persist until a member leaves; the draws come from
// Options.Seed, so a run is reproducible.
//
// Every unit (unpaired job or pair) then gets the isolated-style share
// (N_t/m)/sf of each type, m the number of units, scaled so a row sums to at
// most 1, and nothing on types where it cannot run. Allocation.Objective is
// MinNormalizedThroughput.

func init() {
	register("gandiva", func(o Options) Policy {
		return &gandivaPolicy{rng: rand.New(rand.NewSource(o.Seed))}
	})
}

// gandivaPolicy is not safe for concurrent use: it keeps its pairs between
// calls.
type gandivaPolicy struct {
	rng   *rand.Rand
	pairs [][2]string
}

func (g *gandivaPolicy) Name() string { return "gandiva" }

// Traits: gandiva's shares ignore the GPU types, but the reference runs it
// like its other packing policies, with a fixed type order, so it counts as
// type-aware.
func (g *gandivaPolicy) Traits() Traits {
	return Traits{TypeAware: true, Packs: true, Objective: ObjectiveMinNormalizedThroughput}
}

func (g *gandivaPolicy) Allocate(p *Problem) (*Allocation, error) {
	types := p.Types()
	index := make(map[string]int, len(p.Jobs))
	for i := range p.Jobs {
		index[p.Jobs[i].ID] = i
	}
	paired := make([]bool, len(p.Jobs))
	kept := g.pairs[:0]
	for _, pr := range g.pairs {
		ia, okA := index[pr[0]]
		ib, okB := index[pr[1]]
		if okA && okB {
			if entry, _ := findPair(p, pr[0], pr[1]); entry != nil {
				kept = append(kept, pr)
				paired[ia], paired[ib] = true, true
			}
		}
	}
	g.pairs = kept

	total, demand := 0, 0
	for _, n := range p.GPUs {
		total += n
	}
	var single []int
	for i := range p.Jobs {
		if !paired[i] {
			single = append(single, i)
			demand += jobScale(&p.Jobs[i])
		}
	}
	for _, pr := range g.pairs {
		demand += jobScale(&p.Jobs[index[pr[0]]])
	}
	// Draw pairs while oversubscribed; every draw that fails counts, so the
	// loop ends even when no good pair exists.
	for tries := 0; demand > total && len(single) >= 2 && tries < 4*len(single); tries++ {
		x := g.rng.Intn(len(single))
		y := g.rng.Intn(len(single) - 1)
		if y >= x {
			y++
		}
		a, b := &p.Jobs[single[x]], &p.Jobs[single[y]]
		if jobScale(a) != jobScale(b) || gandivaPairGain(p, types, a, b) < 1 {
			continue
		}
		// Keep the pair as the problem lists it: callers find rows by
		// their key.
		entry, _ := findPair(p, a.ID, b.ID)
		g.pairs = append(g.pairs, entry.Jobs)
		demand -= jobScale(a)
		if x < y {
			x, y = y, x
		}
		single = append(single[:x], single[x+1:]...)
		single = append(single[:y], single[y+1:]...)
	}

	units := len(single) + len(g.pairs)
	share := func(sf int) []float64 { return equalSlice(p, units, sf) }
	a := &Allocation{Policy: "gandiva", Types: types}
	inPair := make(map[int]bool)
	for _, pr := range g.pairs {
		inPair[index[pr[0]]], inPair[index[pr[1]]] = true, true
	}
	for i := range p.Jobs {
		j := &p.Jobs[i]
		x := make([]float64, len(types))
		if !inPair[i] {
			x = share(jobScale(j))
			for k, t := range types {
				if j.Throughput(t) <= 0 || p.GPUs[t] < jobScale(j) {
					x[k] = 0
				}
			}
		}
		a.Rows = append(a.Rows, Row{Jobs: []string{j.ID}, Fractions: x})
	}
	for _, pr := range g.pairs {
		entry, _ := findPair(p, pr[0], pr[1])
		sf := jobScale(&p.Jobs[index[pr[0]]])
		x := share(sf)
		for k, t := range types {
			tp := entry.Throughputs[t]
			if tp[0] <= 0 || tp[1] <= 0 || p.GPUs[t] < sf {
				x[k] = 0
			}
		}
		a.Rows = append(a.Rows, Row{Jobs: []string{pr[0], pr[1]}, Fractions: x})
	}
	var err error
	a.Objective, err = MinNormalizedThroughput(p, a)
	return a, err
}

// gandivaPairGain is the pair's combined normalized throughput averaged
// over the types where both can share (0 when there is none or the
// problem lists no such pair).
func gandivaPairGain(p *Problem, types []string, a, b *Job) float64 {
	entry, swapped := findPair(p, a.ID, b.ID)
	if entry == nil {
		return 0
	}
	sum, n := 0.0, 0
	for _, t := range types {
		tp := entry.Throughputs[t]
		if swapped {
			tp[0], tp[1] = tp[1], tp[0]
		}
		if tp[0] <= 0 || tp[1] <= 0 || a.Throughput(t) <= 0 || b.Throughput(t) <= 0 || p.GPUs[t] < jobScale(a) {
			continue
		}
		sum += tp[0]/a.Throughput(t) + tp[1]/b.Throughput(t)
		n++
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}
