package daemon

import (
	"slices"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/rounds"
)

// translate turns the plan into the fewest Slurm actions that make Slurm
// match it, and notes each job's decision. Nothing is sent for a job whose
// Slurm state already matches, so replaying a round is harmless.
//
//   - run on type T (pending job): constraints=T, release, priority
//     raised, eligible now; only the parts that differ;
//   - wait (pending job): hold, unless held already;
//   - keep (lease extended): nothing;
//   - preempt (running job): the grace signal now; when the grace period
//     is over, requeue held and eligible at once, then, if the plan moves
//     it to another type, the run actions for that type (see graces).
func (c *Core) translate(snap *bridge.Snapshot, plan *rounds.Plan, now time.Time) ([]Action, int) {
	var out []Action
	preemptions := 0
	for i := range plan.Decisions {
		d := &plan.Decisions[i]
		js := c.jobs[d.Job]
		jid, err := parseJobID(d.Job)
		if js == nil || err != nil {
			continue
		}
		j, ok := snap.Job(jid)
		if !ok {
			continue
		}
		js.decision, js.reason = d.Action.String(), describe(d)
		pending := j.State == bridge.JobPending
		running := j.State == bridge.JobRunning || j.State == bridge.JobSuspended
		if pending && !js.graceStart.IsZero() {
			// The requeue took effect: the preemption is over.
			js.graceStart, js.graceTarget = time.Time{}, ""
		}
		// A requeue sent earlier that did not land is tried again once
		// per round.
		js.requeueSent = false
		js.recheckAt = time.Time{} // the round's own actions cover it
		switch d.Action {
		case rounds.Run:
			if pending {
				out = append(out, c.runActions(j, d.Type, "chosen for "+d.Type)...)
			}
		case rounds.Wait:
			if pending && !j.Held {
				out = append(out, Action{Action: bridge.Action{Kind: bridge.ActHold, Job: j.ID}, Why: js.reason, Restarts: j.Restarts})
			}
		case rounds.Keep:
			if running && !js.graceStart.IsZero() {
				// Preempted in an earlier round, chosen again before its
				// grace period ended: it keeps its GPUs and is not
				// requeued (it has had the signal, and may have saved a
				// checkpoint it does not need).
				js.graceStart, js.graceTarget = time.Time{}, ""
				js.reason = "preemption cancelled: " + js.reason
			}
		case rounds.Preempt:
			if running && js.graceStart.IsZero() {
				js.graceStart, js.graceTarget = now, d.Type
				preemptions++
				out = append(out, Action{Action: bridge.Action{Kind: bridge.ActSignal, Job: j.ID, Signal: c.set.GraceSignal},
					Why: "grace period starts: " + js.reason, Restarts: j.Restarts})
			} else if pending {
				// Slurm already stopped it (it failed, or an earlier
				// requeue landed): treat it like a fresh decision.
				if d.Type != "" {
					out = append(out, c.runActions(j, d.Type, "moved to "+d.Type)...)
				} else if !j.Held {
					out = append(out, Action{Action: bridge.Action{Kind: bridge.ActHold, Job: j.ID}, Why: js.reason, Restarts: j.Restarts})
				}
			}
		}
	}
	out = append(out, c.graces(snap, now)...)
	return out, preemptions
}

// runActions makes pending job j eligible to start on GPU type t.
func (c *Core) runActions(j bridge.Job, t, why string) []Action {
	var out []Action
	add := func(a bridge.Action) {
		a.Job = j.ID
		out = append(out, Action{Action: a, Why: why, Restarts: j.Restarts})
	}
	// A typed request already names its type; its own constraints stay.
	// Otherwise the job's own features are kept beside the type.
	if j.RequestedGPUType == "" {
		own, _ := ownFeatures(j.Constraints, c.isGPUType) // checked in eligible
		if want := constraintFor(own, t); j.Constraints != want {
			add(bridge.Action{Kind: bridge.ActSetConstraints, Constraints: want})
		}
	}
	if j.Held {
		add(bridge.Action{Kind: bridge.ActRelease})
	}
	// Release resets Slurm's priority, so it is set after a release.
	if j.Held || j.Priority != RunPriority {
		add(bridge.Action{Kind: bridge.ActSetPriority, Priority: RunPriority})
	}
	// Slurm delays a requeued job's start by about two minutes, and a
	// release sets that delay again: make it eligible at once, last.
	if j.Reason == "BeginTime" || (j.Held && j.Restarts > 0) {
		add(bridge.Action{Kind: bridge.ActBeginNow})
	}
	return out
}

