package policy

import (
	"errors"
	"fmt"
	"math"
)

// The cost policies maximize training progress per unit of money: the
// linear-fractional objective of the paper's §4.2,
//
//	maximize Σ_j Σ_t T[j][t]·X[j][t]  /  Σ_j Σ_t cost_t·sf_j·X[j][t]
//
// (a job of scale factor sf pays for sf GPUs; a co-located pair pays for its
// GPUs once). The Charnes-Cooper transform makes it one exact LP: with
// s = K/denominator and y = s·X, maximize Σ T·y / K subject to
// Σ cost·sf·y = K and the allocation constraints with their right-hand
// sides multiplied by s (K, the hourly cost of the whole cluster, only
// keeps the numbers of the order of 1). The _SLOs variants add Σ_t T[j][t]·X[j][t] >= R_j/SLO_j for every job
// with an SLO.
//
// The ratio is scale-invariant, so its optimum usually includes allocations
// that leave most of the cluster idle. A second LP therefore picks, among
// the ratio-optimal allocations, one with the largest total throughput.
//
// Allocation.Objective is StepsPerCost: steps bought per cost unit (per
// dollar when costs are $/GPU-hour).

func init() {
	registerFunc("max_sum_throughput_normalized_by_cost_perf", func(p *Problem) (*Allocation, error) {
		return maxThroughputPerCost(p, "max_sum_throughput_normalized_by_cost_perf", false, false)
	})
	registerFunc("max_sum_throughput_normalized_by_cost_perf_SLOs", func(p *Problem) (*Allocation, error) {
		return maxThroughputPerCost(p, "max_sum_throughput_normalized_by_cost_perf_SLOs", true, false)
	})
	registerFunc("max_sum_throughput_normalized_by_cost_packed_SLOs", func(p *Problem) (*Allocation, error) {
		return maxThroughputPerCost(p, "max_sum_throughput_normalized_by_cost_packed_SLOs", true, true)
	})
}

// ratioTolerance is the relative slack allowed on the optimal ratio in the
// second LP, so that solver round-off cannot make it infeasible (1e-12 was
// too tight for 2,000 jobs). The slack may buy slivers of allocation of the
// order of 1e-8 for jobs outside the optimum.
const ratioTolerance = 1e-9

func maxThroughputPerCost(p *Problem, name string, slos, packed bool) (*Allocation, error) {
	for _, t := range p.Types() {
		c, ok := p.Costs[t]
		switch {
		case !ok:
			return nil, fmt.Errorf("GPU type %q: %w", t, ErrNoCosts)
		case !(c > 0) || math.IsInf(c, 1):
			return nil, fmt.Errorf("GPU type %q: cost %g must be positive and finite", t, c)
		}
	}
	var stats Stats

	// Stage 1: the optimal ratio, by Charnes-Cooper.
	cc, err := buildPlacementLP(p, realThroughput, packed, true)
	if err != nil {
		return nil, err
	}
	if cc.lp.NumColumns() == 1 {
		return nil, fmt.Errorf("no job can run on any GPU type: %w", ErrInfeasible)
	}
	cc.lp.Maximize()
	for i := range cc.effCols {
		cc.addThroughputObjective(i, 1)
	}
	// The denominator is normalized to the hourly cost of the whole
	// cluster rather than to 1: then s and y = s·X are of the order of 1
	// and X, and the solver's absolute tolerances stay small relative to
	// them (with a denominator of 1, y shrinks with the cluster's price and
	// the ratio came out too high by more than the second stage's slack).
	norm := 0.0
	for t, n := range p.GPUs {
		norm += p.Costs[t] * float64(n)
	}
	costCols, costCoefs := costForm(p, cc)
	cc.lp.AddRow(costCols, costCoefs, norm, norm)
	if slos {
		if err := addSLORows(p, cc); err != nil {
			return nil, err
		}
	}
	res, err := cc.lp.Solve()
	if errors.Is(err, ErrInfeasible) && slos {
		return nil, fmt.Errorf("the SLOs cannot all be met: %w", err)
	}
	if err != nil {
		return nil, err
	}
	noteLP(&stats, cc.lp)
	ratio := res.Objective / norm // steps/s per cost unit/hour

	// Stage 2: the most throughput among allocations within tolerance of
	// that ratio: Σ eff - ratio·Σ cost·sf·X >= 0.
	b, err := newPlacementLP(p, realThroughput, packed)
	if err != nil {
		return nil, err
	}
	b.lp.Maximize()
	costCols, costCoefs = costForm(p, b)
	coefByCol := make(map[int]float64, len(costCols))
	for k, c := range costCols {
		coefByCol[c] = -ratio * (1 - ratioTolerance) * costCoefs[k]
	}
	for i := range b.effCols {
		b.addThroughputObjective(i, 1)
		for k, c := range b.effCols[i] {
			coefByCol[c] += b.effCoefs[i][k]
		}
	}
	cols := make([]int, 0, len(coefByCol))
	coefs := make([]float64, 0, len(coefByCol))
	for c := 0; c < b.lp.NumColumns(); c++ {
		if v, ok := coefByCol[c]; ok {
			cols = append(cols, c)
			coefs = append(coefs, v)
		}
	}
	b.lp.AddRow(cols, coefs, 0, Inf)
	if slos {
		if err := addSLORows(p, b); err != nil {
			return nil, err
		}
	}
	var a *Allocation
	if res2, err := b.lp.Solve(); err == nil {
		a = b.allocation(p, name, res2.X)
		noteLP(&stats, b.lp)
	} else {
		// Round-off put the ratio just out of reach: keep stage 1's
		// allocation X = y/s, optimal but possibly using little capacity.
		s := res.X[cc.scaleCol]
		x := make([]float64, len(res.X))
		for c := range x {
			if c != cc.scaleCol && s > 0 {
				x[c] = res.X[c] / s
			}
		}
		a = cc.allocation(p, name, x)
	}
	a.Stats = stats
	if a.Objective, err = StepsPerCost(p, a); err != nil {
		return nil, err
	}
	return a, nil
}

// costForm is the linear form Σ cost_t·sf·X over the columns of b.
func costForm(p *Problem, b *placementLP) ([]int, []float64) {
	var cols []int
	var coefs []float64
	for _, u := range b.units {
		sf := float64(jobScale(&p.Jobs[u.jobs[0]]))
		for k, c := range u.cols {
			if c >= 0 {
				cols = append(cols, c)
				coefs = append(coefs, p.Costs[b.types[k]]*sf)
			}
		}
	}
	return cols, coefs
}

// addSLORows adds eff_j >= R_j/SLO_j for every job with an SLO and steps
// left (homogenized when b is). Jobs that cannot run on the cluster at all
// are skipped (no allocation could serve them); a job whose SLO is out of
// reach even on its fastest type alone is an error naming it.
func addSLORows(p *Problem, b *placementLP) error {
	for i := range p.Jobs {
		j := &p.Jobs[i]
		if j.SLO <= 0 || j.StepsRemaining <= 0 || len(b.effCols[i]) == 0 {
			continue
		}
		need := j.StepsRemaining / j.SLO
		best := 0.0
		for _, c := range b.effCoefs[i] {
			best = math.Max(best, c)
		}
		if best < need {
			return fmt.Errorf("job %s: SLO of %gs needs %g steps/s, its fastest placement gives %g: %w", j.ID, j.SLO, need, best, ErrInfeasible)
		}
		if b.scaleCol >= 0 {
			b.effectiveRow(i, []int{b.scaleCol}, []float64{-need}, 0, Inf)
		} else {
			b.effectiveRow(i, nil, nil, need, Inf)
		}
	}
	return nil
}
