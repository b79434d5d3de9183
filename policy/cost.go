package policy

import (
	"errors"
	"fmt"
	"math"
	"sort"
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
// with an SLO. One job's SLO must not leave every job without an
// allocation: an SLO that cannot be met (even by the job's fastest
// placement all the time, or whose deadline has passed) is dropped, and
// when the rest cannot all be met together the fewest of the tightest are
// dropped; Allocation.Notes says which and why.
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
	var targets []sloTarget
	var notes map[string]string
	if slos {
		probe, err := newPlacementLP(p, realThroughput, packed)
		if err != nil {
			return nil, err
		}
		targets, notes = reachableSLOs(p, probe)
	}

	// Stage 1: the optimal ratio, by Charnes-Cooper, under the SLOs of
	// targets[dropped:]. When they cannot all be met together, the fewest
	// of the tightest are dropped (targets is sorted tightest first):
	// dropping more SLOs only makes the LP easier, so the number is found
	// by bisection, in a few LPs.
	cc, res, norm, err := ratioStage(p, packed, targets, &stats)
	dropped := 0
	if errors.Is(err, ErrInfeasible) && len(targets) > 0 {
		if cc, res, norm, err = ratioStage(p, packed, nil, &stats); err != nil {
			return nil, err
		}
		lo, hi := 0, len(targets) // infeasible keeping targets[lo:], feasible keeping targets[hi:]
		for hi-lo > 1 {
			mid := (lo + hi) / 2
			c, r, n, err := ratioStage(p, packed, targets[mid:], &stats)
			switch {
			case err == nil:
				hi, cc, res, norm = mid, c, r, n
			case errors.Is(err, ErrInfeasible):
				lo = mid
			default:
				return nil, err
			}
		}
		dropped = hi
		for _, s := range targets[:dropped] {
			notes = addNote(notes, p.Jobs[s.job].ID, fmt.Sprintf(
				"SLO dropped: the SLOs cannot all be met together and this is one of the %d tightest (it needs %.0f%% of its best placement's time)",
				dropped, 100*s.need/s.best))
		}
	}
	if err != nil {
		return nil, err
	}
	targets = targets[dropped:]
	ratio := res.Objective / norm // steps/s per cost unit/hour

	// Stage 2: the most throughput among allocations within tolerance of
	// that ratio: Σ eff - ratio·Σ cost·sf·X >= 0.
	b, err := newPlacementLP(p, realThroughput, packed)
	if err != nil {
		return nil, err
	}
	b.lp.Maximize()
	costCols, costCoefs := costForm(p, b)
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
	addSLORows(b, targets)
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
	a.Notes = notes
	if a.Objective, err = StepsPerCost(p, a); err != nil {
		return nil, err
	}
	return a, nil
}

// ratioStage builds and solves stage 1, the Charnes-Cooper LP of the best
// ratio, with the SLOs of targets. It returns the LP, its solution and the
// normalization of the cost, so that the ratio is res.Objective/norm.
func ratioStage(p *Problem, packed bool, targets []sloTarget, stats *Stats) (*placementLP, *lpResult, float64, error) {
	cc, err := buildPlacementLP(p, realThroughput, packed, true)
	if err != nil {
		return nil, nil, 0, err
	}
	if cc.lp.NumColumns() == 1 {
		return nil, nil, 0, fmt.Errorf("no job can run on any GPU type: %w", ErrInfeasible)
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
	addSLORows(cc, targets)
	res, err := cc.lp.Solve()
	if err != nil {
		return nil, nil, 0, err
	}
	noteLP(stats, cc.lp)
	return cc, res, norm, nil
}

// sloTarget is one job's SLO as a constraint: effective throughput at
// least need steps/s, where best is the most its fastest placement gives.
type sloTarget struct {
	job        int
	need, best float64
}

// reachableSLOs returns the SLOs that each job could meet on its own,
// tightest (largest share of its best placement's time) first, and notes
// for the others, by job id: an SLO whose deadline has passed, one of a
// job that cannot run on the cluster, and one that even the job's fastest
// placement, all the time, cannot meet. Each would make the LP infeasible
// and stop every job's allocation; the job is then served as if it had no
// SLO, and the note says why.
func reachableSLOs(p *Problem, b *placementLP) ([]sloTarget, map[string]string) {
	var targets []sloTarget
	var notes map[string]string
	for i := range p.Jobs {
		j := &p.Jobs[i]
		if j.SLO == 0 || j.StepsRemaining <= 0 {
			continue
		}
		if j.SLO < 0 {
			notes = addNote(notes, j.ID, fmt.Sprintf("SLO dropped: the deadline passed %s ago", formatSeconds(-j.SLO)))
			continue
		}
		best := 0.0
		for _, c := range b.effCoefs[i] {
			best = math.Max(best, c)
		}
		if best == 0 {
			notes = addNote(notes, j.ID, "SLO dropped: the job cannot run on any GPU type of the cluster")
			continue
		}
		need := j.StepsRemaining / j.SLO
		if best < need {
			where := "its best placement"
			if t, tp := fastestType(p, j); tp == best {
				where = t
			}
			notes = addNote(notes, j.ID, fmt.Sprintf("SLO dropped: needs %s on %s alone, %s left",
				formatSeconds(j.StepsRemaining/best), where, formatSeconds(j.SLO)))
			continue
		}
		targets = append(targets, sloTarget{job: i, need: need, best: best})
	}
	sort.SliceStable(targets, func(x, y int) bool {
		return targets[x].need/targets[x].best > targets[y].need/targets[y].best
	})
	return targets, notes
}

// fastestType is the type on which j runs fastest alone, among those with
// enough GPUs for it.
func fastestType(p *Problem, j *Job) (string, float64) {
	bestType, best := "", 0.0
	for _, t := range p.Types() {
		if tp := j.Throughput(t); tp > best && p.GPUs[t] >= jobScale(j) {
			bestType, best = t, tp
		}
	}
	return bestType, best
}

func addNote(notes map[string]string, id, note string) map[string]string {
	if notes == nil {
		notes = map[string]string{}
	}
	notes[id] = note
	return notes
}

// formatSeconds writes a duration for a note: hours, minutes or seconds.
func formatSeconds(s float64) string {
	switch {
	case s >= 3600:
		return fmt.Sprintf("%.1f h", s/3600)
	case s >= 60:
		return fmt.Sprintf("%.1f min", s/60)
	}
	return fmt.Sprintf("%.0f s", s)
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

// addSLORows adds eff_j >= need_j for each target (homogenized when b
// is). reachableSLOs has left out the SLOs no allocation could meet.
func addSLORows(b *placementLP, targets []sloTarget) {
	for _, s := range targets {
		if b.scaleCol >= 0 {
			b.effectiveRow(s.job, []int{b.scaleCol}, []float64{-s.need}, 0, Inf)
		} else {
			b.effectiveRow(s.job, nil, nil, s.need, Inf)
		}
	}
}
