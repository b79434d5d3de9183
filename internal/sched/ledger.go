package sched

import (
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/rounds"
)

// A preemption is a small state machine kept per job in its ledger:
//
//	none ──signal sent (or, for preempt=requeue, decided)──► grace
//	grace ──grace over, or the job ended by itself──► requeued (requeue-hold sent)
//	grace ──the job requeued itself──► none (the plan's type is applied)
//	requeued ──seen pending, or running after a restart──► none
//
// What makes it safe whatever the job's script does with the signal: a
// job that ends while its grace period runs (it died of the signal, or
// trapped it and exited with any code) counts as preempted, not finished,
// and is requeued; Slurm requeues finished batch jobs as it does running
// ones. Only a job that ends outside a grace period the daemon started is
// left finished, and a job cancelled by its owner (CANCELLED) is never
// brought back. Slurm's restart count tells a requeue that landed (the
// daemon's or the job's own) from one still to come.
type preemptPhase uint8

const (
	notPreempted preemptPhase = iota
	// inGrace: the warning signal went out at start; the job runs out its
	// grace period (or ends, or requeues itself).
	inGrace
	// requeued: the requeue went out; the job is not yet seen pending.
	requeued
)

// phaseNames are the phases as the state store spells them.
var phaseNames = map[preemptPhase]string{notPreempted: "", inGrace: "grace", requeued: "requeued"}

func parsePhase(s string) preemptPhase {
	for p, name := range phaseNames {
		if name == s {
			return p
		}
	}
	return notPreempted
}

// preemption is one job's preemption in progress.
type preemption struct {
	phase preemptPhase
	// start is when the grace period started (the signal was sent).
	start time.Time
	// target is the GPU type the plan restarts the job on, if any.
	target string
	// restarts is Slurm's restart count when the preemption started: a
	// higher count means a requeue landed.
	restarts int
	// sentRound is the round in which the requeue was last sent: a
	// requeue that did not land is sent again once per round.
	sentRound uint64
	// forTE is the trial-and-error job the preemption makes room for
	// (te.go; 0 for none): the job is then requeued to wait for a round,
	// whatever the current plan says of it, and a round that chooses it
	// again does not cancel the preemption.
	forTE bridge.JobID
}

// ledger is what the daemon itself did to a job and must remember across
// rounds and restarts: whose hold it is, its preemption, and a pending
// look at a requeued job. A step proposes changes to it; only Commit
// makes them the job's (proposal.go).
type ledger struct {
	pre preemption
	// heldByDaemon is set while the job's hold is one the daemon sent
	// (journaled); any other hold belongs to the user or an admin and is
	// never released by the daemon.
	heldByDaemon bool
	// recheckAt is when to look again at a job requeued mid-round: Slurm
	// sets the requeue's start delay only once the job has stopped (after
	// its KillWait), which can undo the begin-now sent with the requeue.
	recheckAt time.Time
	// recheckRestarts is the restart count before that requeue: a higher
	// count on a running job means it already started again.
	recheckRestarts int
	// marked is set once the daemon gave the job its run priority: a
	// different mark on it later is another daemon's (otherWriter).
	marked bool
	// restartPending is the requeue the daemon sent whose restart cost is
	// being measured (restartcost.go); never changed in place, so that a
	// fork may share it.
	restartPending *pendingRestart
}

// ended reports whether Slurm shows the job finished in a way a grace
// period explains: anything but its owner's scancel.
func endedInGrace(j bridge.Job) bool {
	return !j.Active() && j.State != bridge.JobCancelled
}

func isRunning(j bridge.Job) bool {
	return j.State == bridge.JobRunning || j.State == bridge.JobSuspended
}

// modeOf is how a job takes preemption: never for a job Slurm may not
// requeue, or while preemptions are off and the job's has not started,
// else its tag's mode, else the site's default, else never.
func (c *Core) modeOf(js *jobState) bridge.PreemptMode {
	if c.preemptionOff != "" && js.pre.phase == notPreempted {
		return bridge.PreemptNever
	}
	if js.noRequeue {
		// A requeue would fail and the preemption would end the job.
		return bridge.PreemptNever
	}
	return c.askedMode(js)
}

// askedMode is the preemption mode a job's tag asks for as the site's
// rules let it stand, else the site's default, else never.
func (c *Core) askedMode(js *jobState) bridge.PreemptMode {
	if js.mode != bridge.PreemptUnset {
		return js.mode
	}
	if c.set.DefaultPreempt != bridge.PreemptUnset {
		return c.set.DefaultPreempt
	}
	return bridge.PreemptNever
}

// pinOf says whether running job j must keep its GPUs next round: a job
// that cannot be preempted never moves, and no job is stopped before it
// has run MinRunTime since it started or since the daemon first saw it
// running (so a daemon that starts beside a full cluster does not move
// every job in its first rounds). A job in a grace period is not pinned.
func (c *Core) pinOf(js *jobState, j bridge.Job, now time.Time) rounds.Pin {
	if js.pre.phase != notPreempted {
		if c.forLiveTE(js) {
			// Its GPUs are the waiting TE job's: the round must not give
			// them to another job, nor move the victim.
			return rounds.PinNotPreemptible
		}
		return rounds.NotPinned
	}
	if c.modeOf(js) == bridge.PreemptNever {
		return rounds.PinNotPreemptible
	}
	if now.Sub(runSince(js, j)) < c.set.MinRunTime {
		return rounds.PinMinRunTime
	}
	return rounds.NotPinned
}

// graceOf is the grace period of a job: none for preempt=requeue (it is
// requeued at once), else its tag's, else the default.
func (c *Core) graceOf(js *jobState) time.Duration {
	if c.modeOf(js) == bridge.PreemptRequeue {
		return 0
	}
	if js.grace > 0 {
		return js.grace
	}
	return c.set.DefaultGrace
}

