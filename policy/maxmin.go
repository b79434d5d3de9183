package policy

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
)

// Max-min fairness policies (Gavel §4.1 and §3.1).
//
// All of them work in one unit, the job's normalized level:
//
//	level_j = sf_j · throughput(j, X) / ProportionalThroughput_j
//
// (for the heterogeneity-agnostic max_min_fairness every usable type counts
// as throughput 1 and the normalizer is 1, so the level is sf·Σ_t X_jt). A
// max-min policy maximizes min_j level_j / weight_j; the water-filling
// variants keep raising the jobs that can still rise. Allocation.Objective
// is min_j level_j / weight_j over the jobs that can run somewhere.
//
// The LPs are built over classes of identical jobs (classes.go), which is
// what keeps thousands of jobs cheap: the LP size follows the number of
// distinct jobs, not the job count.

func init() {
	register("max_min_fairness", func(o Options) Policy {
		return &maxMinPolicy{name: "max_min_fairness", agnostic: true, interior: o.InteriorOptimum, unusable: o.AgnosticUnusableTypes}
	})
	register("max_min_fairness_perf", func(o Options) Policy {
		return &maxMinPolicy{name: "max_min_fairness_perf", interior: o.InteriorOptimum, interiorUnusable: o.InteriorUnusableTypes}
	})
}

// maxMinPolicy is the single-level weighted max-min policy.
type maxMinPolicy struct {
	name     string
	agnostic bool
	packed   bool
	solver   levelSolver
	memory   levelMemory
	// interior returns the analytic center of the optimal face instead of
	// the solver's vertex (Options.InteriorOptimum, center.go).
	interior bool
	// unusable counts, when agnostic, types where a job cannot run as
	// usable (Options.AgnosticUnusableTypes).
	unusable bool
	// interiorUnusable centers over fractions on those types too
	// (Options.InteriorUnusableTypes).
	interiorUnusable bool
}

func (pol *maxMinPolicy) Name() string { return pol.name }

func (pol *maxMinPolicy) Traits() Traits {
	return Traits{TypeAware: !pol.agnostic, Packs: pol.packed, Objective: ObjectiveMinNormalizedThroughput}
}

func (pol *maxMinPolicy) Allocate(p *Problem) (*Allocation, error) {
	m, err := newMMModel(p, pol.agnostic, pol.packed)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pol.name, err)
	}
	if pol.agnostic && pol.unusable {
		m.countUnusableTypes()
	}
	m.solver = pol.solver
	pol.memory.restore(p, m)
	var stats Stats
	weight := make([]float64, len(m.jobs))
	for j := range m.jobs {
		if m.jobs[j].runnable {
			weight[j] = m.jobs[j].weight
		}
	}
	sol := m.emptySolution()
	if anyPositive(weight) {
		if sol, err = m.solve(weight, make([]float64, len(m.jobs)), -1, &stats); err != nil {
			return nil, fmt.Errorf("%s: %w", pol.name, err)
		}
	}
	pol.memory.save(p, m)
	if pol.interior && sol.x != nil {
		m.center(sol, weight, pol.interiorUnusable)
	}
	return m.allocation(p, pol.name, sol, stats)
}

// levelMemory carries a policy's last decomposed solve into its next
// Allocate. Successive rounds of a daemon or a simulation change the job
// set little, so the last prices and every job's placement (by job id) are
// a start that usually needs a single master. It only ever changes how
// fast the exact optimum is found, not which optimum value.
type levelMemory struct {
	mu    sync.Mutex
	types []string
	warm  levelWarm
	place map[string]levelPlace
}

// restore gives m the remembered start when the GPU types are the same.
func (mem *levelMemory) restore(p *Problem, m *mmModel) {
	mem.mu.Lock()
	defer mem.mu.Unlock()
	if mem.place == nil || !slices.Equal(mem.types, m.types) {
		return
	}
	m.warm = map[int]*levelWarm{-1: {prices: slices.Clone(mem.warm.prices), tau: mem.warm.tau}}
	m.jobPlace = make([]levelPlace, len(m.jobs))
	for j := range p.Jobs {
		pl, ok := mem.place[p.Jobs[j].ID]
		if !ok {
			pl = placeLeftOut // no start: placed by the prices
		}
		m.jobPlace[j] = pl
	}
}

