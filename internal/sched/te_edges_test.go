package sched

import (
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

func dumpPlan(t *testing.T, c *Core) {
	t.Helper()
	for _, d := range c.plan.Decisions {
		t.Logf("decision %s: %s %s (%s)", d.Job, d.Action, d.Type, d.Reason.String())
	}
}

// A round that comes while a TE job waits for the room its victim frees
// does not preempt a second, uninvolved job to place that TE job again:
// the waiting TE job is out of the round's walk, and its victim keeps its
// GPUs in the plan.
func TestRoundDoesNotPreemptForAWaitingTEJob(t *testing.T) {
	const be = "gavel: model=resnet50-bs64 preempt=checkpoint grace=10m"
	nodes := []bridge.Node{node("a1", "v100", 2, 2), node("a2", "v100", 2, 2)}
	jobs := []bridge.Job{gpus(running(1, be, "a1", "v100", 0), 2), gpus(running(2, be, "a2", "v100", 0), 2)}
	c := teSetup(t, nodes, jobs...)
	at := epoch
	for i := 0; i < 10; i++ {
		at = at.Add(20 * time.Second)
		step(c, snapshot(t, at, nodes, jobs...), at, c.Solve)
	}
	teJob := gpus(pending(9, "gavel: model=a3c class=te"), 2)
	now := at.Add(10 * time.Second)
	first := signalled(look(c, snapshot(t, now, nodes, append(jobs, teJob)...), now))
	if len(first) != 1 {
		t.Fatalf("signalled %v, want one victim", first)
	}
	for k := 0; k < 3; k++ {
		later := now.Add(time.Duration(20*(k+1)) * time.Second)
		res := step(c, snapshot(t, later, nodes, append(jobs, teJob)...), later, c.Solve)
		dumpPlan(t, c)
		if got := signalled(res.Actions); len(got) != 0 {
			t.Errorf("round signalled %v while TE job 9 waits for victim %v", got, first)
		}
		for _, id := range []bridge.JobID{1, 2} {
			if id != first[0] && c.jobs[keyOf(id)].pre.phase != notPreempted {
				t.Fatalf("job %d preempted by the round (%s) although TE job 9 already has its room", id, c.jobs[keyOf(id)].reason)
			}
		}
	}
}

// A TE job cancelled by its owner while its victim runs out its grace
// period: the room is nobody's any more, so the victim (chosen again by
// the round) restarts at once on its type after its requeue, instead of
// waiting for a job that will never start.
func TestVictimOfACancelledTEJobRestartsAtOnce(t *testing.T) {
	const be = "gavel: model=resnet50-bs64 preempt=checkpoint grace=10m"
	nodes := []bridge.Node{node("a1", "v100", 2, 2)}
	jobs := []bridge.Job{gpus(running(1, be, "a1", "v100", 0), 2)}
	c := teSetup(t, nodes, jobs...)
	teJob := gpus(pending(9, "gavel: model=a3c class=te"), 2)
	now := epoch.Add(10 * time.Second)
	if got := signalled(look(c, snapshot(t, now, nodes, append(jobs, teJob)...), now)); len(got) != 1 || got[0] != 1 {
		t.Fatalf("signalled %v, want job 1", got)
	}
	gone := teJob
	gone.State = bridge.JobCancelled
	later := now.Add(20 * time.Second)
	res := step(c, snapshot(t, later, nodes, jobs[0], gone), later, c.Solve)
	dumpPlan(t, c)
	t.Logf("round actions for 1: %q, reason %q, phase %v", actionsOf(res.Actions, 1), c.jobs[keyOf(1)].reason, c.jobs[keyOf(1)].pre.phase)
	end := now.Add(11 * time.Minute)
	out := look(c, snapshot(t, end, nodes, jobs[0], gone), end)
	// It had the signal, so it is requeued (its script may wait for that),
	// but restarted at once on the type the round keeps it on rather than
	// held for a TE job that will never start.
	if got := actionsOf(out, 1); got != "requeue-hold,set-constraints:v100,release,set-priority,begin-now" {
		t.Errorf("victim of cancelled TE job 9: %q at the end of its grace period, want its requeue and restart on v100", got)
	}
}

// A TE job claimed free GPUs that something else (a job of a partition
// the daemon does not manage) took before Slurm started it. A second TE
// job is not promised the same room: preempting the one job on the
// node frees only what the first TE job already claims.
func TestOverClaimedNodeIsNotPromisedTwice(t *testing.T) {
	const be = "gavel: model=resnet50-bs64 preempt=checkpoint"
	nodes := []bridge.Node{node("a1", "v100", 4, 2)}
	jobs := []bridge.Job{gpus(running(1, be, "a1", "v100", 0), 2)}
	c := teSetup(t, nodes, jobs...)
	teA := gpus(pending(9, "gavel: model=a3c class=te"), 2)
	now := epoch.Add(10 * time.Second)
	out := look(c, snapshot(t, now, nodes, append(jobs, teA)...), now)
	if got := signalled(out); len(got) != 0 {
		t.Fatalf("TE job 9 fits: signalled %v", got)
	}
	if w, ok := c.teWaits[9]; !ok || w.node != "a1" {
		t.Fatalf("TE job 9's claim: %+v", c.teWaits)
	}
	// The two free GPUs were taken by another partition's job before
	// Slurm started job 9; a second TE job arrives.
	full := []bridge.Node{node("a1", "v100", 4, 4)}
	teB := gpus(pending(10, "gavel: model=a3c class=te"), 2)
	later := now.Add(5 * time.Second)
	out = look(c, snapshot(t, later, full, append(jobs, teA, teB)...), later)
	if got := signalled(out); len(got) != 0 {
		t.Errorf("signalled %v for TE job 10: job 1's 2 GPUs are all TE job 9 has claimed on a1 (claims %+v)", got, c.teWaits)
	}
}

// A TE job given the room of a job the round preempted (no victim of its
// own) is not left waiting on that room: the next round does not cancel a
// preemption whose room a waiting TE job counts on.
func TestTEClaimOnACancelledPreemption(t *testing.T) {
	const be = "gavel: model=resnet50-bs64 preempt=checkpoint grace=10m"
	nodes := []bridge.Node{node("a1", "v100", 2, 2)}
	p := gpus(running(1, be, "a1", "v100", 0), 2)
	q := gpus(pending(2, be), 2)
	c := teCore(t)
	at := epoch
	var res Result
	for i := 0; i < 20; i++ {
		res = step(c, snapshot(t, at, nodes, p, q), at, c.Solve)
		if c.jobs[keyOf(1)].pre.phase == inGrace {
			break
		}
		if actionsOf(res.Actions, 2) == "hold" {
			q.Held, q.Reason = true, "JobHeldAdmin"
		}
		at = at.Add(20 * time.Second)
	}
	dumpPlan(t, c)
	if c.jobs[keyOf(1)].pre.phase != inGrace {
		t.Fatal("the test needs job 1 preempted by a round")
	}
	qq := q
	qq.Held, qq.Priority, qq.Reason = false, RunPriority, "Resources"
	te := gpus(pending(9, "gavel: model=a3c class=te"), 2)
	now := at.Add(5 * time.Second)
	out := look(c, snapshot(t, now, nodes, p, qq, te), now)
	t.Logf("look: %q / claims %+v", actionsOf(out, 9), c.teWaits)
	// Job 2 is cancelled; the next round keeps job 1.
	qc := qq
	qc.State = bridge.JobCancelled
	later := now.Add(15 * time.Second)
	res = step(c, snapshot(t, later, nodes, p, qc, te), later, c.Solve)
	dumpPlan(t, c)
	t.Logf("job 1: phase %v reason %q", c.jobs[keyOf(1)].pre.phase, c.jobs[keyOf(1)].reason)
	if c.jobs[keyOf(1)].pre.phase == notPreempted {
		if _, ok := c.teWaits[9]; ok {
			t.Errorf("job 1's preemption was cancelled but TE job 9 still waits for its room: %+v", c.teWaits[9])
		}
	}
}
