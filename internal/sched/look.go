// Look is the check between rounds; NextGraceEnd and NextDeadline say
// when the next one is due.

package sched

import (
	"slices"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// Look is the check between rounds, against a fresh snapshot: requeues
// of grace periods that ended, of jobs that ended or requeued themselves
// during theirs, rechecks of requeued jobs, trial-and-error jobs, and
// waiting jobs started on GPUs freed since the round (refill.go). Like
// Step it proposes and changes nothing until Commit.
func (c *Core) Look(snap *bridge.Snapshot, now time.Time) *Proposal {
	w := c.fork()
	p := &Proposal{Round: c.round, next: w, snap: snap, now: now, look: true}
	if snap != nil {
		p.Actions = w.look(snap, now)
	}
	return p
}

// look runs the check between rounds on the fork w.
func (w *Core) look(snap *bridge.Snapshot, now time.Time) []Action {
	w.noteTypes(snap)
	w.refreshTEClaims(snap, now)
	var out []Action
	for _, key := range w.order {
		js := w.jobs[key]
		if js.pre.phase == notPreempted && js.recheckAt.IsZero() {
			continue
		}
		j, ok := jobOf(snap, key)
		if !ok {
			continue // gone: the next round forgets it
		}
		if !js.recheckAt.IsZero() && !now.Before(js.recheckAt) {
			out = append(out, w.recheck(j, js, now)...)
		}
		out = append(out, w.advance(js, j, now, true)...)
	}
	out = append(out, w.trialAndError(snap, now)...)
	out = append(out, w.refill(snap, out)...)
	w.noteHolds(out)
	w.noteArrayOwn(out)
	return out
}

// requeueRecheck is how long after a requeue the daemon checks that the
// job did not fall back into Slurm's requeue delay: a little more than
// the local Slurm's KillWait (5 s), after which the job has stopped.
const requeueRecheck = 7 * time.Second

// recheck makes a requeued job that the plan runs eligible again if
// Slurm's requeue delay caught it after the begin-now; while the job is
// still stopping it looks again shortly.
func (c *Core) recheck(j bridge.Job, js *jobState, now time.Time) []Action {
	js.recheckAt = time.Time{}
	switch {
	case !j.Active(), isRunning(j) && j.Restarts > js.recheckRestarts:
		return nil // finished, or started again already
	case j.State != bridge.JobPending || slices.Contains(j.StateFlags, "COMPLETING"):
		js.recheckAt = now.Add(2 * time.Second)
		return nil
	case j.Held || j.Reason != "BeginTime":
		return nil
	}
	return []Action{{Action: bridge.Action{Kind: bridge.ActBeginNow, Job: j.ID}, Why: "requeue delay set after the requeue", Restarts: j.Restarts}}
}

// NextGraceEnd is when the daemon must look between rounds next: a grace
// period ends, a requeued job is due a recheck, or the next poll after now
// (while a preemption is in progress, for waiting trial-and-error jobs,
// and for GPUs to refill); zero when nothing is due.
func (c *Core) NextGraceEnd(now time.Time) time.Time {
	next := c.NextDeadline()
	if te := c.set.TrialAndError; te.Enabled && te.Poll > 0 {
		// New TE jobs are looked for between rounds.
		if poll := now.Add(te.Poll); next.IsZero() || poll.Before(next) {
			next = poll
		}
	}
	if c.set.RefillPoll > 0 && c.holdsAny() {
		// Freed GPUs are looked for between rounds, while a job waits
		// on a hold of the daemon's to start on them.
		if poll := now.Add(c.set.RefillPoll); next.IsZero() || poll.Before(next) {
			next = poll
		}
	}
	for _, key := range c.order {
		if c.jobs[key].pre.phase != notPreempted {
			if poll := now.Add(gracePoll); next.IsZero() || poll.Before(next) {
				next = poll
			}
			break
		}
	}
	return next
}

// NextDeadline is the earliest time-driven change among preempted jobs:
// a grace period that ends or a requeued job due a recheck; zero when
// none. Unlike NextGraceEnd it leaves out the polls that catch what jobs
// do by themselves, for callers that know when Slurm changes (the
// simulator).
func (c *Core) NextDeadline() time.Time {
	var next time.Time
	earlier := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, key := range c.order {
		js := c.jobs[key]
		earlier(js.recheckAt)
		if js.pre.phase == inGrace {
			earlier(js.pre.start.Add(c.graceOf(js)))
		}
	}
	return next
}
