package policy

import (
	"math"
	"strings"
	"testing"
)

// gavelPolicyNames are the policies the project promises, by the names
// Gavel gives them (plus shortest_job_first_perf, which Gavel lacks).
var gavelPolicyNames = []string{
	"max_min_fairness", "max_min_fairness_perf", "max_min_fairness_packed",
	"max_min_fairness_water_filling", "max_min_fairness_water_filling_perf", "max_min_fairness_water_filling_packed",
	"finish_time_fairness", "finish_time_fairness_perf", "finish_time_fairness_packed",
	"fifo", "fifo_perf", "fifo_packed",
	"max_sum_throughput_perf",
	"min_total_duration", "min_total_duration_perf", "min_total_duration_packed",
	"shortest_job_first_perf",
	"max_sum_throughput_normalized_by_cost_perf", "max_sum_throughput_normalized_by_cost_perf_SLOs",
	"isolated", "proportional", "gandiva",
}

func TestEveryGavelPolicyIsRegistered(t *testing.T) {
	registered := map[string]bool{}
	for _, n := range Names() {
		registered[n] = true
	}
	for _, name := range gavelPolicyNames {
		if !registered[name] {
			t.Errorf("policy %q is not registered", name)
			continue
		}
		pol, err := New(name, Options{})
		if err != nil {
			t.Errorf("New(%q): %v", name, err)
			continue
		}
		if pol.Name() != name {
			t.Errorf("New(%q) returned a policy named %q", name, pol.Name())
		}
	}
	if _, err := New("no_such_policy", Options{}); err == nil || !strings.Contains(err.Error(), "unknown policy") {
		t.Errorf("unknown name: error %v", err)
	}
}

func TestEveryPolicyAcceptsAnEmptyProblem(t *testing.T) {
	p := &Problem{GPUs: map[string]int{"v100": 2, "k80": 1}, Costs: map[string]float64{"v100": 2, "k80": 1}}
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			a := obAllocate(t, name, p)
			if len(a.Rows) != 0 {
				t.Errorf("%d rows for no jobs", len(a.Rows))
			}
			if a.Objective != 0 {
				t.Errorf("objective %v, want 0 for no jobs", a.Objective)
			}
		})
	}
}

func TestEveryPolicyRefusesANilProblem(t *testing.T) {
	for _, name := range Names() {
		pol, err := New(name, Options{})
		if err != nil {
			t.Fatal(err)
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: panicked on a nil problem: %v", name, r)
				}
			}()
			if _, err := pol.Allocate(nil); err == nil {
				t.Errorf("%s: allocated a nil problem", name)
			}
		}()
	}
}

func TestNoPolicyPlacesAJobOnATypeWithTooFewGPUs(t *testing.T) {
	// "wide" needs 2 GPUs at once and only has a throughput on the single
	// v100: no policy may give it time there, and it must not drag the
	// objective of the others down either.
	p := &Problem{
		GPUs:  map[string]int{"v100": 1, "k80": 4},
		Costs: map[string]float64{"v100": 3, "k80": 1},
		Jobs: []Job{
			{ID: "wide", Throughputs: map[string]float64{"v100": 3}, ScaleFactor: 2, Weight: 1, StepsRemaining: 100, TimeSinceStart: 10, IsolatedTime: 5},
			{ID: "narrow", Throughputs: map[string]float64{"v100": 3, "k80": 1}, ScaleFactor: 1, Weight: 1, StepsRemaining: 100, TimeSinceStart: 10, IsolatedTime: 5},
		},
	}
	p.Pairs = []Pair{{Jobs: [2]string{"wide", "narrow"}, Throughputs: map[string][2]float64{"v100": {2, 2}}}}
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			a := obAllocate(t, name, p)
			if err := VerifyAllocation(p, a, 1e-9); err != nil {
				t.Fatal(err)
			}
			for _, r := range a.Rows {
				for k, x := range r.Fractions {
					if x > 0 && strings.Contains(r.Key(), "wide") {
						t.Errorf("row %s got %v of %s", r.Key(), x, a.Types[k])
					}
				}
			}
			if math.IsNaN(a.Objective) || math.IsInf(a.Objective, 0) || a.Objective <= 0 {
				t.Errorf("objective %v, want a positive number set by the job that can run", a.Objective)
			}
		})
	}
}
