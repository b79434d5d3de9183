package sched

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// A round, a look between rounds and the replay of a journal at start all
// work the same way: the core proposes, the shell commits.
//
//   - Step, Look and RestoreJournal work on a fork of the core and return
//     a Proposal: the actions, and the state the core would be in if Slurm
//     carried out every one of them. The core itself is left as it was.
//   - The shell journals and sends the actions, then calls Commit with
//     what became of each (Outcome). Only then does the state move: to the
//     proposal's, with each action that did not land leaving its job as
//     the action found it.
//
// A proposal that is never committed changes nothing, so a failure
// anywhere before Commit needs no undoing.

// Outcome is what became of one proposed action.
type Outcome uint8

const (
	// Accepted: Slurm carried the action out.
	Accepted Outcome = iota
	// Refused: the action was journaled but did not land: Slurm refused
	// it, or it was not sent because an earlier action for the same job
	// failed (a job's actions are sent in order and stop at a failure).
	Refused
	// Unsent: the action never left the daemon: its journal entry could
	// not be written, so nothing of the proposal was sent.
	Unsent
	// Lost: the action went out and no answer came back (a timeout, a
	// broken connection): it may or may not have landed. Commit leaves
	// the job as the action found it, as for Refused; the shell then
	// proposes the action again as landed (Unanswered) and commits that
	// once reconciliation has seen the job in Slurm.
	Lost
)

