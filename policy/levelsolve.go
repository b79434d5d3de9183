package policy

import (
	"fmt"
	"math"
	"sort"
)

// Exact max-min LPs over many distinct units by price decomposition.
//
// The max-min family (max-min fairness, every water-filling step, every
// finish-time-fairness probe) solves one LP shape over units u (job
// classes, or jobs) and GPU types k:
//
//	level_u = Σ_k r_uk·x_uk >= f_u + w_u·τ   (level row, dual μ_u >= 0)
//	Σ_k x_uk <= 1                            (time row,  dual ν_u >= 0)
//	Σ_u q_u·x_uk <= G_k                      (capacity,  price p_k >= 0)
//
// maximizing τ, or, with every weight 0, minimizing the GPU time Σ q_u·x_uk
// spent on one type. Class aggregation (classes.go) makes this small when
// jobs repeat; measured throughputs make every job distinct, and the LP then
// has thousands of rows although only the few capacity rows tie the units
// together.
//
// Given the prices p, a unit's cheapest way to reach a level L is a segment
// of the lower convex hull of the points (0, 0) and (r_uk, c_uk + q_u·p_k)
// (c_uk is the objective's own cost: q_u on the minimized type, else 0):
// one type with time to spare, or all of its time split between two types.
// Along its segment a unit's time is affine in its level, so in τ. Most
// units are "simple": they follow their segment at exactly their level. The
// master LP keeps columns and rows only for the "explicit" units (near-ties
// between types, units whose time may run out) and folds every simple unit
// into the capacity rows as a constant and a coefficient on τ, so it has a
// few hundred rows where the full LP has tens of thousands.
//
// Why the answer is exact. Take the master's optimum and its duals (p, μ)
// and complete them: a simple unit gets its segment's time, μ_u = the
// segment's slope (cost per unit of level) and ν_u = μ_u·r_ua − cost_ua on
// a two-type segment (0 on one type). The master's own optimality gives
// every explicit unit's conditions, and the τ column's (Σ_u w_u·μ_u = 1)
// holds because a simple unit's τ coefficients in the capacity rows price
// out at exactly w_u·μ_u. What remains are the simple units' own
// conditions: their time within [0, 1], and no column of theirs cheaper than
// their segment at the master's prices (checkSimple). When all hold, the
// completed point is primal feasible, the completed duals are dual
// feasible, and complementary slackness holds: both are optimal for the
// full LP. Units that fail become explicit and the master is solved again;
// a master with every unit explicit is the full LP, so the loop ends with
// the exact optimum, in practice after one to three masters.
//
// Three devices keep masters well behaved while simple units sit where the
// optimum would not put them: an overflow column per type at a prohibitive
// cost (a master that still overflows is no solution: the units on that
// type become explicit); an upper bound on τ where a simple unit's time
// would run out (the unit that sets it becomes explicit, unless it is then
// on its fastest type with all of its time, which makes the bound an
// optimum: it takes τ's reduced cost into its μ, its ν covering the rest);
// and τ free below, so that no placement makes a master infeasible.
//
// The first prices come from the full LP over a sample of the units with
// the capacities scaled down to the sample's share, or from the previous
// solve of the same shape (water filling's next step, finish-time
// fairness' next probe, the policy's previous round) together with that
// solve's placements, which is what makes those sequences cheap.

// levelLP is one LP of the max-min family in the form above.
type levelLP struct {
	capacity []float64 // G_k
	units    []levelUnit
	// raise maximizes τ; otherwise the LP minimizes the GPU time spent on
	// type costType (and every weight must be 0).
	raise    bool
	costType int
}

// levelUnit is one unit (a job, or a class of identical jobs) of a levelLP.
type levelUnit struct {
	rate   []float64 // level per unit of time on each type; 0 where it cannot run
	load   float64   // GPUs held on a type per unit of x (class size × scale factor)
	weight float64   // w_u: how fast the level must rise with τ
	floor  float64   // f_u: the level to keep
}

// constrained tells whether the unit has a level row. Units without one
// could only consume capacity and get no time.
func (u *levelUnit) constrained() bool { return u.weight > 0 || u.floor > 0 }

