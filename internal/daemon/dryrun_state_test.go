package daemon

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// A dry run preempts nothing: a real run started on the same state
// afterwards (a restart, or a SIGHUP that turns scheduler.dry_run off)
// must not requeue a job whose grace signal was never sent.
func TestDryRunGracePeriodIsNotRequeuedByARealRun(t *testing.T) {
	h := newHarness(t, t.TempDir(), "a1:v100:1")
	h.dryRun = true
	h.restart()
	first := h.submit(resnet, 1)
	if err := h.slurm.Start(first, "a1"); err != nil { // Slurm starts it: the dry run holds nothing
		t.Fatal(err)
	}
	h.submit(resnet, 1)
	inGrace := false
	for range 4 {
		h.d.RunRound(context.Background())
		if findStatus(t, h.board.Status(), first).Grace != "" {
			inGrace = true
			break
		}
		h.clock.now = h.clock.now.Add(20 * time.Second)
	}
	if !inGrace {
		t.Fatal("the dry run did not decide to preempt the first job")
	}
	if n := len(h.slurm.Applied()); n != 0 {
		t.Fatalf("dry run applied %d actions", n)
	}
	// The operator turns the dry run off.
	h.dryRun = false
	h.restart()
	h.clock.now = h.clock.now.Add(6 * time.Second) // the dry "grace period" is over
	h.d.RunGraces(context.Background())
	signalled := false
	for _, a := range h.slurm.Applied() {
		if a.Job != first {
			continue
		}
		if a.Kind == bridge.ActSignal {
			signalled = true
		}
		if (a.Kind == bridge.ActRequeueHold || a.Kind == bridge.ActRequeue) && !signalled {
			t.Fatalf("the real run requeued job %d without ever sending its grace signal (the dry run's preemption was replayed): %v",
				first, kinds(h.slurm.Applied(), first))
		}
	}
}

// A dry run holds nothing: a hold its user puts on a job afterwards is the
// user's, and a real run on the same state must not release it.
func TestDryRunHoldIsNotTakenForTheDaemonsByARealRun(t *testing.T) {
	h := newHarness(t, t.TempDir(), "a1:v100:1")
	h.dryRun = true
	h.restart()
	a, b := h.submit(resnet, 1), h.submit(resnet, 1)
	h.d.RunRound(context.Background())
	var waiting bridge.JobID
	for _, id := range []bridge.JobID{a, b} {
		if findStatus(t, h.board.Status(), id).Decision == "wait" {
			waiting = id
		}
	}
	if waiting == 0 {
		t.Fatal("the dry run held neither job")
	}
	if h.job(waiting).Held {
		t.Fatal("the dry run held a job in Slurm")
	}
	// Its user holds it (scontrol hold), then the dry run is turned off.
	if err := h.slurm.Apply(context.Background(), bridge.Action{Kind: bridge.ActHold, Job: waiting}); err != nil {
		t.Fatal(err)
	}
	n := len(h.slurm.Applied())
	h.dryRun = false
	h.restart()
	for range 4 {
		h.clock.now = h.clock.now.Add(20 * time.Second)
		h.d.RunRound(context.Background())
		h.startChosen()
	}
	for _, act := range h.slurm.Applied()[n:] {
		if act.Job == waiting && act.Kind == bridge.ActRelease {
			t.Fatalf("the real run released job %d's user hold, taking it for the dry run's: %v", waiting, kinds(h.slurm.Applied()[n:], waiting))
		}
	}
}

// The other way round: a real run held a job, then a dry run (SIGHUP with
// scheduler.dry_run on) "released" it; back to a real run, the hold Slurm
// still shows is the daemon's and must not be taken for its user's.
func TestHoldSentBeforeADryRunIsStillTheDaemonsAfterIt(t *testing.T) {
	h := newHarness(t, t.TempDir(), "a1:v100:1")
	a, b := h.submit(resnet, 1), h.submit(resnet, 1)
	h.d.RunRound(context.Background())
	h.startChosen()
	var waiting bridge.JobID
	for _, id := range []bridge.JobID{a, b} {
		if h.job(id).Held {
			waiting = id
		}
	}
	if waiting == 0 {
		t.Fatal("the real round held neither job")
	}
	h.dryRun = true
	h.restart()
	dryReleased := false
	for range 6 {
		h.clock.now = h.clock.now.Add(20 * time.Second)
		h.d.RunRound(context.Background())
		h.d.RunGraces(context.Background())
		if findStatus(t, h.board.Status(), waiting).Decision == "run" {
			dryReleased = true
			break
		}
	}
	if !dryReleased {
		t.Fatal("the dry run never released the waiting job")
	}
	if !h.job(waiting).Held {
		t.Fatal("the dry run released a job in Slurm")
	}
	h.dryRun = false
	h.restart()
	n := len(h.slurm.Applied())
	for range 6 {
		h.clock.now = h.clock.now.Add(20 * time.Second)
		h.d.RunRound(context.Background())
		h.d.RunGraces(context.Background())
		h.startChosen()
	}
	if got := kinds(h.slurm.Applied()[n:], waiting); !slices.Contains(got, "release") {
		reason := findStatus(t, h.board.Status(), waiting).Reason
		t.Fatalf("job %d: the daemon's own hold is never released after the dry run (status %q, actions %v)", waiting, reason, got)
	}
}
