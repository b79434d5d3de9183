package daemon

import (
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/reports"
	"github.com/gavel-slurm/gavel-slurm/internal/sched"
)

// Job 42 runs on node gpu1 (v100). A report from gpu9, a node the job is
// not on (a leftover process of an earlier run, a stale mapping, or any
// holder of the shared token writing in another node's name), claims a
// rate for it on v100: it is dropped.
func TestFeedDropsReportFromNodeTheJobIsNotOn(t *testing.T) {
	m, _ := referenceMeasured(t)
	d := &Daemon{Deps: Deps{Measured: m}}
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	snap := &bridge.Snapshot{Taken: now, Jobs: []bridge.Job{{
		ID: 42, State: bridge.JobRunning, GPUs: 1, Nodes: 1, RunningGPUType: "v100",
		RunningNodes: []string{"gpu1"}, StartTime: now.Add(-time.Hour), Tag: bridge.Tag{Model: "mystery"},
	}}}
	rate := 1e6
	d.Receive(reports.Report{Node: "gpu9", Time: now, IntervalS: 30, Jobs: []reports.Job{
		{JobID: "42", GPUType: "v100", GPUs: 1, StepsPerS: &rate},
	}})
	taken, dropped := d.feed(snap)
	_, rates := m.Rates(sched.JobQuery{ID: "42", Model: "mystery", Scale: 1}, []string{"v100"}, now)
	t.Logf("taken %d dropped %d; v100: %+v", taken, dropped, rates["v100"])
	if taken != 0 || rates["v100"].Source == "measured" {
		t.Errorf("a report from gpu9 about a job running on gpu1 was taken: %+v", rates["v100"])
	}
}
