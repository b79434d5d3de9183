package policy

import (
	"errors"
	"math"
)

// The max-min LP has many optimal allocations: it fixes only the lowest
// normalized level, and the jobs above it, the GPUs left over and the split
// of each job's time over the types may be chosen freely. A simplex solver
// (CLP) returns a vertex of that optimal face, where most jobs sit on one
// type and spare GPUs go to a few jobs. Gavel solves the same LP with an
// interior-point method (ECOS), whose iterates converge to the analytic
// center of the optimal face: every time fraction that some optimum can
// make positive is positive, and the slack of every constraint that does
// not have to bind is shared out. Which of the optimal allocations is
// installed decides which jobs the round mechanism runs on which type, so a
// reproduction of Gavel's figures needs the interior one
// (Options.InteriorOptimum).
//
// centerLevels computes it by Newton's method on the logarithmic barrier of
// the optimal face, relaxed by centerRelax so that it has an interior:
//
//	x_kw >= 0 on every type w job class k can run on,
//	1 - Σ_w x_kw >= 0 (each job's time),
//	Σ_w a_kw x_kw - (1-centerRelax)·t* >= 0 (each job's weighted level),
//	N_w - Σ_k n_k sf_k x_kw >= 0 (each type's GPUs),
//
// each job of a class of n_k identical jobs contributing its own terms.
// The Hessian is block diagonal (one small block per class) plus one rank-one
// term per GPU type, so each Newton step costs time linear in the number of
// classes (Woodbury's identity over the types).

// levelBarrier is the barrier term each job's level contributes to the
// centering. Which optimum an interior-point solver approaches depends on
// how the problem was written down for it, not only on its optimal set.
type levelBarrier int

const (
	// levelLinear: -log(L - τ), the level as the linear constraint the
	// max-min LP writes it as.
	levelLinear levelBarrier = iota
	// levelInvPos: -2·log(L - τ) + log(L), the finish-time fairness
	// program as Gavel writes it: ρ_j = t_j/D_j + (R_j/D_j)·inv_pos(thr_j)
	// under an epigraph t ≥ ρ_j, where inv_pos becomes a variable u_j with
	// the second-order cone constraint thr_j·u_j ≥ 1. On the optimal face
	// (t = ρ*) the barrier -log(U_j - u_j) - log(thr_j·u_j - 1), with
	// U_j = (ρ*·D_j - t_j)/R_j, is smallest at u_j = (U_j + 1/thr_j)/2, where
	// it is -2·log(thr_j·U_j - 1) + log(thr_j) up to a constant; in the
	// level L_j = thr_j·U_j that is this term. Near the face's edge it
	// pushes twice as hard as the linear one, so jobs keep more time.
	levelInvPos
)

// centerRelax is how far below the optimal level the face is relaxed, as a
// fraction of it: small enough that no job loses a measurable share of its
// level, large enough to keep the barrier's Newton steps well conditioned.
const centerRelax = 1e-3

// centerClass is one class of identical jobs of the centering problem.
type centerClass struct {
	count, sf float64
	// a is the weighted level per unit of time on each type (0: the class
	// cannot run there and gets no time there, unless free says otherwise).
	a []float64
	// free, when set, names the types whose fractions are variables even
	// where a is 0 (Options.InteriorUnusableTypes).
	free []bool
}

// variable reports whether the class's fraction on type w is a variable.
func (c *centerClass) variable(w int) bool {
	if c.free != nil {
		return c.free[w]
	}
	return c.a[w] > 0
}

// errCenterStart reports that the vertex given as start does not reach the
// level it should: the caller keeps the vertex.
var errCenterStart = errors.New("centering: start is not an optimum")

