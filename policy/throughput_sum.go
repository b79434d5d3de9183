package policy

// max_sum_throughput_perf maximizes the cluster's total effective throughput
// Σ_j Σ_t T[j][t]·X[j][t] (steps/s summed over jobs). It ignores fairness:
// jobs that gain little from any GPU may get nothing.

func init() {
	registerFunc("max_sum_throughput_perf", func(p *Problem) (*Allocation, error) {
		return maxSumThroughput(p, "max_sum_throughput_perf")
	})
}

func maxSumThroughput(p *Problem, name string) (*Allocation, error) {
	b, err := newPlacementLP(p, realThroughput, false)
	if err != nil {
		return nil, err
	}
	b.lp.Maximize()
	for i := range b.effCols {
		b.addThroughputObjective(i, 1)
	}
	a, err := b.solve(p, name)
	if err != nil {
		return nil, err
	}
	if a.Objective, err = TotalThroughput(p, a); err != nil {
		return nil, err
	}
	return a, nil
}
