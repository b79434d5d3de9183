package sim

import (
	"testing"

	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
	"github.com/gavel-slurm/gavel-slurm/policy"
	"github.com/gavel-slurm/gavel-slurm/rounds"
)

// The reference mechanism builds its policy as Gavel's runs did (strict
// FIFO queue, a finished job's type handed to the head of the agnostic
// FIFO's queue, interior max-min optimum); only Faithful adds the flaws,
// among them the agnostic FIFO's draws from random.Random(seed).
func TestPolicyOptionsFollowTheMechanism(t *testing.T) {
	for _, tc := range []struct {
		mech     rounds.Variant
		faithful bool
		want     policy.Options // without FIFODropDraws
		drops    bool           // FIFODropDraws is set
	}{
		{"", false, policy.Options{Seed: 7, FIFOBlocking: true, FIFOReplace: true, InteriorOptimum: true}, false},
		{rounds.VariantGavel, false, policy.Options{Seed: 7, FIFOBlocking: true, FIFOReplace: true, InteriorOptimum: true}, false},
		{rounds.VariantGavel, true, policy.Options{Seed: 7, FIFOBlocking: true, FIFOReplace: true, FIFOZeroRates: true, InteriorOptimum: true, AgnosticUnusableTypes: true, InteriorUnusableTypes: true}, true},
		{rounds.VariantImproved, false, policy.Options{Seed: 7}, false},
		{rounds.VariantImproved, true, policy.Options{Seed: 7}, false},
	} {
		cfg := Config{Seed: 7, Mechanism: tc.mech, Faithful: tc.faithful}
		got := cfg.policyOptions()
		if (got.FIFODropDraws != nil) != tc.drops {
			t.Errorf("mechanism %q, faithful %v: drop draws %v, want them: %v", tc.mech, tc.faithful, got.FIFODropDraws, tc.drops)
		}
		if tc.drops {
			// CPython: r = random.Random(7); [r.randrange(3) for _ in range(8)]
			want := []int{1, 0, 1, 2, 0, 0, 2, 0}
			for k, w := range want {
				if d := got.FIFODropDraws.Below(3); d != w {
					t.Fatalf("draw %d: %d, want %d (random.Random(7).randrange(3))", k, d, w)
				}
			}
		}
		got.FIFODropDraws = nil
		if got != tc.want {
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

// Gavel's finish_time_fairness accrues each job's isolated time at the
// rates the agnostic policy sees (its V100 rate on every type it can use):
// only the reference mechanism's agnostic FTF does so.
func TestAgnosticIsolatedTime(t *testing.T) {
	for _, tc := range []struct {
		mech   rounds.Variant
		policy string
		want   bool
	}{
		{"", "finish_time_fairness", true},
		{rounds.VariantGavel, "finish_time_fairness", true},
		{rounds.VariantGavel, "finish_time_fairness_perf", false},
		{rounds.VariantGavel, "max_min_fairness", false},
		{rounds.VariantImproved, "finish_time_fairness", false},
		{rounds.VariantRestart, "finish_time_fairness", false},
	} {
		cfg := Config{Mechanism: tc.mech}
		if got := cfg.agnosticIsolatedTime(tc.policy); got != tc.want {
			t.Errorf("mechanism %q, %s: %v, want %v", tc.mech, tc.policy, got, tc.want)
		}
	}
}

// The policy's isolated time under the reference's agnostic FTF: a job of
// rates 1/2/4 (k80/p100/v100) on 2 GPUs of each type, alone, has the
// isolated share 1/3 of each type, so the policy sees an isolated rate of
// 4 (its V100 rate everywhere), where its rates on those types give 7/3.
// 140 steps done: 35 s in the policy's input, 60 s in the outcome's.
func TestAgnosticIsolatedTimeAccrual(t *testing.T) {
	gpus := map[string]int{"k80": 2, "p100": 2, "v100": 2}
	tputs := map[string]float64{"k80": 1, "p100": 2, "v100": 4}
	for _, tc := range []struct {
		name                  string
		agnostic              bool
		wantSeen, wantOutcome float64
	}{
		{"agnostic reference FTF", true, 35, 60},
		{"other policies", false, 0, 60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &simulator{cfg: Config{GPUs: gpus}, agnosticIso: tc.agnostic, policyIso: tc.agnostic}
			j := &job{tputs: tputs, seen: tputs, isoMark: 200, remaining: 60}
			j.spec.ScaleFactor = 1
			s.active = []*job{j}
			s.accrueIsolated(j, 1)
			if !near(j.seenIsoTime, tc.wantSeen) || !near(j.isoTime, tc.wantOutcome) {
				t.Errorf("policy's isolated time %v, outcome's %v; want %v, %v", j.seenIsoTime, j.isoTime, tc.wantSeen, tc.wantOutcome)
			}
		})
	}
	rates := policy.AgnosticRates(gpus, map[string]float64{"k80": 0, "p100": 2, "v100": 4}, false)
	if rates["k80"] != 0 || rates["p100"] != 4 || rates["v100"] != 4 {
		t.Errorf("AgnosticRates = %v, want k80 0 (cannot run), p100 and v100 4", rates)
	}
	// --faithful: Gavel's view gives the V100 rate on every type, also
	// where the job cannot run and where its rates do not list the type.
	rates = policy.AgnosticRates(gpus, map[string]float64{"k80": 0, "v100": 4}, true)
	if rates["k80"] != 4 || rates["p100"] != 4 || rates["v100"] != 4 {
		t.Errorf("AgnosticRates everywhere = %v, want 4 on every type", rates)
	}
	s := &simulator{cfg: Config{GPUs: gpus, Faithful: true, Mechanism: rounds.VariantGavel}, agnosticIso: true}
	if got := s.isoView(&job{seen: map[string]float64{"k80": 0, "v100": 4}}); got["k80"] != 4 {
		t.Errorf("faithful isolated view %v, want the V100 rate on k80", got)
	}
}

// The policy is asked to keep running jobs where they run only under the
// restart mechanism and only when restarts cost something: with free
// restarts that mechanism, and its policy's input, are the improved one's.
func TestKeepRunningFollowsRestartCosts(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want bool
	}{
		{"restart, 30 s", Config{Mechanism: rounds.VariantRestart, PreemptionOverhead: 30}, true},
		{"restart, free", Config{Mechanism: rounds.VariantRestart}, false},
		{"improved, 30 s", Config{Mechanism: rounds.VariantImproved, PreemptionOverhead: 30}, false},
	} {
		if got := tc.cfg.policyOptions().KeepRunning; got != tc.want {
			t.Errorf("%s: KeepRunning %v, want %v", tc.name, got, tc.want)
		}
	}
}