// centerLevels returns the analytic center of the relaxed optimal face of
// the max-min LP over classes, with capacity the GPUs of every type and
// level the optimal weighted level t*. vertex is an optimal solution (per
// class, per type), the starting point.
func centerLevels(classes []centerClass, capacity []float64, level float64, vertex [][]float64, barrier levelBarrier) ([][]float64, error) {
	nt := len(capacity)
	tau := level * (1 - centerRelax)
	// y: a strictly feasible point for every constraint but the levels.
	demand := make([]float64, nt)
	usable := make([]int, len(classes))
	for k, c := range classes {
		for w := range c.a {
			if c.variable(w) {
				usable[k]++
				demand[w] += c.count * c.sf
			}
		}
		if usable[k] == 0 {
			return nil, errors.New("centering: a class runs nowhere")
		}
	}
	y := make([][]float64, len(classes))
	for k, c := range classes {
		y[k] = make([]float64, nt)
		for w := range c.a {
			if c.variable(w) {
				y[k][w] = math.Min(0.5/float64(usable[k]), 0.5*capacity[w]/demand[w])
			}
		}
	}
	// theta mixes y into the vertex so that every bound is strict while the
	// levels stay above tau.
	theta := 0.5
	for k, c := range classes {
		lv, ly := dot(c.a, vertex[k]), dot(c.a, y[k])
		if lv < level*(1-centerRelax/4) {
			return nil, errCenterStart
		}
		if ly < tau {
			theta = math.Min(theta, 0.5*(lv-tau)/(lv-ly))
		}
	}
	x := make([][]float64, len(classes))
	for k := range classes {
		x[k] = make([]float64, nt)
		for w := range x[k] {
			if classes[k].variable(w) {
				x[k][w] = (1-theta)*math.Max(vertex[k][w], 0) + theta*y[k][w]
			}
		}
	}
	ce := newCentering(classes, capacity, tau, barrier)
	f, ok := ce.value(x)
	if !ok {
		return nil, errCenterStart
	}
	next := make([][]float64, len(x))
	for iter := 0; iter < 200; iter++ {
		g, d := ce.newtonStep(x)
		dec := 0.0 // Newton decrement squared: -gᵀd
		for k := range d {
			dec -= dot(g[k], d[k])
		}
		if dec < 1e-10 {
			break
		}
		step := 1.0
		if dec > 0.25 {
			// Damped phase: a step of 1/(1+λ) stays inside the domain of a
			// self-concordant barrier.
			step = 1 / (1 + math.Sqrt(dec))
		}
		for {
			for k := range x {
				next[k] = addScaled(next[k], x[k], d[k], step)
			}
			if fn, ok := ce.value(next); ok && fn <= f-0.25*step*dec {
				f = fn
				break
			}
			step /= 2
			if step < 1e-12 {
				return x, nil // no further progress at this precision
			}
		}
		x, next = next, x
	}
	return x, nil
}

// centering evaluates the barrier of the relaxed optimal face. Its
// buffers are reused from one Newton step to the next.
type centering struct {
	classes  []centerClass
	capacity []float64
	tau      float64
	barrier  levelBarrier
	nt       int
	// idx lists the types each class can run on.
	idx [][]int
	// g and d are the gradient and the Newton direction; v holds B⁻¹U per
	// class (nt×nt, row = type of the class's variable).
	g, d, v      [][]float64
	used, q, utz []float64
	mm, work     []float64
}

func newCentering(classes []centerClass, capacity []float64, tau float64, barrier levelBarrier) *centering {
	nt := len(capacity)
	ce := &centering{classes: classes, capacity: capacity, tau: tau, barrier: barrier, nt: nt,
		idx: make([][]int, len(classes)), g: make([][]float64, len(classes)), d: make([][]float64, len(classes)),
		v: make([][]float64, len(classes)), used: make([]float64, nt), q: make([]float64, nt), utz: make([]float64, nt),
		mm: make([]float64, nt*(nt+1)), work: make([]float64, nt*(2*nt+1))}
	for k, c := range classes {
		for w := range c.a {
			if c.variable(w) {
				ce.idx[k] = append(ce.idx[k], w)
			}
		}
		ce.g[k] = make([]float64, nt)
		ce.d[k] = make([]float64, nt)
		ce.v[k] = make([]float64, nt*nt)
	}
	return ce
}

