package daemon

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/store"
)

// After a crash that left journal entries pending, the first rounds may
// find Slurm unreadable. They step nothing: the journal's leftovers are
// reconciled first, once Slurm answers, and only then does a round build
// on them. (Stepping before would make the replay a proposal from an older
// state, which could no longer be committed.)
func TestRoundsWaitForTheJournalsLeftoversAfterARestart(t *testing.T) {
	h := newHarness(t, t.TempDir(), "a1:v100:1")
	first, second := h.submit(resnet, 1), h.submit(resnet, 1)
	h.d.RunRound(context.Background())
	if !h.job(second).Held {
		t.Fatal("round 1 should hold the second job")
	}
	// The crash: a hold of the first job was journaled, never settled.
	hold := Action{Action: bridge.Action{Kind: bridge.ActHold, Job: first}, Why: "test"}
	if _, err := h.store.Intents(2, []store.IntentSpec{{JobID: first.String(), Kind: string(hold.Kind), Payload: hold}}, h.clock.now); err != nil {
		t.Fatal(err)
	}
	h.restart()
	h.slurm.FailSnapshot(errors.New("slurmrestd down"))
	for range 2 {
		h.clock.now = h.clock.now.Add(20 * time.Second)
		if rep := h.d.RunRound(context.Background()); rep.Skipped == "" || rep.Actions != 0 {
			t.Fatalf("round without Slurm: skipped %q, %d actions", rep.Skipped, rep.Actions)
		}
		h.d.RunGraces(context.Background())
	}
	h.slurm.FailSnapshot(nil)
	h.clock.now = h.clock.now.Add(20 * time.Second)
	if rep := h.d.RunRound(context.Background()); rep.Skipped != "" || rep.Reconciled != 1 {
		t.Fatalf("round once Slurm answers: skipped %q, reconciled %d; want the leftover reconciled and a round", rep.Skipped, rep.Reconciled)
	}
	if p, _, _ := h.store.Pending(); len(p) != 0 {
		t.Errorf("%d journal entries still pending", len(p))
	}
}
