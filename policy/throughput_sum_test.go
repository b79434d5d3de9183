package policy

import "testing"

func TestMaxSumThroughputByHand(t *testing.T) {
	// a on the v100 and b on the k80 give 4 + 1 = 5 steps/s, the other way
	// round 1 + 2 = 3.
	a := obAllocate(t, "max_sum_throughput_perf", obTwoJobs())
	m := a.Map()
	if a.Objective != 5 || m["a"]["v100"] != 1 || m["b"]["k80"] != 1 {
		t.Fatalf("objective %v allocation %v, want 5 with a on v100 and b on k80", a.Objective, m)
	}
}
