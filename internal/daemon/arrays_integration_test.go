//go:build integration

package daemon

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/siterules"
	"github.com/gavel-slurm/gavel-slurm/internal/slurmtest"
)

// runDaemon runs p's loop until the test ends.
func runDaemon(t *testing.T, p *inProcess) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("daemon: %v", err)
		}
	})
}

// watch calls look with a fresh snapshot every half second until it
// returns true or timeout passes; false at the timeout.
func watch(t *testing.T, slurm bridge.Reader, timeout time.Duration, look func(*bridge.Snapshot) bool) bool {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		snap, err := slurm.Snapshot(context.Background())
		if err != nil {
			t.Logf("snapshot: %v", err)
		} else if look(snap) {
			return true
		}
		time.Sleep(500 * time.Millisecond)
	}
	return false
}

// One user's array of 8 one-GPU tasks beside another user's two jobs on
// a 4-GPU partition, shares by user: the array's user is owed 2 GPUs.
// Released whole (as before), Slurm started every task that fit and the
// array held the partition. Now the array never runs more tasks than the
// policy gives its user, its tasks follow one another on those GPUs as
// they end, and no GPU stays idle while a task waits.
func TestJobArrayRunsOnlyItsShare(t *testing.T) {
	env := slurmtest.FromEnv(t)
	part := ownPartition(t, env, "p100-1")
	const tag = "--comment=gavel: model=resnet50-bs64 steps=1k"
	// An administrator's hold keeps every job pending until the daemon's
	// first round adopts it and makes the ones it chooses eligible:
	// Slurm starts nothing alone.
	var others []int
	for range 2 {
		others = append(others, submitHeld(t, env, "#!/bin/sh\nsleep 600\n", "--partition="+part, "--gres=gpu:1",
			"--output=/dev/null", tag))
	}
	array := submitHeld(t, env, "#!/bin/sh\nsleep 8\n", append([]string{"--partition=" + part, "--array=0-7",
		"--gres=gpu:1", "--output=/dev/null", tag}, bob...)...)

	set := Settings{Policy: "max_min_fairness_water_filling_perf", AdoptAdminHolds: true, Partitions: []string{part}, Round: 20 * time.Second,
		DefaultGrace: time.Second, GraceSignal: "USR1", RefillPoll: 2 * time.Second,
		Rules: siterules.Rules{EntitiesFrom: siterules.EntitiesFromUser}}
	p := newInProcess(t, restClient(t, env, env.URL, part), set)
	runDaemon(t, p)

	observer := restClient(t, env, env.URL, part)
	const share = 2 // 4 GPUs, two users
	var (
		most, finished    int
		idle              idleWatch
		started           time.Time
		limits            = map[int]bool{}
		releasedUnlimited bool
	)
	allDone := watch(t, observer, 150*time.Second, func(snap *bridge.Snapshot) bool {
		running, waiting, busy := 0, false, 0
		finished = 0
		for _, j := range snap.Jobs {
			if j.ArrayJobID != bridge.JobID(array) {
				if j.State == bridge.JobPending {
					waiting = true
				}
				continue
			}
			switch {
			case j.State == bridge.JobRunning:
				running++
			case j.State == bridge.JobCompleted:
				finished++
			case j.HoldsArrayTasks() && j.State == bridge.JobPending:
				waiting = true
				if !j.Held && j.Priority >= RunPriority { // released by the daemon
					limits[j.ArrayLimit] = true
					if j.ArrayLimit == 0 && !releasedUnlimited {
						releasedUnlimited = true
						t.Logf("array record released without a limit: tasks %s, reason %s, priority %d, round %d",
							j.ArrayTasks, j.Reason, j.Priority, p.board.Status().Round.Number)
					}
				}
			case j.State == bridge.JobPending:
				waiting = true
			}
		}
		busy = busyGPUs(snap)
		most = max(most, running)
		if running > 0 && started.IsZero() {
			started = time.Now()
		}
		// Every GPU busy while a job waits, once the first round's jobs
		// had a moment to start.
		idle.look(!started.IsZero() && time.Since(started) > 3*time.Second && waiting && busy < 4)
		return finished == 8
	})
	t.Logf("array %d: at most %d tasks at once, %d of 8 finished, limits set %v; GPUs idle at most %.1f s while a job waited",
		array, most, finished, limits, idle.longest.Seconds())
	if most > share {
		t.Errorf("the array ran %d tasks at once; its user's share is %d GPUs", most, share)
	}
	if most == 0 || !allDone {
		t.Errorf("the array finished %d of its 8 tasks (at most %d at once)", finished, most)
	}
	if releasedUnlimited {
		t.Error("the array's record was released without a limit: Slurm could start every task")
	}
	if idle.longest > 6*time.Second {
		t.Errorf("GPUs stayed idle %.1f s while a job waited", idle.longest.Seconds())
	}
	for _, id := range others {
		if j := env.Job(t, id); !j.HasState("RUNNING") || j.RestartCount != 0 {
			t.Errorf("the other user's job %d: %v, %d restarts; want it running all along", id, j.State, j.RestartCount)
		}
	}
}

