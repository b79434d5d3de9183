package sim

import (
	"testing"

	"github.com/gavel-slurm/gavel-slurm/internal/workload"
	"github.com/gavel-slurm/gavel-slurm/policy"
	"github.com/gavel-slurm/gavel-slurm/rounds"
)

// firstObjective wraps a policy and keeps the objective of its first
// allocation.
type firstObjective struct {
	policy.Policy
	objective float64
	calls     int
}

func (f *firstObjective) Allocate(p *policy.Problem) (*policy.Allocation, error) {
	a, err := f.Policy.Allocate(p)
	if err == nil && f.calls == 0 {
		f.objective = a.Objective
	}
	f.calls++
	return a, err
}

// The static workload of the makespan experiment (100 single-GPU jobs at
// t = 0 on 36/36/36): min_total_duration_perf's first LP says how soon the
// jobs can all finish. The improved mechanism reaches that makespan; the
// reference walk, which fills the V100s first whatever the allocation,
// runs a job that is much faster on a P100 on a V100 and finishes later.
func TestStaticMakespanFollowsTheLP(t *testing.T) {
	cases := []struct {
		mechanism rounds.Variant
		within    float64 // realized / LP makespan at most 1 + within
		beyond    float64 // and at least 1 + beyond
	}{
		{rounds.VariantImproved, 0.05, -0.001},
		{rounds.VariantGavel, 10, 0.05},
	}
	for _, tc := range cases {
		t.Run(string(tc.mechanism), func(t *testing.T) {
			cfg, err := Defaults()
			if err != nil {
				t.Fatal(err)
			}
			pol, err := policy.New("min_total_duration_perf", policy.Options{})
			if err != nil {
				t.Fatal(err)
			}
			rec := &firstObjective{Policy: pol}
			cfg.GPUs = map[string]int{"v100": 36, "p100": 36, "k80": 36}
			cfg.Policy, cfg.Mechanism = rec, tc.mechanism
			src, err := workload.NewGenerator(cfg.Table, workload.GeneratorOptions{Jobs: 100, Seed: 0})
			if err != nil {
				t.Fatal(err)
			}
			res, err := Run(cfg, src)
			if err != nil {
				t.Fatal(err)
			}
			if !(rec.objective > 0) {
				t.Fatalf("LP makespan %v", rec.objective)
			}
			ratio := res.Makespan / rec.objective
			if ratio > 1+tc.within || ratio < 1+tc.beyond {
				t.Errorf("makespan %.1f h against the LP's %.1f h (ratio %.3f), want within [%.3f, %.3f]",
					res.Makespan/3600, rec.objective/3600, ratio, 1+tc.beyond, 1+tc.within)
			}
		})
	}
}

func TestUnknownMechanismRefused(t *testing.T) {
	cfg, err := Defaults()
	if err != nil {
		t.Fatal(err)
	}
	cfg.GPUs, cfg.PolicyName, cfg.Mechanism = map[string]int{"v100": 1}, "max_min_fairness_perf", "ideal"
	if _, err := Run(cfg, Jobs(nil).Source()); err == nil {
		t.Error("an unknown mechanism was accepted")
	}
}
