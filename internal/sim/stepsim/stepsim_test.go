package stepsim

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/bridge/fake"
	"github.com/gavel-slurm/gavel-slurm/internal/sim"
	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
	"github.com/gavel-slurm/gavel-slurm/internal/workload"
	"github.com/gavel-slurm/gavel-slurm/rounds"
)

func toyTable(t *testing.T) *throughputs.Table {
	t.Helper()
	table, err := throughputs.Parse([]byte(`{
		"v100": {"('one', 1)": {"null": 1}, "('two', 1)": {"null": 2}},
		"k80":  {"('one', 1)": {"null": 0.25}, "('two', 1)": {"null": 1.5}}}`))
	if err != nil {
		t.Fatal(err)
	}
	return table
}

func config(t *testing.T, gpus map[string]int) Config {
	return Config{GPUs: gpus, GPUsPerServer: map[string]int{"v100": 1, "k80": 1}, Policy: "max_min_fairness_perf",
		Table: toyTable(t), Round: 360 * time.Second, MinResetInterval: 1920 * time.Second,
		Preempt: bridge.PreemptCheckpoint, Grace: 60 * time.Second}
}

func wjob(model string, steps, arrival float64) workload.Job {
	return workload.Job{Model: model, ScaleFactor: 1, TotalSteps: steps, Priority: 1, Arrival: arrival}
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// A job alone on a v100 runs from its arrival to its last step.
func TestOneJobAlone(t *testing.T) {
	res, err := Run(config(t, map[string]int{"v100": 1}), sim.Jobs{wjob("one", 1000, 0)}.Source())
	if err != nil {
		t.Fatal(err)
	}
	if res.JobsMeasured != 1 || !near(res.AvgJCT, 1000, 0.01) || res.Preemptions != 0 {
		t.Errorf("JCT %v over %d jobs with %d preemptions; want 1000 s, no preemption", res.AvgJCT, res.JobsMeasured, res.Preemptions)
	}
}

// Two jobs time-share one GPU: each preemption costs the grace period
// (the GPU holds a job that only waits for its requeue), so the daemon's
// JCTs exceed the round mechanism's, and grow with the grace period. No
// job is lost, whatever its script does with the signal.
func TestGracePeriodsCostTime(t *testing.T) {
	jobs := sim.Jobs{wjob("one", 2000, 0), wjob("one", 2000, 0)}
	pure, err := sim.Run(sim.Config{GPUs: map[string]int{"v100": 1}, PolicyName: "max_min_fairness_perf", Table: toyTable(t),
		RoundSeconds: 360, MinResetInterval: 1920}, jobs.Source())
	if err != nil {
		t.Fatal(err)
	}
	var last float64
	for _, grace := range []time.Duration{0, 30 * time.Second, 90 * time.Second} {
		cfg := config(t, map[string]int{"v100": 1})
		cfg.Grace = grace
		res, err := Run(cfg, jobs.Source())
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("grace %v: avg JCT %.0f s, %d preemptions (round mechanism alone: %.0f s, %d)", grace, res.AvgJCT, res.Preemptions, pure.AvgJCT, pure.Preemptions)
		if res.JobsMeasured != 2 || res.Preemptions == 0 {
			t.Fatalf("grace %v: %d jobs finished, %d preemptions", grace, res.JobsMeasured, res.Preemptions)
		}
		if res.AvgJCT < pure.AvgJCT-1 || res.AvgJCT <= last {
			t.Errorf("grace %v: avg JCT %.0f s, round mechanism %.0f s, shorter grace %.0f s", grace, res.AvgJCT, pure.AvgJCT, last)
		}
		last = res.AvgJCT
	}
	// A script that exits at once after its checkpoint frees the GPU
	// early: every job still finishes, sooner than when it waits.
	cfg := config(t, map[string]int{"v100": 1})
	cfg.Grace, cfg.Script = 90*time.Second, fake.SignalExitsOK
	res, err := Run(cfg, jobs.Source())
	if err != nil {
		t.Fatal(err)
	}
	if res.JobsMeasured != 2 || res.AvgJCT >= last {
		t.Errorf("exiting scripts: %d jobs finished, avg JCT %.0f s (waiting scripts %.0f s)", res.JobsMeasured, res.AvgJCT, last)
	}
}

// Jobs that cannot be preempted run to the end where they started. The
// second waits held until the first round after the first one finished
// (2000 s, round at 2160 s): the daemon releases held jobs at rounds.
func TestJobsThatCannotBePreemptedRunToTheEnd(t *testing.T) {
	cfg := config(t, map[string]int{"v100": 1})
	cfg.Preempt = bridge.PreemptNever
	res, err := Run(cfg, sim.Jobs{wjob("one", 2000, 0), wjob("one", 2000, 0)}.Source())
	if err != nil {
		t.Fatal(err)
	}
	if res.Preemptions != 0 || res.JobsMeasured != 2 || !near(res.AvgJCT, (2000+2160+2000)/2, 1) {
		t.Errorf("%d preemptions, %d jobs, avg JCT %.0f; want 0, 2, 3080 (one after the other)", res.Preemptions, res.JobsMeasured, res.AvgJCT)
	}
}

// Slurm starts a job that arrives between rounds wherever GPUs are free;
// the next round moves it to the type the policy wants once its minimum
// run time allows.
func TestArrivalsStartBeforeTheNextRound(t *testing.T) {
	cfg := config(t, map[string]int{"v100": 1, "k80": 1})
	res, err := Run(cfg, sim.Jobs{wjob("two", 100, 10)}.Source())
	if err != nil {
		t.Fatal(err)
	}
	// Node order puts k80 first: it starts there at once (1.5 steps/s)
	// and finishes before the next round, in 100/1.5 s.
	if !near(res.AvgJCT, 100/1.5, 0.1) {
		t.Errorf("JCT %.1f s, want %.1f", res.AvgJCT, 100/1.5)
	}
}

func TestRunStopsAtMaxTime(t *testing.T) {
	cfg := config(t, map[string]int{"v100": 1})
	cfg.MaxTime = time.Hour
	if _, err := Run(cfg, sim.Jobs{wjob("one", 1e9, 0)}.Source()); err == nil {
		t.Error("a job that never ends ran past the time limit")
	}
}

// The daemon's mechanism setting reaches the step: a job three times
// faster on k80 than on v100, alone on one GPU of each, runs where its
// allocation puts it (k80) under the improved mechanism, and on the first
// type of the paper's walk (v100) under the faithful one.
func TestMechanismSettingReachesTheStep(t *testing.T) {
	table, err := throughputs.Parse([]byte(`{
		"v100": {"('kfast', 1)": {"null": 1}},
		"k80":  {"('kfast', 1)": {"null": 3}}}`))
	if err != nil {
		t.Fatal(err)
	}
	jct := map[rounds.Variant]float64{}
	for _, m := range []rounds.Variant{rounds.VariantGavel, rounds.VariantImproved} {
		cfg := config(t, map[string]int{"v100": 1, "k80": 1})
		cfg.Table, cfg.Mechanism = table, m
		res, err := Run(cfg, sim.Jobs{wjob("kfast", 3000, 0)}.Source())
		if err != nil {
			t.Fatal(err)
		}
		jct[m] = res.AvgJCT
	}
	if !near(jct[rounds.VariantImproved], 1000, 1) || jct[rounds.VariantGavel] < 2*jct[rounds.VariantImproved] {
		t.Errorf("JCT %.0f s (improved) and %.0f s (gavel); want 1000 s on the k80, and the paper's walk on the v100 far slower", jct[rounds.VariantImproved], jct[rounds.VariantGavel])
	}
}

// Two 100 s jobs on one GPU: the round runs one and holds the other.
// Without refilling, the GPU the first frees at 100 s stays idle until the
// next round (360 s); with refill_poll 30 s the daemon's first look after
// the completion (120 s) starts the second job there.
func TestRefillUsesGPUsFreedBetweenRounds(t *testing.T) {
	jobs := sim.Jobs{wjob("one", 100, 0), wjob("one", 100, 0)}
	for _, tc := range []struct {
		poll time.Duration
		want float64 // average JCT, s
	}{{0, (100 + 460) / 2.0}, {30 * time.Second, (100 + 220) / 2.0}} {
		cfg := config(t, map[string]int{"v100": 1})
		cfg.Preempt, cfg.RefillPoll = bridge.PreemptNever, tc.poll
		res, err := Run(cfg, jobs.Source())
		if err != nil {
			t.Fatal(err)
		}
		if res.JobsMeasured != 2 || !near(res.AvgJCT, tc.want, 1) {
			t.Errorf("refill poll %v: %d jobs, avg JCT %.1f s, want %.1f s", tc.poll, res.JobsMeasured, res.AvgJCT, tc.want)
		}
	}
}

// A policy that fails stops the simulation with the policy's error: the
// daemon would go on with the stand-in's shares, but results under the
// policy's name must be the policy's.
func TestAFailingPolicyStopsTheSimulation(t *testing.T) {
	cfg := config(t, map[string]int{"v100": 1, "k80": 1})
	// A cost policy with no price for one of the types fails on every
	// problem.
	cfg.Policy, cfg.Costs = "max_sum_throughput_normalized_by_cost_perf", map[string]float64{"v100": 2.48}
	_, err := Run(cfg, sim.Jobs{wjob("one", 100, 0)}.Source())
	if err == nil || !strings.Contains(err.Error(), "the policy failed") {
		t.Errorf("err = %v, want the policy's failure", err)
	}
}

// Jobs that pay 3 minutes for each restart, time-sharing one GPU: the
// daemon's step under the restart mechanism measures each job's cost at
// its first restart, then keeps a job on the GPU until its run has paid
// for its restart, so the jobs restart far less often and finish sooner
// than under the improved mechanism. Each restart's cost is counted in
// the restart time lost.
func TestRestartMechanismInTheStep(t *testing.T) {
	costs, err := sim.ParseRestartCosts("fixed:3m")
	if err != nil {
		t.Fatal(err)
	}
	jobs := sim.Jobs{wjob("one", 20000, 0), wjob("one", 20000, 0), wjob("one", 20000, 60)}
	results := map[rounds.Variant]*sim.Result{}
	for _, m := range []rounds.Variant{rounds.VariantImproved, rounds.VariantRestart} {
		cfg := config(t, map[string]int{"v100": 1})
		cfg.Mechanism, cfg.RestartCosts, cfg.DefaultRestart = m, costs, time.Minute
		cfg.Script = fake.SignalExitsOK
		res, err := Run(cfg, jobs.Source())
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		if res.JobsMeasured != 3 {
			t.Fatalf("%s: %d jobs finished, want 3", m, res.JobsMeasured)
		}
		if want := float64(res.Restarts) * 180; !near(res.RestartLost, want, 1e-6) {
			t.Errorf("%s: %d restarts lost %v s, want %v", m, res.Restarts, res.RestartLost, want)
		}
		t.Logf("%s: avg JCT %.0f s, %d restarts, %d preemptions", m, res.AvgJCT, res.Restarts, res.Preemptions)
		results[m] = res
	}
	improved, restart := results[rounds.VariantImproved], results[rounds.VariantRestart]
	if restart.Restarts*2 > improved.Restarts {
		t.Errorf("restart mechanism restarts %d times, want at most half of the improved mechanism's %d", restart.Restarts, improved.Restarts)
	}
	if restart.AvgJCT >= improved.AvgJCT {
		t.Errorf("restart mechanism's average JCT %.0f s, want below the improved mechanism's %.0f s", restart.AvgJCT, improved.AvgJCT)
	}
}