// levelResult is the optimum of a levelLP.
type levelResult struct {
	x         [][]float64 // per unit and type, clipped to [0, 1]
	tau       float64
	objective float64   // τ, or the GPU time on costType
	dual      []float64 // μ_u (0 for units without a level row)
	prices    []float64 // p_k
	// place is where the next solve of a similar LP should start: the
	// final placement, with each explicit unit whose solution is a segment
	// comfortably cheapest at the final prices made simple.
	place []levelPlace
	// Work done: LPs solved, the largest one's size, explicit units at the
	// end.
	lps, columns, rows, explicit int
}

// levelWarm carries prices from one solve of a shape to the next.
type levelWarm struct {
	prices []float64
	tau    float64
}

// Tuning of the decomposition. None affects the answer, only how many
// masters it takes to get there.
const (
	// levelSampleUnits is the size of the sample whose LP gives the first
	// prices.
	levelSampleUnits = 192
	// levelSampleSqueeze scales the sample's share of the capacities down
	// a little, so that a cluster with slack everywhere still yields the
	// prices of a nearly full one: every price 0 would place every unit
	// on its fastest type, which a full type then cannot hold.
	levelSampleSqueeze = 0.9
	// levelMargin makes a unit explicit from the start when estimated
	// prices leave it this close (relative reduced cost, or share of its
	// time) to changing its placement: such units would often flip.
	levelMargin = 0.005
	// levelMaxMasters bounds the rounds before the master takes every unit
	// (the full LP).
	levelMaxMasters = 25
	// levelPricedPerRound is the least number of units whose placement is
	// no longer cheapest that a round makes explicit (when that many fail).
	levelPricedPerRound = 64
)

// levelPlace is where a unit is in the master. A simple unit follows one
// segment of its cost hull: with a < 0 it sits on type b alone (its time
// row slack), otherwise it splits all of its time between types a and b
// (r_ua < r_ub), the mix that reaches its level. Explicit units have their
// own columns and rows; units without a level row get no time.
type levelPlace struct{ a, b int }

var (
	placeExplicit = levelPlace{-1, -1}
	placeLeftOut  = levelPlace{-1, -2}
)

func (pl levelPlace) simple() bool { return pl.b >= 0 }

// cost is c_uk, the objective's own cost of a unit of x on type k.
func (lp *levelLP) cost(u, k int) float64 {
	if !lp.raise && k == lp.costType {
		return lp.units[u].load
	}
	return 0
}

// priced is unit u's whole cost of a unit of x on type k at prices p:
// c_uk + q_u·p_k.
func (lp *levelLP) priced(u, k int, p []float64) float64 {
	return lp.cost(u, k) + lp.units[u].load*p[k]
}

// need is the level unit u must reach at τ.
func (u *levelUnit) need(tau float64) float64 { return floorOf(u) + u.weight*tau }

// floorOf is the floor a level row enforces: earlier solutions of the same
// constraints set the floors, and a relative slack of 1e-9 absorbs the
// solver's rounding (as in mmModel.solve).
func floorOf(u *levelUnit) float64 { return u.floor * (1 - 1e-9) }

// hullSegment is unit u's cheapest way to reach level L at prices p: the
// segment of the lower convex hull of the points (0, 0) and (r_uk, priced_uk)
// above L. Every point on that hull is the cheapest cost of its level with
// the unit's time at most 1. Ties go to the faster type, which needs less
// time. ok is false when no type mix reaches L.
func (lp *levelLP) hullSegment(u int, p []float64, L float64) (pl levelPlace, ok bool) {
	rate := lp.units[u].rate
	a, ra, ca := -1, 0.0, 0.0 // the current hull vertex, the origin first
	for {
		next, slope := -1, math.Inf(1)
		for k, r := range rate {
			if r <= ra {
				continue
			}
			s := (lp.priced(u, k, p) - ca) / (r - ra)
			if next < 0 || s < slope || (s == slope && r > rate[next]) {
				next, slope = k, s
			}
		}
		if next < 0 {
			return placeExplicit, false
		}
		if L <= rate[next] {
			return levelPlace{a, next}, true
		}
		a, ra, ca = next, rate[next], lp.priced(u, next, p)
	}
}

