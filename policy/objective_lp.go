package policy

import (
	"fmt"
	"math"
)

// placementLP is the common skeleton of the allocation LPs of this file's
// family of policies (throughput sum, makespan, finish-time fairness, cost,
// shortest job first): one column per (job or pair, GPU type) on which the
// row may run, and the constraints of the paper's §3.1:
//
//	0 <= X <= 1, Σ_t X[j][t] <= 1 per job (pairs count for both members),
//	Σ_j sf_j·X[j][t] <= N_t per type.
//
// No column exists where a job's throughput is 0 or its scale factor is
// larger than the type's GPU count, so such placements are impossible by
// construction rather than by a constraint.
type placementLP struct {
	lp    *linearProgram
	types []string
	// units are the allocation rows: every job (problem order), then every
	// usable pair.
	units []placementUnit
	// effCols/effCoefs express each job's effective throughput (steps/s)
	// as a linear form over the columns, indexed like Problem.Jobs.
	effCols  [][]int
	effCoefs [][]float64
	// scaleCol is the Charnes-Cooper scaling column when the LP was built
	// homogeneous (every constant right-hand side multiplied by it), else -1.
	scaleCol int
	// timeRow is each job's time row and capRow each type's capacity row
	// (-1 where there is none), for callers that carry a basis over.
	timeRow []int
	capRow  []int
}

// placementUnit is one row of the allocation: a job or a pair of jobs.
type placementUnit struct {
	jobs []int // indices into Problem.Jobs
	cols []int // column per type index, -1 where the unit cannot run
}

// throughputFunc gives a job's step rate on a type as a policy sees it.
type throughputFunc func(j *Job, t string) float64

// realThroughput is the measured throughput: the heterogeneity-aware view.
func realThroughput(j *Job, t string) float64 { return j.Throughput(t) }

// agnosticThroughput returns the heterogeneity-agnostic view used by
// finish_time_fairness and min_total_duration: every type on which the job
// can run is assumed to be as fast as the job's v100 (or, without a usable
// v100 entry, its fastest type). Types where the job cannot run stay at 0,
// because no policy may place a job where it cannot execute.
func agnosticThroughput(p *Problem) throughputFunc {
	return agnosticView(p, false)
}

// agnosticView is agnosticThroughput; with everywhere, a job also gets its
// reference rate on the types where it cannot run, as Gavel's
// FinishTimeFairnessPolicy hands its perf policy the V100 rate on every
// type (Options.AgnosticUnusableTypes).
func agnosticView(p *Problem, everywhere bool) throughputFunc {
	ref := make(map[*Job]float64, len(p.Jobs))
	for i := range p.Jobs {
		j := &p.Jobs[i]
		v := 0.0
		if _, ok := p.GPUs["v100"]; ok {
			v = j.Throughput("v100")
		}
		if v <= 0 {
			for t := range p.GPUs {
				v = math.Max(v, j.Throughput(t))
			}
		}
		ref[j] = v
	}
	return func(j *Job, t string) float64 {
		if !everywhere && j.Throughput(t) <= 0 {
			return 0
		}
		if r, ok := ref[j]; ok {
			return r
		}
		return j.Throughput(t)
	}
}

// jobScale is the job's scale factor, treating unset values as 1.
func jobScale(j *Job) int {
	if j.ScaleFactor < 1 {
		return 1
	}
	return j.ScaleFactor
}

// jobWeight is the job's priority weight, treating unset values as 1.
func jobWeight(j *Job) float64 {
	if j.Weight <= 0 || math.IsNaN(j.Weight) {
		return 1
	}
	return j.Weight
}

// findPair returns the problem's pair entry for jobs a and b and whether the
// entry lists them in the opposite order. It scans the pairs: callers that
// look up many rows use newPairIndex instead.
func findPair(p *Problem, a, b string) (*Pair, bool) {
	for i := range p.Pairs {
		pr := &p.Pairs[i]
		if pr.Jobs[0] == a && pr.Jobs[1] == b {
			return pr, false
		}
		if pr.Jobs[0] == b && pr.Jobs[1] == a {
			return pr, true
		}
	}
	return nil, false
}

