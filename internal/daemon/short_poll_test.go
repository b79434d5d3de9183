package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/bridge/fake"
)

type snapshotCounter struct {
	*fake.Slurm
	reads int
}

func (s *snapshotCounter) Snapshot(ctx context.Context) (*bridge.Snapshot, error) {
	s.reads++
	return s.Slurm.Snapshot(ctx)
}

// stopClock is fakeClock that cancels the run once a wait would take it
// past stop.
type stopClock struct {
	fc     *fakeClock
	stop   time.Time
	cancel context.CancelFunc
}

func (c *stopClock) Now() time.Time { return c.fc.Now() }
func (c *stopClock) After(d time.Duration) <-chan time.Time {
	if !c.fc.now.Add(d).Before(c.stop) {
		c.cancel()
		return make(chan time.Time)
	}
	return c.fc.After(d)
}

// scheduler.refill_poll and trial_and_error.poll may be set down to 1 s
// (config validation): the spin guard only spaces looks whose deadline
// the last look left due, so a 2 s refill poll looks every 2 s.
func TestConfiguredPollShorterThanFiveSecondsIsKept(t *testing.T) {
	set := settings()
	set.RefillPoll = 2 * time.Second
	h := newHarnessWith(t, set, t.TempDir(), "a1:v100:1")
	h.submit(resnet, 1)
	h.submit(resnet, 1)
	cs := &snapshotCounter{Slurm: h.slurm}
	h.d.Slurm = cs
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h.d.Clock = &stopClock{fc: h.clock, stop: h.clock.now.Add(19 * time.Second), cancel: cancel}
	if err := h.d.Run(ctx); err != nil {
		t.Fatal(err)
	}
	looks := cs.reads - 1 // the round's own read
	if looks < 8 {
		t.Errorf("%d looks between rounds in 19 s with scheduler.refill_poll = 2s, want about 9", looks)
	}
}