// startPreemption begins preempting running job j, which the plan moves to
// target ("" when it waits). Only preempt=checkpoint jobs get the signal.
func (c *Core) startPreemption(js *jobState, j bridge.Job, target string, now time.Time) []Action {
	js.pre = preemption{phase: inGrace, start: now, target: target, restarts: j.Restarts}
	if c.modeOf(js) != bridge.PreemptCheckpoint {
		return nil // requeued by advance, at once
	}
	return []Action{{Action: bridge.Action{Kind: bridge.ActSignal, Job: j.ID, Signal: c.set.GraceSignal},
		Why: "grace period starts: " + js.reason, Restarts: j.Restarts}}
}

// advance moves a job's preemption on against what Slurm shows now and
// returns the actions that takes. midRound is set between rounds, where no
// plan decision covers a job that requeued itself.
func (c *Core) advance(js *jobState, j bridge.Job, now time.Time, midRound bool) []Action {
	p := &js.pre
	switch p.phase {
	case inGrace:
		switch {
		case j.Restarts > p.restarts && j.State != bridge.JobPending:
			// It requeued itself and Slurm started it again already; what
			// that later run does is its own: a run that ended was not
			// signalled and is left finished.
			js.pre = preemption{}
			js.reason = "requeued itself during its grace period; running again"
			if !j.Active() {
				js.reason = "requeued itself during its grace period, then ended (" + string(j.State) + ")"
			}
		case j.State == bridge.JobPending && j.Held && !js.heldByDaemon:
			// It requeued itself held (scontrol requeuehold, or Slurm's
			// RequeueExitHold): that hold is not the daemon's to release.
			js.pre = preemption{}
			js.reason = "requeued itself during its grace period; " + holdOwner(j)
		case j.State == bridge.JobPending:
			// It requeued itself (scontrol requeue from its script): no
			// second requeue; the planned type still applies.
			target := c.targetOf(js)
			js.pre = preemption{}
			js.reason = "requeued itself during its grace period"
			if midRound {
				return c.placeRequeued(j, target, "requeued itself: ")
			}
		case j.State == bridge.JobCancelled:
			js.pre = preemption{} // its owner cancelled it
		case endedInGrace(j):
			js.reason = "ended during its grace period (" + string(j.State) + "): requeued, not finished"
			return c.requeue(js, j, now)
		case !now.Before(p.start.Add(c.graceOf(js))):
			return c.requeue(js, j, now)
		}
	case requeued:
		switch {
		case j.State == bridge.JobPending, j.Restarts > p.restarts:
			js.pre = preemption{} // the requeue landed
		case j.State == bridge.JobCancelled:
			js.pre = preemption{}
		case p.sentRound < c.round:
			// It did not land (a failed send, a crash): once per round.
			return c.requeue(js, j, now)
		}
	}
	return nil
}

// targetOf is the type the current plan runs a job on, else the type its
// preemption chose.
func (c *Core) targetOf(js *jobState) string {
	if js.pre.forTE != 0 {
		return ""
	}
	if c.plan != nil {
		if d := c.plan.Find(js.name); d != nil && d.Type != "" {
			return d.Type
		}
	}
	return js.pre.target
}

// requeue sends the requeue of a preempted job (running, or ended during
// its grace period): requeued held, so it cannot restart where it was,
// then given the plan's type, or made eligible at once to wait held for
// a later round.
func (c *Core) requeue(js *jobState, j bridge.Job, now time.Time) []Action {
	target := c.targetOf(js)
	js.noteRequeue(j, target != "", now)
	js.pre.phase, js.pre.sentRound = requeued, c.round
	js.recheckAt, js.recheckRestarts = now.Add(requeueRecheck), j.Restarts
	out := []Action{{Action: bridge.Action{Kind: bridge.ActRequeueHold, Job: j.ID}, Why: "grace period over", Restarts: j.Restarts}}
	if target == "" {
		// A requeue-hold leaves a hold the job's owner may release
		// (scontrol release), which would start it again ahead of the
		// rounds' choice: the daemon's own hold, an administrator's,
		// replaces it.
		return append(out,
			Action{Action: bridge.Action{Kind: bridge.ActHold, Job: j.ID}, Why: "grace period over: waits for a round", Restarts: j.Restarts},
			Action{Action: bridge.Action{Kind: bridge.ActBeginNow, Job: j.ID}, Why: "grace period over", Restarts: j.Restarts})
	}
	// After the requeue the job is pending, held, with no priority.
	after := j
	after.State, after.Held, after.Priority, after.Reason = bridge.JobPending, true, 0, "JobHeldUser"
	after.Restarts++
	return append(out, c.runActions(after, target, "restart on "+target)...)
}

// placeRequeued gives a job that requeued itself the planned type, or
// holds it until a round chooses it.
func (c *Core) placeRequeued(j bridge.Job, target, why string) []Action {
	if target != "" {
		return c.runActions(j, target, why+"restart on "+target)
	}
	if j.Held {
		return nil
	}
	return []Action{{Action: bridge.Action{Kind: bridge.ActHold, Job: j.ID}, Why: why + "waits for a round", Restarts: j.Restarts}}
}

// gracePoll is how often the daemon looks at jobs in a grace period
// between rounds: a job that exits after its checkpoint, dies of the
// signal or requeues itself is handled within this time instead of at the
// end of its grace period.
const gracePoll = 5 * time.Second

// graceStatus says where a job's preemption stands, for status.
func (c *Core) graceStatus(js *jobState) string {
	switch js.pre.phase {
	case inGrace:
		return "grace until " + js.pre.start.Add(c.graceOf(js)).Format(time.RFC3339)
	case requeued:
		return "requeued"
	}
	return ""
}
