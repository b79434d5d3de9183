package policy

import (
	"math"
	"testing"
)

func TestShortestJobFirstFavoursTheShortJob(t *testing.T) {
	// b has 50 s of work on its fastest type, a 250 s: SJF gives b the v100
	// although a would gain more from it (the throughput sum's choice).
	p := obTwoJobs()
	p.Jobs[1].StepsRemaining = 100
	a := obAllocate(t, "shortest_job_first_perf", p)
	m := a.Map()
	if math.Abs(m["b"]["v100"]-1) > 1e-9 || math.Abs(m["a"]["k80"]-1) > 1e-9 {
		t.Fatalf("allocation %v, want b on v100 and a on k80", m)
	}
	if math.Abs(a.Objective-50) > 1e-9 {
		t.Fatalf("shortest completion %v, want 100/2 = 50 s", a.Objective)
	}
	if sum := obAllocate(t, "max_sum_throughput_perf", p).Map(); sum["a"]["v100"] != 1 {
		t.Fatalf("throughput sum gave a %v, want the v100", sum["a"])
	}
}