// A heterogeneous job of one user beside another user's jobs that may be
// preempted: the daemon leaves it to Slurm, with the reason in status. It
// never holds a component (as it did, while choosing the other one),
// never preempts for it, and Slurm starts it as soon as its components
// fit, so the GPUs freed do not sit idle.
func TestHetJobIsLeftToSlurm(t *testing.T) {
	env := slurmtest.FromEnv(t)
	// Slurm places a heterogeneous job's components on distinct nodes.
	part := ownPartition(t, env, "p100-1", "p100-2")
	const tag = "--comment=gavel: model=resnet50-bs64 steps=1k preempt=checkpoint"
	long := env.Submit(t, "#!/bin/sh\nsleep 600\n", "--partition="+part, "--gres=gpu:3", "--output=/dev/null", tag)
	env.WaitState(t, long, "RUNNING", 30*time.Second)
	short := env.Submit(t, "#!/bin/sh\nsleep 15\n", "--partition="+part, "--gres=gpu:4", "--output=/dev/null", tag)
	env.WaitState(t, short, "RUNNING", 30*time.Second)
	// Two components of one GPU each, on two nodes: one node is full
	// until the short job ends, so it waits.
	het := env.Submit(t, "#!/bin/sh\nsleep 600\n", append(append([]string{"--partition=" + part, "--gres=gpu:1",
		"--output=/dev/null", tag}, bob...), ":", "--partition="+part, "--gres=gpu:1", tag)...)

	set := Settings{Policy: "max_min_fairness_perf", Partitions: []string{part}, Round: 5 * time.Second,
		DefaultPreempt: bridge.PreemptCheckpoint, DefaultGrace: time.Second, GraceSignal: "USR1", RefillPoll: 2 * time.Second}
	p := newInProcess(t, restClient(t, env, env.URL, part), set)
	runDaemon(t, p)

	observer := restClient(t, env, env.URL, part)
	var (
		heldComponent string
		shortEnded    time.Time
		hetRunning    time.Time
	)
	watch(t, observer, 60*time.Second, func(snap *bridge.Snapshot) bool {
		parts := 0
		for _, j := range snap.Jobs {
			switch {
			case j.HetJobID == bridge.JobID(het):
				parts++
				if j.Held && heldComponent == "" {
					heldComponent = j.ID.String() + " (" + j.Reason + ")"
				}
				if j.State == bridge.JobRunning && hetRunning.IsZero() {
					hetRunning = time.Now()
				}
			case j.ID == bridge.JobID(short) && !j.Active() && shortEnded.IsZero():
				shortEnded = time.Now()
			}
		}
		if parts != 2 {
			t.Fatalf("heterogeneous job %d shows %d components", het, parts)
		}
		return !hetRunning.IsZero()
	})
	if heldComponent != "" {
		t.Errorf("component %s of the heterogeneous job was held", heldComponent)
	}
	switch {
	case hetRunning.IsZero():
		t.Errorf("the heterogeneous job never started (short job ended at %v)", shortEnded)
	case shortEnded.IsZero() || hetRunning.Before(shortEnded):
		t.Errorf("the heterogeneous job started before the short job ended: another job was preempted for it")
	case hetRunning.Sub(shortEnded) > 6*time.Second:
		t.Errorf("the heterogeneous job started %.1f s after the GPUs it needs were freed", hetRunning.Sub(shortEnded).Seconds())
	}
	if j := env.Job(t, short); !j.HasState("COMPLETED") || j.RestartCount != 0 {
		t.Errorf("the short job: %v, %d restarts; want it to run to its end", j.State, j.RestartCount)
	}
	if j := env.Job(t, long); !j.HasState("RUNNING") || j.RestartCount != 0 {
		t.Errorf("the long job: %v, %d restarts; want it left running", j.State, j.RestartCount)
	}
	st := p.board.Status()
	for _, js := range st.Jobs {
		if js.JobID == itoa(het) && (js.Managed || !strings.Contains(js.Reason, "heterogeneous job")) {
			t.Errorf("status of the heterogeneous job: managed %v, %q", js.Managed, js.Reason)
		}
	}
}