// save remembers m's last decomposed solve (nothing when m solved none).
func (mem *levelMemory) save(p *Problem, m *mmModel) {
	warm := m.warm[-1]
	if m.jobPlace == nil || warm == nil || warm.prices == nil {
		return
	}
	mem.mu.Lock()
	defer mem.mu.Unlock()
	mem.types = m.types
	mem.warm = levelWarm{prices: slices.Clone(warm.prices), tau: warm.tau}
	mem.place = make(map[string]levelPlace, len(p.Jobs))
	for j := range p.Jobs {
		mem.place[p.Jobs[j].ID] = m.jobPlace[j]
	}
}

// emptySolution gives no job any time: the answer when no job can run (or
// there are no jobs), where the LP would have nothing to bound its tau.
func (m *mmModel) emptySolution() *mmSolution {
	return &mmSolution{classes: groupBySignature(len(m.jobs), func(int, classKey) classKey { return nil })}
}

// mmModel is a max-min problem in normalized units, ready to be turned into
// per-class LPs.
type mmModel struct {
	types    []string
	capacity []float64 // GPUs of each type
	jobs     []mmJob
	// pairs are the usable co-locations (packed policies only).
	pairs []mmPair
	// links is pairs as the class machinery sees them.
	links []pairLink
	// solver picks the full LP or the price decomposition (levelsolve.go)
	// for the LPs without pairs.
	solver levelSolver
	// warm holds the last prices of each LP shape (key: the minimized
	// type, -1 for the LPs that raise τ) for the next solve of that shape.
	warm map[int]*levelWarm
	// physical groups the jobs by everything but weights and levels, once
	// for all the LPs of a policy run.
	physical *jobClasses
	// jobPlace is every job's placement in the last decomposed solve, the
	// start of the next one (nil before the first).
	jobPlace []levelPlace
}

// mmJob is one job of the problem in normalized units.
type mmJob struct {
	sf     float64
	weight float64
	// rate is the job's level per unit of time on each type (0 where it
	// cannot run).
	rate     []float64
	runnable bool
	// normalizer is the job's proportional throughput (1 when agnostic).
	normalizer float64
	// physical is the signature of everything but weights and levels.
	physical classKey
}

// mmPair is one usable co-location.
type mmPair struct {
	problemIndex int // index into Problem.Pairs
	jobs         [2]int
	sf           float64
	// rate of each side's level per unit of time on each type; both 0 on
	// types where the pair cannot run.
	rate [2][]float64
}