// segmentX is the time unit u spends on the types of pl at level L.
func (lp *levelLP) segmentX(u int, pl levelPlace, L float64) (xa, xb float64) {
	rate := lp.units[u].rate
	if pl.a < 0 {
		return 0, L / rate[pl.b]
	}
	d := rate[pl.b] - rate[pl.a]
	return (rate[pl.b] - L) / d, (L - rate[pl.a]) / d
}

// segmentDuals are the duals that make segment pl optimal for unit u at
// prices p: μ, the slope of the segment (cost per unit of level), and ν,
// the value of the unit's time (0 on a segment from the origin).
func (lp *levelLP) segmentDuals(u int, pl levelPlace, p []float64) (mu, nu float64) {
	rate := lp.units[u].rate
	cb := lp.priced(u, pl.b, p)
	if pl.a < 0 {
		return cb / rate[pl.b], 0
	}
	ca := lp.priced(u, pl.a, p)
	mu = (cb - ca) / (rate[pl.b] - rate[pl.a])
	return mu, mu*rate[pl.a] - ca
}

// segmentSlack is the smallest reduced cost, each relative to the size of
// its terms, that the duals of segment pl give unit u at prices p: of its
// other columns, and for a mix of the unit's idle time (ν >= 0) and of its
// level (μ >= 0). Negative means pl is not optimal at p; +Inf means nothing
// could make it so (every term is zero).
func (lp *levelLP) segmentSlack(u int, pl levelPlace, p []float64) float64 {
	mu, nu := lp.segmentDuals(u, pl, p)
	worst := math.Inf(1)
	relative := func(v, size float64) {
		if size > 0 {
			worst = math.Min(worst, v/size)
		}
	}
	if pl.a >= 0 {
		relative(mu, math.Abs(mu))
		relative(nu, math.Abs(nu)+math.Abs(mu)*lp.units[u].rate[pl.a])
	}
	for k, r := range lp.units[u].rate {
		if r <= 0 || k == pl.a || k == pl.b {
			continue
		}
		c := lp.priced(u, k, p)
		relative(c+nu-r*mu, c+math.Abs(nu)+r*math.Abs(mu))
	}
	return worst
}

// place puts unit u where the prices p and the level L make it simple, or
// explicit when the placement is too close to changing (margin) or no mix
// reaches L.
func (lp *levelLP) place(u int, p []float64, L, margin float64) levelPlace {
	pl, ok := lp.hullSegment(u, p, L)
	if !ok {
		return placeExplicit
	}
	if lp.segmentSlack(u, pl, p) < margin {
		return placeExplicit
	}
	xa, xb := lp.segmentX(u, pl, L)
	if xb > 1-margin || (pl.a >= 0 && xa > 1-margin) {
		return placeExplicit
	}
	return pl
}

// solveLevel solves lp exactly. With a non-nil warm it starts from the
// prices it holds and leaves the final ones there. start, when not nil,
// holds a placement per unit to begin with (the previous solve's place):
// with floors that the previous solution reached, it makes the first master
// feasible and most units already simple.
func solveLevel(lp *levelLP, warm *levelWarm, start []levelPlace) (*levelResult, error) {
	n := len(lp.units)
	res := &levelResult{}
	where := make([]levelPlace, n)
	var active []int
	for u := range lp.units {
		where[u] = placeLeftOut
		if lp.units[u].constrained() && anyPositive(lp.units[u].rate) {
			active = append(active, u)
		}
	}
	var prices []float64
	tauEst := 0.0
	if warm != nil && len(warm.prices) == len(lp.capacity) {
		prices, tauEst = warm.prices, warm.tau
	} else if len(start) != n {
		prices, tauEst = lp.samplePrices(active, res)
	}
	for _, u := range active {
		if len(start) == n && lp.validPlace(u, start[u]) {
			where[u] = start[u]
			continue
		}
		if prices == nil {
			where[u] = placeExplicit
			continue
		}
		where[u] = lp.place(u, prices, lp.units[u].need(math.Max(tauEst, 0)), levelMargin)
	}
	var m *levelMasterSolution
	for round := 0; ; round++ {
		if round == levelMaxMasters {
			for _, u := range active {
				where[u] = placeExplicit
			}
		}
		lp.fixConstantUnits(where, active)
		var err error
		// A master cannot be infeasible where the full LP is feasible: τ
		// may fall as far as it needs, overflow columns take any shortage
		// of capacity, and fixConstantUnits left no folded unit outside
		// its time. What remains is an explicit unit that cannot keep its
		// own floor, which no placement changes.
		m, err = lp.solveMaster(where, nil, res)
		if err != nil {
			return nil, err
		}
		added := lp.checkSimple(m, where, active)
		if added > 0 {
			continue
		}
		if n := lp.overflowing(m, where, active); n == 0 {
			break
		} else if n < 0 {
			return nil, fmt.Errorf("max-min master LP short of capacity with every unit explicit: %w", ErrInfeasible)
		}
	}
	lp.complete(m, where, res)
	if warm != nil {
		warm.prices, warm.tau = res.prices, res.tau
	}
	return res, nil
}

