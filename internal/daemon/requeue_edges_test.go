package daemon

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/bridge/fake"
	"github.com/gavel-slurm/gavel-slurm/internal/store"
)

// A crash between a preemption's requeue-hold and the daemon's own hold
// after it: Slurm shows the job pending and held, but by the
// requeue-hold's hold, which its owner may release. The daemon's hold
// never landed and must be resent, not taken as shown.
func TestReconcileResendsTheHoldAfterARequeueHold(t *testing.T) {
	tests := map[string]struct {
		reason string // the hold's reason Slurm shows
		want   Verdict
	}{
		"only the requeue-hold's hold": {reason: "JobHeldUser", want: VerdictResend},
		"the daemon's hold landed":     {reason: "JobHeldAdmin", want: VerdictDone},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			snap, err := bridge.NewSnapshot(epoch, "", nil, []bridge.Job{
				{ID: 3, State: bridge.JobPending, Held: true, Reason: tc.reason, Restarts: 2},
			})
			if err != nil {
				t.Fatal(err)
			}
			chain := []Action{
				{Action: bridge.Action{Kind: bridge.ActRequeueHold, Job: 3}, Restarts: 1},
				{Action: bridge.Action{Kind: bridge.ActHold, Job: 3}, Restarts: 1},
			}
			var pending []store.Entry
			for i, a := range chain {
				pending = append(pending, store.Entry{Seq: uint64(i + 1), Attempts: 1, State: store.Pending, Payload: mustJSON(t, a)})
			}
			got := Reconcile(pending, snap)
			if got[1].Verdict != tc.want {
				t.Errorf("hold after the requeue-hold, Slurm showing %s: verdict %s (%s), want %s",
					tc.reason, got[1].Verdict, got[1].Why, tc.want)
			}
		})
	}
}

// A requeue failed (access denied) and nothing has proven requeues since:
// when the job that waited for its requeue goes (its owner cancelled it)
// and the next check has nothing to test against, /healthz and status
// must still say that requeues fail.
func TestInconclusiveCheckAfterAFailedRequeueKeepsFailing(t *testing.T) {
	h := newCheckedHarness(t, nil, "a1:v100:1")
	first := h.submit(resnet, 1)
	h.d.RunRound(context.Background())
	h.startChosen()
	denied := errors.New("Access/permission denied")
	h.slurm.FailActions(fake.FailKind(bridge.ActRequeueHold, denied))
	h.submit(resnet, 1)
	for range 6 {
		h.clock.now = h.clock.now.Add(20 * time.Second)
		h.d.RunRound(context.Background())
		h.startChosen()
		if len(h.slurm.Signals(first)) > 0 {
			break
		}
	}
	if len(h.slurm.Signals(first)) == 0 {
		t.Fatal("job 1 was not preempted; the test needs it")
	}
	h.clock.now = h.clock.now.Add(10 * time.Minute)
	h.d.RunGraces(context.Background())
	if p := h.board.Status().Preemption; !p.Failing || len(p.Waiting) != 1 {
		t.Fatalf("after the failed requeue: %+v; want failing with job 1 waiting", p)
	}
	// Its owner cancels it; no pending, held job of another user is left
	// to probe.
	if err := h.slurm.Finish(first, bridge.JobCancelled); err != nil {
		t.Fatal(err)
	}
	h.checker.err = fmt.Errorf("requeue check: %w", bridge.ErrNoRequeueProbe)
	h.clock.now = h.clock.now.Add(time.Minute)
	h.d.RunRound(context.Background())
	p := h.board.Status().Preemption
	code, body := h.healthz()
	if !p.Failing || code != 503 {
		t.Errorf("after a failed requeue and an inconclusive check: status failing=%t (%q), healthz %d %q; "+
			"want failing and 503: no requeue has worked since", p.Failing, p.Reason, code, body)
	}
}
