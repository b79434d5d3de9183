package policy

// max_sum_throughput_perf maximizes the cluster's total effective throughput
// Σ_j Σ_t T[j][t]·X[j][t] (steps/s summed over jobs). It ignores fairness:
// jobs that gain little from any GPU may get nothing.

func init() {
	declareTraits(Traits{TypeAware: true, Objective: ObjectiveTotalThroughput}, "max_sum_throughput_perf")
	// The family's cost-normalized members (cost.go) report steps per cost
	// unit instead.
	declareTraits(Traits{TypeAware: true, Objective: ObjectiveStepsPerCost},
		"max_sum_throughput_normalized_by_cost_perf", "max_sum_throughput_normalized_by_cost_perf_SLOs")
	declareTraits(Traits{TypeAware: true, Packs: true, Objective: ObjectiveStepsPerCost},
		"max_sum_throughput_normalized_by_cost_packed_SLOs")
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