// validPlace tells whether pl can place unit u at all: an explicit unit,
// or a segment over types the unit can run on in increasing rate.
func (lp *levelLP) validPlace(u int, pl levelPlace) bool {
	if pl == placeExplicit {
		return true
	}
	rate := lp.units[u].rate
	if !pl.simple() || pl.b >= len(rate) || rate[pl.b] <= 0 {
		return false
	}
	return pl.a < 0 || (pl.a < len(rate) && rate[pl.a] > 0 && rate[pl.a] < rate[pl.b])
}

// fixConstantUnits makes explicit every simple unit whose time does not
// depend on τ (no weight, or no τ at all) and falls outside [0, 1]: the
// master could not repair it.
func (lp *levelLP) fixConstantUnits(where []levelPlace, active []int) {
	for _, u := range active {
		pl := where[u]
		if !pl.simple() || (lp.raise && lp.units[u].weight > 0) {
			continue
		}
		xa, xb := lp.segmentX(u, pl, floorOf(&lp.units[u]))
		if !inUnit(xa) || !inUnit(xb) {
			where[u] = placeExplicit
		}
	}
}

// inUnit tells whether a time fraction is in [0, 1] up to rounding.
func inUnit(x float64) bool { return x >= -1e-9 && x <= 1+1e-9 }

// tauRange is the range of τ over which unit u's segment keeps its time in
// [0, 1] (the whole line for a unit without weight).
func (lp *levelLP) tauRange(u int, pl levelPlace) (lo, hi float64) {
	lo, hi = math.Inf(-1), math.Inf(1)
	unit := &lp.units[u]
	if unit.weight <= 0 {
		return lo, hi
	}
	// Every time fraction on the segment is α + β·τ.
	f := floorOf(unit)
	bound := func(xAt0, xAt1 float64) {
		alpha, beta := xAt0, xAt1-xAt0
		switch {
		case beta > 0:
			lo, hi = math.Max(lo, -alpha/beta), math.Min(hi, (1-alpha)/beta)
		case beta < 0:
			lo, hi = math.Max(lo, (1-alpha)/beta), math.Min(hi, -alpha/beta)
		}
	}
	a0, b0 := lp.segmentX(u, pl, f)
	a1, b1 := lp.segmentX(u, pl, f+unit.weight)
	bound(b0, b1)
	if pl.a >= 0 {
		bound(a0, a1)
	}
	return lo, hi
}

// samplePrices estimates the prices (and τ) from the full LP over every
// few active units, with the capacities scaled to the sample's share of
// the load (squeezed a little). When the sample still leaves every type
// with slack (all prices 0), it is solved again with each type's capacity
// just below what the sample used there: prices that reflect how the
// sample spread over the types, where zero prices would pile every unit
// onto its fastest type. An infeasible sample (floors that only the whole
// can keep) gives zero prices.
func (lp *levelLP) samplePrices(active []int, res *levelResult) ([]float64, float64) {
	nt := len(lp.capacity)
	zero := make([]float64, nt)
	if len(active) == 0 {
		return zero, 0
	}
	stride := max(1, (len(active)+levelSampleUnits-1)/levelSampleUnits)
	where := make([]levelPlace, len(lp.units))
	for u := range where {
		where[u] = placeLeftOut
	}
	total, sampled := 0.0, 0.0
	for i, u := range active {
		total += lp.units[u].load
		if i%stride == 0 {
			where[u] = placeExplicit
			sampled += lp.units[u].load
		}
	}
	capacity := make([]float64, nt)
	for k, c := range lp.capacity {
		capacity[k] = c * levelSampleSqueeze * sampled / total
	}
	m, err := lp.solveMaster(where, capacity, res)
	if err != nil {
		return zero, 0
	}
	if anyPositive(m.prices) {
		return m.prices, m.tau
	}
	for k := range capacity {
		capacity[k] = 0
	}
	for u, row := range m.x {
		for k, v := range row {
			capacity[k] += levelSampleSqueeze * lp.units[u].load * v
		}
	}
	if tight, err := lp.solveMaster(where, capacity, res); err == nil {
		return tight.prices, tight.tau
	}
	return m.prices, m.tau
}

