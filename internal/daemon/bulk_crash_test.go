package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/store"
)

// crashedJournal writes intents but loses every later journal update, as
// a daemon that stops right after its bulk calls to Slurm returned.
type crashedJournal struct{ Journal }

var errCrashed = errors.New("stopped before the journal was updated")

func (crashedJournal) Settle([]store.Outcome, time.Time) error { return errCrashed }
func (crashedJournal) MarkDone(uint64, time.Time) error        { return errCrashed }

// halfSlurm carries out the first half of each batch and then stops: the
// rest never reaches Slurm.
type halfSlurm struct{ bridge.BatchActuator }

func (h halfSlurm) ApplyBatch(ctx context.Context, actions []bridge.Action) []error {
	errs := make([]error, len(actions))
	n := (len(actions) + 1) / 2
	copy(errs, h.BatchActuator.ApplyBatch(ctx, actions[:n]))
	for i := n; i < len(actions); i++ {
		errs[i] = errCrashed
	}
	return errs
}

// A crash between a bulk send and the journal's update repeats nothing
// that landed and loses nothing that did not: after the restart each job
// carries every action once.
func TestACrashAfterABulkSendRepeatsNothingAndLosesNothing(t *testing.T) {
	for _, half := range []bool{false, true} {
		name := "every action landed"
		if half {
			name = "half of each batch landed"
		}
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, t.TempDir(), "a1:v100:4")
			var ids []bridge.JobID
			for range 8 {
				ids = append(ids, h.submit(resnet, 1))
			}
			h.d.RunRound(context.Background())
			h.startChosen()
			var running []bridge.JobID
			for _, id := range ids {
				if h.job(id).State == bridge.JobRunning {
					running = append(running, id)
				}
			}
			if len(running) != 4 {
				t.Fatalf("%d jobs running, want 4", len(running))
			}
			// The round that preempts the running jobs for the waiting
			// ones crashes after sending.
			h.clock.now = h.clock.now.Add(20 * time.Second)
			h.d.journal = crashedJournal{h.d.journal}
			if half {
				h.d.out = halfSlurm{h.slurm}
			}
			sentBefore := len(h.slurm.Applied())
			h.d.RunRound(context.Background())
			crashed := h.slurm.Applied()[sentBefore:]
			if len(crashed) == 0 {
				t.Fatal("the round sent nothing")
			}
			pending, _, err := h.store.Pending()
			if err != nil {
				t.Fatal(err)
			}
			if len(pending) == 0 {
				t.Fatal("no pending journal entries after the crash")
			}

			h.restart()
			h.clock.now = h.clock.now.Add(time.Second)
			h.d.RunRound(context.Background())
			if pending, _, _ := h.store.Pending(); len(pending) != 0 {
				t.Errorf("%d entries still pending after the restart's round", len(pending))
			}
			signalled := 0
			for _, id := range running {
				switch n := len(h.slurm.Signals(id)); {
				case n > 1:
					t.Errorf("job %s signalled %d times", id, n)
				case n == 1:
					signalled++
				}
			}
			if signalled == 0 {
				t.Error("no running job was signalled")
			}
			// Each action that reached Slurm before the crash is not sent
			// again; each journaled one that did not is sent once.
			count := map[bridge.Action]int{}
			for _, a := range h.slurm.Applied()[sentBefore:] {
				count[a]++
			}
			for _, e := range pendingEntries(t, h) {
				if count[e] != 1 {
					t.Errorf("%s reached Slurm %d times, want once", e, count[e])
				}
			}
		})
	}
}

// pendingEntries are the actions the crashed round journaled.
func pendingEntries(t *testing.T, h *harness) []bridge.Action {
	t.Helper()
	entries, _, err := h.store.Recent(0)
	if err != nil {
		t.Fatal(err)
	}
	var out []bridge.Action
	for _, e := range entries {
		if e.Attempts >= 1 && e.Round == h.d.Core.Round()-1 {
			var a Action
			if err := json.Unmarshal(e.Payload, &a); err != nil {
				t.Fatal(err)
			}
			out = append(out, a.Action)
		}
	}
	if len(out) == 0 {
		t.Fatal("no journaled actions for the crashed round")
	}
	return out
}
