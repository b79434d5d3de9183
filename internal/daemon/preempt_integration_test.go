//go:build integration

package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/slurmtest"
)

// scriptKinds are batch scripts as users write them, by what they do with
// the warning signal. Each logs "start" when it starts and "saved" when it
// gets the signal, in a log named after the job.
var scriptKinds = map[string]string{
	"no-trap":      `while true; do sleep 5; done`,
	"trap-wait":    `trap 'echo saved >>"$log"' USR1; while true; do sleep 1; done`,
	"trap-exit-0":  `trap 'echo saved >>"$log"; exit 0' USR1; while true; do sleep 1; done`,
	"trap-exit-1":  `trap 'echo saved >>"$log"; exit 1' USR1; while true; do sleep 1; done`,
	"self-requeue": `trap 'echo saved >>"$log"; scontrol requeue $SLURM_JOB_ID; sleep 30' USR1; while true; do sleep 1; done`,
	// Its work ends by itself a few seconds in.
	"ends-itself": `sleep 4; echo done >>"$log"; exit 0`,
}

func kindScript(env *slurmtest.Env, body string) string {
	return fmt.Sprintf("#!/bin/bash\nlog=%s/kinds-$SLURM_JOB_ID.log\necho start >>\"$log\"\n%s\n", env.SharedDirInJob, body)
}

// Twelve one-GPU jobs of every kind of script time-share eight GPUs of two
// types under short rounds, so that most are preempted, some more than
// once. No job the daemon preempted may end finished: each is pending or
// running again, requeued at most once per preemption, and a job that
// requeued itself is not requeued again by the daemon. A job the daemon
// never preempted that ended by itself stays COMPLETED.
func TestPreemptionLosesNoJobWhateverItsScriptDoes(t *testing.T) {
	env := slurmtest.FromEnv(t)
	part := ownPartition(t, env, "p100-2", "k80-1")
	kindOf := map[int]string{}
	for kind, body := range scriptKinds {
		for range 2 {
			id := submitHeld(t, env, kindScript(env, body), "--partition="+part, "--gres=gpu:1", "--output=/dev/null", `--comment=gavel: model="ResNet-50 (batch size 64)" steps=100000000`)
			kindOf[id] = kind
		}
	}
	// The grace period leaves a self-requeuing script time to requeue
	// itself on a loaded machine: bash runs the trap only after its
	// current sleep, and slurmrestd delivers the signal when it can. A
	// job still running when its grace period ends is requeued by the
	// daemon, rightly, and would count against it here.
	set := Settings{Policy: "max_min_fairness_perf", AdoptAdminHolds: true, Partitions: []string{part}, Round: 5 * time.Second,
		DefaultGrace: 6 * time.Second, GraceSignal: "USR1", DefaultPreempt: bridge.PreemptCheckpoint}
	p := newInProcess(t, restClient(t, env, env.URL, part), set)
	p.run(t, 50*time.Second)
	// Let the grace periods that are still running end, without new
	// rounds, as the daemon would between rounds.
	for range 10 {
		time.Sleep(time.Second)
		p.d.RunGraces(context.Background())
	}

	signals, requeues := map[int]int{}, map[int]int{}
	for _, a := range p.slurm.sent {
		switch a.Kind {
		case bridge.ActSignal:
			signals[int(a.Job)]++
		case bridge.ActRequeueHold, bridge.ActRequeue:
			requeues[int(a.Job)]++
		}
	}
	preemptedKinds := map[string]bool{}
	for id, kind := range kindOf {
		j := env.Job(t, id)
		log, _ := os.ReadFile(filepath.Join(env.SharedDir, fmt.Sprintf("kinds-%d.log", id)))
		t.Logf("job %d (%s): %v, %d restarts, %d signals, %d daemon requeues; log %q",
			id, kind, j.State, j.RestartCount, signals[id], requeues[id], strings.ReplaceAll(string(log), "\n", " "))
		if signals[id] == 0 {
			if kind == "ends-itself" && !j.HasState("COMPLETED") && !j.HasState("RUNNING") && !j.HasState("PENDING") {
				t.Errorf("job %d ended by itself but is %v", id, j.State)
			}
			continue
		}
		preemptedKinds[kind] = true
		lines := strings.Fields(string(log))
		// Preempted earlier, requeued, and its last run ended by itself:
		// finished, as it should be.
		finishedByItself := kind == "ends-itself" && j.HasState("COMPLETED") && len(lines) > 0 && lines[len(lines)-1] == "done"
		if !finishedByItself && !j.HasState("PENDING") && !j.HasState("RUNNING") {
			t.Errorf("job %d (%s) was preempted and is now %v: lost", id, kind, j.State)
		}
		if j.RestartCount < 1 || j.RestartCount > signals[id] {
			t.Errorf("job %d (%s): %d restarts after %d preemptions", id, kind, j.RestartCount, signals[id])
		}
		if requeues[id] > signals[id] {
			t.Errorf("job %d (%s): %d requeues for %d grace signals", id, kind, requeues[id], signals[id])
		}
		if kind == "self-requeue" && requeues[id] > 0 {
			t.Errorf("job %d requeued itself but the daemon requeued it %d more times", id, requeues[id])
		}
	}
	for kind := range scriptKinds {
		if kind != "ends-itself" && !preemptedKinds[kind] {
			t.Errorf("no %s job was preempted: the test did not exercise it", kind)
		}
	}
	for _, js := range p.board.Status().Jobs {
		if js.Managed && js.Preempt != string(bridge.PreemptCheckpoint) {
			t.Errorf("job %s shows preemption mode %q, want checkpoint", js.JobID, js.Preempt)
		}
	}
}