// levelMasterSolution is a master's optimum in the terms of its units.
type levelMasterSolution struct {
	tau float64
	// tauHi is the bound the simple units put on τ, and tauReduced the
	// magnitude of τ's reduced cost (nonzero only when τ is at it).
	tauHi, tauReduced float64
	// saturated is the simple unit that sets τ's bound at its highest
	// possible level, or -1 (set by checkSimple). It takes τ's reduced
	// cost into its level dual.
	saturated int
	prices    []float64
	// overflow is the capacity each type lacks (0 in a solution of the
	// full LP).
	overflow []float64
	x        [][]float64 // explicit units only (nil rows for the others)
	dual     []float64   // μ of explicit units
}

// foldedLoads are the simple units' loads on every type as a constant and a
// coefficient on τ.
func (lp *levelLP) foldedLoads(where []levelPlace) (constLoad, tauLoad []float64) {
	nt := len(lp.capacity)
	constLoad, tauLoad = make([]float64, nt), make([]float64, nt)
	for u, pl := range where {
		if !pl.simple() {
			continue
		}
		unit := &lp.units[u]
		rate, f := unit.rate, floorOf(unit)
		if pl.a < 0 {
			constLoad[pl.b] += unit.load * f / rate[pl.b]
			tauLoad[pl.b] += unit.load * unit.weight / rate[pl.b]
			continue
		}
		d := rate[pl.b] - rate[pl.a]
		constLoad[pl.b] += unit.load * (f - rate[pl.a]) / d
		tauLoad[pl.b] += unit.load * unit.weight / d
		constLoad[pl.a] += unit.load * (rate[pl.b] - f) / d
		tauLoad[pl.a] -= unit.load * unit.weight / d
	}
	return constLoad, tauLoad
}

