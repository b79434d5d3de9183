package policy

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestCostPoliciesByHand(t *testing.T) {
	// Throughput per cost rate: a on v100 4/3, a on k80 1, b on v100 2/3,
	// b on k80 1. The best ratio is a alone on the v100: 4 steps/s for
	// 3/h, 4800 steps per cost unit; adding anything lowers it.
	// With b's SLO of 600 s b needs 500/600 steps/s, cheapest on the k80:
	// (4 + 5/6)·3600 / (3 + 5/6) = 29·3600/23 steps per cost unit.
	tests := []struct {
		name      string
		sloB      float64
		want      float64
		wantA     map[string]float64
		wantBOnK8 float64
	}{
		{"max_sum_throughput_normalized_by_cost_perf", 0, 4800, map[string]float64{"v100": 1, "k80": 0}, 0},
		{"max_sum_throughput_normalized_by_cost_perf_SLOs", 600, 29 * 3600.0 / 23, map[string]float64{"v100": 1, "k80": 0}, 5.0 / 6},
		{"max_sum_throughput_normalized_by_cost_packed_SLOs", 600, 29 * 3600.0 / 23, map[string]float64{"v100": 1, "k80": 0}, 5.0 / 6},
	}
	for _, tc := range tests {
		p := obTwoJobs()
		p.Jobs[1].SLO = tc.sloB
		a := obAllocate(t, tc.name, p)
		if math.Abs(a.Objective-tc.want) > 1e-6*tc.want {
			t.Errorf("%s: objective %v, want %v", tc.name, a.Objective, tc.want)
		}
		m := a.Map()
		for typ, want := range tc.wantA {
			if math.Abs(m["a"][typ]-want) > 1e-6 {
				t.Errorf("%s: a on %s %v, want %v", tc.name, typ, m["a"][typ], want)
			}
		}
		if math.Abs(m["b"]["k80"]-tc.wantBOnK8) > 1e-6 {
			t.Errorf("%s: b on k80 %v, want %v", tc.name, m["b"]["k80"], tc.wantBOnK8)
		}
	}
}

func TestCostPolicyUsesTheClusterAmongOptimalAllocations(t *testing.T) {
	// Two identical jobs and two v100s: any amount of v100 time has the
	// same ratio, and the second stage must fill both GPUs.
	p := &Problem{GPUs: map[string]int{"v100": 2}, Costs: map[string]float64{"v100": 2}, Jobs: []Job{
		{ID: "a", Throughputs: map[string]float64{"v100": 3}, ScaleFactor: 1, Weight: 1},
		{ID: "b", Throughputs: map[string]float64{"v100": 3}, ScaleFactor: 1, Weight: 1},
	}}
	a := obAllocate(t, "max_sum_throughput_normalized_by_cost_perf", p)
	m := a.Map()
	if m["a"]["v100"] < 1-1e-6 || m["b"]["v100"] < 1-1e-6 {
		t.Fatalf("allocation %v leaves GPUs idle", m)
	}
	if want := 3 * 3600.0 / 2; math.Abs(a.Objective-want) > 1e-6 {
		t.Fatalf("objective %v, want %v", a.Objective, want)
	}
}

func TestCostPoliciesReportMissingCosts(t *testing.T) {
	p := obTwoJobs()
	delete(p.Costs, "k80")
	pol, _ := New("max_sum_throughput_normalized_by_cost_perf", Options{})
	if _, err := pol.Allocate(p); !errors.Is(err, ErrNoCosts) || !strings.Contains(err.Error(), `"k80"`) {
		t.Errorf("missing cost: got %v", err)
	}
}

func TestCostPolicyKeepsItsSecondStageOnLargeProblems(t *testing.T) {
	// Hundreds of jobs with SLOs on clusters priced in dollars: the ratio
	// found by the first LP must be accurate enough for the second LP
	// (most throughput at that ratio) to be feasible, and every SLO holds.
	p, _ := mmTableProblem(t, 1024, 1, false)
	p.Costs = map[string]float64{"k80": 0.90, "p100": 1.46, "v100": 3.06}
	for i := range p.Jobs {
		j := &p.Jobs[i]
		j.StepsRemaining = 1000 + float64(i*37%100000)
		if i%3 == 0 {
			j.SLO = 10 * j.StepsRemaining / j.Throughputs["v100"]
		}
	}
	a := obAllocate(t, "max_sum_throughput_normalized_by_cost_perf_SLOs", p)
	if a.Stats.LPs != 2 {
		t.Errorf("%d LPs: the second stage failed", a.Stats.LPs)
	}
	if err := VerifyAllocation(p, a, 1e-7); err != nil {
		t.Error(err)
	}
	eff, err := JobThroughputs(p, a)
	if err != nil {
		t.Fatal(err)
	}
	for i := range p.Jobs {
		if j := &p.Jobs[i]; j.SLO > 0 && eff[i] < j.StepsRemaining/j.SLO*(1-1e-6) {
			t.Errorf("job %s: %g steps/s, its SLO needs %g", j.ID, eff[i], j.StepsRemaining/j.SLO)
		}
	}
}