func (o Outcome) String() string {
	switch o {
	case Accepted:
		return "accepted"
	case Refused:
		return "refused"
	case Unsent:
		return "unsent"
	case Lost:
		return "lost"
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// Proposal is what a step, a look or a journal replay would do. Nothing
// of it is part of the core until Commit.
type Proposal struct {
	// Round is the round the proposal belongs to.
	Round uint64
	// Skipped is non-empty when the step sends nothing because the
	// snapshot cannot be trusted; SkipCause is its short metric label.
	// The shell sets them when it could not send the actions (journal
	// failure) before committing.
	Skipped   string
	SkipCause string
	// Actions are the Slurm actions to send, in order.
	Actions []Action
	// Solved is set when the step recomputed the allocation; Fallback
	// says why the allocation in use is the stand-in's.
	Solved   bool
	Fallback string
	// Preemptions counts the grace periods the actions start.
	Preemptions int
	// Forget are the job records the step stops keeping.
	Forget []string
	// Journal are, for a journal replay, the sequence numbers of the
	// entries Actions come from, in the same order.
	Journal []uint64

	// next is the fork the proposal was worked out on: the core as it
	// will be if every action lands.
	next *Core
	// releases are the queued releases of untracked jobs among Actions:
	// only the queue remembers those jobs, so one that does not land is
	// queued again.
	releases []queuedRelease
	// snap and now are what the proposal was worked out against, for the
	// view Commit builds; a look keeps the last round's view.
	snap *bridge.Snapshot
	now  time.Time
	look bool
	// replay marks the journal's leftovers at start (RestoreJournal).
	replay    bool
	committed bool
}

// Commit makes the proposal the core's state, given what became of each
// of its actions (outcomes[i] for Actions[i]; missing ones count as
// Unsent). It returns what the round did: its figures, the records to
// persist and the status view. A proposal is committed once; proposals
// are committed in the order they were made, and the core must not have
// changed since p was made (a proposal drawn from an older state is
// refused with a panic, since committing it would lose what came after).
func (c *Core) Commit(p *Proposal, outcomes []Outcome) Result {
	if p.committed {
		panic("sched: proposal committed twice")
	}
	if p.next.base != c.version {
		panic("sched: proposal made from another state of the core")
	}
	p.committed = true
	next := p.next
	outcome := func(i int) Outcome {
		if i < len(outcomes) {
			return outcomes[i]
		}
		return Unsent
	}
	if len(p.Actions) > 0 && outcome(0) == Unsent {
		// Nothing was sent (the journal write failed): every job keeps
		// what the daemon had done to it before the proposal, and the
		// queued releases and TE claims stay as they were.
		c.keepLedgers(next, p)
	} else {
		var missed []Action
		for i, a := range p.Actions {
			if outcome(i) != Accepted {
				missed = append(missed, a)
			}
		}
		c.settleMissed(next, p, missed)
	}
	next.base, next.version = 0, c.version+1
	*c = *next

	res := Result{Round: p.Round, Skipped: p.Skipped, SkipCause: p.SkipCause, Actions: p.Actions,
		Solved: p.Solved, Fallback: p.Fallback, Preemptions: p.Preemptions, Forget: p.Forget}
	if p.look || p.replay {
		return res
	}
	if p.Skipped == "" {
		res.Records = c.records(p.now)
		res.State = c.state()
	}
	c.lastSkip = p.Skipped
	res.View = c.view(p.snap, p.now, &res)
	return res
}

// keepLedgers gives every job in next the ledger and status line it has
// in c, the state before the proposal, and puts back the queued releases
// and trial-and-error claims: none of the proposal's actions was sent.
// Jobs the proposal took up keep what it saw of them (a hold adopted from
// an admin, say), without the effects of the actions it gave them.
func (c *Core) keepLedgers(next *Core, p *Proposal) {
	for key, js := range next.jobs {
		if before := c.jobs[key]; before != nil {
			js.ledger, js.decision, js.reason = before.ledger, before.decision, before.reason
		}
	}
	var newcomers []Action
	for _, a := range p.Actions {
		if key := keyOf(a.Job); next.jobs[key] != nil && c.jobs[key] == nil {
			newcomers = append(newcomers, a)
		}
	}
	c.settleMissed(next, p, newcomers)
	next.released = append(next.released, p.releases...)
	next.teWaits, next.teTried = maps.Clone(c.teWaits), maps.Clone(c.teTried)
}

// settleMissed leaves each job whose actions did not all land as those
// actions found it, in next: a release that did not land leaves the hold
// the daemon's, so the next look releases it again rather than taking it
// for an admin's; a hold or requeue-hold that did not land owns no hold;
// a grace signal that did not go out starts no grace period.
//
// A job's missed actions are the tail of what the proposal gave it
// (nothing more is sent for a job after one of its actions fails), so its
// hold is as it was before the first of them that changes whose hold it
// is: a requeue-hold and the release that follows it, both missed, leave
// no hold of the daemon's. A requeue that did not land stays recorded as
// sent in this round: it is sent again once per round, not at every look.
func (c *Core) settleMissed(next *Core, p *Proposal, missed []Action) {
	settled := map[bridge.JobID]bool{}
	missedRequeue := map[bridge.JobID]bool{}
	for _, a := range missed {
		if a.Kind == bridge.ActRequeueHold {
			missedRequeue[a.Job] = true
		}
	}
	// proposedRequeue are the jobs the proposal itself requeue-holds: a
	// journal replay takes a requeue of an earlier round for landed
	// without recording it as sent in this one.
	proposedRequeue := map[bridge.JobID]bool{}
	for _, a := range p.Actions {
		if a.Kind == bridge.ActRequeueHold {
			proposedRequeue[a.Job] = true
		}
	}
	for _, a := range missed {
		js := next.jobs[keyOf(a.Job)]
		if js != nil && a.Kind == bridge.ActHold && !settled[a.Job] && !missedRequeue[a.Job] &&
			js.pre.phase == requeued && (js.pre.sentRound == next.round || proposedRequeue[a.Job]) {
			// The hold that follows a requeue-hold that landed: the
			// requeue-hold's own hold keeps the job, and it is the
			// daemon's (the next round or reconciliation holds it again).
			settled[a.Job] = true
			js.heldByDaemon = true
			continue
		}
		if a.Kind == bridge.ActSignal && js != nil {
			// No warning went out: the grace period it would have started
			// does not start, so the job is not requeued without one; the
			// next round (or look) decides again.
			var before jobState
			if b := c.jobs[keyOf(a.Job)]; b != nil {
				before = *b
			}
			if before.pre.phase == notPreempted {
				js.pre, js.decision, js.reason = before.pre, before.decision, before.reason
				if a.ForTE != 0 && !next.anyVictimOf(a.ForTE) {
					// The TE job's room will not free: its claim goes, so
					// the next look chooses again.
					delete(next.teWaits, a.ForTE)
					delete(next.teTried, a.ForTE)
				}
			}
		}
		if a.Kind == bridge.ActSetShare && js != nil {
			// Slurm refused it: whose shard request the job carries is as
			// it was before.
			if b := c.jobs[keyOf(a.Job)]; b != nil {
				js.shareSet = b.shareSet
			} else {
				js.shareSet = false
			}
		}
		if a.Kind == bridge.ActSetArrayLimit && js == nil {
			// The put-back of the own limit of an array that left
			// management: queued again, now checked against what Slurm
			// shows, so that one refusal does not leave the array under
			// the daemon's limit for the rest of its life.
			for _, r := range p.releases {
				if r.Job == a.Job && r.Kind == bridge.ActSetArrayLimit {
					r.blind = false
					next.released = append(next.released, r)
				}
			}
			continue
		}
		held, changes := holdOwnership(a.Kind)
		if !changes || settled[a.Job] {
			continue
		}
		settled[a.Job] = true
		if js != nil {
			js.heldByDaemon = !held // as it was before the action
			continue
		}
		// The release of a job the daemon no longer tracks: queued again,
		// for the next round to send if the job is still held (a blind
		// one Slurm refused was for a job that is gone).
		for _, r := range p.releases {
			if r.Job == a.Job && !r.blind {
				next.released = append(next.released, r)
			}
		}
	}
}

// fork returns a copy of the core that shares no mutable state with it:
// a step works on the copy, and the core stays as it was until the copy
// is committed. The settings, policies and estimator are shared; they do
// not change while the core runs.
func (c *Core) fork() *Core {
	w := *c
	w.base = c.version
	w.jobTable = c.jobTable.clone()
	w.roundState = c.roundState.clone()
	w.typeIndex = c.typeIndex.clone()
	w.trustState = c.trustState.clone()
	w.teClaims = c.teClaims.clone()
	w.releaseQueue = c.releaseQueue.clone()
	w.share = c.share.clone()
	w.arrayLimits = maps.Clone(c.arrayLimits)
	// allocationState holds values and an allocation that is replaced,
	// never changed in place: the copy above is its own.
	return &w
}

// clone returns a copy of the job's state that shares no map or slice
// with it.
func (js *jobState) clone() *jobState {
	out := *js
	out.throughputs = maps.Clone(js.throughputs)
	out.perType = maps.Clone(js.perType)
	out.received = maps.Clone(js.received)
	out.notes = slices.Clone(js.notes)
	out.slots = slices.Clone(js.slots)
	out.partners = slices.Clone(js.partners)
	return &out
}
