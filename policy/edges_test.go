package policy

import (
	"math"
	"testing"
)

// A job with steps left that can run nowhere (its only usable type has
// fewer GPUs than its scale factor) is the only job with steps: the
// makespan LP would have no row bounding z; nothing is allocated instead.
func TestMakespanWithOnlyUnrunnableJobsLeft(t *testing.T) {
	p := &Problem{
		GPUs: map[string]int{"k80": 1, "v100": 2},
		Jobs: []Job{{ID: "a", Throughputs: map[string]float64{"k80": 1}, ScaleFactor: 2, Weight: 1, StepsRemaining: 100}},
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"min_total_duration", "min_total_duration_perf", "min_total_duration_packed"} {
		pol, _ := New(name, Options{})
		a, err := pol.Allocate(p)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if math.IsNaN(a.Objective) || math.IsInf(a.Objective, 0) {
			t.Errorf("%s: objective %v", name, a.Objective)
		}
	}
}

// The agnostic finish-time-fairness pooled path (levelAuto, no LP) can
// come out a hair infeasible where jobs' needs are orders of magnitude
// apart (its raised shares overfill a set of types, 9.0000028 GPUs of 9);
// the λ-LP search then answers.
func TestPooledFTFSplitFallsBackToTheSearch(t *testing.T) {
	p := &Problem{
		GPUs: map[string]int{"k80": 8, "p100": 1},
		Jobs: []Job{
			{ID: "1", Throughputs: map[string]float64{"k80": 0.0823695201612116, "p100": 10.758181231478046}, ScaleFactor: 7, Weight: 1, StepsRemaining: 193.56623071682827},
			{ID: "2", Throughputs: map[string]float64{"k80": 12019.084699987761, "p100": 17723.32935134076}, ScaleFactor: 1, Weight: 1, StepsRemaining: 128.63813580974016, IsolatedTime: 1e+09},
			{ID: "3", Throughputs: map[string]float64{"k80": 11.986382605892898, "p100": 0.21155876814669178}, ScaleFactor: 1, Weight: 1, StepsRemaining: 41071.66142867779, TimeSinceStart: 4.349357178997454e+06, IsolatedTime: 1.955559105024186e+06},
			{ID: "4", Throughputs: map[string]float64{"k80": 0, "p100": 85.19421181531771}, ScaleFactor: 1, Weight: 1, StepsRemaining: 2.694054255240088, TimeSinceStart: 1e+09, IsolatedTime: 8.421671319908103e+08},
		},
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	full, err := minMaxFinishTimeFairness(p, "finish_time_fairness", agnosticThroughput(p), false, levelFull)
	if err != nil {
		t.Fatalf("full λ-LP search: %v", err)
	}
	pol, _ := New("finish_time_fairness", Options{})
	a, err := pol.Allocate(p)
	if err != nil {
		t.Fatalf("policy (pooled path) fails where the full search gives max ρ %v: %v", full.Objective, err)
	}
	if err := VerifyAllocation(p, a, 1e-9); err != nil {
		t.Error(err)
	}
}

// A finish-time-fairness search whose bracket stalls 1.4e-6 wide (a job's
// need lies below the solver's precision, so no probe moves either end)
// returns its best allocation after 256 LPs rather than fail.
func TestFTFSearchThatStallsReturnsItsBest(t *testing.T) {
	p := &Problem{
		GPUs: map[string]int{"k80": 1},
		Jobs: []Job{
			{ID: "0", Throughputs: map[string]float64{"k80": 1}, ScaleFactor: 1, Weight: 1, StepsRemaining: 0, TimeSinceStart: 3.486219965174879e+08, IsolatedTime: 1e+09},
			{ID: "1", Throughputs: map[string]float64{"k80": 35034.39546586443}, ScaleFactor: 1, Weight: 1, StepsRemaining: 19.248874015586612, TimeSinceStart: 1168.53522918343, IsolatedTime: 134.39876120356146},
			{ID: "2", Throughputs: map[string]float64{"k80": 100000}, ScaleFactor: 1, Weight: 1, StepsRemaining: 1.0929342797356298, TimeSinceStart: 6.468951981896325e+08, IsolatedTime: 1e+09},
			{ID: "3", Throughputs: map[string]float64{"k80": 0.014127073132071238}, ScaleFactor: 1, Weight: 1, StepsRemaining: 0, TimeSinceStart: 1e+09, IsolatedTime: 3.9352611764055115e+08},
		},
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	pol, _ := New("finish_time_fairness_packed", Options{})
	a, err := pol.Allocate(p)
	if err != nil {
		t.Errorf("finish_time_fairness_packed: %v", err)
	} else if math.IsInf(a.Objective, 0) || math.IsNaN(a.Objective) {
		t.Errorf("finish_time_fairness_packed: objective %v", a.Objective)
	}
	if _, err := minMaxFinishTimeFairness(p, "finish_time_fairness_perf", realThroughput, false, levelFull); err != nil {
		t.Errorf("full search without pairs: %v", err)
	}
}