// pairIndex finds pair entries by their member ids in constant time.
type pairIndex map[[2]string]int

// newPairIndex indexes p's pairs (in both member orders).
func newPairIndex(p *Problem) pairIndex {
	idx := make(pairIndex, 2*len(p.Pairs))
	for i := range p.Pairs {
		a, b := p.Pairs[i].Jobs[0], p.Pairs[i].Jobs[1]
		idx[[2]string{a, b}] = i
		if _, dup := idx[[2]string{b, a}]; !dup {
			idx[[2]string{b, a}] = -i - 1 // negative: stored swapped
		}
	}
	return idx
}

// find is findPair through the index.
func (idx pairIndex) find(p *Problem, a, b string) (*Pair, bool) {
	i, ok := idx[[2]string{a, b}]
	switch {
	case !ok:
		return nil, false
	case i < 0:
		return &p.Pairs[-i-1], true
	default:
		return &p.Pairs[i], false
	}
}

// newPlacementLP builds the columns and base constraints for p. With packed
// set, the problem's pairs of equal scale factor get columns too.
func newPlacementLP(p *Problem, tput throughputFunc, packed bool) (*placementLP, error) {
	return buildPlacementLP(p, tput, packed, false)
}

// buildPlacementLP is newPlacementLP with the option of a homogeneous LP for
// the Charnes-Cooper transform of a ratio objective: column scaleCol = s >= 0
// is added first, the columns stand for y = s·X (so their upper bound of 1
// becomes implied by the time rows), and each row's constant bound c becomes
// the term -c·s with bound 0.
func buildPlacementLP(p *Problem, tput throughputFunc, packed, homogeneous bool) (*placementLP, error) {
	types := p.Types()
	b := &placementLP{
		lp:       newLinearProgram(0),
		types:    types,
		effCols:  make([][]int, len(p.Jobs)),
		effCoefs: make([][]float64, len(p.Jobs)),
		scaleCol: -1,
	}
	colHi := 1.0
	if homogeneous {
		b.scaleCol = b.lp.AddColumn(0, Inf, 0)
		colHi = Inf
	}
	index := make(map[string]int, len(p.Jobs))
	for i := range p.Jobs {
		if _, dup := index[p.Jobs[i].ID]; dup {
			return nil, fmt.Errorf("duplicate job id %q", p.Jobs[i].ID)
		}
		index[p.Jobs[i].ID] = i
	}
	// timeCols[j] lists every column that consumes job j's time.
	timeCols := make([][]int, len(p.Jobs))
	capCols := make([][]int, len(types))
	capCoefs := make([][]float64, len(types))
	// A job has at most one column per type: its lists are windows of
	// shared arrays, so the simulator's thousands of allocations per run
	// do not each make a few small slices per job (pairs, when packed,
	// grow a job's lists past its window, which then copy).
	nj, nt := len(p.Jobs), len(types)
	unitJobs, unitCols := make([]int, nj), make([]int, nj*nt)
	effCols, effCoefs, timeFlat := make([]int, nj*nt), make([]float64, nj*nt), make([]int, nj*nt)
	b.units = make([]placementUnit, 0, nj)
	b.lp.reserveColumns(nj * nt)
	for k := range types {
		capCols[k] = make([]int, 0, nj)
		capCoefs[k] = make([]float64, 0, nj)
	}
	for i := range p.Jobs {
		j := &p.Jobs[i]
		unitJobs[i] = i
		lo, hi := i*nt, (i+1)*nt
		b.effCols[i], b.effCoefs[i], timeCols[i] = effCols[lo:lo:hi], effCoefs[lo:lo:hi], timeFlat[lo:lo:hi]
		u := placementUnit{jobs: unitJobs[i : i+1 : i+1], cols: unitCols[lo:hi:hi]}
		for k, t := range types {
			u.cols[k] = -1
			tp := tput(j, t)
			if tp <= 0 || p.GPUs[t] < jobScale(j) {
				continue
			}
			c := b.lp.AddColumn(0, colHi, 0)
			u.cols[k] = c
			b.effCols[i] = append(b.effCols[i], c)
			b.effCoefs[i] = append(b.effCoefs[i], tp)
			timeCols[i] = append(timeCols[i], c)
			capCols[k] = append(capCols[k], c)
			capCoefs[k] = append(capCoefs[k], float64(jobScale(j)))
		}
		b.units = append(b.units, u)
	}
	if packed {
		for _, pr := range p.Pairs {
			ia, okA := index[pr.Jobs[0]]
			ib, okB := index[pr.Jobs[1]]
			if !okA || !okB || ia == ib {
				return nil, fmt.Errorf("pair %s+%s names a job that is not in the problem", pr.Jobs[0], pr.Jobs[1])
			}
			ja, jb := &p.Jobs[ia], &p.Jobs[ib]
			if jobScale(ja) != jobScale(jb) {
				continue // co-location needs equal scale factors
			}
			u := placementUnit{jobs: []int{ia, ib}, cols: make([]int, len(types))}
			used := false
			for k, t := range types {
				u.cols[k] = -1
				tp := pr.Throughputs[t]
				if tp[0] <= 0 || tp[1] <= 0 || p.GPUs[t] < jobScale(ja) {
					continue
				}
				c := b.lp.AddColumn(0, colHi, 0)
				u.cols[k] = c
				used = true
				b.effCols[ia] = append(b.effCols[ia], c)
				b.effCoefs[ia] = append(b.effCoefs[ia], tp[0])
				b.effCols[ib] = append(b.effCols[ib], c)
				b.effCoefs[ib] = append(b.effCoefs[ib], tp[1])
				timeCols[ia] = append(timeCols[ia], c)
				timeCols[ib] = append(timeCols[ib], c)
				capCols[k] = append(capCols[k], c)
				capCoefs[k] = append(capCoefs[k], float64(jobScale(ja)))
			}
			if used {
				b.units = append(b.units, u)
			}
		}
	}
	b.timeRow = make([]int, len(p.Jobs))
	for i := range p.Jobs {
		b.timeRow[i] = -1
		if len(timeCols[i]) > 0 {
			b.timeRow[i] = b.lp.NumRows()
			b.boundedRow(timeCols[i], ones(len(timeCols[i])), 1)
		}
	}
	b.capRow = make([]int, len(types))
	for k, t := range types {
		b.capRow[k] = -1
		if len(capCols[k]) > 0 {
			b.capRow[k] = b.lp.NumRows()
			b.boundedRow(capCols[k], capCoefs[k], float64(p.GPUs[t]))
		}
	}
	return b, nil
}

