package sched

import (
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// Restart costs. The restart mechanism (rounds.VariantRestart) weighs
// each preemption and move against what a restart costs the job: its
// checkpoint in the grace period, the requeue, Slurm starting it again,
// and its start-up until it makes progress. The step passes each job's
// cost (measured, else its tag's restart=, else Settings.DefaultRestart,
// never above the site's max_restart), its remaining steps and when its
// current run began; the other mechanisms ignore them.

// FirstProgress is an Estimator that knows when a job made its first
// progress in a run (the collectors' reports): the step measures restart
// costs with it.
type FirstProgress interface {
	// FirstProgress is when the job first reported progress in the run
	// Slurm started at start; false while it has reported none.
	FirstProgress(job bridge.JobID, start time.Time) (time.Time, bool)
}

// pendingRestart is a requeue the daemon sent whose cost is not measured
// yet: the job has not made progress since it started again.
type pendingRestart struct {
	// requeued is when the requeue was proposed; restarts is Slurm's
	// restart count then (a higher count is the restart).
	requeued time.Time
	restarts int
	// grace is the part of the grace period the job used: from the
	// signal to the requeue, which goes out once the job stops (gracePoll)
	// or its grace period ends.
	grace time.Duration
	// moved is set when the job was requeued to start at once on other
	// GPUs: Slurm's requeue and start are then part of the cost. A job
	// requeued to wait for a round is measured from its next start, since
	// the wait is the rounds' choice, not its restart.
	moved bool
}

// restartCost is what a restart is taken to cost the job: its measured
// cost, else its tag's, else the site's default, within the site's limit.
func (c *Core) restartCost(js *jobState) time.Duration {
	cost := c.set.DefaultRestart
	switch {
	case js.restartMeasured > 0:
		cost = js.restartMeasured
	case js.restartTag > 0:
		cost = js.restartTag
	}
	if js.restartMax > 0 {
		cost = min(cost, js.restartMax)
	}
	return max(cost, 0)
}

// restartSource says where restartCost took the job's figure from.
func restartSource(js *jobState) string {
	switch {
	case js.restartMeasured > 0:
		return "measured"
	case js.restartTag > 0:
		return "tag"
	}
	return "default"
}

// noteRequeue starts measuring the restart a requeue of the job begins.
// A requeue sent again (the first did not land) keeps the first's start.
func (js *jobState) noteRequeue(j bridge.Job, moved bool, now time.Time) {
	if p := js.restartPending; p != nil && p.restarts == j.Restarts {
		return
	}
	grace := time.Duration(0)
	if !js.pre.start.IsZero() && now.After(js.pre.start) {
		grace = now.Sub(js.pre.start)
	}
	js.restartPending = &pendingRestart{requeued: now, restarts: j.Restarts, grace: grace, moved: moved}
}

// measureRestarts completes the measurements of the jobs that restarted
// and have since made progress, and hands the mechanism the costs that
// changed.
func (c *Core) measureRestarts(snap *bridge.Snapshot) {
	fp, ok := c.est.(FirstProgress)
	for _, key := range c.order {
		js := c.jobs[key]
		p := js.restartPending
		if p == nil {
			continue
		}
		j, seen := jobOf(snap, key)
		if !seen || !isRunning(j) || j.Restarts <= p.restarts || j.StartTime.IsZero() {
			continue
		}
		if !ok {
			js.restartPending = nil // nothing will ever say when it progressed
			continue
		}
		first, progressed := fp.FirstProgress(j.ID, j.StartTime)
		if !progressed {
			continue
		}
		from := j.StartTime
		if p.moved && p.requeued.Before(from) {
			from = p.requeued
		}
		cost := p.grace + max(first.Sub(from), 0)
		if js.restartMax > 0 {
			cost = min(cost, js.restartMax)
		}
		js.restartMeasured, js.restartPending = max(cost, time.Second), nil
		if js.scale != 0 {
			c.mech.SetRestartCost(js.name, c.restartCost(js).Seconds()) //nolint:errcheck // a job in the mechanism, a finite cost
		}
	}
}

// passProgress tells the mechanism each scheduled job's remaining steps
// (0: unknown), for the restart rule's near-end exception.
func (c *Core) passProgress() {
	for _, key := range c.order {
		js := c.jobs[key]
		if js.scale == 0 || js.arrayOf != 0 {
			continue
		}
		c.mech.SetRemainingSteps(js.name, float64(c.stepsRemaining(js))) //nolint:errcheck // a job in the mechanism, a count ≥ 0
	}
}

// runSince is when a running job's current run began, as far as the
// daemon knows: its start, or when the daemon first saw it.
// longAgo is the start of a run that earned nothing (jobState.jumped): so
// long ago that every pin on time run has lapsed (the mechanism reads 0
// seconds as long ago too).
var longAgo = time.Unix(0, 0)

func runSince(js *jobState, j bridge.Job) time.Time {
	if js.jumped {
		return longAgo
	}
	since := js.firstSeen
	if j.StartTime.After(since) {
		since = j.StartTime
	}
	return since
}
