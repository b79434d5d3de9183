package policy

import (
	"fmt"
	"math"
)

// The finish_time_fairness policies minimize Themis' max_j ρ_j with
//
//	ρ_j = (t_j + R_j / eff_j) / D_j,  D_j = C_j + R_j / iso_j
//
// (t: time since start, R: steps left, eff: effective throughput under X,
// C: cumulative isolated time, iso: throughput under the isolated 1/n share).
// ρ_j <= ρ is equivalent to eff_j >= c_j(ρ) = R_j / (ρ·D_j − t_j), which is
// linear in X for a fixed ρ, so the optimum is found by bisection on ρ over
// the LP
//
//	maximize λ  s.t.  eff_j >= λ·c_j(ρ)  for every job with steps left,
//
// which is feasible for ρ exactly when λ* >= 1. Each solve also tightens
// both ends beyond the halving: its allocation X has max_j ρ_j(X) >= the
// optimum (an upper bound), and since every allocation leaves some job
// with eff_j <= λ*·c_j, the optimum is at least
// min_j t_j/D_j + (ρ − t_j/D_j)/λ* (a lower bound). The search stops at a
// relative gap of 1e-6 and the final allocation is that LP solved at the
// upper end, so every job gets at least its requirement and spare capacity
// is spread in proportion to the requirements.
//
// Jobs that cannot run on any type of the cluster (zero throughput, or a
// scale factor above the count of every type where they could run) get an
// empty row and are left out of the objective.
//
// finish_time_fairness is the heterogeneity-agnostic baseline (every usable
// type as fast as the job's v100, also in the isolated reference),
// finish_time_fairness_perf uses measured throughputs, and
// finish_time_fairness_packed adds the problem's pairs. Allocation.Objective
// is MaxFinishTimeFairness under the measured throughputs.

func init() {
	registerFunc("finish_time_fairness", func(p *Problem) (*Allocation, error) {
		return minMaxFinishTimeFairness(p, "finish_time_fairness", agnosticThroughput(p), false)
	})
	registerFunc("finish_time_fairness_perf", func(p *Problem) (*Allocation, error) {
		return minMaxFinishTimeFairness(p, "finish_time_fairness_perf", realThroughput, false)
	})
	registerFunc("finish_time_fairness_packed", func(p *Problem) (*Allocation, error) {
		return minMaxFinishTimeFairness(p, "finish_time_fairness_packed", realThroughput, true)
	})
}

// ftfRelativeGap is the relative precision of the optimal max ρ.
const ftfRelativeGap = 1e-6

// ftfMaxSolves bounds the bisection; halving alone needs about 60 solves to
// shrink any double range to 1e-6 relative, and the bound updates need far
// fewer in practice.
const ftfMaxSolves = 200

// ftfJob is one job's data for the search, in the policy's throughput view.
type ftfJob struct {
	index     int
	since     float64 // t_j
	remaining float64 // R_j
	isoTime   float64 // D_j
}

func minMaxFinishTimeFairness(p *Problem, name string, tput throughputFunc, packed bool) (*Allocation, error) {
	b, err := newPlacementLP(p, tput, packed)
	if err != nil {
		return nil, err
	}
	types := p.Types()
	var active []ftfJob
	lo := 0.0 // a lower bound on the optimal max ρ
	for i := range p.Jobs {
		j := &p.Jobs[i]
		share := IsolatedShare(p, j)
		iso := 0.0
		for k, t := range types {
			iso += tput(j, t) * share[k]
		}
		rho := themisRho(j.TimeSinceStart, j.StepsRemaining, 1, j.IsolatedTime, iso)
		if j.StepsRemaining <= 0 {
			if !math.IsNaN(rho) {
				lo = math.Max(lo, rho) // a finished job's ρ does not depend on X
			}
			continue
		}
		if iso <= 0 || len(b.effCols[i]) == 0 {
			continue // runs nowhere: no allocation can change its ρ
		}
		fj := ftfJob{index: i, since: j.TimeSinceStart, remaining: j.StepsRemaining, isoTime: j.IsolatedTime + j.StepsRemaining/iso}
		active = append(active, fj)
		// No allocation gives the job more than its best single column.
		best := 0.0
		for _, c := range b.effCoefs[i] {
			best = math.Max(best, c)
		}
		lo = math.Max(lo, (fj.since+fj.remaining/best)/fj.isoTime)
	}
	if len(active) == 0 {
		a := b.allocation(p, name, make([]float64, b.lp.NumColumns()))
		a.Objective, err = MaxFinishTimeFairness(p, a)
		return a, err
	}

	lambda := b.lp.AddColumn(0, Inf, 1)
	b.lp.Maximize()
	reqRows := make([]int, len(active))
	for n, fj := range active {
		reqRows[n] = b.lp.NumRows()
		b.effectiveRow(fj.index, []int{lambda}, []float64{-1}, 0, Inf) // coefficient set per ρ
	}
	var stats Stats
	// solveAt solves the λ-LP at ρ; it returns λ* and the column values.
	solveAt := func(rho float64) (float64, []float64, error) {
		for n, fj := range active {
			need := fj.remaining / (rho*fj.isoTime - fj.since)
			b.setRowCoef(reqRows[n], lambda, -need)
		}
		res, err := b.lp.Solve()
		if err != nil {
			return 0, nil, fmt.Errorf("at ρ = %g: %w", rho, err)
		}
		noteLP(&stats, b.lp)
		return res.X[lambda], res.X, nil
	}
	// maxRho is max_j ρ_j at column values x in the policy's view.
	maxRho := func(x []float64) float64 {
		eff := b.effective(x)
		worst := lo
		for _, fj := range active {
			if eff[fj.index] <= 0 {
				return math.Inf(1)
			}
			worst = math.Max(worst, (fj.since+fj.remaining/eff[fj.index])/fj.isoTime)
		}
		return worst
	}

	hi := math.Inf(1)
	rho := lo
	for iter := 0; iter < ftfMaxSolves; iter++ {
		lam, x, err := solveAt(rho)
		if err != nil {
			return nil, err
		}
		if lam <= 0 {
			return nil, fmt.Errorf("at ρ = %g no allocation serves every job: %w", rho, ErrInfeasible)
		}
		hi = math.Min(hi, maxRho(x))
		bound := math.Inf(1)
		for _, fj := range active {
			base := fj.since / fj.isoTime
			bound = math.Min(bound, base+(rho-base)/lam)
		}
		lo = math.Max(lo, math.Min(bound, hi))
		if hi-lo <= ftfRelativeGap*lo {
			break
		}
		rho = (lo + hi) / 2
	}
	_, x, err := solveAt(hi)
	if err != nil {
		return nil, err
	}
	a := b.allocation(p, name, x)
	a.Stats = stats
	if a.Objective, err = MaxFinishTimeFairness(p, a); err != nil {
		return nil, err
	}
	return a, nil
}
