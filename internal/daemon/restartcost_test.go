package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/reports"
)

// A preempted job's restart cost is measured from the requeue the daemon
// sent: the grace period it used (5 s: it ran it out) and, since it
// waited for a round before it started again, from its next start to its
// first progress: the time its collector reports for the run's first
// progress line, from the warm-up report on, else (a collector without
// first_progress, or one that says the run progressed before it started)
// the end of its first interval with a rate. Status shows the figure and
// where it comes from; a job never restarted shows the default.
func TestRestartCostIsMeasuredAndShown(t *testing.T) {
	type report struct {
		after time.Duration  // since the restart
		rated bool           // carries a rate (all but the warm-up)
		first *time.Duration // first_progress, since the restart; nil: absent
	}
	since := func(d time.Duration) *time.Duration { return &d }
	tests := map[string]struct {
		reports    []report
		wantSource string
		wantCost   float64
	}{
		"no first progress: the first interval with a rate": {
			[]report{{60 * time.Second, true, nil}, {90 * time.Second, true, nil}}, "measured", 65},
		"no progress since the start": {nil, "default", 0},
		"reported first progress": {
			[]report{{30 * time.Second, false, since(12 * time.Second)}, {60 * time.Second, true, since(12 * time.Second)}}, "measured", 17},
		"reported in the warm-up alone": {
			[]report{{30 * time.Second, false, since(12500 * time.Millisecond)}}, "measured", 17.5},
		"reported with the rates alone": {
			[]report{{30 * time.Second, false, nil}, {60 * time.Second, true, since(21 * time.Second)}}, "measured", 26},
		"first progress before the start": {
			[]report{{30 * time.Second, false, since(-3 * time.Second)}, {60 * time.Second, true, since(-3 * time.Second)}}, "measured", 65},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h, _ := measuredHarness(t, "a1:v100:1")
			first, second := h.preemptFirst()
			h.clock.now = h.clock.now.Add(5 * time.Second)
			h.d.RunGraces(context.Background())
			if j := h.job(first); j.State != bridge.JobPending || j.Restarts != 1 {
				t.Fatalf("first job not requeued: %+v", j)
			}
			h.startChosen()
			// The second job ends; the next round starts the first again.
			h.clock.now = h.clock.now.Add(10 * time.Minute)
			if err := h.slurm.Finish(second, bridge.JobCompleted); err != nil {
				t.Fatal(err)
			}
			h.d.RunRound(context.Background())
			h.startChosen()
			j := h.job(first)
			if j.State != bridge.JobRunning {
				t.Fatalf("first job not started again: %+v", j)
			}
			for _, r := range tc.reports {
				steps := int64(r.after.Seconds() * 40)
				job := reports.Job{JobID: first.String(), GPUType: "v100", GPUs: 1, Steps: &steps}
				if r.rated {
					rate := 40.0
					job.StepsPerS = &rate
				}
				if r.first != nil {
					fp := j.StartTime.Add(*r.first)
					job.FirstProgress = &fp
				}
				if err := h.d.Receive(reports.Report{Node: "a1", Time: j.StartTime.Add(r.after), IntervalS: 30,
					Jobs: []reports.Job{job}}); err != nil {
					t.Fatal(err)
				}
			}
			h.clock.now = j.StartTime.Add(2 * time.Minute)
			h.d.RunRound(context.Background())
			st := findStatus(t, h.board.Status(), first)
			if st.RestartSource != tc.wantSource || (tc.wantCost > 0 && st.RestartCostS != tc.wantCost) {
				t.Errorf("status: restart cost %gs (%s), want %gs (%s)", st.RestartCostS, st.RestartSource, tc.wantCost, tc.wantSource)
			}
		})
	}
}

// Measured keeps each job's earliest progress in its current run: a later
// or repeated report leaves it, an earlier one replaces it, a new start
// begins a new run, and a report from before the start is not the run's.
func TestFirstProgressPerRun(t *testing.T) {
	s1, s2 := queueEpoch, queueEpoch.Add(time.Hour)
	type note struct{ start, at time.Time }
	tests := map[string]struct {
		notes   []note
		askFor  time.Time
		want    time.Time
		wantOK  bool
		forgets bool
	}{
		"earliest kept":           {[]note{{s1, s1.Add(time.Minute)}, {s1, s1.Add(2 * time.Minute)}, {s1, s1.Add(30 * time.Second)}}, s1, s1.Add(30 * time.Second), true, false},
		"new run replaces":        {[]note{{s1, s1.Add(time.Minute)}, {s2, s2.Add(90 * time.Second)}}, s2, s2.Add(90 * time.Second), true, false},
		"older run not answered":  {[]note{{s1, s1.Add(time.Minute)}, {s2, s2.Add(90 * time.Second)}}, s1, time.Time{}, false, false},
		"report before the start": {[]note{{s2, s1.Add(time.Minute)}}, s2, time.Time{}, false, false},
		"forgotten job":           {[]note{{s1, s1.Add(time.Minute)}}, s1, time.Time{}, false, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := &Measured{}
			_, measured := measuredHarness(t, "a1:v100:1")
			m.est = measured.est
			for _, n := range tc.notes {
				m.noteProgress("7", n.start, n.at)
			}
			if tc.forgets {
				m.Forget("7")
			}
			got, ok := m.FirstProgress(7, tc.askFor)
			if ok != tc.wantOK || !got.Equal(tc.want) {
				t.Errorf("first progress %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
