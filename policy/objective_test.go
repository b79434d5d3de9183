package policy

import (
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"
)

// obTwoJobs is the hand-checked problem of several tests: one v100 and one
// k80; job a runs 4 steps/s on v100 and 1 on k80, job b 2 and 1.
func obTwoJobs() *Problem {
	return &Problem{
		GPUs:  map[string]int{"v100": 1, "k80": 1},
		Costs: map[string]float64{"v100": 3, "k80": 1},
		Jobs: []Job{
			{ID: "a", Throughputs: map[string]float64{"v100": 4, "k80": 1}, ScaleFactor: 1, Weight: 1, StepsRemaining: 1000},
			{ID: "b", Throughputs: map[string]float64{"v100": 2, "k80": 1}, ScaleFactor: 1, Weight: 1, StepsRemaining: 500},
		},
	}
}

// obRandomProblem draws a problem with 3 types, n jobs of scale factors 1,
// 2 or 4, some zero throughputs, histories for finish-time fairness, SLOs
// loose enough to be met, and random pairs of single-GPU jobs.
func obRandomProblem(seed int64, n int) *Problem {
	rng := rand.New(rand.NewSource(seed))
	p := &Problem{
		GPUs:  map[string]int{"v100": 1 + rng.Intn(8), "p100": 1 + rng.Intn(8), "k80": 4 + rng.Intn(8)},
		Costs: map[string]float64{"v100": 2.5, "p100": 1.5, "k80": 0.7},
	}
	for i := 0; i < n; i++ {
		sf := []int{1, 1, 1, 2, 4}[rng.Intn(5)]
		base := 0.5 + 10*rng.Float64()
		tp := map[string]float64{"v100": base * (1 + 3*rng.Float64()), "p100": base * (1 + rng.Float64()), "k80": base}
		if rng.Intn(5) == 0 {
			tp["k80"] = 0
		}
		since := 3600 * rng.Float64()
		p.Jobs = append(p.Jobs, Job{
			ID: fmt.Sprint(i), Throughputs: tp, ScaleFactor: sf, Weight: float64(1 + rng.Intn(2)),
			StepsRemaining: 1e3 + 1e5*rng.Float64(), TimeSinceStart: since, IsolatedTime: since * rng.Float64(),
			Arrival: float64(i), SLO: 1e8,
		})
	}
	for k := 0; k < n; k++ {
		a, b := rng.Intn(n), rng.Intn(n)
		ja, jb := &p.Jobs[a], &p.Jobs[b]
		if a == b || ja.ScaleFactor != 1 || jb.ScaleFactor != 1 {
			continue
		}
		if pr, _ := findPair(p, ja.ID, jb.ID); pr != nil {
			continue
		}
		pt := map[string][2]float64{}
		for _, t := range p.Types() { // sorted: the draws must not follow map order
			f := 0.4 + 0.5*rng.Float64()
			pt[t] = [2]float64{ja.Throughput(t) * f, jb.Throughput(t) * (1.2 - f)}
		}
		p.Pairs = append(p.Pairs, Pair{Jobs: [2]string{ja.ID, jb.ID}, Throughputs: pt})
	}
	return p
}

