package sim

import (
	"math"
	"strings"
	"testing"

	"github.com/gavel-slurm/gavel-slurm/rounds"
)

func TestParseRestartCosts(t *testing.T) {
	cases := []struct {
		spec     string
		wantErr  string
		model    string
		min, max float64 // every draw within [min, max]
	}{
		{spec: "fixed:3m", min: 180, max: 180},
		{spec: "30s", min: 30, max: 30},
		{spec: "uniform:30s:5m", min: 30, max: 300},
		{spec: "model:ResNet-50=40s,Transformer=3m,*=1m", model: "ResNet-50 (batch size 64)", min: 40, max: 40},
		{spec: "model:ResNet=10s,ResNet-50=40s", model: "ResNet-50 (batch size 64)", min: 40, max: 40},
		{spec: "model:ResNet-50=40s,*=1m", model: "ResNet-18 (batch size 16)", min: 60, max: 60},
		{spec: "model:ResNet-50=40s", model: "LM (batch size 10)", min: 0, max: 0},
		{spec: "uniform:5m:30s", wantErr: "below A"},
		{spec: "uniform:30s", wantErr: "needs A:B"},
		{spec: "fixed:-3s", wantErr: "negative"},
		{spec: "lognormal:1m:2m", wantErr: "want fixed:D"},
		{spec: "model:ResNet-50", wantErr: "not NAME=D"},
	}
	for _, tc := range cases {
		t.Run(tc.spec, func(t *testing.T) {
			r, err := ParseRestartCosts(tc.spec)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Max() < tc.max {
				t.Errorf("Max %v below the largest draw %v", r.Max(), tc.max)
			}
			for id := range 200 {
				if v := r.Draw(3, id, tc.model); v < tc.min || v > tc.max {
					t.Fatalf("job %d drew %v, want within [%v, %v]", id, v, tc.min, tc.max)
				}
			}
		})
	}
}

// Draws depend only on the seed and the job: the same job gets the same
// cost in every run, jobs get different ones, and they spread over the
// range.
func TestRestartCostDraws(t *testing.T) {
	r, err := ParseRestartCosts("uniform:30s:5m")
	if err != nil {
		t.Fatal(err)
	}
	sum, distinct := 0.0, map[float64]bool{}
	const n = 10000
	for id := range n {
		v := r.Draw(1, id, "x")
		if v != r.Draw(1, id, "y") {
			t.Fatalf("job %d: the draw depends on the model", id)
		}
		sum += v
		distinct[v] = true
	}
	if mean := sum / n; math.Abs(mean-165) > 5 {
		t.Errorf("mean draw %.1f s, want about 165 s", mean)
	}
	if len(distinct) < n*9/10 {
		t.Errorf("%d distinct draws of %d", len(distinct), n)
	}
	if r.Draw(1, 7, "x") == r.Draw(2, 7, "x") {
		t.Error("two seeds drew the same cost for job 7")
	}
}

// Two 1000-step jobs on one V100 with 30 s restarts. The improved
// mechanism alternates them every round and loses 30 s at each restart;
// the restart mechanism (a hold of 40 × 30 s) lets the first run to its
// end and then the second: no restart, JCTs 1000 s and 2000 s.
func TestRestartTimeLost(t *testing.T) {
	costs, err := ParseRestartCosts("fixed:30s")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		mechanism rounds.Variant
		overhead  float64
		costs     RestartCosts
		restarts  bool
		jcts      []float64 // when not nil
	}{
		{"improved, flat overhead", rounds.VariantImproved, 30, RestartCosts{}, true, nil},
		{"improved, drawn costs", rounds.VariantImproved, 0, costs, true, nil},
		{"restart mechanism", rounds.VariantRestart, 0, costs, false, []float64{1000, 2000}},
		{"free restarts", rounds.VariantImproved, 0, RestartCosts{}, true, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := toyConfig(t, map[string]int{"v100": 1})
			cfg.Mechanism, cfg.PreemptionOverhead, cfg.RestartCosts = tc.mechanism, tc.overhead, tc.costs
			res, err := Run(cfg, Jobs{mkjob("one", 1000, 0), mkjob("one", 1000, 0)}.Source())
			if err != nil {
				t.Fatal(err)
			}
			if (res.Restarts > 0) != tc.restarts {
				t.Fatalf("%d restarts, want some: %v", res.Restarts, tc.restarts)
			}
			cost := tc.overhead + tc.costs.Max()
			if want := float64(res.Restarts) * cost; !near(res.RestartLost, want) || !near(res.RestartLostGPU, want) {
				t.Errorf("restart time lost %v s (%v GPU-s), want %d × %v s", res.RestartLost, res.RestartLostGPU, res.Restarts, cost)
			}
			if tc.jcts != nil {
				if a, b := res.Jobs[0].JCT(), res.Jobs[1].JCT(); !near(a, tc.jcts[0]) || !near(b, tc.jcts[1]) {
					t.Errorf("JCTs %v, %v; want %v", a, b, tc.jcts)
				}
			}
		})
	}
}

// With free restarts the restart mechanism's run is the improved one's.
func TestRestartMechanismFreeIsImproved(t *testing.T) {
	var jobs Jobs
	for i := range 12 {
		model := []string{"one", "two", "slow"}[i%3]
		jobs = append(jobs, mkjob(model, float64(500+300*i), float64(200*i)))
	}
	run := func(v rounds.Variant) *Result {
		cfg := toyConfig(t, map[string]int{"v100": 2, "k80": 1})
		cfg.Mechanism = v
		res, err := Run(cfg, jobs.Source())
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	a, b := run(rounds.VariantImproved), run(rounds.VariantRestart)
	if a.Preemptions != b.Preemptions || a.LeaseExtensions != b.LeaseExtensions || a.Rounds != b.Rounds {
		t.Errorf("preemptions %d/%d, extensions %d/%d, rounds %d/%d", a.Preemptions, b.Preemptions,
			a.LeaseExtensions, b.LeaseExtensions, a.Rounds, b.Rounds)
	}
	for i := range a.Jobs {
		if a.Jobs[i].Finish != b.Jobs[i].Finish {
			t.Errorf("job %d finished at %v and %v", i, a.Jobs[i].Finish, b.Jobs[i].Finish)
		}
	}
	if a.Preemptions == 0 {
		t.Error("the workload preempts nothing, so the comparison shows nothing")
	}
}

func TestRestartCostLongerThanRoundRefused(t *testing.T) {
	costs, err := ParseRestartCosts("uniform:1m:7m")
	if err != nil {
		t.Fatal(err)
	}
	cfg := toyConfig(t, map[string]int{"v100": 1})
	cfg.RestartCosts = costs
	if _, err := Run(cfg, Jobs{mkjob("one", 10, 0)}.Source()); err == nil || !strings.Contains(err.Error(), "shorter than a round") {
		t.Errorf("error %v, want one about the round", err)
	}
}