// graceOf is the grace period of a job: its tag's, else the default.
func (c *Core) graceOf(js *jobState) time.Duration {
	if js.tag.Grace > 0 {
		return js.tag.Grace
	}
	return c.set.DefaultGrace
}

// graces requeues the running jobs whose grace period is over: requeue
// held (so the job cannot restart where it was), eligible now, and, when
// the plan gives it a type, the run actions for that type.
func (c *Core) graces(snap *bridge.Snapshot, now time.Time) []Action {
	var out []Action
	for _, id := range c.order {
		js := c.jobs[id]
		if !js.recheckAt.IsZero() && !now.Before(js.recheckAt) {
			out = append(out, c.recheck(snap, js, now)...)
		}
		if js.graceStart.IsZero() || js.requeueSent || now.Before(js.graceStart.Add(c.graceOf(js))) {
			continue
		}
		jid, err := parseJobID(id)
		if err != nil {
			continue
		}
		j, ok := snap.Job(jid)
		if !ok || (j.State != bridge.JobRunning && j.State != bridge.JobSuspended) {
			continue
		}
		why := "grace period over"
		js.requeueSent = true
		js.recheckAt = now.Add(requeueRecheck)
		out = append(out, Action{Action: bridge.Action{Kind: bridge.ActRequeueHold, Job: j.ID}, Why: why, Restarts: j.Restarts})
		target := js.graceTarget
		if c.plan != nil {
			if d := c.plan.Find(id); d != nil && d.Type != "" {
				target = d.Type
			}
		}
		if target != "" {
			// After the requeue the job is pending, held, with no
			// priority; give it the type the plan chose.
			after := j
			after.State, after.Held, after.Priority, after.Reason = bridge.JobPending, true, 0, "JobHeldUser"
			after.Restarts++
			out = append(out, c.runActions(after, target, "restart on "+target)...)
		} else {
			out = append(out, Action{Action: bridge.Action{Kind: bridge.ActBeginNow, Job: j.ID}, Why: why, Restarts: j.Restarts})
		}
	}
	return out
}

// requeueRecheck is how long after a requeue the daemon checks that the
// job did not fall back into Slurm's requeue delay: a little more than
// the local Slurm's KillWait (5 s), after which the job has stopped.
const requeueRecheck = 7 * time.Second

// recheck makes a requeued job that the plan runs eligible again if
// Slurm's requeue delay caught it after the begin-now; while the job is
// still stopping it looks again shortly.
func (c *Core) recheck(snap *bridge.Snapshot, js *jobState, now time.Time) []Action {
	js.recheckAt = time.Time{}
	jid, err := parseJobID(js.id)
	if err != nil {
		return nil
	}
	j, ok := snap.Job(jid)
	switch {
	case !ok || !j.Active():
		return nil
	case j.State != bridge.JobPending || slices.Contains(j.StateFlags, "COMPLETING"):
		js.recheckAt = now.Add(2 * time.Second)
		return nil
	case j.Held || j.Reason != "BeginTime":
		return nil
	}
	return []Action{{Action: bridge.Action{Kind: bridge.ActBeginNow, Job: j.ID}, Why: "requeue delay set after the requeue", Restarts: j.Restarts}}
}

// Graces is the mid-round check: the actions for grace periods that ended
// since the round started, against a fresh snapshot.
func (c *Core) Graces(snap *bridge.Snapshot, now time.Time) []Action {
	if snap == nil {
		return nil
	}
	c.noteTypes(snap)
	out := c.graces(snap, now)
	c.noteHolds(out)
	return out
}

// NextGraceEnd is when the earliest running grace period ends; zero when
// none is running.
func (c *Core) NextGraceEnd() time.Time {
	var next time.Time
	for _, id := range c.order {
		js := c.jobs[id]
		if !js.recheckAt.IsZero() && (next.IsZero() || js.recheckAt.Before(next)) {
			next = js.recheckAt
		}
		if js.graceStart.IsZero() || js.requeueSent {
			continue
		}
		end := js.graceStart.Add(c.graceOf(js))
		if next.IsZero() || end.Before(next) {
			next = end
		}
	}
	return next
}
