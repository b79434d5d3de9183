package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// A job the daemon once held, whose hold then became its user's, leaves
// the managed partitions and is forgotten (no release: the hold is not the
// daemon's). After a restart within the journal's retention, the replay
// of its old hold entry tracks it again as held by the daemon; such a
// job, known only from the journal, has no hold released blind when it
// is forgotten again: the user's own hold stays.
func TestRestartDoesNotReleaseAForgottenUserHold(t *testing.T) {
	h := newHarness(t, t.TempDir(), "a1:v100:1")
	a, b := h.submit(resnet, 1), h.submit(resnet, 1)
	h.d.RunRound(context.Background())
	h.startChosen()
	if h.job(a).State != bridge.JobRunning || !h.job(b).Held {
		t.Fatalf("want a running and b held by the daemon: a %s, b held=%v", h.job(a).State, h.job(b).Held)
	}
	// a ends; b's user releases b before the next round, which chooses b.
	if err := h.slurm.Finish(a, bridge.JobCompleted); err != nil {
		t.Fatal(err)
	}
	if err := h.slurm.Apply(context.Background(), bridge.Action{Kind: bridge.ActRelease, Job: b}); err != nil {
		t.Fatal(err)
	}
	h.clock.now = h.clock.now.Add(20 * time.Second)
	h.d.RunRound(context.Background())
	// Its user holds it, then moves it to a partition the daemon does not read.
	if err := h.slurm.Apply(context.Background(), bridge.Action{Kind: bridge.ActHold, Job: b}); err != nil {
		t.Fatal(err)
	}
	h.clock.now = h.clock.now.Add(20 * time.Second)
	h.d.RunRound(context.Background())
	if got := findStatus(t, h.board.Status(), b).Reason; got != "held by user" {
		t.Fatalf("b: status %q, want held by user", got)
	}
	h.slurm.HideJobs(func(int) []bridge.JobID { return []bridge.JobID{b} })
	for range 3 {
		h.clock.now = h.clock.now.Add(20 * time.Second)
		h.d.RunRound(context.Background())
	}
	n := len(h.slurm.Applied())
	if got := kinds(h.slurm.Applied(), b); len(got) > 0 && got[len(got)-1] == "release" {
		t.Fatalf("b's user hold released before the restart: %v", got)
	}
	h.restart()
	for range 3 {
		h.clock.now = h.clock.now.Add(20 * time.Second)
		h.d.RunRound(context.Background())
	}
	if got := kinds(h.slurm.Applied()[n:], b); len(got) > 0 {
		t.Errorf("after a restart the daemon sent %v to job %d, whose hold is its user's", got, b)
	}
}