// value is the barrier at x, and false outside its domain.
func (ce *centering) value(x [][]float64) (float64, bool) {
	f := 0.0
	used := ce.used
	clear(used)
	for k, c := range ce.classes {
		sum, lv, logs := 0.0, 0.0, 0.0
		for _, w := range ce.idx[k] {
			v := x[k][w]
			if !(v > 0) {
				return 0, false
			}
			logs += math.Log(v)
			sum += v
			lv += c.a[w] * v
			used[w] += c.count * c.sf * v
		}
		r, s := 1-sum, lv-ce.tau
		if !(r > 0) || !(s > 0) {
			return 0, false
		}
		f += c.count * (ce.levelTerm(lv, s) - logs - math.Log(r))
	}
	for w, n := range ce.capacity {
		if used[w] == 0 {
			continue // no class can use the type: no constraint
		}
		q := n - used[w]
		if !(q > 0) {
			return 0, false
		}
		f -= math.Log(q)
	}
	return f, true
}

// levelTerm is the level's barrier term at level lv, s = lv - τ > 0.
func (ce *centering) levelTerm(lv, s float64) float64 {
	if ce.barrier == levelInvPos {
		return -2*math.Log(s) + math.Log(lv)
	}
	return -math.Log(s)
}

// levelDerivatives are levelTerm's first and second derivatives in lv.
func (ce *centering) levelDerivatives(lv, s float64) (float64, float64) {
	if ce.barrier == levelInvPos {
		return -2/s + 1/lv, 2/(s*s) - 1/(lv*lv)
	}
	return -1 / s, 1 / (s * s)
}

// newtonStep returns the barrier's gradient at x and the Newton direction
// (both owned by ce, valid until the next call).
func (ce *centering) newtonStep(x [][]float64) (g, d [][]float64) {
	nt := ce.nt
	used, q, utz := ce.used, ce.q, ce.utz
	clear(used)
	clear(utz)
	for k, c := range ce.classes {
		for _, w := range ce.idx[k] {
			used[w] += c.count * c.sf * x[k][w]
		}
	}
	// mm is M = D⁻¹ + UᵀB⁻¹U over the types, then a column for Uᵀz.
	mm := ce.mm
	clear(mm)
	cols := nt + 1
	for w := range q {
		q[w] = ce.capacity[w] - used[w]
		if used[w] > 0 {
			mm[w*cols+w] = q[w] * q[w]
		} else {
			mm[w*cols+w] = 1 // no constraint on this type: U's column is 0
		}
	}
	for k, c := range ce.classes {
		idx := ce.idx[k]
		n := len(idx)
		sum, lv := 0.0, 0.0
		for _, w := range idx {
			sum += x[k][w]
			lv += c.a[w] * x[k][w]
		}
		r, s := 1-sum, lv-ce.tau
		d1, d2 := ce.levelDerivatives(lv, s)
		gk, dk, vk := ce.g[k], ce.d[k], ce.v[k]
		clear(gk)
		clear(dk)
		clear(vk)
		// The block system [B | -g | U's columns], n rows.
		bc := n + 1 + nt
		m := ce.work[:n*bc]
		clear(m)
		for i, w := range idx {
			xi := x[k][w]
			gk[w] = c.count*(-1/xi+1/r+c.a[w]*d1) + c.count*c.sf/q[w]
			for j, w2 := range idx {
				h := 1/(r*r) + c.a[w]*c.a[w2]*d2
				if i == j {
					h += 1 / (xi * xi)
				}
				m[i*bc+j] = c.count * h
			}
			m[i*bc+n] = -gk[w]
			m[i*bc+n+1+w] = c.count * c.sf
		}
		solveInPlace(m, n, bc)
		for i, w := range idx {
			dk[w] = m[i*bc+n] // z for now
			copy(vk[w*nt:(w+1)*nt], m[i*bc+n+1:i*bc+bc])
		}
		// Uᵀ over this block: U[(k,w), w] = count·sf.
		for _, w := range idx {
			utz[w] += c.count * c.sf * dk[w]
			for w2 := 0; w2 < nt; w2++ {
				mm[w*cols+w2] += c.count * c.sf * vk[w*nt+w2]
			}
		}
	}
	// d = z - V M⁻¹ Uᵀz.
	for w := range utz {
		mm[w*cols+nt] = utz[w]
	}
	solveInPlace(mm, nt, cols)
	for k := range ce.classes {
		dk, vk := ce.d[k], ce.v[k]
		for _, w := range ce.idx[k] {
			for w2 := 0; w2 < nt; w2++ {
				dk[w] -= vk[w*nt+w2] * mm[w2*cols+nt]
			}
		}
	}
	return ce.g, ce.d
}

