package policy

// Reference shares: the static allocations the policies normalize against.
// They are defined once here so the LPs, the reported objective values and
// the tests all use the same definitions.

// Throughput is the job's whole-job step rate on GPU type t (0 when it
// cannot run there).
func (j *Job) Throughput(t string) float64 { return j.Throughputs[t] }

// EffectiveThroughput is Σ_t T[t]·x[t]: the job's average step rate under
// the time fractions x (indexed like types).
func EffectiveThroughput(j *Job, types []string, x []float64) float64 {
	sum := 0.0
	for i, t := range types {
		sum += j.Throughput(t) * x[i]
	}
	return sum
}

// ProportionalShare is the equal share X_equal: every job gets each type in
// proportion to its size, N_t / Σ N (a row that sums to 1). Indexed like
// p.Types().
func ProportionalShare(p *Problem) []float64 {
	types := p.Types()
	total := 0
	for _, t := range types {
		total += p.GPUs[t]
	}
	x := make([]float64, len(types))
	if total == 0 {
		return x
	}
	for i, t := range types {
		x[i] = float64(p.GPUs[t]) / float64(total)
	}
	return x
}

// ProportionalThroughput is the job's effective throughput under the equal
// share; the max-min policies normalize by it.
func ProportionalThroughput(p *Problem, j *Job) float64 {
	return EffectiveThroughput(j, p.Types(), ProportionalShare(p))
}

// IsolatedShare is the job's 1/n slice of the cluster (Themis' isolated
// allocation): (N_t / n) / scale factor of type t, scaled down so the row
// sums to at most 1. Indexed like p.Types().
func IsolatedShare(p *Problem, j *Job) []float64 {
	return equalSlice(p, len(p.Jobs), jobScale(j))
}

// equalSlice is one of units equal slices of the cluster for a unit of sf
// GPUs: (N_t / units) / sf of every type t, scaled down so the row sums to
// at most 1 (all zeros when there are no units). Indexed like p.Types().
func equalSlice(p *Problem, units, sf int) []float64 {
	return equalSliceOf(p, p.Types(), units, sf)
}

// equalSliceOf is equalSlice over types, p.Types() computed by the caller.
func equalSliceOf(p *Problem, types []string, units, sf int) []float64 {
	x := make([]float64, len(types))
	if units == 0 {
		return x
	}
	sum := 0.0
	for i, t := range types {
		x[i] = float64(p.GPUs[t]) / float64(units) / float64(sf)
		sum += x[i]
	}
	if sum > 1 {
		for i := range x {
			x[i] /= sum
		}
	}
	return x
}

// IsolatedThroughput is the job's effective throughput under its isolated
// share; finish-time fairness compares against it.
func IsolatedThroughput(p *Problem, j *Job) float64 {
	return EffectiveThroughput(j, p.Types(), IsolatedShare(p, j))
}

// IsolatedShares answers IsolatedShare and IsolatedThroughput for many
// jobs of one problem: finish-time fairness asks for every job at every
// allocation, and sorting the types and slicing the cluster once per job
// cost more than the rest of an agnostic allocation. The problem's GPUs
// and job count must not change while it is in use.
type IsolatedShares struct {
	p     *Problem
	types []string
	bySF  map[int][]float64
}

// NewIsolatedShares returns the isolated shares of p's jobs.
func NewIsolatedShares(p *Problem) *IsolatedShares {
	return &IsolatedShares{p: p, types: p.Types(), bySF: map[int][]float64{}}
}

// Share is IsolatedShare(p, j); the slice is shared between jobs of one
// scale factor and must not be changed.
func (s *IsolatedShares) Share(j *Job) []float64 {
	sf := jobScale(j)
	x, ok := s.bySF[sf]
	if !ok {
		x = equalSliceOf(s.p, s.types, len(s.p.Jobs), sf)
		s.bySF[sf] = x
	}
	return x
}

// Throughput is IsolatedThroughput(p, j).
func (s *IsolatedShares) Throughput(j *Job) float64 {
	return EffectiveThroughput(j, s.types, s.Share(j))
}
