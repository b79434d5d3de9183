package daemon

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// spinClock is fakeClock that counts waits of zero length in a row and
// cancels the run once there are too many: a Run loop that waits 0 again
// and again without the clock moving is a busy loop on a real clock.
type spinClock struct {
	mu     sync.Mutex
	fc     *fakeClock
	zero   int
	limit  int
	cancel context.CancelFunc
}

func (c *spinClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.fc.Now() }
func (c *spinClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d > 0 {
		c.zero = 0 // the clock moves: not a spin
	} else {
		c.zero++
		if c.zero >= c.limit {
			c.cancel()
		}
	}
	return c.fc.After(d)
}

// runSpin runs h.d.Run with a clock that stops it after 50 zero-length
// waits in a row (or once the clock passed a minute) and returns the
// count.
func runSpin(t *testing.T, h *harness) int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sc := &spinClock{fc: h.clock, limit: 50, cancel: cancel}
	h.d.Clock = sc
	stopAt := h.clock.now.Add(time.Minute)
	done := make(chan error, 1)
	go func() { done <- h.d.Run(ctx) }()
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			sc.mu.Lock()
			defer sc.mu.Unlock()
			return sc.zero
		case <-time.After(time.Millisecond):
			if !sc.Now().Before(stopAt) {
				cancel()
			}
		}
	}
}

// A grace period has ended while slurmrestd cannot be read: the look
// between rounds fails, and the loop must not retry it without waiting.
func TestRunDoesNotSpinWhenAGraceEndCannotBeActedOn(t *testing.T) {
	h := newHarness(t, t.TempDir(), "a1:v100:1")
	h.preemptFirst()
	h.slurm.FailSnapshot(errors.New("connection refused"))
	h.clock.now = h.clock.now.Add(6 * time.Second) // past the 5 s grace
	if zero := runSpin(t, h); zero >= 50 {
		t.Errorf("Run waited 0 s %d times in a row with the clock standing still: a busy loop on a failing snapshot", zero)
	}
}

// The same with a snapshot that works but leaves the preempted job out
// (one partial reply): Graces skips it, its deadline stays in the past.
func TestRunDoesNotSpinWhenAJobInGraceIsMissing(t *testing.T) {
	h := newHarness(t, t.TempDir(), "a1:v100:1")
	first, _ := h.preemptFirst()
	h.slurm.HideJobs(func(int) []bridge.JobID { return []bridge.JobID{first} })
	h.clock.now = h.clock.now.Add(6 * time.Second)
	if zero := runSpin(t, h); zero >= 50 {
		t.Errorf("Run waited 0 s %d times with the clock standing still: a busy loop re-reading Slurm", zero)
	}
}