// Slurm's last task of an array takes over the array's id, and scontrol,
// like slurmrestd's signal, reads that id as the whole array. A signal or
// a requeue the daemon sends that task (a preemption) reaches it alone,
// named ARRAY_TASK, never the array's other running tasks.
func TestArrayTaskIsSignalledAndRequeuedAlone(t *testing.T) {
	env := slurmtest.FromEnv(t)
	part := ownPartition(t, env, "p100-1")
	marker := fmt.Sprintf("%s/alone-%d", env.SharedDirInJob, time.Now().UnixNano())
	script := "#!/bin/bash\ntrap 'echo got >> " + marker + "-$SLURM_ARRAY_TASK_ID' USR1\nwhile true; do sleep 0.2; done\n"
	array := env.Submit(t, script, "--partition="+part, "--array=0-1", "--gres=gpu:1", "--output=/dev/null")
	t.Cleanup(func() {
		for _, task := range []string{"0", "1"} {
			_ = os.Remove(env.HostPath(marker + "-" + task))
		}
	})
	c := restClient(t, env, env.URL, part)
	var last, first bridge.Job // the task on the array's id, the other
	if !watch(t, c, 30*time.Second, func(snap *bridge.Snapshot) bool {
		running := 0
		for _, j := range snap.Jobs {
			if j.ArrayJobID == bridge.JobID(array) && j.State == bridge.JobRunning {
				running++
				if j.ID == bridge.JobID(array) {
					last = j
				} else {
					first = j
				}
			}
		}
		return running == 2 && last.ID != 0 && first.ID != 0
	}) {
		t.Fatal("the array's two tasks never ran at once")
	}
	time.Sleep(time.Second) // let the scripts install their traps
	ctx := context.Background()
	if err := c.Apply(ctx, bridge.Action{Kind: bridge.ActSignal, Job: last.ID, Signal: "USR1"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	got := func(task uint32) bool {
		_, err := os.Stat(env.HostPath(fmt.Sprintf("%s-%d", marker, task)))
		return err == nil
	}
	if !got(last.ArrayTaskID) || got(first.ArrayTaskID) {
		t.Errorf("signal to job %d (task %d): task %d got it %v, task %d got it %v; want the one task alone",
			last.ID, last.ArrayTaskID, last.ArrayTaskID, got(last.ArrayTaskID), first.ArrayTaskID, got(first.ArrayTaskID))
	}
	if err := c.Apply(ctx, bridge.Action{Kind: bridge.ActRequeueHold, Job: last.ID}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	// slurmrestd's GET of the array's id answers with every task: the
	// snapshot tells them apart.
	snap, err := c.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if j, _ := snap.Job(last.ID); j.State != bridge.JobPending || !j.Held {
		t.Errorf("task %d after its requeue: %s, held %v", last.ArrayTaskID, j.State, j.Held)
	}
	if j, _ := snap.Job(first.ID); j.State != bridge.JobRunning || j.Restarts != 0 {
		t.Errorf("the array's other task after the requeue of task %d: %s, %d restarts; want it left running",
			last.ArrayTaskID, j.State, j.Restarts)
	}
}
