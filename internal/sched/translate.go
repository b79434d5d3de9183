package sched

import (
	"strings"
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
	tallies := map[bridge.JobID]*arrayTally{}
	decided := c.keyed(plan)
	for _, kd := range decided {
		d := kd.Decision
		js := c.jobs[kd.key]
		if js.arrayOf != 0 {
			// A job array's waiting task: counted here, acted on through
			// the array's record below.
			js.decision, js.reason = d.Action.String(), describe(d)
			t := tallies[js.arrayOf]
			if t == nil {
				t = &arrayTally{}
				tallies[js.arrayOf] = t
			}
			t.tallySlot(d)
			continue
		}
		j, ok := jobOf(snap, kd.key)
		if !ok {
			continue
		}
		js.decision, js.reason = d.Action.String(), describe(d)
		js.recheckAt = time.Time{} // the round's own actions cover it
		running := isRunning(j)
		if js.pre.forTE != 0 && !c.forLiveTE(js) {
			// The TE job it was preempted for no longer waits: an
			// ordinary preemption from now on, restarted where the
			// rounds put it.
			js.pre.forTE = 0
		}
		if d.Action == rounds.Keep && running && js.pre.phase == inGrace && j.Restarts == js.pre.restarts {
			// Chosen again before its grace period ended. The preemption
			// stands: the job has had the signal, and its script may have
			// stopped training to wait for the requeue, which would then
			// never come. It is requeued when its grace period ends and
			// restarted at once on this type, from the checkpoint it saved.
			js.reason = "restarts on " + d.Type + " once the preemption under way ends: " + js.reason
		}
		out = append(out, c.advance(js, j, now, false)...)
		pending := j.State == bridge.JobPending
		if w, ok := c.teWaits[j.ID]; ok && pending {
			// A trial-and-error job waiting for the room made for it:
			// the round neither holds it nor sends it elsewhere.
			js.decision, js.reason = rounds.Run.String(), w.why
			continue
		}
		switch d.Action {
		case rounds.Run:
			if pending {
				out = append(out, c.runActions(j, d.Type, "chosen for "+d.Type)...)
			}
		case rounds.Wait:
			if pending && !j.Held {
				out = append(out, Action{Action: bridge.Action{Kind: bridge.ActHold, Job: j.ID}, Why: js.reason, Restarts: j.Restarts})
			}
			if pending {
				out = append(out, c.waitAsSubmitted(j, js.reason)...)
			}
		case rounds.Preempt:
			switch {
			case running && js.pre.phase == notPreempted && c.modeOf(js) == bridge.PreemptNever:
				// Pinned in the plan; reached only if Slurm shows it
				// somewhere the mechanism could not see. Never stopped.
				js.decision, js.reason = rounds.Keep.String(), "kept running: it cannot be preempted (preempt=never)"
				if c.preemptionOff != "" {
					js.reason = "kept running: preemption is off: " + c.preemptionOff
				}
			case running && js.pre.phase == notPreempted:
				preemptions++
				out = append(out, c.startPreemption(js, j, d.Type, now)...)
				out = append(out, c.advance(js, j, now, false)...) // preempt=requeue: at once
			case pending:
				// Slurm already stopped it (it failed, or an earlier
				// requeue landed): treat it like a fresh decision.
				out = append(out, c.placeRequeued(j, d.Type, "")...)
			}
		}
	}
	out = append(out, c.arrayActions(snap, decided, tallies)...)
	return out, preemptions
}

// runActions makes pending job j eligible to start on GPU type t; a pair's
// member that no node can take this round is held instead.
func (c *Core) runActions(j bridge.Job, t, why string) []Action {
	if js := c.jobs[keyOf(j.ID)]; js != nil {
		if wait := c.pairUnplaced(js, t); wait != "" {
			js.reason = "chosen with " + c.share.places[js.name].partner + " for " + t + ", but " + wait
			if j.Held {
				return nil
			}
			return []Action{{Action: bridge.Action{Kind: bridge.ActHold, Job: j.ID}, Why: js.reason, Restarts: j.Restarts}}
		}
	}
	return append(c.placeActions(j, t, why), c.eligibleActions(j, c.runPriority(), why)...)
}

