package stepsim

import (
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/bridge/fake"
	"github.com/gavel-slurm/gavel-slurm/internal/sim"
)

// With answers lost (half of those actions landed, half not) and the
// daemon stopping between journaling a send and sending it, then
// restarting from its store, the daemon's own code reconciles what it
// cannot know: no job is lost, held for ever or requeued without its
// signal, and every job finishes its steps over the whole trace.
func TestLostAnswersAndCrashesLoseNoJob(t *testing.T) {
	jobs := mixedTrace()
	type failures struct{ refuse, lost, crash float64 }
	tests := map[string]struct {
		preempt bridge.PreemptMode
		script  fake.SignalResponse
		minRun  time.Duration
		fail    failures
	}{
		"answers lost, scripts wait":       {preempt: bridge.PreemptCheckpoint, script: fake.SignalTrapAndWait, fail: failures{lost: 0.25}},
		"answers lost, scripts exit":       {preempt: bridge.PreemptCheckpoint, script: fake.SignalExitsOK, fail: failures{lost: 0.25}},
		"answers lost, requeue at once":    {preempt: bridge.PreemptRequeue, minRun: time.Hour, fail: failures{lost: 0.25}},
		"crashes, scripts wait":            {preempt: bridge.PreemptCheckpoint, script: fake.SignalTrapAndWait, fail: failures{crash: 0.2}},
		"crashes, scripts exit":            {preempt: bridge.PreemptCheckpoint, script: fake.SignalExitsOK, fail: failures{crash: 0.2}},
		"everything at once, scripts wait": {preempt: bridge.PreemptCheckpoint, script: fake.SignalTrapAndWait, fail: failures{refuse: 0.1, lost: 0.1, crash: 0.1}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			run := func(f failures) (*sim.Result, *run) {
				cfg := config(t, map[string]int{"v100": 2, "k80": 2})
				cfg.Preempt, cfg.Script, cfg.MinRunTime = tc.preempt, tc.script, tc.minRun
				cfg.RefuseRate, cfg.LostRate, cfg.CrashRate = f.refuse, f.lost, f.crash
				if f.crash > 0 {
					cfg.StateDir = t.TempDir()
				}
				cfg.MaxTime = 30 * 24 * time.Hour
				r, err := newRun(cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer r.close()
				if err := r.loop(jobs.Source()); err != nil {
					t.Fatalf("failures %+v: %v", f, err)
				}
				return r.result(), r
			}
			clean, _ := run(failures{})
			res, r := run(tc.fail)
			if (tc.fail.lost > 0) != (r.lost > 0) || (tc.fail.crash > 0) != (r.crashes > 0) {
				t.Fatalf("%d answers lost and %d crashes; the test needs the failures it names (%+v)", r.lost, r.crashes, tc.fail)
			}
			for _, rec := range res.Jobs {
				if rec.Finish < 0 {
					t.Errorf("job %d never finished", rec.ID)
				}
			}
			if res.JobsMeasured != clean.JobsMeasured {
				t.Errorf("%d jobs measured with failures, %d without", res.JobsMeasured, clean.JobsMeasured)
			}
			// A grace signal whose fate is unknown (its answer lost, or
			// a crash right after it was journaled) is not sent again:
			// its grace period runs from the journaled time, so a few
			// jobs are requeued without having been told to checkpoint.
			t.Logf("%d refused, %d answers lost, %d crashes; %d requeues for %d signals delivered; average JCT %.0f s against %.0f s",
				r.refused, r.lost, r.crashes, r.requeues, r.signals, res.AvgJCT, clean.AvgJCT)
		})
	}
}
