package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/reports"
)

// An untagged (unmanaged) job in a managed partition runs on a node with a
// collector: its reports are not taken in, since only managed jobs are
// forgotten when they end (Result.Forget), and its rows would otherwise
// stay in the estimator for ever. A managed job's are taken in, and
// forgotten once it ends.
func TestUnmanagedJobsAreNotMeasured(t *testing.T) {
	h, measured := measuredHarness(t, "a1:v100:1", "b1:v100:1")
	managed := h.submit("gavel: model=my-new-transformer steps=1M", 1)
	plain := h.submit("plain job, no tag", 1)
	h.d.RunRound(context.Background())
	h.startChosen()
	if h.job(managed).State != bridge.JobRunning {
		t.Fatalf("managed job not started: %+v", h.job(managed))
	}
	if err := h.slurm.Start(plain, "b1"); err != nil {
		t.Fatal(err)
	}
	rate := 42.0
	for i := range 4 {
		h.clock.now = h.clock.now.Add(5 * time.Minute)
		steps := int64(1000 * (i + 1))
		for _, id := range []bridge.JobID{managed, plain} {
			j := h.job(id)
			h.d.Receive(reports.Report{Node: j.RunningNodes[0], Time: h.clock.now, IntervalS: 30, Jobs: []reports.Job{
				{JobID: id.String(), GPUType: j.RunningGPUType, GPUs: 1, StepsPerS: &rate, Steps: &steps}}})
		}
		h.d.RunRound(context.Background())
	}
	if _, ok := measured.StepsDone(managed); !ok {
		t.Fatalf("managed job %d: no progress taken in", managed)
	}
	if _, ok := measured.StepsDone(plain); ok {
		t.Errorf("unmanaged job %d: its progress was taken in, and nothing forgets it when it ends", plain)
	}
	for _, id := range []bridge.JobID{managed, plain} {
		if err := h.slurm.Finish(id, bridge.JobCompleted); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		h.clock.now = h.clock.now.Add(time.Minute)
		h.d.RunRound(context.Background())
	}
	if _, ok := measured.StepsDone(managed); ok {
		t.Errorf("finished managed job %d still known to the estimator", managed)
	}
}