// solveMaster builds and solves the master for the placement where, with
// the given capacities (lp's own when nil).
func (lp *levelLP) solveMaster(where []levelPlace, capacity []float64, res *levelResult) (*levelMasterSolution, error) {
	if capacity == nil {
		capacity = lp.capacity
	}
	nt := len(lp.capacity)
	master := newLinearProgram(0)
	if lp.raise {
		master.Maximize()
	}
	cols := make([][]int, len(lp.units))
	for u, pl := range where {
		if pl != placeExplicit {
			continue
		}
		cols[u] = make([]int, nt)
		for k, r := range lp.units[u].rate {
			cols[u][k] = -1
			if r > 0 {
				cols[u][k] = master.AddColumn(0, 1, lp.cost(u, k))
			}
		}
	}
	// τ may not rise past the point where a simple unit would need more
	// than all of its time (or, on a mix, less than none on its slower
	// type): a master whose τ stops there has not found the full LP's
	// optimum, and the units that set the bound become explicit
	// (checkSimple). Below, τ is free: units whose time a low τ would make
	// negative fail the same check, and the master stays feasible.
	tau := -1
	tauHi := math.Inf(1)
	if lp.raise {
		for u, pl := range where {
			if pl.simple() {
				_, hi := lp.tauRange(u, pl)
				tauHi = math.Min(tauHi, hi)
			}
		}
		tau = master.AddColumn(-Inf, tauHi, 1)
	}
	// Time rows of the explicit units.
	var rc []int
	var rv []float64
	for u := range cols {
		if cols[u] == nil {
			continue
		}
		rc, rv = rc[:0], rv[:0]
		for _, c := range cols[u] {
			if c >= 0 {
				rc, rv = append(rc, c), append(rv, 1)
			}
		}
		master.AddRow(rc, rv, -Inf, 1)
	}
	// Capacity rows, with every simple unit's load folded in, and an
	// overflow column on each at a prohibitive cost: simple units held on
	// the wrong types can overload one, and the master should then still
	// say which types are short (their prices), not just fail.
	constLoad, tauLoad := lp.foldedLoads(where)
	capRow := make([]int, nt)
	overflow := make([]int, nt)
	penalty := lp.overflowPenalty()
	if lp.raise {
		penalty = -penalty
	}
	for k := range overflow {
		overflow[k] = master.AddColumn(0, Inf, penalty)
	}
	for k := 0; k < nt; k++ {
		rc, rv = rc[:0], rv[:0]
		for u := range cols {
			if cols[u] != nil && cols[u][k] >= 0 {
				rc, rv = append(rc, cols[u][k]), append(rv, lp.units[u].load)
			}
		}
		if tau >= 0 && tauLoad[k] != 0 {
			rc, rv = append(rc, tau), append(rv, tauLoad[k])
		}
		rc, rv = append(rc, overflow[k]), append(rv, -1)
		capRow[k] = master.AddRow(rc, rv, -Inf, capacity[k]-constLoad[k])
	}
	// Level rows of the explicit units.
	levelRow := make([]int, len(lp.units))
	for u := range cols {
		levelRow[u] = -1
		if cols[u] == nil || !lp.units[u].constrained() {
			continue
		}
		rc, rv = rc[:0], rv[:0]
		for k, c := range cols[u] {
			if c >= 0 {
				rc, rv = append(rc, c), append(rv, lp.units[u].rate[k])
			}
		}
		if w := lp.units[u].weight; w > 0 && tau >= 0 {
			rc, rv = append(rc, tau), append(rv, -w)
		}
		levelRow[u] = master.AddRow(rc, rv, floorOf(&lp.units[u]), Inf)
	}
	res.lps++
	res.columns = max(res.columns, master.NumColumns())
	res.rows = max(res.rows, master.NumRows())
	sol, err := master.Solve()
	if err != nil {
		return nil, fmt.Errorf("max-min master LP: %w", err)
	}
	m := &levelMasterSolution{tauHi: tauHi, prices: make([]float64, nt), x: make([][]float64, len(lp.units)), dual: make([]float64, len(lp.units))}
	if tau >= 0 {
		m.tau = sol.X[tau]
		m.tauReduced = math.Abs(sol.ColumnDuals[tau])
	}
	m.overflow = make([]float64, nt)
	for k, r := range capRow {
		m.prices[k] = math.Abs(sol.RowDuals[r])
		m.overflow[k] = sol.X[overflow[k]]
	}
	for u := range cols {
		if cols[u] == nil {
			continue
		}
		m.x[u] = make([]float64, nt)
		for k, c := range cols[u] {
			if c >= 0 {
				m.x[u][k] = sol.X[c]
			}
		}
		if levelRow[u] >= 0 {
			m.dual[u] = math.Abs(sol.RowDuals[levelRow[u]])
		}
	}
	return m, nil
}

// overflowPenalty is the cost of a GPU of overflow: far above any price a
// GPU can have in the LP, so that the master overflows only where no
// placement of its explicit units avoids it. For τ, a GPU is worth at most
// the level the fastest use of it gives a unit, per unit of weight; for GPU
// time, at most the time it saves by moving a unit between types. The
// answer never depends on it: a master that still overflows is no
// solution, and its units become explicit until none does.
func (lp *levelLP) overflowPenalty() float64 {
	worth := 1.0
	for u := range lp.units {
		unit := &lp.units[u]
		lo, hi := math.Inf(1), 0.0
		for _, r := range unit.rate {
			if r > 0 {
				lo, hi = math.Min(lo, r), math.Max(hi, r)
			}
		}
		if hi == 0 {
			continue
		}
		if lp.raise && unit.weight > 0 {
			worth = math.Max(worth, hi/(unit.load*unit.weight))
		}
		if !lp.raise {
			worth = math.Max(worth, unit.load*hi/lo)
		}
	}
	return 1e3 * worth
}