// boundedRow adds Σ coefs·cols <= hi, homogenized when the LP is.
func (b *placementLP) boundedRow(cols []int, coefs []float64, hi float64) {
	if b.scaleCol < 0 {
		b.lp.AddRow(cols, coefs, -Inf, hi)
		return
	}
	cols = append(append([]int(nil), cols...), b.scaleCol)
	coefs = append(append([]float64(nil), coefs...), -hi)
	b.lp.AddRow(cols, coefs, -Inf, 0)
}

func ones(n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = 1
	}
	return v
}

// effectiveRow adds lo <= eff_j - Σ extraCoefs·extraCols <= hi for job i.
func (b *placementLP) effectiveRow(i int, extraCols []int, extraCoefs []float64, lo, hi float64) {
	cols := append(append([]int(nil), b.effCols[i]...), extraCols...)
	coefs := append(append([]float64(nil), b.effCoefs[i]...), extraCoefs...)
	b.lp.AddRow(cols, coefs, lo, hi)
}

// addThroughputObjective adds w·eff_j to the LP's objective.
func (b *placementLP) addThroughputObjective(j int, w float64) {
	for k, c := range b.effCols[j] {
		b.lp.SetObjective(c, b.lp.obj[c]+w*b.effCoefs[j][k])
	}
}

