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
	types := p.Types()
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
