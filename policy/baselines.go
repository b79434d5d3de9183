package policy

// The static 1/n baselines. They solve nothing: every job gets a fixed
// slice of the cluster, which is what the fairness policies are measured
// against.
//
//   - isolated: the job's IsolatedShare, (N_t/n)/sf of every type, scaled so
//     the row sums to at most 1 (Themis' reference for ρ).
//   - proportional: every job gets each type in proportion to its size,
//     N_t/ΣN, scaled down by ΣN/Σ_j sf_j when the jobs ask for more GPUs
//     than exist. (The unscaled ProportionalShare is a normalization
//     reference that oversubscribes the cluster; the baseline has to be
//     runnable.)
//
// Both leave out the types on which a job cannot run (zero throughput or a
// scale factor above the type's count): that time would be wasted anyway,
// and the effective throughput is the same. Allocation.Objective is
// MinNormalizedThroughput.

func init() {
	declareTraits(Traits{Objective: ObjectiveMinNormalizedThroughput}, "isolated", "proportional")
	registerFunc("isolated", func(p *Problem) (*Allocation, error) {
		return staticShares(p, "isolated", func(j *Job) []float64 { return IsolatedShare(p, j) })
	})
	registerFunc("proportional", func(p *Problem) (*Allocation, error) {
		demand, total := 0, 0
		for i := range p.Jobs {
			demand += jobScale(&p.Jobs[i])
		}
		for _, n := range p.GPUs {
			total += n
		}
		scale := 1.0
		if demand > total {
			scale = float64(total) / float64(demand)
		}
		return staticShares(p, "proportional", func(*Job) []float64 {
			x := ProportionalShare(p)
			for k := range x {
				x[k] *= scale
			}
			return x
		})
	})
}

func staticShares(p *Problem, name string, share func(j *Job) []float64) (*Allocation, error) {
	a := &Allocation{Policy: name, Types: p.Types()}
	for i := range p.Jobs {
		j := &p.Jobs[i]
		x := share(j)
		for k, t := range a.Types {
			if j.Throughput(t) <= 0 || p.GPUs[t] < jobScale(j) {
				x[k] = 0
			}
		}
		a.Rows = append(a.Rows, Row{Jobs: []string{j.ID}, Fractions: x})
	}
	var err error
	a.Objective, err = MinNormalizedThroughput(p, a)
	return a, err
}
