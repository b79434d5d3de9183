package daemon

import (
	"context"
	"testing"
	"time"
)

// A reload that changes scheduler.policy: the next round must run on the
// new policy's allocation, not keep the old one until a reset.
func TestReloadedPolicyTakesEffectAtTheNextRound(t *testing.T) {
	h := newHarness(t, t.TempDir(), "a1:v100:2", "b1:k80:2")
	for range 3 {
		h.submit(resnet, 1)
	}
	h.d.RunRound(context.Background())
	h.startChosen()
	if p := h.board.Allocation().Policy; p != "max_min_fairness_perf" {
		t.Fatalf("allocation policy %q", p)
	}
	h.set.Policy = "fifo_perf"
	h.restart()
	for i := range 3 {
		h.clock.now = h.clock.now.Add(20 * time.Second)
		h.d.RunRound(context.Background())
		if p := h.board.Allocation().Policy; p != "fifo_perf" {
			t.Errorf("round %d after the reload: allocation of %q in force, want fifo_perf", i+1, p)
		}
	}
}
