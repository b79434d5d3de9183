package daemon

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/store"
)

// The daemon crashes after journaling a preempted job's requeue and its
// restart on another type (requeue-hold, release, set-priority,
// begin-now, as Core.requeue journals them) but before sending any of
// them. At the restart, reconciliation resends the requeue-hold (the job
// still runs) and the actions after it, which the snapshot taken before
// that resend cannot judge (a running job is not held): the job is not
// left held.
func TestCrashBeforeSendingARequeueChainLeavesNoJobHeld(t *testing.T) {
	h := newHarness(t, t.TempDir(), "a1:v100:1")
	first, _ := h.preemptFirst()
	h.clock.now = h.clock.now.Add(5 * time.Second) // the grace period is over
	restarts := h.job(first).Restarts
	chain := []bridge.Action{
		{Kind: bridge.ActRequeueHold, Job: first},
		{Kind: bridge.ActRelease, Job: first},
		{Kind: bridge.ActSetPriority, Job: first, Priority: RunPriority},
		{Kind: bridge.ActBeginNow, Job: first},
	}
	specs := make([]store.IntentSpec, len(chain))
	for i, a := range chain {
		r := restarts + 1
		if i == 0 {
			r = restarts
		}
		specs[i] = store.IntentSpec{JobID: first.String(), Kind: string(a.Kind),
			Payload: Action{Action: a, Why: "grace period over", Restarts: r}}
	}
	if _, err := h.store.Intents(h.d.Core.Round(), specs, h.clock.now); err != nil {
		t.Fatal(err)
	}
	h.restart() // crashed before sending anything
	for range 4 {
		h.clock.now = h.clock.now.Add(20 * time.Second)
		h.d.RunRound(context.Background())
		h.d.RunGraces(context.Background())
		h.startChosen()
	}
	j := h.job(first)
	if j.State == bridge.JobPending && j.Held {
		t.Errorf("job %d is left held after the crash (status: %q); the daemon's requeue-hold was never released",
			first, findStatus(t, h.board.Status(), first).Reason)
	}
}

// One partial reply that leaves out a job in its grace period (too few
// missing jobs to be distrusted) does not forget the job and its
// preemption: when the job then exits after its checkpoint, as the grace
// signal asked, it is requeued.
func TestJobInGraceMissingFromOneReplyIsNotLost(t *testing.T) {
	set := settings()
	set.DefaultGrace = time.Minute
	h := newHarnessWith(t, set, t.TempDir(), "a1:v100:1")
	first, _ := h.preemptFirst()
	reads := 0
	h.slurm.HideJobs(func(int) []bridge.JobID {
		reads++
		if reads == 1 {
			return []bridge.JobID{first} // one partial answer
		}
		return nil
	})
	h.clock.now = h.clock.now.Add(20 * time.Second)
	h.d.RunRound(context.Background())
	// The script checkpointed and exited inside its grace period.
	if err := h.slurm.Finish(first, bridge.JobCompleted); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		h.clock.now = h.clock.now.Add(20 * time.Second)
		h.d.RunGraces(context.Background())
		h.d.RunRound(context.Background())
	}
	if j := h.job(first); lost(j) {
		t.Errorf("the preempted job ended %s with %d restarts: lost after one partial reply", j.State, j.Restarts)
	}
}

// The same partial reply, for a job waiting on the daemon's hold: when it
// shows again its hold is still the daemon's, and a round releases it.
func TestHeldJobMissingFromOneReplyIsReleasedLater(t *testing.T) {
	h := newHarness(t, t.TempDir(), "a1:v100:1")
	first, second := h.submit(resnet, 1), h.submit(resnet, 1)
	h.d.RunRound(context.Background())
	h.startChosen()
	waiting := second
	if h.job(first).Held {
		waiting = first
	}
	reads := 0
	h.slurm.HideJobs(func(int) []bridge.JobID {
		reads++
		if reads == 1 {
			return []bridge.JobID{waiting}
		}
		return nil
	})
	n := len(h.slurm.Applied())
	for range 6 {
		h.clock.now = h.clock.now.Add(20 * time.Second)
		h.d.RunRound(context.Background())
		for range 5 {
			h.clock.now = h.clock.now.Add(6 * time.Second)
			h.d.RunGraces(context.Background())
		}
		h.startChosen()
	}
	if got := kinds(h.slurm.Applied()[n:], waiting); !slices.Contains(got, "release") {
		t.Errorf("job %d never released after one partial reply (status %q, actions %v)",
			waiting, findStatus(t, h.board.Status(), waiting).Reason, got)
	}
}

// TestAFailedResendLeavesTheHoldTheDaemons: the same crash, but at the
// restart the resent requeue-hold lands and the resent release fails.
// The replay of the journal took that release for landed; reconciliation
// takes it back, so the job's hold is still the daemon's and a later
// round releases it.
func TestAFailedResendLeavesTheHoldTheDaemons(t *testing.T) {
	h := newHarness(t, t.TempDir(), "a1:v100:1")
	first, _ := h.preemptFirst()
	h.clock.now = h.clock.now.Add(5 * time.Second)
	restarts := h.job(first).Restarts
	chain := []bridge.Action{
		{Kind: bridge.ActRequeueHold, Job: first},
		{Kind: bridge.ActRelease, Job: first},
	}
	specs := make([]store.IntentSpec, len(chain))
	for i, a := range chain {
		specs[i] = store.IntentSpec{JobID: first.String(), Kind: string(a.Kind),
			Payload: Action{Action: a, Why: "grace period over", Restarts: restarts + min(i, 1)}}
	}
	if _, err := h.store.Intents(h.d.Core.Round(), specs, h.clock.now); err != nil {
		t.Fatal(err)
	}
	h.restart()
	failing := true
	h.slurm.FailActions(func(a bridge.Action) error {
		if failing && a.Kind == bridge.ActRelease && a.Job == first {
			return errors.New("slurmrestd: connection reset")
		}
		return nil
	})
	h.clock.now = h.clock.now.Add(20 * time.Second)
	h.d.RunRound(context.Background())
	if j := h.job(first); j.State != bridge.JobPending || !j.Held {
		t.Fatalf("after the restart's resends job %d is %s held=%v; the test needs the requeue landed and the release failed", first, j.State, j.Held)
	}
	if reason := findStatus(t, h.board.Status(), first).Reason; strings.Contains(reason, "held by user") {
		t.Errorf("job %d, held by the daemon's own requeue-hold, shows %q", first, reason)
	}
	failing = false
	for range 4 {
		h.clock.now = h.clock.now.Add(20 * time.Second)
		h.d.RunRound(context.Background())
		h.d.RunGraces(context.Background())
		h.startChosen()
	}
	if j := h.job(first); j.State == bridge.JobPending && j.Held {
		t.Errorf("job %d is still held after the failed resend (status %q)", first, findStatus(t, h.board.Status(), first).Reason)
	}
}
