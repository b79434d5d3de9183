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
// linear in X for a fixed ρ, so the optimum is searched over ρ with the LP
//
//	maximize λ  s.t.  eff_j >= λ·c_j(ρ)  for every job with steps left,
//
// which is feasible for ρ exactly when λ* >= 1. The search keeps a bracket
// [lo, hi] of the optimum and stops at a relative gap of 1e-6:
//
//   - lo starts at the largest ρ any job would have with its best placement
//     to itself, hi at the max ρ of the isolated allocation;
//   - every LP's allocation X gives hi = min(hi, max_j ρ_j(X));
//   - an LP with λ* < 1 gives a lower bound from its duals μ: every
//     allocation has Σ μ_j·eff_j <= λ*·Σ μ_j·c_j(ρ), so no ρ' with
//     Σ μ_j·c_j(ρ') above that is reachable (see ftfLowerBound);
//   - the next LP probes lo itself, where feasibility ends the search; it
//     halves the bracket only after ftfBoundProbes infeasible probes in a
//     row, or a probe that moved neither end.
//
// The first probe usually ends it: some job is behind by so much that its
// best placement is the optimum, and one LP finds an allocation that gives
// it that while serving every other job. The answer is the best allocation
// seen, so every job is within the optimal ρ.
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
	declareTraits(Traits{Objective: ObjectiveMaxFinishTimeFairness}, "finish_time_fairness")
	declareTraits(Traits{TypeAware: true, Objective: ObjectiveMaxFinishTimeFairness}, "finish_time_fairness_perf")
	declareTraits(Traits{TypeAware: true, Packs: true, Objective: ObjectiveMaxFinishTimeFairness}, "finish_time_fairness_packed")
	register("finish_time_fairness", func(o Options) Policy {
		return &ftfPolicy{name: "finish_time_fairness", agnostic: true, interior: o.InteriorOptimum, unusable: o.AgnosticUnusableTypes}
	})
	register("finish_time_fairness_perf", func(o Options) Policy {
		return &ftfPolicy{name: "finish_time_fairness_perf", interior: o.InteriorOptimum, keepRunning: o.KeepRunning,
			keepRoom: min(max(o.KeepRunningRoom, 0), 1)}
	})
	register("finish_time_fairness_packed", func(Options) Policy {
		return &ftfPolicy{name: "finish_time_fairness_packed", packed: true}
	})
}

// ftfPolicy is one of the finish_time_fairness policies. It remembers the
// basis its last search ended with, so the next round's search, over
// nearly the same jobs, starts from it. The optimal max ρ does not depend
// on that start; which optimal allocation comes out may (a restarted
// daemon can return another allocation of the same max ρ).
type ftfPolicy struct {
	name     string
	agnostic bool
	packed   bool
	memory   ftfMemory
	// interior returns the analytic center of the optimal face instead of
	// the solver's vertex (Options.InteriorOptimum, center.go).
	interior bool
	// unusable gives the agnostic policy's jobs their reference rate also
	// on the types where they cannot run (Options.AgnosticUnusableTypes).
	unusable bool
	// keepRunning picks the optimum for a mechanism that pays for
	// restarts (Options.KeepRunning, keepRunningFTF).
	keepRunning bool
	keepRoom    float64
}

func (pol *ftfPolicy) Name() string { return pol.name }

func (pol *ftfPolicy) Traits() Traits { return declaredTraits[pol.name] }

func (pol *ftfPolicy) Allocate(p *Problem) (*Allocation, error) {
	if len(p.Jobs) == 0 {
		return emptyAllocation(p, pol.name), nil
	}
	tput := realThroughput
	if pol.agnostic {
		tput = agnosticView(p, pol.unusable)
	}
	// The basis is carried over only without pairs: pair columns come and
	// go with the pairs the problem lists, and a carried basis that puts
	// every pair column back at its bound made packed searches several
	// times slower than fresh ones.
	memory := &pol.memory
	if pol.packed {
		memory = nil
	}
	a, err := minMaxFinishTimeFairnessWith(p, pol.name, tput, pol.packed, levelAuto, memory)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pol.name, err)
	}
	a.Stats.Classes = len(p.Jobs) // no aggregation: one LP row per job
	if pol.keepRunning && !pol.packed {
		keepRunningFTF(p, a, tput, pol.keepRoom)
	}
	if pol.interior && !pol.packed {
		centerFTF(p, a, tput)
	}
	return a, nil
}

