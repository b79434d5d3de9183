package sched

import (
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// A heterogeneous job's components are records of their own, which Slurm
// starts together. The rounds place one job on one GPU type, so they
// would hold one component while choosing the other, and preempt other
// jobs to make room for a job that cannot start: the node then sits idle.
// The daemon leaves them to Slurm: no action for any component, nothing
// preempted for them, a hold it sent before released, and the reason in
// status.
func TestHetJobsAreLeftToSlurm(t *testing.T) {
	component := func(id bridge.JobID, offset, gpus int) bridge.Job {
		j := pending(id, tag)
		j.HetJobID, j.HetJobOffset, j.GPUs = 139, offset, gpus
		return j
	}
	set := settings()
	set.MinRunTime = 0
	tests := map[string]struct {
		nodes []bridge.Node
		jobs  []bridge.Job
		// heldBefore are components the daemon held before (a daemon
		// that managed them).
		heldBefore []string
		want       map[bridge.JobID]string
	}{
		"room for both components": {
			nodes: []bridge.Node{node("p1", "p100", 4, 0)},
			jobs:  []bridge.Job{component(139, 0, 1), component(140, 1, 2)},
			want:  map[bridge.JobID]string{139: "", 140: ""},
		},
		"room for one component": {
			nodes: []bridge.Node{node("p1", "p100", 2, 0)},
			jobs:  []bridge.Job{component(139, 0, 1), component(140, 1, 2)},
			want:  map[bridge.JobID]string{139: "", 140: ""},
		},
		"another user's job on the GPUs": {
			nodes: []bridge.Node{node("p1", "p100", 2, 2)},
			jobs:  []bridge.Job{component(139, 0, 1), component(140, 1, 1), running(5, tag+" preempt=checkpoint", "p1", "p100", 0)},
			want:  map[bridge.JobID]string{139: "", 140: "", 5: ""},
		},
		"a hold the daemon sent before": {
			nodes: []bridge.Node{node("p1", "p100", 4, 0)},
			jobs: []bridge.Job{func() bridge.Job {
				j := component(139, 0, 1)
				j.Held, j.Reason = true, "JobHeldAdmin"
				return j
			}(), component(140, 1, 2)},
			heldBefore: []string{"139"},
			want:       map[bridge.JobID]string{139: "release", 140: ""},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := newCore(t, set)
			records := map[string]Record{}
			for _, id := range tc.heldBefore {
				records[id] = Record{JobID: id, FirstSeen: epoch.Add(-time.Hour), HeldByDaemon: true}
			}
			c.Restore(records, 0)
			running := tc.jobs[len(tc.jobs)-1]
			if running.State == bridge.JobRunning {
				// Job 5 ran a round already.
				running.StartTime = epoch.Add(-time.Hour)
				tc.jobs[len(tc.jobs)-1] = running
			}
			res := step(c, snapshot(t, epoch, tc.nodes, tc.jobs...), epoch, c.Solve)
			for id, want := range tc.want {
				if got := actionsOf(res.Actions, id); got != want {
					t.Errorf("job %d: %q, want %q", id, got, want)
				}
			}
			for _, v := range res.View.Jobs {
				if v.Job.HetJobID != 0 && (v.Managed || !strings.Contains(v.Reason, "heterogeneous job (component")) {
					t.Errorf("job %d: managed %v, reason %q", v.Job.ID, v.Managed, v.Reason)
				}
			}
		})
	}
}
