//go:build integration

package rest

import (
	"context"
	"os"
	"slices"
	"testing"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// A batch of each bulk kind against the real Slurm, through every API
// version slurmrestd offers: signals in one DELETE /jobs, requeue-holds
// as one list (POST /jobs/requeue on v0.0.45, scontrol before), then
// constraint, release and begin-now lists on the requeued jobs; and a
// look answered from job states alone matches the full read.
func TestIntegrationBulkActionsAndLooks(t *testing.T) {
	for _, version := range offeredVersions(t) {
		t.Run(version, func(t *testing.T) {
			c := integrationClientWith(t, func(cfg *Config) { cfg.Scontrol = os.Getenv("SCONTROL") }, version)
			// Both on v100 and moved to k80, as a round moves jobs: Slurm
			// 24.11 kills a requeued job restarted at once on its old node
			// ("Job credential revoked").
			a, b := submit(t, "--gres=gpu:1", "--constraint=v100"), submit(t, "--gres=gpu:1", "--constraint=v100")
			for _, id := range []bridge.JobID{a, b} {
				waitJob(t, c, id, "running", func(j bridge.Job) bool { return j.State == bridge.JobRunning })
			}
			steps := [][]bridge.Action{
				{{Kind: bridge.ActSignal, Job: a, Signal: "CONT"}, {Kind: bridge.ActSignal, Job: b, Signal: "CONT"}},
				{{Kind: bridge.ActRequeueHold, Job: a}, {Kind: bridge.ActRequeueHold, Job: b}},
				{{Kind: bridge.ActSetConstraints, Job: a, Constraints: "k80"}, {Kind: bridge.ActSetConstraints, Job: b, Constraints: "k80"}},
			}
			for _, step := range steps {
				for i, err := range c.ApplyBatch(context.Background(), step) {
					if err != nil {
						t.Fatalf("%s: %v", step[i], err)
					}
				}
			}
			// Slurm sets the requeue delay when the job's completion ends,
			// over any begin time set before, so begin-now waits for that
			// (as the daemon's look does).
			for _, id := range []bridge.JobID{a, b} {
				j := waitJob(t, c, id, "requeued, completed and held with constraint k80", func(j bridge.Job) bool {
					return j.State == bridge.JobPending && j.Held && j.Constraints == "k80" && !slices.Contains(j.StateFlags, "COMPLETING")
				})
				if j.Restarts < 1 {
					t.Errorf("job %s: %d restarts after its requeue", id, j.Restarts)
				}
			}
			full, err := c.Snapshot(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			look, err := c.Snapshot(bridge.AsLook(context.Background()))
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range []bridge.JobID{a, b} {
				fj, _ := full.Job(id)
				lj, ok := look.Job(id)
				if !ok || lj.State != fj.State || lj.Held != fj.Held || lj.Constraints != fj.Constraints {
					t.Errorf("job %s: look shows %+v, full read %+v", id, lj, fj)
				}
			}
			for i, err := range c.ApplyBatch(context.Background(), []bridge.Action{
				{Kind: bridge.ActRelease, Job: a}, {Kind: bridge.ActRelease, Job: b},
			}) {
				if err != nil {
					t.Errorf("release %d: %v", i, err)
				}
			}
			for i, err := range c.ApplyBatch(context.Background(), []bridge.Action{
				{Kind: bridge.ActBeginNow, Job: a}, {Kind: bridge.ActBeginNow, Job: b},
			}) {
				if err != nil {
					t.Errorf("begin-now %d: %v", i, err)
				}
			}
			for _, id := range []bridge.JobID{a, b} {
				waitJob(t, c, id, "running again", func(j bridge.Job) bool { return j.State == bridge.JobRunning })
			}
		})
	}
}

// A pending job's constraint, priority and begin time go to slurmctld as
// one update, through scontrol and through slurmrestd alike, and the job
// starts where the constraint sends it, at that priority.
func TestIntegrationUpdatesShareOneRequest(t *testing.T) {
	paths := map[string]string{"scontrol": os.Getenv("SCONTROL"), "slurmrestd": "/nonexistent/scontrol"}
	for _, version := range offeredVersions(t) {
		for path, scontrol := range paths {
			t.Run(version+"/"+path, func(t *testing.T) {
				c := integrationClientWith(t, func(cfg *Config) { cfg.Scontrol = scontrol }, version)
				id := submit(t, "--gres=gpu:1", "--constraint=v100", "--begin=now+1hour")
				waitJob(t, c, id, "pending until its begin time", func(j bridge.Job) bool {
					return j.State == bridge.JobPending && j.Reason == "BeginTime"
				})
				request := []bridge.Action{
					{Kind: bridge.ActSetConstraints, Job: id, Constraints: "k80"},
					{Kind: bridge.ActSetPriority, Job: id, Priority: 4242},
					{Kind: bridge.ActBeginNow, Job: id},
				}
				if got := bridge.Requests(request); len(got) != 1 {
					t.Fatalf("requests %v, want one", got)
				}
				for i, err := range c.ApplyBatch(context.Background(), request) {
					if err != nil {
						t.Fatalf("%s: %v", request[i], err)
					}
				}
				j := waitJob(t, c, id, "running", func(j bridge.Job) bool { return j.State == bridge.JobRunning })
				if j.RunningGPUType != "k80" || j.Priority != 4242 {
					t.Errorf("job runs on %q at priority %d, want k80 at 4242", j.RunningGPUType, j.Priority)
				}
			})
		}
	}
}