// ftfRelativeGap is the relative precision of the optimal max ρ.
const ftfRelativeGap = 1e-6

// ftfStalledGap is the relative gap within which a search that used up
// ftfMaxSolves returns its best allocation rather than fail: the bracket
// stalls only where a job's need lies below the solver's tolerance.
const ftfStalledGap = 1e-4

// ftfMaxSolves bounds the search: halving alone needs about 60 halvings to
// shrink any double range to 1e-6 relative, each after at most
// ftfBoundProbes probes at the bound plus itself, and the bound updates
// need far fewer in practice (one to three LPs).
const ftfMaxSolves = 256

// ftfKeptMaxUnits is the number of active jobs below which the search keeps
// the full λ-LP loaded rather than decomposing it (levelsolve.go), even
// where the decomposition would be used for other policies: each probe
// then starts from the last one's basis, and each search from the
// previous round's, so probes take a few pivots each, while the
// decomposition starts its masters afresh. On the multi-GPU trace at 3.2
// jobs/h (300-400 jobs in the system, one or two arrivals or completions
// between allocations) that halves the solver's time; with a twentieth of
// the jobs replaced between rounds
// (BenchmarkFinishTimeFairnessPerfDistinctNextRound) the two are even at
// 512 jobs. A first, cold search costs more this way (7 ms against 5 at
// 256 distinct jobs), and far more above 512, where the decomposition
// stays (5x faster cold at 1024).
const ftfKeptMaxUnits = 512

// ftfBoundProbes is how many infeasible probes in a row the search makes
// at its lower bound before it halves the bracket instead.
const ftfBoundProbes = 3

// ftfJob is one job's data for the search, in the policy's throughput view.
type ftfJob struct {
	index     int
	since     float64 // t_j
	remaining float64 // R_j
	isoTime   float64 // D_j
}

func minMaxFinishTimeFairness(p *Problem, name string, tput throughputFunc, packed bool, solver levelSolver) (*Allocation, error) {
	return minMaxFinishTimeFairnessWith(p, name, tput, packed, solver, nil)
}

