package policy

import (
	"math"
	"testing"
)

func TestFinishTimeFairnessSingleJobByHand(t *testing.T) {
	// Alone, the job's isolated share is the whole v100 (10 steps/s), and
	// the best allocation is the same: ρ = (100 + 1000/10) / (50 + 1000/10).
	p := &Problem{GPUs: map[string]int{"v100": 1}, Jobs: []Job{{
		ID: "a", Throughputs: map[string]float64{"v100": 10}, ScaleFactor: 1, Weight: 1,
		StepsRemaining: 1000, TimeSinceStart: 100, IsolatedTime: 50,
	}}}
	for _, name := range []string{"finish_time_fairness", "finish_time_fairness_perf", "finish_time_fairness_packed"} {
		if a := obAllocate(t, name, p); math.Abs(a.Objective-4.0/3) > 1e-6 {
			t.Errorf("%s: ρ %v, want 4/3", name, a.Objective)
		}
	}
}

func TestFinishTimeFairnessMatchesBruteForce(t *testing.T) {
	for seed := int64(1); seed <= 4; seed++ {
		p := obTwoByTwo(seed)
		iso := [2]float64{IsolatedThroughput(p, &p.Jobs[0]), IsolatedThroughput(p, &p.Jobs[1])}
		best := obGridSearch(p, func(eff [2]float64) float64 {
			worst := 0.0
			for j := range eff {
				jb := &p.Jobs[j]
				worst = math.Max(worst, themisRho(jb.TimeSinceStart, jb.StepsRemaining, eff[j], jb.IsolatedTime, iso[j]))
			}
			return worst
		})
		got := obAllocate(t, "finish_time_fairness_perf", p).Objective
		if got > best*(1+1e-6) || best > got*1.03 {
			t.Errorf("seed %d: bisection ρ %v, grid search %v", seed, got, best)
		}
	}
}

func TestFinishTimeFairnessMeetsItsOptimumForEveryJob(t *testing.T) {
	// Every job's ρ is at most the reported maximum, and the packed
	// variant without pairs solves the same problem.
	p := obRandomProblem(3, 20)
	a := obAllocate(t, "finish_time_fairness_perf", p)
	rho, err := FinishTimeFairness(p, a)
	if err != nil {
		t.Fatal(err)
	}
	if a.Stats.LPs < 2 {
		t.Errorf("solved %d LPs, want a search and a final solve", a.Stats.LPs)
	}
	for i, r := range rho {
		if r > a.Objective*(1+1e-9) {
			t.Errorf("job %s: ρ %v above the reported max %v", p.Jobs[i].ID, r, a.Objective)
		}
	}
	p.Pairs = nil
	if packed := obAllocate(t, "finish_time_fairness_packed", p); math.Abs(packed.Objective-a.Objective) > 1e-5*a.Objective {
		t.Errorf("packed without pairs %v, perf %v", packed.Objective, a.Objective)
	}
}

func TestAgnosticThroughputUsesV100OrFastest(t *testing.T) {
	p := &Problem{GPUs: map[string]int{"v100": 1, "k80": 1, "p100": 1}, Jobs: []Job{
		{ID: "a", Throughputs: map[string]float64{"v100": 4, "k80": 1, "p100": 0}},
		{ID: "b", Throughputs: map[string]float64{"k80": 1, "p100": 3}},
	}}
	tput := agnosticThroughput(p)
	tests := []struct {
		job  int
		typ  string
		want float64
	}{
		{0, "k80", 4}, {0, "v100", 4}, {0, "p100", 0}, // cannot run on p100
		{1, "k80", 3}, {1, "p100", 3}, {1, "v100", 0}, // no v100 entry: fastest
	}
	for _, tc := range tests {
		if got := tput(&p.Jobs[tc.job], tc.typ); got != tc.want {
			t.Errorf("job %s on %s: got %v, want %v", p.Jobs[tc.job].ID, tc.typ, got, tc.want)
		}
	}
}

func TestFinishTimeFairnessSkipsJobsThatCannotRun(t *testing.T) {
	p := obTwoJobs()
	p.Jobs = append(p.Jobs, Job{ID: "big", Throughputs: map[string]float64{"v100": 5}, ScaleFactor: 2, Weight: 1, StepsRemaining: 10})
	a := obAllocate(t, "finish_time_fairness_perf", p)
	if m := a.Map(); m["big"]["v100"] != 0 || m["big"]["k80"] != 0 {
		t.Fatalf("unrunnable job got %v", m["big"])
	}
	if math.IsInf(a.Objective, 0) || math.IsNaN(a.Objective) {
		t.Fatalf("objective %v", a.Objective)
	}
}
