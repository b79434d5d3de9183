package sched

import (
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// While the shell cannot prove that requeues work, no round starts a
// preemption: the job that would be preempted keeps running, gets no
// signal, and status says why. Once preemption is allowed again the next
// round preempts as usual.
func TestPreemptionOffSendsNoSignal(t *testing.T) {
	comment := tag + " preempt=checkpoint"
	c := newCore(t, settings())
	c.SetPreemptionOff("scontrol requeue: access denied")
	nodes := []bridge.Node{node("a1", "v100", 1, 1)}
	step(c, snapshot(t, epoch, nodes, running(1, comment, "a1", "v100", 0), pending(2, tag)), epoch, c.Solve)
	now := epoch.Add(time.Minute)
	for i := range 3 {
		res := step(c, snapshot(t, now, nodes, running(1, comment, "a1", "v100", 0), pending(2, tag)), now, c.Solve)
		if got := actionsOf(res.Actions, 1); got != "" {
			t.Fatalf("round %d with preemption off: job 1 gets %q, want nothing", i+2, got)
		}
		if res.Preemptions != 0 {
			t.Errorf("round %d with preemption off counts %d preemptions", i+2, res.Preemptions)
		}
		graces := look(c, snapshot(t, now.Add(time.Second), nodes, running(1, comment, "a1", "v100", 0), pending(2, tag)), now.Add(time.Second))
		if got := actionsOf(graces, 1); got != "" {
			t.Fatalf("look between rounds with preemption off: job 1 gets %q, want nothing", got)
		}
		if c.jobs[keyOf(1)].pre.phase != notPreempted {
			t.Fatalf("job 1 is being preempted (%+v) while preemption is off", c.jobs[keyOf(1)].pre)
		}
		now = now.Add(time.Minute)
	}
	v := c.view(snapshot(t, now, nodes, running(1, comment, "a1", "v100", 0), pending(2, tag)), now, &Result{})
	for _, jv := range v.Jobs {
		if jv.Job.ID == 1 && jv.Preempt != string(bridge.PreemptNever) {
			t.Errorf("status shows job 1 as preempt=%s while preemption is off; want never", jv.Preempt)
		}
	}

	c.SetPreemptionOff("")
	res := step(c, snapshot(t, now, nodes, running(1, comment, "a1", "v100", 0), pending(2, tag)), now, c.Solve)
	if got := actionsOf(res.Actions, 1); got != "signal:USR1" {
		t.Errorf("first round with preemption allowed again: job 1 gets %q, want the grace signal", got)
	}
}

// A preemption under way when preemption is turned off goes on: the job
// had its signal and may be stopping, so it is still requeued when its
// grace period ends (and retried while that fails).
func TestPreemptionOffStillRequeuesJobsAlreadySignalled(t *testing.T) {
	set := settings()
	comment := tag + " preempt=checkpoint"
	c, nodes, now := preemptedOnce(t, set, comment)
	c.SetPreemptionOff("scontrol requeue: access denied")
	after := now.Add(set.DefaultGrace + time.Second)
	p := c.Look(snapshot(t, after, nodes, running(1, comment, "a1", "v100", 0), pending(2, tag)), after)
	if got := actionsOf(p.Actions, 1); !strings.HasPrefix(got, "requeue-hold") {
		t.Fatalf("job 1 at the end of its grace period with preemption off: %q; want its requeue", got)
	}
	// The requeue fails; the next round sends it again.
	c.Commit(p, outcomesFor(p, p.Actions))
	later := after.Add(time.Minute)
	res := step(c, snapshot(t, later, nodes, running(1, comment, "a1", "v100", 0), pending(2, tag)), later, c.Solve)
	if got := actionsOf(res.Actions, 1); !strings.HasPrefix(got, "requeue-hold") {
		t.Errorf("next round after a failed requeue with preemption off: job 1 gets %q; want the requeue again", got)
	}
}
