package daemon

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/store"
)

// A requeue-hold sent at the end of a grace period gets no answer (a
// timeout). Whether it landed or not, the job is neither lost nor left
// held for ever: its journal entry stays pending, the next read finds
// the requeue in Slurm (and keeps the hold the daemon's) or sends it
// again, and the job runs again when the rounds give it its turn.
func TestARequeueWithoutAnAnswerIsReconciled(t *testing.T) {
	tests := map[string]struct {
		landed bool
	}{
		"landed":     {landed: true},
		"not landed": {landed: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, t.TempDir(), "a1:v100:1")
			first, _ := h.preemptFirst()
			lostOnce := true
			h.slurm.LoseReplies(func(a bridge.Action) (lost, landed bool) {
				if lostOnce && a.Job == first && a.Kind == bridge.ActRequeueHold {
					lostOnce = false
					return true, tc.landed
				}
				return false, true
			})
			// The grace period ends; the look between rounds requeues.
			h.clock.now = h.clock.now.Add(10 * time.Second)
			h.d.RunGraces(context.Background())
			if lostOnce {
				t.Fatal("no requeue-hold was sent for the job whose grace period ended; the test needs one")
			}
			pending, _, err := h.store.Pending()
			if err != nil {
				t.Fatal(err)
			}
			if !hasPendingKind(pending, first, bridge.ActRequeueHold) {
				t.Fatalf("the requeue-hold without an answer is not pending in the journal: %+v", pending)
			}
			// The next look reconciles it against a full read.
			h.clock.now = h.clock.now.Add(2 * time.Second)
			h.d.RunGraces(context.Background())
			if j := h.job(first); j.State != bridge.JobPending || !j.Held {
				t.Fatalf("after reconciliation job %d is %s held=%v, want requeued and held", first, j.State, j.Held)
			}
			if reason := findStatus(t, h.board.Status(), first).Reason; strings.Contains(reason, "held by user") {
				t.Errorf("job %d, held by the daemon's own requeue-hold, shows %q", first, reason)
			}
			ranAgain := false
			for range 12 {
				h.clock.now = h.clock.now.Add(20 * time.Second)
				h.d.RunRound(context.Background())
				h.d.RunGraces(context.Background())
				h.startChosen()
				if h.job(first).State == bridge.JobRunning {
					ranAgain = true
					break
				}
			}
			if !ranAgain {
				j := h.job(first)
				t.Errorf("job %d never ran again after its unanswered requeue: %s held=%v (status %q)",
					first, j.State, j.Held, findStatus(t, h.board.Status(), first).Reason)
			}
			if pending, _, _ := h.store.Pending(); len(pending) > 0 {
				t.Errorf("journal entries still pending at the end: %+v", pending)
			}
		})
	}
}

func hasPendingKind(entries []store.Entry, job bridge.JobID, kind bridge.ActionKind) bool {
	for _, e := range entries {
		if e.JobID == job.String() && e.Kind == string(kind) {
			return true
		}
	}
	return false
}

// Slurm goes away while a round's actions are out: their answers are
// lost and the next reads fail. The rounds send nothing, say that the
// snapshot failed (as any outage does) and that actions wait; once Slurm
// answers again, the first round reconciles them and goes on.
func TestAnOutageWithActionsOutWaitsThenReconciles(t *testing.T) {
	h := newHarness(t, t.TempDir(), "a1:v100:1")
	for range 3 {
		h.submit(resnet, 1)
	}
	h.slurm.LoseReplies(func(bridge.Action) (lost, landed bool) { return true, false })
	h.d.RunRound(context.Background())
	if pending, _, _ := h.store.Pending(); len(pending) == 0 {
		t.Fatal("no action without an answer is pending; the test needs some")
	}
	h.slurm.FailSnapshot(errors.New("connection refused"))
	h.clock.now = h.clock.now.Add(20 * time.Second)
	h.d.RunRound(context.Background())
	if skipped := h.board.Status().Round.Skipped; !strings.Contains(skipped, "snapshot failed") || !strings.Contains(skipped, "without an answer") {
		t.Errorf("round during the outage: skipped=%q, want the failed snapshot and the actions waiting", skipped)
	}
	h.slurm.FailSnapshot(nil)
	h.slurm.LoseReplies(nil)
	h.clock.now = h.clock.now.Add(20 * time.Second)
	h.d.RunRound(context.Background())
	if skipped := h.board.Status().Round.Skipped; skipped != "" {
		t.Errorf("first round after the outage skipped: %q", skipped)
	}
	if pending, _, _ := h.store.Pending(); len(pending) > 0 {
		t.Errorf("journal entries still pending after the outage: %+v", pending)
	}
}