// solve solves the LP and returns its allocation, with the LP counted in
// the allocation's Stats.
func (b *placementLP) solve(p *Problem, name string) (*Allocation, error) {
	res, err := b.lp.Solve()
	if err != nil {
		return nil, err
	}
	a := b.allocation(p, name, res.X)
	noteLP(&a.Stats, b.lp)
	return a, nil
}

// effective evaluates each job's effective throughput at column values x.
func (b *placementLP) effective(x []float64) []float64 {
	eff := make([]float64, len(b.effCols))
	for i := range b.effCols {
		for k, c := range b.effCols[i] {
			eff[i] += b.effCoefs[i][k] * x[c]
		}
	}
	return eff
}

// allocation turns column values into an Allocation: one row per job, then
// the pairs that received time. Values are clipped to [0, 1] and solver
// noise below 1e-9 is dropped.
func (b *placementLP) allocation(p *Problem, name string, x []float64) *Allocation {
	a := &Allocation{Policy: name, Types: b.types}
	for n, u := range b.units {
		fr := make([]float64, len(b.types))
		received := false
		for k, c := range u.cols {
			if c < 0 {
				continue
			}
			v := x[c]
			if v < 1e-9 {
				v = 0
			}
			fr[k] = math.Min(v, 1)
			received = received || fr[k] > 0
		}
		if n >= len(p.Jobs) && !received {
			continue
		}
		ids := make([]string, len(u.jobs))
		for m, ji := range u.jobs {
			ids[m] = p.Jobs[ji].ID
		}
		a.Rows = append(a.Rows, Row{Jobs: ids, Fractions: fr})
	}
	return a
}

// noteLP records one solved LP's size in s.
func noteLP(s *Stats, lp *linearProgram) {
	s.LPs++
	s.Columns = max(s.Columns, lp.NumColumns())
	s.Rows = max(s.Rows, lp.NumRows())
}

// emptyAllocation is the answer for a problem without jobs: rows for
// nothing, columns for every type.
func emptyAllocation(p *Problem, name string) *Allocation {
	return &Allocation{Policy: name, Types: p.Types()}
}

// funcPolicy adapts a stateless allocation function to the Policy interface.
type funcPolicy struct {
	name string
	fn   func(p *Problem) (*Allocation, error)
}

func (f funcPolicy) Name() string { return f.name }

// Traits are those its family declared with declareTraits.
func (f funcPolicy) Traits() Traits { return declaredTraits[f.name] }

func (f funcPolicy) Allocate(p *Problem) (*Allocation, error) {
	if len(p.Jobs) == 0 {
		return emptyAllocation(p, f.name), nil
	}
	a, err := f.fn(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.name, err)
	}
	a.Stats.Classes = len(p.Jobs)
	return a, nil
}

// registerFunc registers a stateless policy.
func registerFunc(name string, fn func(p *Problem) (*Allocation, error)) {
	register(name, func(Options) Policy { return funcPolicy{name: name, fn: fn} })
}

// setRowCoef changes the coefficient of column col in row r, which must
// already hold an entry for it (rows keep the entries they were built with).
func (b *placementLP) setRowCoef(r, col int, v float64) { b.lp.setCoefficient(r, col, v) }

// AgnosticRates is what the heterogeneity-agnostic policies see of a job
// with rates tputs on a cluster with gpus: its reference rate
// (agnosticThroughput: V100's, or its best where it has none) on every
// type it can run on, 0 elsewhere; with everywhere, also on the cluster's
// types where it cannot run (Options.AgnosticUnusableTypes).
func AgnosticRates(gpus map[string]int, tputs map[string]float64, everywhere bool) map[string]float64 {
	p := Problem{GPUs: gpus, Jobs: []Job{{Throughputs: tputs}}}
	view := agnosticView(&p, everywhere)
	out := make(map[string]float64, len(tputs))
	for t := range tputs {
		out[t] = view(&p.Jobs[0], t)
	}
	if everywhere {
		for t := range gpus {
			out[t] = view(&p.Jobs[0], t)
		}
	}
	return out
}