// checkSimple tests every simple unit's optimality conditions against the
// master's solution and makes units that fail explicit: every unit whose
// segment leaves [0, 1] of its time, and of those whose segment is no longer
// the cheapest, the ones that gain most by changing (standard partial
// pricing: a degenerate master can leave many units almost equally
// unhappy where moving a few of them is enough). It returns the number of
// units made explicit; 0 means the master's solution is optimal.
func (lp *levelLP) checkSimple(m *levelMasterSolution, where []levelPlace, active []int) int {
	type violation struct {
		unit int
		gain float64
	}
	// When τ stops at the bound of the simple units' time, the unit that
	// sets it either has reached the most it can ever do (all of its time
	// on its fastest type), which makes the bound an optimum, or must
	// become explicit together with those whose bound is just above: τ
	// would stop at theirs next.
	atBound := lp.raise && closeTo(m.tau, m.tauHi)
	m.saturated = -1
	if atBound {
		for _, u := range active {
			pl := where[u]
			if !pl.simple() || lp.units[u].weight <= 0 {
				continue
			}
			if _, hi := lp.tauRange(u, pl); closeTo(m.tau, hi) && lp.saturates(u, pl) && lp.segmentGain(u, pl, m.prices) == 0 {
				m.saturated = u
				break
			}
		}
	}
	var priced []violation
	added := 0
	for _, u := range active {
		pl := where[u]
		if !pl.simple() || u == m.saturated {
			continue
		}
		xa, xb := lp.segmentX(u, pl, lp.units[u].need(m.tau))
		binds := false
		if atBound && m.saturated < 0 && lp.units[u].weight > 0 {
			_, hi := lp.tauRange(u, pl)
			binds = hi <= m.tau+levelMargin*math.Abs(m.tau)+1e-9
		}
		if binds || !inUnit(xa) || !inUnit(xb) {
			where[u] = placeExplicit
			added++
			continue
		}
		if g := lp.segmentGain(u, pl, m.prices); g > 0 {
			priced = append(priced, violation{u, g})
		}
	}
	if len(priced) == 0 {
		return added
	}
	sort.Slice(priced, func(i, j int) bool { return priced[i].gain > priced[j].gain })
	take := min(len(priced), max(levelPricedPerRound, len(active)/20))
	for _, v := range priced[:take] {
		where[v.unit] = placeExplicit
	}
	return added + take
}

// saturates tells whether segment pl ends on unit u's fastest type: at its
// upper τ bound the unit then spends all of its time there, the highest
// level it can reach at all.
func (lp *levelLP) saturates(u int, pl levelPlace) bool {
	rate := lp.units[u].rate
	for _, r := range rate {
		if r > rate[pl.b] {
			return false
		}
	}
	return true
}

// closeTo tells whether x and y agree to a relative 1e-9.
func closeTo(x, y float64) bool { return math.Abs(x-y) <= 1e-9*math.Max(1, math.Abs(y)) }

// segmentGain is how much unit u's cost at prices p would fall per unit of
// time moved off segment pl (the most negative reduced cost, as a positive
// number), or 0 when pl is optimal at p within a relative 1e-9.
func (lp *levelLP) segmentGain(u int, pl levelPlace, p []float64) float64 {
	if lp.segmentSlack(u, pl, p) >= -1e-9 {
		return 0
	}
	mu, nu := lp.segmentDuals(u, pl, p)
	gain := math.Max(0, -mu) + math.Max(0, -nu)
	for k, r := range lp.units[u].rate {
		if r > 0 && k != pl.a && k != pl.b {
			gain = math.Max(gain, -(lp.priced(u, k, p) + nu - r*mu))
		}
	}
	return gain
}

// overflowing makes explicit every simple unit on a type that the master
// overflows, and returns their number. When no simple unit is left there,
// the master overflows although every unit on the type can move: the LP
// itself cannot keep its floors, and every unit becomes explicit, which
// ends in the full LP's verdict.
func (lp *levelLP) overflowing(m *levelMasterSolution, where []levelPlace, active []int) int {
	over := make([]bool, len(m.overflow))
	anyOver := false
	for k, o := range m.overflow {
		over[k] = o > 1e-9*math.Max(1, lp.capacity[k])
		anyOver = anyOver || over[k]
	}
	if !anyOver {
		return 0
	}
	changed := 0
	for _, u := range active {
		if pl := where[u]; pl.simple() && (over[pl.b] || (pl.a >= 0 && over[pl.a])) {
			where[u] = placeExplicit
			changed++
		}
	}
	if changed == 0 {
		for _, u := range active {
			if where[u] != placeExplicit {
				where[u] = placeExplicit
				changed++
			}
		}
	}
	if changed == 0 {
		return -1 // every unit explicit and still short: infeasible
	}
	return changed
}

