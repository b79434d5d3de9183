//go:build integration

package daemon

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/siterules"
	"github.com/gavel-slurm/gavel-slurm/internal/slurmtest"
)

// Two users share two 4-GPU nodes, shares by user. One submits what users
// really submit: a job array, a job with a dependency on another of its
// jobs, and a heterogeneous job; the other three plain long jobs (the het
// job takes two GPUs; the rest is shared). No GPU stays idle while a
// managed job Slurm could start waits, the dependent job waits for Slurm
// (not chosen while it cannot start, and status says so), the het job is
// left to Slurm, and the other user keeps every job running: none is
// preempted for jobs that cannot start or for the array's tasks.
func TestTwoUsersWithArraysDependenciesAndHetJobs(t *testing.T) {
	env := slurmtest.FromEnv(t)
	part := ownPartition(t, env, "v100-1", "v100-2")
	const tag = "--comment=gavel: model=resnet50-bs64 steps=1k preempt=checkpoint"
	held := func(script string, args ...string) int {
		return submitHeld(t, env, script, append([]string{"--partition=" + part, "--output=/dev/null", tag}, args...)...)
	}
	var bos []int
	for range 3 {
		bos = append(bos, held(kindScript(env, scriptKinds["trap-wait"]), "--gres=gpu:1"))
	}
	array := held("#!/bin/sh\nsleep 10\n", append([]string{"--array=0-5", "--gres=gpu:1"}, bob...)...)
	first := held("#!/bin/sh\nsleep 60\n", append([]string{"--gres=gpu:1"}, bob...)...)
	dependent := held("#!/bin/sh\nsleep 5\n", append([]string{"--gres=gpu:1", "--dependency=afterok:" + itoa(first)}, bob...)...)
	het := env.Submit(t, "#!/bin/sh\nsleep 5\n", append(append([]string{"--partition=" + part, "--gres=gpu:1",
		"--output=/dev/null", tag}, bob...), ":", "--partition="+part, "--gres=gpu:1", tag)...)

	set := Settings{Policy: "max_min_fairness_perf", AdoptAdminHolds: true, Partitions: []string{part},
		Round: 10 * time.Second, DefaultGrace: 2 * time.Second, GraceSignal: "USR1", RefillPoll: 2 * time.Second,
		DefaultPreempt: bridge.PreemptCheckpoint, Rules: siterules.Rules{EntitiesFrom: siterules.EntitiesFromUser}}
	p := newInProcess(t, restClient(t, env, env.URL, part), set)
	runDaemon(t, p)

	observer := restClient(t, env, env.URL, part)
	var (
		started               time.Time
		idle                  idleWatch
		mostTasks             int
		bosFewest             = len(bos)
		dependentStartedEarly bool
		dependentWhy          string
		hetSeen, hetManaged   bool
	)
	watch(t, observer, 75*time.Second, func(snap *bridge.Snapshot) bool {
		tasks, bosRunning, busy := 0, 0, 0
		runnableWaits := false
		firstDone := false
		for _, j := range snap.Jobs {
			if j.ID == bridge.JobID(first) && !j.Active() {
				firstDone = true
			}
		}
		for _, j := range snap.Jobs {
			switch {
			case j.State == bridge.JobRunning && j.ArrayJobID == bridge.JobID(array):
				tasks++
			case j.State == bridge.JobRunning && j.User == env.UserName:
				bosRunning += j.GPUs
			case j.ID == bridge.JobID(dependent) && j.State == bridge.JobRunning && !firstDone:
				dependentStartedEarly = true
			}
			// A managed job Slurm could start that waits: not the het
			// job (left to Slurm), not one waiting for its dependency.
			if j.State == bridge.JobPending && j.HetJobID == 0 && !strings.Contains(j.Dependency, "unfulfilled") {
				runnableWaits = true
			}
		}
		busy = busyGPUs(snap)
		mostTasks = max(mostTasks, tasks)
		if busy > 0 && started.IsZero() {
			started = time.Now()
		}
		if started.IsZero() || time.Since(started) < 5*time.Second {
			return false
		}
		bosFewest = min(bosFewest, bosRunning)
		if st := p.board.Status(); st.Round.Number > 1 {
			for _, js := range st.Jobs {
				switch {
				case js.JobID == itoa(dependent) && !firstDone && dependentWhy == "":
					dependentWhy = js.Reason
				case js.JobID == itoa(het):
					hetSeen, hetManaged = true, hetManaged || js.Managed
				}
			}
		}
		idle.look(runnableWaits && busy < 8)
		return false
	})
	t.Logf("array: at most %d tasks at once; the other user ran %d of their %d jobs at the fewest; GPUs idle at most %.1f s while a runnable job waited; the dependent job, while it could not start: %q",
		mostTasks, bosFewest, len(bos), idle.longest.Seconds(), dependentWhy)
	if bosFewest < len(bos) {
		t.Errorf("the other user ran only %d of their %d jobs at some point: less than their share", bosFewest, len(bos))
	}
	if !strings.Contains(dependentWhy, "waits for Slurm: dependency") {
		t.Errorf("the dependent job's status while it could not start: %q; want it to wait for Slurm", dependentWhy)
	}
	// A job whose dependency just cleared has no share until the next
	// round computes one (the refill between rounds starts only jobs with
	// a share): GPUs may wait up to a round for it, never longer.
	if idle.longest > set.Round+set.RefillPoll {
		t.Errorf("GPUs stayed idle %.1f s while a job Slurm could start waited", idle.longest.Seconds())
	}
	if dependentStartedEarly {
		t.Errorf("job %d ran before the job it depends on ended", dependent)
	}
	for _, id := range bos {
		if j := env.Job(t, id); !j.HasState("RUNNING") || j.RestartCount != 0 {
			t.Errorf("the other user's job %d: %v, %d restarts; want it running on its share all along", id, j.State, j.RestartCount)
		}
	}
	if sig := signalsSent(p); len(sig) > 0 {
		for _, id := range bos {
			if sig[id] > 0 {
				t.Errorf("the other user's job %d was preempted although that user stays within their share", id)
			}
		}
	}
	if hetSeen && hetManaged {
		t.Errorf("the het job %d was managed; want it left to Slurm", het)
	}
	snap, err := observer.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range snap.Jobs {
		if j.HetJobID == bridge.JobID(het) && j.State == bridge.JobPending {
			t.Errorf("het job component %d is still pending (%s): Slurm should have started it on the GPUs left", j.ID, j.Reason)
		}
	}
}
