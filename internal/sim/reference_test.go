package sim

import (
	"testing"

	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
	"github.com/gavel-slurm/gavel-slurm/policy"
	"github.com/gavel-slurm/gavel-slurm/rounds"
)

// The reference mechanism builds its policy as Gavel's runs did (strict
// FIFO queue, interior max-min optimum); only Faithful adds the flaws.
func TestPolicyOptionsFollowTheMechanism(t *testing.T) {
	for _, tc := range []struct {
		mech     rounds.Variant
		faithful bool
		want     policy.Options
	}{
		{"", false, policy.Options{Seed: 7, FIFOBlocking: true, InteriorOptimum: true}},
		{rounds.VariantGavel, false, policy.Options{Seed: 7, FIFOBlocking: true, InteriorOptimum: true}},
		{rounds.VariantGavel, true, policy.Options{Seed: 7, FIFOBlocking: true, FIFOZeroRates: true, InteriorOptimum: true, AgnosticUnusableTypes: true, InteriorUnusableTypes: true}},
		{rounds.VariantImproved, false, policy.Options{Seed: 7}},
		{rounds.VariantImproved, true, policy.Options{Seed: 7}},
	} {
		cfg := Config{Seed: 7, Mechanism: tc.mech, Faithful: tc.faithful}
		if got := cfg.policyOptions(); got != tc.want {
			t.Errorf("mechanism %q, faithful %v: %+v, want %+v", tc.mech, tc.faithful, got, tc.want)
		}
	}
}

// A 4-GPU job whose last round has fewer steps left than it has GPUs:
// Gavel gives each worker but the last floor(steps/4) = 0 steps, counts the
// round as a failed micro-task, and drops the job after five of them,
// leaving it out of the average. Only Faithful reproduces that; otherwise
// the round completes the job.
func TestFailedMicroTasks(t *testing.T) {
	table, err := throughputs.Parse([]byte(`{"v100": {"('d', 4)": {"null": 1}, "('e', 1)": {"null": 1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	jobs := Jobs{
		// 360 steps a round: two rounds, then 2.5 steps for 4 GPUs.
		{Model: "d", ScaleFactor: 4, TotalSteps: 722.5, Priority: 1},
		{Model: "e", ScaleFactor: 1, TotalSteps: 3600, Priority: 1},
	}
	for _, tc := range []struct {
		name             string
		faithful         bool
		dropped, counted int
		avgJCT           float64
	}{
		// d: 720 s, then 2.5 s more; e: ten rounds of 360 s, run beside d.
		{"completes", false, 0, 2, (722.5 + 3600) / 2},
		{"dropped", true, 1, 1, 3600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{GPUs: map[string]int{"v100": 5}, Policy: equalShare{}, Table: table,
				RoundSeconds: 360, MinResetInterval: 1920, Mechanism: rounds.VariantGavel, Faithful: tc.faithful}
			res, err := Run(cfg, jobs.Source())
			if err != nil {
				t.Fatal(err)
			}
			if res.JobsDropped != tc.dropped || res.JobsMeasured != tc.counted {
				t.Fatalf("%d dropped, %d measured; want %d and %d", res.JobsDropped, res.JobsMeasured, tc.dropped, tc.counted)
			}
			if !near(res.AvgJCT, tc.avgJCT) {
				t.Errorf("average JCT %v s, want %v", res.AvgJCT, tc.avgJCT)
			}
			if d := res.Jobs[0]; d.Dropped != tc.faithful || (d.Finish < 0) != tc.faithful {
				t.Errorf("job d: dropped %v, finish %v", d.Dropped, d.Finish)
			}
		})
	}
}
