package stepsim

import (
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/bridge/fake"
	"github.com/gavel-slurm/gavel-slurm/internal/sim"
)

// With Slurm refusing a share of the daemon's actions (holds, releases,
// signals, requeues), every refused action is committed as such and the
// next round or look tries again: no job is lost, held for ever or
// requeued without its signal, and every job finishes its steps.
func TestRefusedActionsLoseNoJob(t *testing.T) {
	jobs := mixedTrace()
	tests := map[string]struct {
		preempt bridge.PreemptMode
		script  fake.SignalResponse
		// minRun lets jobs that restart from scratch (no checkpoint)
		// run to their end, as a site would set it for them.
		minRun time.Duration
	}{
		"checkpoint, scripts wait": {preempt: bridge.PreemptCheckpoint, script: fake.SignalTrapAndWait},
		"checkpoint, scripts exit": {preempt: bridge.PreemptCheckpoint, script: fake.SignalExitsOK},
		"requeue at once":          {preempt: bridge.PreemptRequeue, minRun: time.Hour},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			run := func(rate float64) (*sim.Result, int) {
				cfg := config(t, map[string]int{"v100": 2, "k80": 2})
				cfg.Preempt, cfg.Script, cfg.RefuseRate, cfg.MinRunTime = tc.preempt, tc.script, rate, tc.minRun
				cfg.MaxTime = 30 * 24 * time.Hour
				r, err := newRun(cfg)
				if err != nil {
					t.Fatal(err)
				}
				if err := r.loop(jobs.Source()); err != nil {
					t.Fatalf("refuse rate %v: %v", rate, err)
				}
				return r.result(), r.refused
			}
			clean, none := run(0)
			res, refused := run(0.25)
			if none != 0 || refused == 0 {
				t.Fatalf("refused %d actions without refusals and %d with; the test needs refusals", none, refused)
			}
			for _, rec := range res.Jobs {
				if rec.Finish < 0 {
					t.Errorf("job %d never finished with a quarter of the actions refused", rec.ID)
				}
			}
			if res.JobsMeasured != clean.JobsMeasured {
				t.Errorf("%d jobs measured with refusals, %d without", res.JobsMeasured, clean.JobsMeasured)
			}
			t.Logf("%d actions refused; average JCT %.0f s against %.0f s", refused, res.AvgJCT, clean.AvgJCT)
		})
	}
}

// mixedTrace is 24 jobs of two models and seven lengths, one arriving
// every 200 s: enough contention for rounds to preempt and move them.
func mixedTrace() sim.Jobs {
	var jobs sim.Jobs
	for i := range 24 {
		model := "one"
		if i%3 == 0 {
			model = "two"
		}
		jobs = append(jobs, wjob(model, float64(1500+100*(i%7)), float64(200*i)))
	}
	return jobs
}