// minMaxFinishTimeFairnessWith is minMaxFinishTimeFairness starting the LP
// search from the basis in memory (when not nil), which it updates.
func minMaxFinishTimeFairnessWith(p *Problem, name string, tput throughputFunc, packed bool, solver levelSolver, memory *ftfMemory) (*Allocation, error) {
	b, err := newPlacementLP(p, tput, packed)
	if err != nil {
		return nil, err
	}
	types := p.Types()
	var active []ftfJob
	lo := 0.0 // a lower bound on the optimal max ρ
	// isolated holds the column values of the isolated allocation, a
	// feasible point whose max ρ is a first upper bound.
	isolated := make([]float64, b.lp.NumColumns())
	shares := NewIsolatedShares(p)
	for i := range p.Jobs {
		j := &p.Jobs[i]
		share := shares.Share(j)
		iso := 0.0
		for k, t := range types {
			iso += tput(j, t) * share[k]
			if c := b.units[i].cols[k]; c >= 0 {
				isolated[c] = share[k]
			}
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

	if !packed && solver == levelAuto {
		if jobs, capacity, ok := pooledFTF(p, b, active); ok {
			// When the pooled split fails (its flow can come out a hair
			// infeasible where some jobs' needs are many orders of
			// magnitude apart), the LP search below answers instead.
			if x, err := solvePooledFTF(b, jobs, capacity, lo); err == nil {
				a := b.allocation(p, name, x)
				a.Stats.Pooled = true
				a.Objective, err = MaxFinishTimeFairness(p, a)
				return a, err
			}
		}
	}
	var decomposed *ftfLevel
	if !packed && solver.decompose(len(active)) && !(solver == levelAuto && len(active) < ftfKeptMaxUnits) {
		decomposed = newFTFLevel(p, tput, b, active)
		if memory != nil {
			memory.restoreLevel(p, decomposed)
		}
	}
	var stats Stats
	// The λ-LP is loaded once and each probe changes λ's coefficients in
	// place, so every probe after the first starts from the last basis,
	// and the first from the previous search's (by job id).
	var kept *keptLP
	lambda, reqRows := -1, make([]int, len(active))
	if decomposed == nil {
		lambda = b.lp.AddColumn(0, Inf, 1)
		b.lp.Maximize()
		for n, fj := range active {
			reqRows[n] = b.lp.NumRows()
			b.effectiveRow(fj.index, []int{lambda}, []float64{-fj.need(lo)}, 0, Inf)
		}
		if kept, err = b.lp.Keep(); err != nil {
			return nil, err
		}
		defer kept.Close()
		if memory != nil {
			if err := kept.SetBasis(memory.restore(p, b, active, lambda, reqRows)); err != nil {
				return nil, err
			}
		}
	}
	// solveAt solves the λ-LP at ρ; it returns λ*, the column values and
	// the magnitudes of the requirement rows' duals.
	solveAt := func(rho float64) (float64, []float64, []float64, error) {
		if decomposed != nil {
			return decomposed.solveAt(rho, &stats)
		}
		for n, fj := range active {
			kept.SetCoefficient(reqRows[n], lambda, -fj.need(rho))
		}
		res, err := kept.Solve()
		if err != nil {
			return 0, nil, nil, fmt.Errorf("at ρ = %g: %w", rho, err)
		}
		noteLP(&stats, b.lp)
		stats.Pivots += kept.Iterations()
		mu := make([]float64, len(active))
		for n, r := range reqRows {
			mu[n] = math.Abs(res.RowDuals[r])
		}
		return res.X[lambda], res.X, mu, nil
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

	best := isolated
	hi := maxRho(isolated)
	rho := lo
	boundFailures := 0 // infeasible probes in a row
	for iter := 0; hi-lo > ftfRelativeGap*lo; iter++ {
		if iter == ftfMaxSolves {
			if hi-lo <= ftfStalledGap*lo {
				// Neither end can move: some job's need is below what the
				// solver resolves. The best allocation is within this gap
				// of the optimum.
				break
			}
			return nil, fmt.Errorf("max ρ still in [%g, %g] after %d LPs", lo, hi, iter)
		}
		lam, x, mu, err := solveAt(rho)
		if err != nil {
			return nil, err
		}
		if lam <= 0 {
			return nil, fmt.Errorf("at ρ = %g no allocation serves every job: %w", rho, ErrInfeasible)
		}
		before := [2]float64{lo, hi}
		if r := maxRho(x); r < hi {
			hi, best = r, x
		}
		if lam < 1 {
			lo = math.Max(lo, math.Min(ftfLowerBound(active, rho, lam, mu), hi))
		}
		// Probe the lower bound: if it is feasible the search is over. The
		// duals' bound is usually within a few parts per million of the
		// optimum, so the next probe at it ends the search or gives a bound
		// closer still. Only when probes at the bound keep failing
		// (ftfBoundProbes in a row), or solver round-off kept a probe from
		// moving either end, is the bracket halved, so the search never
		// crawls.
		if lam < 1 {
			boundFailures++
		} else {
			boundFailures = 0
		}
		next := lo
		if boundFailures >= ftfBoundProbes || before == [2]float64{lo, hi} {
			next, boundFailures = (lo+hi)/2, 0
		}
		rho = next
	}
	switch {
	case memory != nil && kept != nil:
		memory.save(p, b, active, lambda, reqRows, kept.Basis())
	case memory != nil && decomposed != nil:
		memory.saveLevel(p, decomposed)
	}
	a := b.allocation(p, name, best)
	a.Stats = stats
	if a.Objective, err = MaxFinishTimeFairness(p, a); err != nil {
		return nil, err
	}
	return a, nil
}

// need is c_j(ρ) = R_j / (ρ·D_j − t_j), the effective throughput the job
// needs for ρ_j <= ρ (ρ above t_j/D_j).
func (fj *ftfJob) need(rho float64) float64 {
	return fj.remaining / (rho*fj.isoTime - fj.since)
}

// ftfLowerBound is the lower bound on the optimal max ρ that the λ-LP's
// duals give when ρ is infeasible (λ* < 1). With μ the duals of the
// requirement rows, every allocation X has Σ_j μ_j·eff_j(X) <= λ*·Σ_j μ_j·c_j(ρ)
// (the Lagrangian bound of the LP), and an X with max ρ_j <= r has
// eff_j >= c_j(r) for every job. So r is a bound whenever
// g(r) = Σ_j μ_j·c_j(r) > λ*·g(ρ); g falls as r grows, and the bound is the
// root of g(r) = λ*·g(ρ), found by bisection to double precision. Jobs
// whose duals vanish do not constrain it: that is what makes it tighter
// than any single job's bound.
func ftfLowerBound(active []ftfJob, rho, lam float64, mu []float64) float64 {
	g := func(r float64) float64 {
		sum := 0.0
		for n := range active {
			if mu[n] > 0 {
				sum += mu[n] * active[n].need(r)
			}
		}
		return sum
	}
	target := lam * g(rho)
	if !(target > 0) {
		return rho // no dual information: ρ itself is infeasible
	}
	// The root lies above ρ (g(ρ) > target) and below any r where g has
	// fallen under the target.
	left, right := rho, 2*rho
	for g(right) > target {
		left, right = right, 2*right
		if math.IsInf(right, 1) {
			return left
		}
	}
	for k := 0; k < 200 && right-left > 1e-15*right; k++ {
		mid := (left + right) / 2
		if g(mid) > target {
			left = mid
		} else {
			right = mid
		}
	}
	return left
}

// ftfLevel solves the λ-LP without pairs by the price decomposition
// (levelsolve.go): it is a max-min LP whose units are the active jobs,
// with level eff_j and weight c_j(ρ). Successive probes differ only in
// the weights, so each starts from the previous one's prices and
// placement.
type ftfLevel struct {
	b      *placementLP
	active []ftfJob
	lp     *levelLP
	warm   levelWarm
	place  []levelPlace
}

func newFTFLevel(p *Problem, tput throughputFunc, b *placementLP, active []ftfJob) *ftfLevel {
	nt := len(b.types)
	f := &ftfLevel{b: b, active: active, lp: &levelLP{raise: true, costType: -1}}
	f.lp.capacity = make([]float64, nt)
	for k, t := range b.types {
		f.lp.capacity[k] = float64(p.GPUs[t])
	}
	f.lp.units = make([]levelUnit, len(active))
	for n, fj := range active {
		j := &p.Jobs[fj.index]
		u := &f.lp.units[n]
		u.rate = make([]float64, nt)
		u.load = float64(jobScale(j))
		for k, c := range b.units[fj.index].cols {
			if c >= 0 { // the columns where the job can run
				u.rate[k] = tput(j, b.types[k])
			}
		}
	}
	return f
}

// solveAt is solveAt of minMaxFinishTimeFairness for the decomposition.
func (f *ftfLevel) solveAt(rho float64, stats *Stats) (float64, []float64, []float64, error) {
	for n := range f.active {
		f.lp.units[n].weight = f.active[n].need(rho)
	}
	res, err := solveLevel(f.lp, &f.warm, f.place)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("at ρ = %g: %w", rho, err)
	}
	f.place = res.place
	stats.LPs += res.lps
	stats.Columns = max(stats.Columns, res.columns)
	stats.Rows = max(stats.Rows, res.rows)
	x := make([]float64, f.b.lp.NumColumns())
	for n, fj := range f.active {
		for k, c := range f.b.units[fj.index].cols {
			if c >= 0 {
				x[c] = res.x[n][k]
			}
		}
	}
	return res.tau, x, res.dual, nil
}