// Jobs that cannot be preempted (their tag, or the site default) hold their
// GPUs against waiting jobs: never signalled, never requeued, and status
// says why the waiting ones wait.
func TestJobsThatCannotBePreemptedAreNeverStopped(t *testing.T) {
	env := slurmtest.FromEnv(t)
	part := ownPartition(t, env, "k80-2")
	var never, waiting []int
	for i := range 4 {
		tag := "--comment=gavel: model=a3c steps=100000000"
		if i%2 == 0 {
			tag += " preempt=never" // the others get the site default, never
		}
		never = append(never, submitHeld(t, env, kindScript(env, scriptKinds["trap-wait"]), "--partition="+part,
			"--gres=gpu:1", "--output=/dev/null", tag))
	}
	for range 2 {
		waiting = append(waiting, submitHeld(t, env, kindScript(env, scriptKinds["trap-wait"]), "--partition="+part,
			"--gres=gpu:1", "--output=/dev/null", "--comment=gavel: model=a3c steps=100000000 preempt=checkpoint"))
	}
	set := Settings{Policy: "max_min_fairness_perf", AdoptAdminHolds: true, Partitions: []string{part}, Round: 4 * time.Second,
		DefaultGrace: time.Second, GraceSignal: "USR1"}
	p := newInProcess(t, restClient(t, env, env.URL, part), set)
	// Jobs that may be preempted give way over the rounds; once the four
	// that cannot be are running, nothing moves them.
	p.run(t, 30*time.Second)
	stopped := map[int]bool{}
	for _, a := range p.slurm.sent {
		if a.Kind == bridge.ActSignal || a.Kind == bridge.ActRequeueHold || a.Kind == bridge.ActRequeue {
			stopped[int(a.Job)] = true
		}
	}
	st := p.board.Status()
	running := 0
	for _, id := range append(never, waiting...) {
		j := env.Job(t, id)
		js := findJob(t, st, id)
		t.Logf("job %d: %v, %d restarts, mode %s: %s", id, j.State, j.RestartCount, js.Preempt, js.Reason)
		if j.HasState("RUNNING") {
			running++
		}
		isNever := js.Preempt == string(bridge.PreemptNever)
		if isNever && (stopped[id] || j.RestartCount != 0) {
			t.Errorf("job %d cannot be preempted but was stopped (%d restarts)", id, j.RestartCount)
		}
		if isNever && j.HasState("RUNNING") && !strings.Contains(js.Reason, "cannot be preempted") {
			t.Errorf("job %d: reason %q does not say it cannot be preempted", id, js.Reason)
		}
	}
	if running != 4 {
		t.Errorf("%d jobs running on the 4 GPUs", running)
	}
	for _, id := range never {
		if js := findJob(t, st, id); js.Preempt != string(bridge.PreemptNever) {
			t.Errorf("job %d: mode %q, want never (tag or site default)", id, js.Preempt)
		}
	}
}
