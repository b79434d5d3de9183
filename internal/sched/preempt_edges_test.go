package sched

import (
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// preemptedOnce runs two rounds so that job 1 (running on the only v100)
// gets the grace signal for waiting job 2; it returns the core and the
// time of the preempting round.
func preemptedOnce(t *testing.T, set Settings, comment string) (*Core, []bridge.Node, time.Time) {
	t.Helper()
	c, p, nodes, now := preemptingRound(t, set, comment)
	c.Commit(p, accepted(p))
	return c, nodes, now
}

// preemptingRound is preemptedOnce with the preempting round proposed
// and not committed yet.
func preemptingRound(t *testing.T, set Settings, comment string) (*Core, *Proposal, []bridge.Node, time.Time) {
	t.Helper()
	c := newCore(t, set)
	nodes := []bridge.Node{node("a1", "v100", 1, 1)}
	step(c, snapshot(t, epoch, nodes, running(1, comment, "a1", "v100", 0), pending(2, tag)), epoch, c.Solve)
	now := epoch.Add(time.Minute)
	p := c.Step(Input{Snap: snapshot(t, now, nodes, running(1, comment, "a1", "v100", 0), pending(2, tag)), Now: now, Solve: c.Solve})
	if got := actionsOf(p.Actions, 1); got != "signal:USR1" {
		t.Fatalf("preempting round: %q", got)
	}
	return c, p, nodes, now
}

// A job that requeued itself during its grace period, was started again
// by Slurm and finished that later run before the daemon looked (daemon
// down, REST errors, or a short run) is left finished: the run that ended
// was never signalled.
func TestSelfRequeuedJobThatFinishedItsNextRunIsNotRequeued(t *testing.T) {
	set := settings()
	set.DefaultGrace = time.Hour // a long grace period: the job is still inside it
	comment := tag + " preempt=checkpoint"
	c, nodes, now := preemptedOnce(t, set, comment)
	// The script trapped the signal, checkpointed and ran `scontrol
	// requeue`; Slurm started it again (restart 1) and it completed.
	finished := running(1, comment, "a1", "v100", 1)
	finished.State, finished.RunningNodes, finished.RunningGPUType = bridge.JobCompleted, nil, ""
	now = now.Add(10 * time.Minute)
	out := look(c, snapshot(t, now, nodes, finished, pending(2, tag)), now)
	if got := actionsOf(out, 1); got != "" {
		t.Errorf("a job that requeued itself and then completed its next run gets %q; want nothing (it is finished)", got)
	}
	// The same at a round (e.g. the first one after a daemon restart).
	c2, nodes2, now2 := preemptedOnce(t, set, comment)
	now2 = now2.Add(20 * time.Second)
	res := step(c2, snapshot(t, now2, nodes2, finished, pending(2, tag)), now2, c2.Solve)
	if got := actionsOf(res.Actions, 1); got != "" {
		t.Errorf("round: a job that requeued itself and then completed its next run gets %q; want nothing", got)
	}
}

// A job that requeued itself held during its grace period (`scontrol
// requeuehold` in its script, or Slurm's RequeueExitHold) keeps that
// hold: the daemon never releases a hold it did not send.
func TestSelfRequeueHoldIsNotReleased(t *testing.T) {
	c, now, _ := movedInGrace(t)
	userHeld := pending(1, tag)
	userHeld.Restarts, userHeld.Held, userHeld.Reason = 1, true, "JobHeldUser"
	at := now.Add(10 * time.Second)
	out := look(c, snapshot(t, at, []bridge.Node{node("a1", "v100", 1, 0), node("b1", "k80", 1, 0)},
		userHeld, held(2, tag), held(3, tag)), at)
	if got := actionsOf(out, 1); strings.Contains(got, "release") {
		t.Errorf("job 1, held by its user after requeueing itself: %q; the daemon released a hold it did not send", got)
	}
}

// A failed requeue-hold and the release sent after it (so never sent)
// leave the job with no hold of the daemon's: a hold its owner puts on it
// later is the owner's, and no round releases it.
func TestFailedRequeueChainOwnsNoHold(t *testing.T) {
	c, now, _ := movedInGrace(t)
	moved := running(1, tag, "b1", "k80", 0)
	moved.StartTime = epoch
	at := now.Add(61 * time.Second)
	nodes := []bridge.Node{node("a1", "v100", 1, 0), node("b1", "k80", 1, 1)}
	p := c.Look(snapshot(t, at, nodes, moved, held(2, tag), held(3, tag)), at)
	got := actionsOf(p.Actions, 1)
	if !strings.HasPrefix(got, "requeue-hold") || !strings.Contains(got, "release") {
		t.Fatalf("job 1 at the end of its grace period: %q", got)
	}
	// Slurm refuses the requeue-hold (a REST error; or the script
	// requeued itself held just before); apply sends none of the job's
	// later actions, and none of them lands.
	var missed []Action
	for _, a := range p.Actions {
		if a.Job == 1 {
			missed = append(missed, a)
		}
	}
	c.Commit(p, outcomesFor(p, missed))
	if c.jobs[keyOf(1)].heldByDaemon {
		t.Errorf("job 1 is marked held by the daemon although none of its actions landed")
	}
	// The job's own requeuehold put it pending and held by its user: the
	// next round must leave that hold alone.
	userHeld := pending(1, tag)
	userHeld.Restarts, userHeld.Held, userHeld.Reason = 1, true, "JobHeldUser"
	at = at.Add(10 * time.Second)
	res := step(c, snapshot(t, at, []bridge.Node{node("a1", "v100", 1, 0), node("b1", "k80", 1, 0)},
		userHeld, held(2, tag), held(3, tag)), at, c.Solve)
	if got := actionsOf(res.Actions, 1); strings.Contains(got, "release") {
		t.Errorf("next round releases the user's hold on job 1: %q", got)
	}
}

// The release of a daemon hold on a job that stopped being managed
// survives a round whose journal write failed: the next round sends it.
func TestReleaseOfUnmanagedJobSurvivesAnUnsentRound(t *testing.T) {
	c := newCore(t, settings())
	nodes := []bridge.Node{node("a1", "v100", 1, 0)}
	first := step(c, snapshot(t, epoch, nodes, pending(1, tag), pending(2, tag)), epoch, c.Solve)
	if got := actionsOf(first.Actions, 2); got != "hold" {
		t.Fatalf("round 1: job 2 %q, want hold", got)
	}
	// Its owner moves job 2 to a partition the daemon does not manage.
	moved := held(2, tag)
	moved.Partition = "cpu"
	now := epoch.Add(20 * time.Second)
	p := c.Step(Input{Snap: snapshot(t, now, nodes, running(1, tag, "a1", "v100", 0), moved), Now: now, Solve: c.Solve})
	if got := actionsOf(p.Actions, 2); !strings.Contains(got, "release") {
		t.Fatalf("round 2: job 2 %q, want its release", got)
	}
	c.Commit(p, nil) // the journal write failed: nothing was sent
	now = now.Add(20 * time.Second)
	res := step(c, snapshot(t, now, nodes, running(1, tag, "a1", "v100", 0), moved), now, c.Solve)
	if got := actionsOf(res.Actions, 2); !strings.Contains(got, "release") {
		t.Errorf("round after the abandoned one: job 2 %q; its daemon hold is never released", got)
	}
}

// A grace signal Slurm did not deliver (a REST error) starts no grace
// period: the job is not requeued at its end without the warning, and a
// later round preempts it again, with a signal.
func TestAFailedSignalStartsNoGracePeriod(t *testing.T) {
	set := settings()
	set.DefaultGrace = time.Minute
	comment := tag + " preempt=checkpoint"
	c, p, nodes, now := preemptingRound(t, set, comment)
	c.Commit(p, outcomesFor(p, []Action{{Action: bridge.Action{Kind: bridge.ActSignal, Job: 1, Signal: set.GraceSignal}}}))
	if pre := c.jobs[keyOf(1)].pre; pre.phase != notPreempted {
		t.Fatalf("after a failed signal job 1 is in phase %v", pre.phase)
	}
	end := now.Add(2 * time.Minute)
	out := look(c, snapshot(t, end, nodes, running(1, comment, "a1", "v100", 0), pending(2, tag)), end)
	if got := actionsOf(out, 1); got != "" {
		t.Errorf("job 1, never warned, gets %q when its grace period would have ended", got)
	}
	res := step(c, snapshot(t, end, nodes, running(1, comment, "a1", "v100", 0), pending(2, tag)), end, c.Solve)
	if got := actionsOf(res.Actions, 1); got != "signal:USR1" {
		t.Errorf("next round: job 1 gets %q, want the signal again", got)
	}
}