// obAllocate runs a fresh instance of the named policy.
func obAllocate(t *testing.T, name string, p *Problem) *Allocation {
	t.Helper()
	pol, err := New(name, Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	a, err := pol.Allocate(p)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return a
}

func obMetric(t *testing.T, metric func(*Problem, *Allocation) (float64, error), p *Problem, a *Allocation) float64 {
	t.Helper()
	v, err := metric(p, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// obFeasiblePolicies are this file family's policies whose allocations must
// satisfy every constraint (fifo may oversubscribe by design).
var obFeasiblePolicies = []string{
	"finish_time_fairness", "finish_time_fairness_perf", "finish_time_fairness_packed",
	"min_total_duration", "min_total_duration_perf", "min_total_duration_packed",
	"max_sum_throughput_perf", "max_sum_throughput_normalized_by_cost_perf",
	"max_sum_throughput_normalized_by_cost_perf_SLOs", "max_sum_throughput_normalized_by_cost_packed_SLOs",
	"shortest_job_first_perf", "isolated", "proportional", "gandiva", "fifo_perf", "fifo_packed",
}

func TestAllocationsSatisfyConstraintsOnRandomProblems(t *testing.T) {
	for seed := int64(1); seed <= 6; seed++ {
		p := obRandomProblem(seed, 6+int(seed)*5)
		if err := p.Validate(); err != nil {
			t.Fatalf("seed %d: generator made an invalid problem: %v", seed, err)
		}
		for _, name := range obFeasiblePolicies {
			a := obAllocate(t, name, p)
			if len(a.Rows) < len(p.Jobs) {
				t.Errorf("seed %d %s: %d rows for %d jobs", seed, name, len(a.Rows), len(p.Jobs))
			}
			if err := VerifyAllocation(p, a, 1e-6); err != nil {
				t.Errorf("seed %d %s: %v", seed, name, err)
			}
		}
	}
}

func TestPerfPoliciesDoAtLeastAsWellAsIsolated(t *testing.T) {
	// Sharing incentive: each heterogeneity-aware policy is at least as
	// good on its own objective as the static isolated allocation.
	type check struct {
		policy string
		metric func(*Problem, *Allocation) (float64, error)
		better func(got, iso float64) bool
	}
	lower := func(got, iso float64) bool { return got <= iso*(1+1e-6) }
	higher := func(got, iso float64) bool { return got >= iso*(1-1e-6) }
	checks := []check{
		{"finish_time_fairness_perf", MaxFinishTimeFairness, lower},
		{"finish_time_fairness_packed", MaxFinishTimeFairness, lower},
		{"min_total_duration_perf", Makespan, lower},
		{"min_total_duration_packed", Makespan, lower},
		{"max_sum_throughput_perf", TotalThroughput, higher},
		{"max_sum_throughput_normalized_by_cost_perf", StepsPerCost, higher},
	}
	for seed := int64(10); seed < 15; seed++ {
		p := obRandomProblem(seed, 12)
		for i := range p.Jobs { // no history: isolated gives ρ = 1 exactly
			p.Jobs[i].TimeSinceStart, p.Jobs[i].IsolatedTime = 0, 0
		}
		iso := obAllocate(t, "isolated", p)
		for _, c := range checks {
			got := obMetric(t, c.metric, p, obAllocate(t, c.policy, p))
			ref := obMetric(t, c.metric, p, iso)
			if !c.better(got, ref) {
				t.Errorf("seed %d %s: %g, isolated %g", seed, c.policy, got, ref)
			}
		}
		if rho := obMetric(t, MaxFinishTimeFairness, p, obAllocate(t, "finish_time_fairness_perf", p)); rho > 1+1e-6 {
			t.Errorf("seed %d: max ρ %g > 1 although every job's isolated ρ is 1", seed, rho)
		}
	}
}

func TestPackedPoliciesDoAtLeastAsWellAsUnpacked(t *testing.T) {
	for seed := int64(20); seed < 25; seed++ {
		p := obRandomProblem(seed, 14)
		for _, c := range []struct {
			unpacked, packed string
			metric           func(*Problem, *Allocation) (float64, error)
		}{
			{"finish_time_fairness_perf", "finish_time_fairness_packed", MaxFinishTimeFairness},
			{"min_total_duration_perf", "min_total_duration_packed", Makespan},
		} {
			u := obMetric(t, c.metric, p, obAllocate(t, c.unpacked, p))
			k := obMetric(t, c.metric, p, obAllocate(t, c.packed, p))
			if k > u*(1+1e-6) {
				t.Errorf("seed %d: %s %g worse than %s %g", seed, c.packed, k, c.unpacked, u)
			}
		}
	}
}

func TestMetricsByHand(t *testing.T) {
	p := obTwoJobs()
	p.Jobs[0].TimeSinceStart, p.Jobs[0].IsolatedTime = 100, 50
	// a: 0.5 of v100 and 0.5 of k80 (2.5 steps/s); b: 0.5 of v100 (1 step/s).
	a := &Allocation{Types: []string{"k80", "v100"}, Rows: []Row{
		{Jobs: []string{"a"}, Fractions: []float64{0.5, 0.5}},
		{Jobs: []string{"b"}, Fractions: []float64{0, 0.5}},
	}}
	// Isolated: each job gets half of each type: a 2.5, b 1.5 steps/s.
	// ρ_a = (100 + 1000/2.5) / (50 + 1000/2.5) = 500/450; ρ_b = (500/1) / (500/1.5) = 1.5.
	// Proportional share is 1/2 of each type, so a's normalized throughput
	// is 2.5/2.5 = 1 and b's is 1/1.5.
	tests := []struct {
		name   string
		metric func(*Problem, *Allocation) (float64, error)
		want   float64
	}{
		{"total throughput", TotalThroughput, 3.5},
		{"makespan", Makespan, 500},
		{"shortest completion", ShortestCompletion, 400},
		{"max finish-time fairness", MaxFinishTimeFairness, 1.5},
		{"min normalized throughput", MinNormalizedThroughput, 1 / 1.5},
		{"hourly cost", HourlyCost, 0.5*1 + 0.5*3 + 0.5*3},
		{"steps per cost", StepsPerCost, 3.5 * 3600 / 3.5},
	}
	for _, tc := range tests {
		if got := obMetric(t, tc.metric, p, a); math.Abs(got-tc.want) > 1e-9*math.Max(1, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	rho, _ := FinishTimeFairness(p, a)
	if math.Abs(rho[0]-500.0/450) > 1e-12 {
		t.Errorf("ρ_a: got %v, want %v", rho[0], 500.0/450)
	}
}

func TestVerifyAllocationCatchesViolations(t *testing.T) {
	p := obTwoJobs()
	p.Jobs[1].Throughputs["k80"] = 0
	p.Pairs = []Pair{{Jobs: [2]string{"a", "b"}, Throughputs: map[string][2]float64{"v100": {2, 1}}}}
	p.Jobs = append(p.Jobs, Job{ID: "wide", Throughputs: map[string]float64{"v100": 5}, ScaleFactor: 2, Weight: 1})
	row := func(frac ...float64) Row { return Row{Jobs: []string{"a"}, Fractions: frac} }
	tests := []struct {
		name string
		rows []Row
		want string
	}{
		{"over one", []Row{row(0, 1.5)}, "outside [0, 1]"},
		{"negative", []Row{row(-0.5, 0)}, "outside [0, 1]"},
		{"row sum", []Row{row(0.6, 0.6)}, "sum to 1.2"},
		{"capacity", []Row{row(0, 0.7), {Jobs: []string{"b"}, Fractions: []float64{0, 0.7}}}, "type v100: 1.4 GPUs used of 1"},
		{"zero throughput", []Row{{Jobs: []string{"b"}, Fractions: []float64{0.5, 0}}}, "where job b cannot run"},
		{"pair time counts for both", []Row{row(0, 0.6), {Jobs: []string{"b", "a"}, Fractions: []float64{0, 0.4}}, {Jobs: []string{"b"}, Fractions: []float64{0, 0}}}, ""},
		{"pair over job time", []Row{row(0.5, 0), {Jobs: []string{"a", "b"}, Fractions: []float64{0, 0.6}}}, "job a: time fractions sum to 1.1"},
		{"unknown pair", []Row{{Jobs: []string{"a", "c"}, Fractions: []float64{0, 0.1}}}, "not a pair"},
		{"type too small", []Row{{Jobs: []string{"wide"}, Fractions: []float64{0, 0.5}}}, "job wide, which needs 2 GPUs of the 1 there"},
	}
	for _, tc := range tests {
		err := VerifyAllocation(p, &Allocation{Types: []string{"k80", "v100"}, Rows: tc.rows}, 1e-9)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: unexpected %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
}