// solveInPlace solves the n×n system in the first n columns of the
// row-major matrix m (cols columns) for every further column, by Gaussian
// elimination with partial pivoting; the solutions replace those columns.
func solveInPlace(m []float64, n, cols int) {
	for p := 0; p < n; p++ {
		best := p
		for i := p + 1; i < n; i++ {
			if math.Abs(m[i*cols+p]) > math.Abs(m[best*cols+p]) {
				best = i
			}
		}
		if best != p {
			for j := 0; j < cols; j++ {
				m[p*cols+j], m[best*cols+j] = m[best*cols+j], m[p*cols+j]
			}
		}
		for i := p + 1; i < n; i++ {
			f := m[i*cols+p] / m[p*cols+p]
			for j := p; j < cols; j++ {
				m[i*cols+j] -= f * m[p*cols+j]
			}
		}
	}
	for i := n - 1; i >= 0; i-- {
		for j := n; j < cols; j++ {
			v := m[i*cols+j]
			for l := i + 1; l < n; l++ {
				v -= m[i*cols+l] * m[l*cols+j]
			}
			m[i*cols+j] = v / m[i*cols+i]
		}
	}
}

func dot(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// addScaled writes x + step·d into dst (reused when long enough).
func addScaled(dst, x, d []float64, step float64) []float64 {
	if cap(dst) < len(x) {
		dst = make([]float64, len(x))
	}
	dst = dst[:len(x)]
	for i := range x {
		dst[i] = x[i] + step*d[i]
	}
	return dst
}

// center replaces sol's vertex by the analytic center of the optimal face
// (Options.InteriorOptimum) when sol raised every class with weight > 0 from
// floor 0; it keeps the vertex when the centering cannot start from it.
func (m *mmModel) center(sol *mmSolution, weight []float64, unusable bool) {
	n := sol.classes.Count()
	if n == 0 || len(sol.x) != n || sol.pairs != nil {
		return
	}
	classes := make([]centerClass, n)
	level := math.Inf(1)
	for c := 0; c < n; c++ {
		j := sol.classes.Members[c][0]
		job := &m.jobs[j]
		if weight[j] <= 0 {
			return
		}
		a := make([]float64, len(m.types))
		for w, r := range job.rate {
			a[w] = r / weight[j]
		}
		classes[c] = centerClass{count: float64(sol.classes.Size(c)), sf: job.sf, a: a}
		if unusable {
			// As ECOS sees it: a fraction on every type with room for the
			// job, also where it cannot run.
			classes[c].free = make([]bool, len(a))
			for w := range a {
				classes[c].free[w] = m.capacity[w] >= job.sf
			}
		}
		level = math.Min(level, dot(a, sol.x[c]))
	}
	if !(level > 0) {
		return
	}
	x, err := centerLevels(classes, m.capacity, level, sol.x, levelLinear)
	if err != nil {
		return
	}
	sol.x = x
}

// centerFTF replaces the optimal allocation a of a finish_time_fairness
// policy by the analytic center of its optimal face (Options.InteriorOptimum):
// the allocations under which every job's ρ, in the policy's view tput,
// stays at or below the optimal max ρ*, that is every job's effective
// throughput reaches c_j(ρ*) = R_j / (ρ*·D_j − t_j). Dividing each job's
// throughputs by c_j makes that a level of 1 for every job, the face
// centerLevels centers. ρ* is the vertex's max ρ in that view: for the
// agnostic policy, whose view rates every usable type at the job's v100
// rate, it is not a.Objective, which is measured at the real rates. Jobs
// whose ρ no allocation changes keep their (empty) rows; a keeps its
// vertex when the centering cannot start from it.
func centerFTF(p *Problem, a *Allocation, tput throughputFunc) {
	face, rho, ok := ftfVertexFace(p, a, tput)
	if !ok {
		return
	}
	capacity := make([]float64, len(a.Types))
	for k, t := range a.Types {
		capacity[k] = float64(p.GPUs[t])
	}
	classes := make([]centerClass, len(face))
	vertex := make([][]float64, len(face))
	for n, fj := range face {
		slack := rho*fj.isoTime - fj.since
		if !(slack > 0) {
			return
		}
		need := fj.remaining / slack
		c := centerClass{count: 1, sf: float64(jobScale(&p.Jobs[fj.row])), a: make([]float64, len(a.Types))}
		for k, v := range fj.rates {
			c.a[k] = v / need
		}
		classes[n] = c
		vertex[n] = a.Rows[fj.row].Fractions
	}
	x, err := centerLevels(classes, capacity, 1, vertex, levelInvPos)
	if err != nil {
		return
	}
	for n, fj := range face {
		a.Rows[fj.row].Fractions = x[n]
	}
	if obj, err := MaxFinishTimeFairness(p, a); err == nil {
		a.Objective = obj
	}
}

// ftfFaceJob is one job whose ρ an allocation of a finish-time fairness
// policy can change, as the vertex a leaves it.
type ftfFaceJob struct {
	row                       int
	since, remaining, isoTime float64
	// rho is the job's ρ at the vertex; rates its rates, in the policy's
	// view, on the types it can run on (0 elsewhere).
	rho   float64
	rates []float64
}

// ftfVertexFace reads the optimal allocation a of a finish-time fairness
// policy in the policy's view tput: the jobs whose ρ an allocation can
// change, and the vertex's max ρ (a finished job's fixed ρ included),
// which for the agnostic policy is not a.Objective (measured at the real
// rates). ok is false where there is nothing to choose: rows not in
// problem order, a job the vertex leaves without time (no finite optimum),
// or no such job at all.
func ftfVertexFace(p *Problem, a *Allocation, tput throughputFunc) (face []ftfFaceJob, rho float64, ok bool) {
	if len(a.Rows) < len(p.Jobs) {
		return nil, 0, false
	}
	shares := NewIsolatedShares(p)
	for i := range p.Jobs {
		j := &p.Jobs[i]
		if len(a.Rows[i].Jobs) != 1 || a.Rows[i].Jobs[0] != j.ID {
			return nil, 0, false
		}
		share := shares.Share(j)
		fj := ftfFaceJob{row: i, since: j.TimeSinceStart, remaining: j.StepsRemaining, rates: make([]float64, len(a.Types))}
		iso, eff, runs := 0.0, 0.0, false
		for k, t := range a.Types {
			v := tput(j, t)
			iso += v * share[k]
			if v > 0 && p.GPUs[t] >= jobScale(j) {
				fj.rates[k] = v
				eff += v * a.Rows[i].Fractions[k]
				runs = true
			}
		}
		if j.StepsRemaining <= 0 {
			// A finished job's ρ is fixed; the optimum is at least it.
			if r := themisRho(j.TimeSinceStart, 0, 1, j.IsolatedTime, iso); !math.IsNaN(r) {
				rho = math.Max(rho, r)
			}
			continue
		}
		if !(iso > 0) || !runs {
			continue // no allocation changes its ρ
		}
		if !(eff > 0) {
			return nil, 0, false
		}
		fj.isoTime = j.IsolatedTime + j.StepsRemaining/iso
		fj.rho = (fj.since + fj.remaining/eff) / fj.isoTime
		rho = math.Max(rho, fj.rho)
		face = append(face, fj)
	}
	if len(face) == 0 || !(rho > 0) || math.IsInf(rho, 0) {
		return nil, 0, false
	}
	return face, rho, true
}

// countUnusableTypes gives every runnable job of an agnostic model rate 1
// (its scale factor, in normalized units) also on the types where it cannot
// run, as Gavel's max_min_fairness does (Options.AgnosticUnusableTypes).
func (m *mmModel) countUnusableTypes() {
	for j := range m.jobs {
		mj := &m.jobs[j]
		if !mj.runnable {
			continue
		}
		for i := range mj.rate {
			if mj.rate[i] == 0 && m.capacity[i] >= mj.sf {
				mj.rate[i] = mj.sf
			}
		}
		mj.physical = classKey(nil).float(mj.sf).floats(mj.rate)
	}
}
