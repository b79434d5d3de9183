package policy

import (
	"math"
	"sort"
)

// shortest_job_first_perf is a heterogeneity-aware shortest-job-first. Jobs
// are ranked by their remaining time on their fastest type, R_j / max_t T_jt
// (ties by arrival, then problem order), and one LP maximizes
//
//	Σ_j (M − rank_j) · eff_j / max_t T_jt
//
// the priority-weighted form the paper gives for FIFO (§4.2) with the
// shortest remaining job first instead of the earliest arrival: each job's
// progress is measured relative to its fastest type, so every type goes to
// the jobs it helps most, with shorter jobs first in line. Jobs without
// steps left get no weight.
//
// Allocation.Objective is the time in seconds until the first job would
// finish under the allocation (ShortestCompletion), the quantity the paper
// states SJF minimizes.

func init() {
	declareTraits(Traits{TypeAware: true, Objective: ObjectiveShortestCompletion}, "shortest_job_first_perf")
	registerFunc("shortest_job_first_perf", shortestJobFirst)
}

func shortestJobFirst(p *Problem) (*Allocation, error) {
	const name = "shortest_job_first_perf"
	b, err := newPlacementLP(p, realThroughput, false)
	if err != nil {
		return nil, err
	}
	fastest := make([]float64, len(p.Jobs))
	var order []int
	for i := range p.Jobs {
		for _, c := range b.effCoefs[i] {
			fastest[i] = math.Max(fastest[i], c)
		}
		if p.Jobs[i].StepsRemaining > 0 && fastest[i] > 0 {
			order = append(order, i)
		}
	}
	sort.SliceStable(order, func(x, y int) bool {
		a, c := &p.Jobs[order[x]], &p.Jobs[order[y]]
		da, dc := a.StepsRemaining/fastest[order[x]], c.StepsRemaining/fastest[order[y]]
		if da != dc {
			return da < dc
		}
		return a.Arrival < c.Arrival
	})
	b.lp.Maximize()
	m := float64(len(order))
	for rank, i := range order {
		b.addThroughputObjective(i, (m-float64(rank))/fastest[i])
	}
	a, err := b.solve(p, name)
	if err != nil {
		return nil, err
	}
	a.Objective, err = ShortestCompletion(p, a)
	return a, err
}