// complete turns the final master into the full LP's solution: explicit
// units as the master has them, simple units on their segment at exactly
// their level, with the duals derived above.
func (lp *levelLP) complete(m *levelMasterSolution, where []levelPlace, res *levelResult) {
	nt := len(lp.capacity)
	res.tau, res.prices = m.tau, m.prices
	res.x = make([][]float64, len(lp.units))
	res.dual = make([]float64, len(lp.units))
	res.explicit = 0
	for u, pl := range where {
		row := make([]float64, nt)
		switch {
		case pl == placeExplicit:
			res.explicit++
			copy(row, m.x[u])
			res.dual[u] = m.dual[u]
		case pl.simple():
			xa, xb := lp.segmentX(u, pl, lp.units[u].need(m.tau))
			row[pl.b] = xb
			if pl.a >= 0 {
				row[pl.a] = xa
			}
			res.dual[u], _ = lp.segmentDuals(u, pl, m.prices)
			if u == m.saturated {
				// Its time row binds too (ν = the extra μ times its
				// rate), which keeps its other columns' reduced costs
				// non-negative: they are slower.
				res.dual[u] += m.tauReduced / lp.units[u].weight
			}
		}
		for t, v := range row {
			if v < 1e-9 {
				v = 0
			}
			row[t] = math.Min(1, v)
		}
		res.x[u] = row
	}
	res.place = make([]levelPlace, len(lp.units))
	for u, pl := range where {
		res.place[u] = pl
		if pl == placeExplicit {
			res.place[u] = lp.segmentOf(u, res.x[u], m.prices)
		}
	}
	if lp.raise {
		res.objective = res.tau
		return
	}
	for u, row := range res.x {
		res.objective += lp.cost(u, lp.costType) * row[lp.costType]
	}
}

// levelSolver chooses how the LPs of the max-min family are solved.
type levelSolver int

const (
	// levelAuto decomposes LPs from levelMinUnits units on: below that the
	// full LP is as fast and its vertex is the one earlier versions gave.
	levelAuto levelSolver = iota
	// levelFull always solves the full LP (the reference).
	levelFull
	// levelDecomposed always decomposes.
	levelDecomposed
)

// levelMinUnits is where levelAuto starts to decompose.
const levelMinUnits = 256

// decompose tells whether an LP over that many units is decomposed.
func (s levelSolver) decompose(units int) bool {
	switch s {
	case levelFull:
		return false
	case levelDecomposed:
		return true
	default:
		return units >= levelMinUnits
	}
}

// segmentOf is the segment that unit u's solution x follows when it is
// one and the prices p leave it comfortably cheapest (by levelMargin), or
// placeExplicit.
func (lp *levelLP) segmentOf(u int, x []float64, p []float64) levelPlace {
	unit := &lp.units[u]
	var used []int
	sum, level := 0.0, 0.0
	for k, v := range x {
		if v > 0 {
			used = append(used, k)
			sum += v
			level += v * unit.rate[k]
		}
	}
	pl := placeExplicit
	switch {
	case len(used) == 1 && (sum < 1-levelMargin || unit.weight == 0):
		// A unit without weight holds its time whatever τ does, so it
		// needs no distance from its whole time.
		pl = levelPlace{-1, used[0]}
	case len(used) == 2 && sum > 1-1e-9:
		a, b := used[0], used[1]
		if unit.rate[a] > unit.rate[b] {
			a, b = b, a
		}
		if unit.rate[a] == unit.rate[b] {
			return placeExplicit
		}
		pl = levelPlace{a, b}
		if xa, xb := lp.segmentX(u, pl, level); xa < levelMargin || xb < levelMargin {
			return placeExplicit
		}
	default:
		return placeExplicit
	}
	if lp.segmentSlack(u, pl, p) < levelMargin {
		return placeExplicit
	}
	return pl
}
