package sched

import (
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// A preemption ends in requeue-hold, hold, begin-now. When the
// requeue-hold lands but the hold after it fails (a transient error), the
// job is held by the daemon's requeue-hold: the daemon must still treat
// the hold as its own and schedule the job, not take it for its owner's.
func TestFailedHoldAfterLandedRequeueHoldKeepsTheHoldTheDaemons(t *testing.T) {
	tests := map[string]struct {
		missed []bridge.ActionKind // the tail of the job's actions that did not land
	}{
		"hold failed":      {missed: []bridge.ActionKind{bridge.ActHold, bridge.ActBeginNow}},
		"begin-now failed": {missed: []bridge.ActionKind{bridge.ActBeginNow}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			set := settings()
			set.MinRunTime = 0
			c := newCore(t, set)
			nodes := []bridge.Node{node("a1", "v100", 1, 1)}
			comment := tag + " preempt=requeue"
			step(c, snapshot(t, epoch, nodes, running(1, comment, "a1", "v100", 0)), epoch, c.Solve)
			var p *Proposal
			now := epoch
			for i := range 6 {
				now = epoch.Add(time.Duration(i+1) * time.Minute)
				p = c.Step(Input{Snap: snapshot(t, now, nodes, running(1, comment, "a1", "v100", 0), pending(2, tag)), Now: now, Solve: c.Solve})
				if strings.HasPrefix(actionsOf(p.Actions, 1), "requeue-hold,hold") {
					break
				}
				c.Commit(p, accepted(p))
			}
			if got := actionsOf(p.Actions, 1); !strings.HasPrefix(got, "requeue-hold,hold") {
				t.Fatalf("job 1 gets %q; the test needs its requeue to wait for a round", got)
			}
			var missed []Action
			for _, a := range p.Actions {
				for _, k := range tc.missed {
					if a.Job == 1 && a.Kind == k {
						missed = append(missed, a)
					}
				}
			}
			c.Commit(p, outcomesFor(p, missed))
			// Slurm: job 1 requeued and held by the requeue-hold (a user hold).
			requeued := with(pending(1, comment), func(j *bridge.Job) {
				j.Held, j.Reason, j.Restarts = true, "JobHeldUser", 1
			})
			now = now.Add(time.Minute)
			step(c, snapshot(t, now, nodes, requeued, running(2, tag, "a1", "v100", 0)), now, c.Solve)
			if js := c.jobs[keyOf(1)]; js.heldBy != "" || js.scale == 0 {
				t.Errorf("job 1, held by the daemon's requeue-hold: heldBy %q, in the mechanism %t; want the daemon's hold, scheduled",
					js.heldBy, js.scale != 0)
			}
		})
	}
}

// A job the daemon released onto a GPU type (its constraint is the
// daemon's) whose nodes then drain shows ReqNodeNotAvail: Slurm cannot
// start it on that type, but the daemon can move it to another type. It
// must not be left out of the allocation, with the daemon's constraint,
// while GPUs of another type sit idle.
func TestJobBlockedOnlyByTheDaemonsConstraintIsPlacedAgain(t *testing.T) {
	set := settings()
	c := newCore(t, set)
	nodes := []bridge.Node{node("a1", "v100", 1, 0), node("b1", "k80", 1, 0)}
	res := step(c, snapshot(t, epoch, nodes, pending(2, tag)), epoch, c.Solve)
	got := actionsOf(res.Actions, 2)
	if !strings.Contains(got, "set-constraints:v100") {
		t.Fatalf("first round: job 2 gets %q; the test needs it released on v100", got)
	}
	// The v100 node drains before Slurm starts job 2.
	drained := node("a1", "v100", 1, 0)
	drained.State = []string{"IDLE", "DRAIN"}
	released := with(pending(2, tag), func(j *bridge.Job) {
		j.Constraints, j.Priority = "v100", RunPriority
		j.Reason = "ReqNodeNotAvail, UnavailableNodes:a1"
	})
	moved := false
	for i := range 4 {
		now := epoch.Add(time.Duration(i+1) * time.Minute)
		res := step(c, snapshot(t, now, []bridge.Node{drained, node("b1", "k80", 1, 0)}, released), now, c.Solve)
		if strings.Contains(actionsOf(res.Actions, 2), "k80") {
			moved = true
		}
	}
	if !moved {
		t.Errorf("job 2, constrained to v100 by the daemon, whose v100 node drained: never moved to the idle k80 (reason %q)",
			c.jobs[keyOf(2)].reason)
	}
}