// placeActions points pending job j at GPU type t: its constraint, or its
// whole request when a mix shaped it.
func (c *Core) placeActions(j bridge.Job, t, why string) []Action {
	var out []Action
	add := func(a bridge.Action) {
		a.Job = j.ID
		out = append(out, Action{Action: a, Why: why, Restarts: j.Restarts})
	}
	// A typed request already names its type; its own constraints stay.
	// Otherwise the job's own features are kept beside the type.
	if js := c.jobs[keyOf(j.ID)]; js != nil && c.shareActions(j, js, t, add) {
		// A pair's member, or one that was and now runs alone.
	} else if c.inMixShape(j) {
		// Shaped for a mix earlier: back to one type, request and all.
		if shape := c.singleShape(j, c.jobs[keyOf(j.ID)], t, t); !hasShape(j, shape) {
			add(shape)
		}
	} else if j.RequestedGPUType == "" {
		own, _ := ownFeatures(j.Constraints, c.isGPUType) // checked in eligible
		if want := constraintFor(own, t); j.Constraints != want {
			add(bridge.Action{Kind: bridge.ActSetConstraints, Constraints: want})
		}
	}
	return out
}

// eligibleActions lets pending job j start as soon as Slurm finds room:
// released if held, at priority prio, and out of Slurm's requeue delay;
// only the parts that differ from what Slurm shows.
func (c *Core) eligibleActions(j bridge.Job, prio int64, why string) []Action {
	var out []Action
	add := func(a bridge.Action) {
		a.Job = j.ID
		out = append(out, Action{Action: a, Why: why, Restarts: j.Restarts})
	}
	if j.Held {
		add(bridge.Action{Kind: bridge.ActRelease})
	}
	// Release resets Slurm's priority, so it is set after a release.
	if j.Held || j.Priority != prio {
		add(bridge.Action{Kind: bridge.ActSetPriority, Priority: uint32(prio)})
	}
	// Slurm delays a requeued job's start by about two minutes, and a
	// release sets that delay again: make it eligible at once, last.
	if j.Reason == "BeginTime" || (j.Held && j.Restarts > 0) {
		add(bridge.Action{Kind: bridge.ActBeginNow})
	}
	return out
}

// waitAsSubmitted is what makes a job the round keeps waiting look as its
// owner submitted it, where the daemon changed it when it last chose it
// (or it ran, and was requeued): its own features without a GPU type and
// Slurm's own priority. A waiting job is then already right for Slurm to
// schedule if the daemon's lease runs out; the next choice sets both
// again. Pairs' shard requests and mixes' shapes stay: they are put back
// when the job leaves management or is handed back.
func (c *Core) waitAsSubmitted(j bridge.Job, why string) []Action {
	var out []Action
	add := func(a bridge.Action) {
		a.Job = j.ID
		out = append(out, Action{Action: a, Why: why, Restarts: j.Restarts})
	}
	if j.RequestedGPUType == "" && j.Shards == 0 && !isMixConstraint(j.Constraints, c.isGPUType) {
		if own, ok := ownFeatures(j.Constraints, c.isGPUType); ok {
			if want := strings.Join(own, "&"); want != j.Constraints {
				add(bridge.Action{Kind: bridge.ActSetConstraints, Constraints: want})
			}
		}
	}
	// A Slurm hold's release would reset it anyway; only the lease leaves
	// an explicit priority in place.
	if j.Priority >= RunPriority && (!j.Held || j.LeaseHeld) {
		add(bridge.Action{Kind: bridge.ActResetPriority})
	}
	return out
}
