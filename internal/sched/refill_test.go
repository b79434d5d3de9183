package sched

import (
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

func refillSettings() Settings {
	set := settings()
	set.RefillPoll = 30 * time.Second
	set.MinRunTime = time.Hour // the round keeps what runs: the tests set the scene
	return set
}

// held is job id as Slurm shows it after the daemon's hold.
func held(id bridge.JobID, comment string) bridge.Job {
	j := pending(id, comment)
	j.Held, j.Reason = true, "JobHeldAdmin"
	return j
}

// done is job j finished: Slurm keeps its record a while.
func done(j bridge.Job) bridge.Job {
	j.State, j.RunningNodes, j.RunningGPUType = bridge.JobCompleted, nil, ""
	return j
}

// A job that ends in the middle of a round frees its GPU; the check
// between rounds starts the waiting job on it instead of leaving it idle
// until the next round, and says why in its status.
func TestRefillStartsTheWaitingJobOnAFreedGPU(t *testing.T) {
	c := newCore(t, refillSettings())
	first := c.Step(snapshot(t, epoch, []bridge.Node{node("a1", "v100", 1, 0)}, pending(1, tag), pending(2, tag)), epoch, c.Solve)
	if got := actionsOf(first.Actions, 2); got != "hold" {
		t.Fatalf("round: job 2 %q, want it held", got)
	}
	one := running(1, tag, "a1", "v100", 0)
	one.StartTime = epoch
	now := epoch.Add(30 * time.Second)
	if out := c.Graces(snapshot(t, now, []bridge.Node{node("a1", "v100", 1, 1)}, one, held(2, tag)), now); len(out) != 0 {
		t.Fatalf("while job 1 runs: %v", out)
	}
	now = now.Add(30 * time.Second)
	out := c.Graces(snapshot(t, now, []bridge.Node{node("a1", "v100", 1, 0)}, done(one), held(2, tag)), now)
	if got := actionsOf(out, 2); got != "set-constraints:v100,release,set-priority" {
		t.Errorf("after job 1 ended: job 2 %q", got)
	}
	if js := c.jobs["2"]; js.decision != "run" || !strings.Contains(js.reason, "GPUs freed between rounds") || js.heldByDaemon {
		t.Errorf("job 2: decision %q, reason %q, held by daemon %v", js.decision, js.reason, js.heldByDaemon)
	}
	if next := c.NextGraceEnd(now); next.IsZero() || next.After(now.Add(30*time.Second)) {
		t.Errorf("next look between rounds at %v, want within the refill poll", next)
	}
}

// What keeps a freed GPU from being refilled: the setting off, a job Slurm
// may start there by itself, and a job whose allocation gives it no share
// of the type.
func TestRefillLeavesGPUsToWhatMayTakeThem(t *testing.T) {
	unmanaged := func(reason string) bridge.Job {
		j := pending(9, "no tag")
		j.Reason = reason
		return j
	}
	tests := map[string]struct {
		poll  time.Duration
		extra []bridge.Job
		want  string
	}{
		"refill on":                             {poll: 30 * time.Second, want: "set-constraints:v100,release,set-priority"},
		"refill off":                            {poll: 0, want: ""},
		"an untyped job waits for resources":    {poll: 30 * time.Second, extra: []bridge.Job{unmanaged("Resources")}, want: ""},
		"an untyped job waits for a dependency": {poll: 30 * time.Second, extra: []bridge.Job{unmanaged("Dependency")}, want: "set-constraints:v100,release,set-priority"},
		"a typed job waits for the freed type":  {poll: 30 * time.Second, extra: []bridge.Job{func() bridge.Job { j := unmanaged("Priority"); j.RequestedGPUType = "v100"; return j }()}, want: ""},
		"a typed job waits for another type":    {poll: 30 * time.Second, extra: []bridge.Job{func() bridge.Job { j := unmanaged("Priority"); j.RequestedGPUType = "k80"; return j }()}, want: "set-constraints:v100,release,set-priority"},
		"a job the round chose has not started": {poll: 30 * time.Second, extra: []bridge.Job{func() bridge.Job {
			j := pending(9, tag)
			j.Constraints, j.Priority, j.Reason = "v100", RunPriority, "BeginTime"
			return j
		}()}, want: ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			set := refillSettings()
			set.RefillPoll = tc.poll
			c := newCore(t, set)
			nodes := []bridge.Node{node("a1", "v100", 1, 0), node("b1", "k80", 1, 1)}
			other := running(3, tag, "b1", "k80", 0)
			c.Step(snapshot(t, epoch, nodes, pending(1, tag), pending(2, tag), other), epoch, c.Solve)
			one := running(1, tag, "a1", "v100", 0)
			now := epoch.Add(time.Minute)
			jobs := append([]bridge.Job{done(one), held(2, tag), other}, tc.extra...)
			out := c.Graces(snapshot(t, now, nodes, jobs...), now)
			if got := actionsOf(out, 2); got != tc.want {
				t.Errorf("job 2: %q, want %q", got, tc.want)
			}
		})
	}
}

// Freed GPUs go to the waiting job with the highest priority on their
// type among those that fit: a heavier job first; a two-GPU job does not
// fit one free GPU, so a one-GPU job behind it starts.
func TestRefillOrderAndFit(t *testing.T) {
	t.Run("priority", func(t *testing.T) {
		c := newCore(t, refillSettings())
		heavy := tag + " weight=4"
		one := running(1, tag, "a1", "v100", 0)
		c.Step(snapshot(t, epoch, []bridge.Node{node("a1", "v100", 1, 1)}, one, pending(2, tag), pending(3, heavy)), epoch, c.Solve)
		now := epoch.Add(time.Minute)
		out := c.Graces(snapshot(t, now, []bridge.Node{node("a1", "v100", 1, 0)}, done(one), held(2, tag), held(3, heavy)), now)
		if got := actionsOf(out, 2) + "|" + actionsOf(out, 3); got != "|set-constraints:v100,release,set-priority" {
			t.Errorf("jobs 2 and 3: %q, want the heavier job 3 started", got)
		}
	})
	t.Run("fit", func(t *testing.T) {
		c := newCore(t, refillSettings())
		nodes := []bridge.Node{node("a1", "v100", 2, 2)}
		one, five := running(1, tag, "a1", "v100", 0), running(5, tag, "a1", "v100", 0)
		pair := pending(2, tag)
		pair.GPUs = 2
		c.Step(snapshot(t, epoch, nodes, one, five, pair, pending(3, tag)), epoch, c.Solve)
		heldPair := held(2, tag)
		heldPair.GPUs = 2
		now := epoch.Add(time.Minute)
		out := c.Graces(snapshot(t, now, []bridge.Node{node("a1", "v100", 2, 1)}, done(one), five, heldPair, held(3, tag)), now)
		if got := actionsOf(out, 2); got != "" {
			t.Errorf("the two-GPU job on one free GPU: %q", got)
		}
		if got := actionsOf(out, 3); got != "set-constraints:v100,release,set-priority" {
			t.Errorf("the one-GPU job: %q", got)
		}
	})
}
