package stepsim

import (
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/internal/sim"
)

// A grace period longer than a round lets a round choose a signalled job
// again before its requeue: the job is still requeued when its grace
// period ends (its script may wait for that) and restarted at once, so it
// makes progress again and every job finishes.
func TestSignalledJobChosenAgainFinishes(t *testing.T) {
	jobs := sim.Jobs{wjob("one", 2159, 878), wjob("one", 5439, 1947), wjob("one", 2800, 2244)}
	cfg := config(t, map[string]int{"v100": 2, "k80": 1})
	cfg.Grace = 10 * time.Minute
	cfg.MaxTime = 1000 * time.Hour // the work is 10,398 steps at >= 0.25 step/s
	res, err := Run(cfg, jobs.Source())
	if err != nil {
		t.Fatalf("run did not finish: %v", err)
	}
	if res.JobsMeasured != len(jobs) {
		t.Fatalf("%d of %d jobs finished", res.JobsMeasured, len(jobs))
	}
}

// The daemon-step run reports its JCT percentiles like the round
// mechanism's simulator (numpy's linear interpolation, sim.Result's
// definition), so the two can be compared row by row as
// docs/evaluation.md does. Two jobs alone on their own GPU, 1000 s and
// 2000 s: the median is 1500 s in both.
func TestPercentilesMatchTheRoundSimulator(t *testing.T) {
	jobs := sim.Jobs{wjob("one", 1000, 0), wjob("one", 2000, 0)}
	pure, err := sim.Run(sim.Config{GPUs: map[string]int{"v100": 2}, PolicyName: "max_min_fairness_perf", Table: toyTable(t),
		RoundSeconds: 360, MinResetInterval: 1920}, jobs.Source())
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(config(t, map[string]int{"v100": 2}), jobs.Source())
	if err != nil {
		t.Fatal(err)
	}
	if !near(res.AvgJCT, pure.AvgJCT, 0.01) {
		t.Fatalf("avg JCT %v, round simulator %v: not the same schedule", res.AvgJCT, pure.AvgJCT)
	}
	if !near(res.P50JCT, pure.P50JCT, 0.01) || !near(res.P95JCT, pure.P95JCT, 0.01) {
		t.Errorf("daemon step p50 %v p95 %v, round simulator p50 %v p95 %v", res.P50JCT, res.P95JCT, pure.P50JCT, pure.P95JCT)
	}
}
