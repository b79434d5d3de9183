package sched

import (
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/siterules"
)

// A site that allows only preempt=checkpoint: a running job whose owner
// edits its --comment (scontrol update jobid=1 comment=...) to drop the
// gavel: tag after the daemon started it, or once the preemption signal
// arrived, must still be preempted; it must not keep the GPUs the policy
// gave to another job.
func TestDroppingTheTagDoesNotEscapePreemption(t *testing.T) {
	for _, when := range []string{"before the signal", "during the grace period"} {
		t.Run(when, func(t *testing.T) {
			set := settings()
			set.Rules = siterules.Default()
			set.Rules.Limits.AllowedPreempt = []bridge.PreemptMode{bridge.PreemptCheckpoint}
			set.DefaultGrace = 5 * time.Second
			c := newCore(t, set)
			nodes := []bridge.Node{node("a1", "v100", 1, 1)}
			comment := tag + " preempt=checkpoint"
			edited := "my job, do not touch"
			step(c, snapshot(t, epoch, nodes, running(1, comment, "a1", "v100", 0), pending(2, tag)), epoch, c.Solve)
			now := epoch.Add(time.Minute)
			first := comment
			if when == "before the signal" {
				first = edited
			}
			res := step(c, snapshot(t, now, nodes, running(1, first, "a1", "v100", 0), pending(2, tag)), now, c.Solve)
			var all []string
			all = append(all, actionsOf(res.Actions, 1))
			// Later rounds and grace checks: the owner's edit is in place.
			for i := 1; i <= 3; i++ {
				now = now.Add(10 * time.Second)
				snap := snapshot(t, now, nodes, running(1, edited, "a1", "v100", 0), pending(2, tag))
				all = append(all, actionsOf(step(c, snap, now, c.Solve).Actions, 1))
				all = append(all, actionsOf(look(c, snap, now.Add(6*time.Second)), 1))
			}
			requeued := false
			for _, a := range all {
				if a == "requeue-hold,hold,begin-now" || a == "requeue-hold" || a == "requeue" {
					requeued = true
				}
			}
			if !requeued {
				t.Errorf("job 1 kept its v100 after its owner removed the tag: actions per step %q; job 2 (due) %q", all, c.jobs[keyOf(2)].reason)
			}
		})
	}
}