// newMMModel validates p and converts it to normalized units. With agnostic
// every usable type counts as throughput 1 and the normalizer is 1. Pairs
// are read only when packed is set.
func newMMModel(p *Problem, agnostic, packed bool) (*mmModel, error) {
	types := p.Types()
	m := &mmModel{types: types, capacity: make([]float64, len(types)), jobs: make([]mmJob, len(p.Jobs))}
	total := 0.0
	for i, t := range types {
		n := p.GPUs[t]
		if n < 0 {
			return nil, fmt.Errorf("cluster has %d GPUs of type %q", n, t)
		}
		m.capacity[i] = float64(n)
		total += float64(n)
	}
	for j := range p.Jobs {
		job := &p.Jobs[j]
		sf := job.ScaleFactor
		if sf < 1 {
			return nil, fmt.Errorf("job %q: scale factor %d, want at least 1", job.ID, sf)
		}
		weight := job.Weight
		if weight == 0 {
			weight = 1
		}
		if !(weight > 0) || math.IsInf(weight, 0) {
			return nil, fmt.Errorf("job %q: weight %v, want a positive number", job.ID, job.Weight)
		}
		for t, v := range job.Throughputs {
			if !(v >= 0) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("job %q: throughput %v on %q, want a finite non-negative number", job.ID, v, t)
			}
		}
		mj := &m.jobs[j]
		mj.sf, mj.weight = float64(sf), weight
		mj.rate = make([]float64, len(types))
		normalizer := 1.0
		if !agnostic {
			normalizer = 0
			for i, t := range types {
				normalizer += job.Throughputs[t] * m.capacity[i]
			}
			if total > 0 {
				normalizer /= total
			}
		}
		if normalizer <= 0 {
			continue // runs nowhere: not runnable
		}
		mj.normalizer = normalizer
		for i, t := range types {
			v := job.Throughputs[t]
			// A type with fewer GPUs than the job needs at once cannot run
			// it at all, whatever fraction of time the LP would grant.
			if v <= 0 || m.capacity[i] < mj.sf {
				continue
			}
			if agnostic {
				v = 1
			}
			mj.rate[i] = mj.sf * v / normalizer
			mj.runnable = true
		}
		mj.physical = classKey(nil).float(mj.sf).floats(mj.rate)
	}
	if packed {
		if err := m.addPairs(p, agnostic); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// mmSolution is the solution of one per-class LP.
type mmSolution struct {
	classes *jobClasses
	pairs   *pairClasses // nil without pairs
	// x and y are the per-member time fractions of every job class and
	// pair class on every type.
	x, y [][]float64
	// tau is the common rise of the raised jobs' levels (per unit weight).
	tau float64
	// bottlenecked tells for every class with a positive weight whether
	// its level row has a positive dual: such a class cannot rise above
	// floor + weight·tau while the others keep theirs (see waterfilling.go).
	bottlenecked []bool
	// dual is the magnitude of every class's level-row dual (0 for classes
	// without a level row).
	dual []float64
	// objective is the LP's objective value.
	objective float64
}

// solve builds and solves one per-class LP. Every job with weight > 0 must
// reach floor + weight·tau, every other job included keeps floor. With
// minimizeType < 0 the LP maximizes tau; otherwise it minimizes the GPU time
// used on that type (weights must then be 0) and tau is not a variable.
//
// Jobs that are not runnable are left out; without pairs so are jobs with
// weight 0 and floor 0, whose columns could only consume capacity.
func (m *mmModel) solve(weight, floor []float64, minimizeType int, stats *Stats) (*mmSolution, error) {
	packed := len(m.pairs) > 0
	if m.physical == nil {
		m.physical = groupBySignature(len(m.jobs), func(j int, k classKey) classKey {
			return k.bytes(m.jobs[j].physical)
		})
	}
	type signature struct {
		physical      int
		weight, floor float64
	}
	classes := groupByKey(len(m.jobs), func(j int) (signature, bool) {
		job := &m.jobs[j]
		if !job.runnable || (!packed && weight[j] == 0 && floor[j] == 0) {
			return signature{}, false
		}
		return signature{m.physical.Of[j], weight[j], floor[j]}, true
	})
	if !packed && m.solver.decompose(classes.Count()) {
		return m.solveDecomposed(classes, weight, floor, minimizeType, stats)
	}
	sol := &mmSolution{classes: classes}
	if packed {
		classes, sol.pairs = refineByPairs(classes, m.links)
		sol.classes = classes
	}
	nt := len(m.types)
	lp := newLinearProgram(0)
	if minimizeType < 0 {
		lp.Maximize()
	}
	// Columns: one per class and usable type, one per pair class and type
	// where both sides can run, and tau.
	xcol := make([][]int, classes.Count())
	for c := range xcol {
		xcol[c] = make([]int, nt)
		rep := &m.jobs[classes.Members[c][0]]
		for t := 0; t < nt; t++ {
			xcol[c][t] = -1
			if rep.rate[t] > 0 {
				obj := 0.0
				if t == minimizeType {
					obj = float64(classes.Size(c)) * rep.sf
				}
				xcol[c][t] = lp.AddColumn(0, 1, obj)
			}
		}
	}
	var ycol [][]int
	if sol.pairs != nil {
		ycol = make([][]int, len(sol.pairs.Members))
		for pc, members := range sol.pairs.Members {
			ycol[pc] = make([]int, nt)
			rep := &m.pairs[members[0]]
			for t := 0; t < nt; t++ {
				ycol[pc][t] = -1
				if rep.rate[0][t] > 0 && rep.rate[1][t] > 0 {
					obj := 0.0
					if t == minimizeType {
						obj = float64(len(members)) * rep.sf
					}
					ycol[pc][t] = lp.AddColumn(0, 1, obj)
				}
			}
		}
	}
	tau := -1
	if minimizeType < 0 {
		tau = lp.AddColumn(-Inf, Inf, 1)
	}

	// Per class: the row sum over its own columns and its pairs' columns,
	// and the level row. Pair terms are per member of the class: a class of
	// n jobs sharing m pairs of a pair class, s sides each, sees m·s/n of
	// every pair's time.
	rowCols := make([][]int, classes.Count())
	rowCoefs := make([][]float64, classes.Count())
	levelCols := make([][]int, classes.Count())
	levelCoefs := make([][]float64, classes.Count())
	for c := range xcol {
		rep := &m.jobs[classes.Members[c][0]]
		for t, col := range xcol[c] {
			if col >= 0 {
				rowCols[c] = append(rowCols[c], col)
				rowCoefs[c] = append(rowCoefs[c], 1)
				levelCols[c] = append(levelCols[c], col)
				levelCoefs[c] = append(levelCoefs[c], rep.rate[t])
			}
		}
	}
	if sol.pairs != nil {
		for pc, members := range sol.pairs.Members {
			rep := &m.pairs[members[0]]
			swapped := sol.pairs.Swapped[members[0]]
			for side := 0; side < 2; side++ {
				c := sol.pairs.SideClass[pc][side]
				share := float64(len(members)) / float64(classes.Size(c))
				pairSide := side
				if swapped {
					pairSide ^= 1
				}
				for t, col := range ycol[pc] {
					if col < 0 {
						continue
					}
					rowCols[c] = append(rowCols[c], col)
					rowCoefs[c] = append(rowCoefs[c], share)
					levelCols[c] = append(levelCols[c], col)
					levelCoefs[c] = append(levelCoefs[c], share*rep.rate[pairSide][t])
				}
			}
		}
	}
	for c := range rowCols {
		lp.AddRow(rowCols[c], rowCoefs[c], -Inf, 1)
	}
	// Capacity per type.
	for t := 0; t < nt; t++ {
		var cols []int
		var coefs []float64
		for c := range xcol {
			if col := xcol[c][t]; col >= 0 {
				cols = append(cols, col)
				coefs = append(coefs, float64(classes.Size(c))*m.jobs[classes.Members[c][0]].sf)
			}
		}
		for pc := range ycol {
			if col := ycol[pc][t]; col >= 0 {
				cols = append(cols, col)
				coefs = append(coefs, float64(len(sol.pairs.Members[pc]))*m.pairs[sol.pairs.Members[pc][0]].sf)
			}
		}
		lp.AddRow(cols, coefs, -Inf, m.capacity[t])
	}
	// Level rows. Floors come from earlier solutions of the same
	// constraints; a relative slack of 1e-9 absorbs the solver's rounding.
	levelRow := make([]int, classes.Count())
	for c := range levelRow {
		levelRow[c] = -1
		j := classes.Members[c][0]
		w, f := weight[j], floor[j]
		if w == 0 && f == 0 {
			continue
		}
		cols, coefs := levelCols[c], levelCoefs[c]
		if w > 0 && tau >= 0 {
			cols = append(cols[:len(cols):len(cols)], tau)
			coefs = append(coefs[:len(coefs):len(coefs)], -w)
		}
		levelRow[c] = lp.AddRow(cols, coefs, f*(1-1e-9), Inf)
	}

	noteMMStats(stats, lp, classes.Count())
	res, err := lp.Solve()
	if err != nil {
		return nil, fmt.Errorf("max-min LP over %d job classes: %w", classes.Count(), err)
	}
	sol.objective = res.Objective
	if tau >= 0 {
		sol.tau = res.X[tau]
	}
	// Values are clipped to [0, 1] and solver noise below 1e-9 is dropped,
	// as in placementLP.allocation.
	value := func(col int) float64 {
		if col < 0 || res.X[col] < 1e-9 {
			return 0
		}
		return math.Min(1, res.X[col])
	}
	sol.x = make([][]float64, len(xcol))
	for c := range xcol {
		sol.x[c] = make([]float64, nt)
		for t, col := range xcol[c] {
			sol.x[c][t] = value(col)
		}
	}
	sol.y = make([][]float64, len(ycol))
	for pc := range ycol {
		sol.y[pc] = make([]float64, nt)
		for t, col := range ycol[pc] {
			sol.y[pc][t] = value(col)
		}
	}
	sol.bottlenecked = make([]bool, classes.Count())
	sol.dual = make([]float64, classes.Count())
	for c, r := range levelRow {
		if r >= 0 {
			sol.dual[c] = math.Abs(res.RowDuals[r])
		}
	}
	if tau >= 0 {
		// The duals of the raised rows, times the rows' weights, sum to 1;
		// anything well above rounding noise marks a binding class.
		for c, r := range levelRow {
			if r >= 0 && weight[classes.Members[c][0]] > 0 && sol.dual[c] > 1e-9 {
				sol.bottlenecked[c] = true
			}
		}
	}
	return sol, nil
}

// noteMMStats records one solved LP in stats.
func noteMMStats(stats *Stats, lp *linearProgram, classes int) {
	stats.LPs++
	stats.Classes = max(stats.Classes, classes)
	stats.Columns = max(stats.Columns, lp.NumColumns())
	stats.Rows = max(stats.Rows, lp.NumRows())
}

// jobFractions expands a class solution to per-job rows (zero rows for jobs
// the LP left out).
func (m *mmModel) jobFractions(sol *mmSolution) [][]float64 {
	rows := make([][]float64, len(m.jobs))
	for j := range rows {
		if c := sol.classes.Of[j]; c >= 0 {
			rows[j] = append([]float64(nil), sol.x[c]...)
		} else {
			rows[j] = make([]float64, len(m.types))
		}
	}
	return rows
}

// pairFractions expands a class solution to per-pair rows (nil without
// pairs).
func (m *mmModel) pairFractions(sol *mmSolution) [][]float64 {
	if sol.pairs == nil {
		return nil
	}
	rows := make([][]float64, len(m.pairs))
	for i := range rows {
		if pc := sol.pairs.Of[i]; pc >= 0 {
			rows[i] = sol.y[pc]
		}
	}
	return rows
}

// allocation turns a solution into the policy's answer: one row per job in
// problem order, then one row per pair that got time. The objective is
// MinNormalizedThroughput, under the measured throughputs also for the
// heterogeneity-agnostic variants, so that every max-min policy reports the
// same quantity.
func (m *mmModel) allocation(p *Problem, name string, sol *mmSolution, stats Stats) (*Allocation, error) {
	jobRows := m.jobFractions(sol)
	pairRows := m.pairFractions(sol)
	a := &Allocation{Policy: name, Types: m.types, Stats: stats}
	a.Rows = make([]Row, 0, len(p.Jobs))
	for j := range p.Jobs {
		a.Rows = append(a.Rows, Row{Jobs: []string{p.Jobs[j].ID}, Fractions: jobRows[j]})
	}
	if pairRows == nil {
		var err error
		if a.Objective, err = MinNormalizedThroughput(p, a); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return a, nil
	}
	// With pairs, every job's effective throughput is summed here, in
	// JobThroughputs' order, from the pairs' own entries: JobThroughputs
	// would index every pair of the problem by its members' ids to find
	// the few that got time, which cost more than the LP.
	eff := make([]float64, len(p.Jobs))
	for j := range p.Jobs {
		for k, t := range a.Types {
			eff[j] += p.Jobs[j].Throughput(t) * jobRows[j][k]
		}
	}
	for i, row := range pairRows {
		if row == nil || !anyPositive(row) {
			continue
		}
		pair := &p.Pairs[m.pairs[i].problemIndex]
		a.Rows = append(a.Rows, Row{Jobs: []string{pair.Jobs[0], pair.Jobs[1]}, Fractions: append([]float64(nil), row...)})
		for k, t := range a.Types {
			tp := pair.Throughputs[t]
			eff[m.pairs[i].jobs[0]] += tp[0] * row[k]
			eff[m.pairs[i].jobs[1]] += tp[1] * row[k]
		}
	}
	a.Objective = minNormalized(p, eff)
	return a, nil
}

// anyPositive tells whether some fraction is above rounding noise.
func anyPositive(row []float64) bool {
	for _, v := range row {
		if v > 1e-12 {
			return true
		}
	}
	return false
}

// soloMaxLevel is the highest level job j can reach with the whole cluster
// to itself: its row sum of 1 spread over its best options, each type
// holding at most N_t/sf of it. No allocation can push j above this, so a
// job promised this level is bottlenecked whatever the others do.
func (m *mmModel) soloMaxLevel(j int, pairsOf [][]int) float64 {
	job := &m.jobs[j]
	best := append([]float64(nil), job.rate...)
	for _, i := range pairsOf[j] {
		pr := &m.pairs[i]
		side := 0
		if pr.jobs[1] == j {
			side = 1
		}
		for t := range best {
			if pr.rate[0][t] > 0 && pr.rate[1][t] > 0 {
				best[t] = math.Max(best[t], pr.rate[side][t])
			}
		}
	}
	order := make([]int, len(best))
	for t := range order {
		order[t] = t
	}
	sort.Slice(order, func(a, b int) bool { return best[order[a]] > best[order[b]] })
	budget, level := 1.0, 0.0
	for _, t := range order {
		if budget <= 0 || best[t] <= 0 {
			break
		}
		take := math.Min(budget, m.capacity[t]/job.sf)
		level += take * best[t]
		budget -= take
	}
	return level
}

// solveDecomposed is solve without pairs through the price decomposition
// (levelsolve.go): the same LP over the same classes, solved exactly.
func (m *mmModel) solveDecomposed(classes *jobClasses, weight, floor []float64, minimizeType int, stats *Stats) (*mmSolution, error) {
	lp := &levelLP{capacity: m.capacity, raise: minimizeType < 0, costType: minimizeType}
	lp.units = make([]levelUnit, classes.Count())
	for c, members := range classes.Members {
		j := members[0]
		job := &m.jobs[j]
		lp.units[c] = levelUnit{rate: job.rate, load: float64(len(members)) * job.sf, weight: weight[j], floor: floor[j]}
		if !lp.raise {
			lp.units[c].weight = 0
		}
	}
	if m.warm == nil {
		m.warm = make(map[int]*levelWarm)
	}
	warm := m.warm[minimizeType]
	if warm == nil {
		warm = &levelWarm{}
		m.warm[minimizeType] = warm
	}
	var start []levelPlace
	if m.jobPlace != nil {
		start = make([]levelPlace, classes.Count())
		for c, members := range classes.Members {
			start[c] = m.jobPlace[members[0]]
		}
	}
	res, err := solveLevel(lp, warm, start)
	if err != nil {
		// The decomposition found no feasible master even with every
		// class explicit. Floors that earlier solutions kept only within
		// the solver's tolerance can do that to one ordering of the LP and
		// not another, so the reference LP has the last word.
		saved := m.solver
		m.solver = levelFull
		defer func() { m.solver = saved }()
		return m.solve(weight, floor, minimizeType, stats)
	}
	if m.jobPlace == nil {
		m.jobPlace = make([]levelPlace, len(m.jobs))
	}
	for j, c := range classes.Of {
		if c >= 0 {
			m.jobPlace[j] = res.place[c]
		}
	}
	stats.LPs += res.lps
	stats.Classes = max(stats.Classes, classes.Count())
	stats.Columns = max(stats.Columns, res.columns)
	stats.Rows = max(stats.Rows, res.rows)
	sol := &mmSolution{classes: classes, x: res.x, tau: res.tau, objective: res.objective, dual: res.dual}
	sol.bottlenecked = make([]bool, classes.Count())
	if lp.raise {
		for c := range sol.bottlenecked {
			sol.bottlenecked[c] = lp.units[c].weight > 0 && sol.dual[c] > 1e-9
		}
	}
	return sol, nil
}
