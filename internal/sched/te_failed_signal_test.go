package sched

import (
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// The grace signal a look sends to a TE job's victim fails. Committed as
// refused, it starts no grace period for the victim, and with it goes the TE job's claim on
// the victim's room, so the next look chooses again rather than leave the
// TE job waiting for room that will not free.
func TestFailedTESignalDropsTheClaim(t *testing.T) {
	const be = "gavel: model=resnet50-bs64 preempt=checkpoint grace=10m"
	nodes := []bridge.Node{node("a1", "v100", 2, 2)}
	job := gpus(running(1, be, "a1", "v100", 0), 2)
	c := teSetup(t, nodes, job)
	te := gpus(pending(9, "gavel: model=a3c class=te"), 2)
	now := epoch.Add(10 * time.Second)
	p := c.Look(snapshot(t, now, nodes, job, te), now)
	out := p.Actions
	var sig []Action
	for _, a := range out {
		if a.Kind == bridge.ActSignal {
			sig = append(sig, a)
		}
	}
	if len(sig) != 1 || sig[0].Job != 1 {
		t.Fatalf("look: %v, want job 1 signalled", out)
	}
	c.Commit(p, outcomesFor(p, sig)) // slurmrestd refused the signal
	if c.jobs[keyOf(1)].pre.phase != notPreempted {
		t.Fatalf("failed signal left job 1 in phase %v", c.jobs[keyOf(1)].pre.phase)
	}
	resent := false
	at := now
	for i := 0; i < 24 && !resent; i++ { // two minutes of rounds and looks
		at = at.Add(5 * time.Second)
		snap := snapshot(t, at, nodes, job, te)
		var acts []Action
		if i%4 == 3 {
			acts = step(c, snap, at, c.Solve).Actions
		} else {
			acts = look(c, snap, at)
		}
		for _, a := range acts {
			if a.Job == 1 && (a.Kind == bridge.ActSignal || a.Kind == bridge.ActRequeueHold) {
				resent = true
			}
		}
	}
	if !resent {
		t.Errorf("two minutes after its victim's signal failed, TE job 9 still waits on a claim nothing frees (%+v); job 1: %q",
			c.teWaits[9], c.jobs[keyOf(1)].reason)
	}
}
