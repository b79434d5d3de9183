// Record is what the core persists of a job, and how the journal and the
// saved records come back after a restart (RestoreJournal).

package sched

import (
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// Record is what the step remembers about one managed job between rounds
// and across restarts; the daemon persists it.
type Record struct {
	JobID string `json:"job_id"`
	// FirstSeen is when the job was first seen (its arrival for the
	// policies).
	FirstSeen time.Time `json:"first_seen"`
	// Received is the seconds of service on each GPU type since arrival.
	Received map[string]float64 `json:"received,omitempty"`
	// LastDecision and Reason are the last round's decision and why.
	LastDecision string `json:"last_decision,omitempty"`
	Reason       string `json:"reason,omitempty"`
	// GraceStart, GraceTarget, GracePhase and GraceRestarts are the
	// preemption in progress (ledger.go); zero when none. Kept so that a
	// restart neither repeats the signal nor forgets the requeue.
	GraceStart    time.Time `json:"grace_start,omitzero"`
	GraceTarget   string    `json:"grace_target,omitempty"`
	GracePhase    string    `json:"grace_phase,omitempty"`
	GraceRestarts int       `json:"grace_restarts,omitempty"`
	// GraceForTE is the trial-and-error job the preemption makes room
	// for ("" for a round's preemption): after a restart the room stays
	// claimed for it.
	GraceForTE string `json:"grace_for_te,omitempty"`
	// Preempt is the job's preemption mode from its tag, if any.
	Preempt string `json:"preempt,omitempty"`
	// RestartCostS is the job's restart cost in seconds as last measured
	// (restartcost.go); 0 when it has not been.
	RestartCostS float64 `json:"restart_cost_s,omitempty"`
	// HeldByDaemon is set while the job's hold is the daemon's; other
	// holds are the user's or an admin's and are left alone.
	HeldByDaemon bool `json:"held_by_daemon,omitempty"`
	// SharedByDaemon is set while the job's shard request is the
	// daemon's (a pair's member): it is made a whole-GPU request again
	// when it runs alone, where a user's own shard request is left as
	// it is.
	SharedByDaemon bool      `json:"shared_by_daemon,omitempty"`
	UpdatedAt      time.Time `json:"updated_at"`
}

// JournalEntry is one journaled action as RestoreJournal replays it; its
// job is the one the action names.
type JournalEntry struct {
	Created time.Time
	// Failed entries changed nothing in Slurm.
	Failed bool
	// Pending entries were journaled and perhaps sent, but their outcome
	// was not recorded; Seq names them for reconciliation.
	Pending bool
	Seq     uint64
	Action  Action
}

// RestoreJournal replays the journaled actions that the persisted records
// may not reflect yet (a crash between sending and persisting), in journal
// order: holds and releases (whose hold is whose) and grace signals (a
// grace period that started, so it is neither signalled again nor
// forgotten). Failed entries changed nothing in Slurm and are skipped.
// Entries known done are the core's at once. Entries still pending may or
// may not have reached Slurm: they come back as a proposal (nil when there
// are none), to be committed once reconciliation against Slurm tells what
// became of each (Proposal.Journal names their entries). Call after
// Restore, before the first Step.
func (c *Core) RestoreJournal(entries []JournalEntry, records map[string]Record) *Proposal {
	var pending []JournalEntry
	for _, e := range entries {
		if e.Pending {
			pending = append(pending, e)
			continue
		}
		c.replay(e, records)
	}
	return c.proposeLanded(pending, records)
}

// Unanswered proposes the actions of entries, sent without an answer
// (Outcome Lost) and left pending in the journal, as landed: the shell
// commits the proposal with what reconciliation finds in Slurm, as it does
// the journal's leftovers at start (nil when entries is empty). Call after
// committing the proposal the actions came from.
func (c *Core) Unanswered(entries []JournalEntry) *Proposal {
	return c.proposeLanded(entries, nil)
}

// proposeLanded is a proposal of pending journal entries taken for landed
// (Proposal.Journal names them); nil when there are none.
func (c *Core) proposeLanded(pending []JournalEntry, records map[string]Record) *Proposal {
	if len(pending) == 0 {
		return nil
	}
	w := c.fork()
	p := &Proposal{Round: c.round, next: w, replay: true}
	for _, e := range pending {
		w.replay(e, records)
		p.Actions = append(p.Actions, e.Action)
		p.Journal = append(p.Journal, e.Seq)
	}
	return p
}

// replay takes one journaled action for landed.
func (c *Core) replay(e JournalEntry, records map[string]Record) {
	if e.Failed {
		return
	}
	a := e.Action
	if a.Kind == bridge.ActSetArrayLimit && a.ArrayOwnSet {
		// The array's own limit, which the state may not have kept yet:
		// without it the limit the daemon set would be taken for its
		// user's at the next look.
		if _, known := c.arrayLimits[a.Job]; !known {
			if c.arrayLimits == nil {
				c.arrayLimits = map[bridge.JobID]int{}
			}
			c.arrayLimits[a.Job] = a.ArrayOwn
		}
	}
	key := keyOf(e.Action.Job)
	js := c.jobs[key]
	if js != nil && e.Created.Before(records[js.name].UpdatedAt) {
		return
	}
	if js == nil {
		if a.Kind != bridge.ActHold && a.Kind != bridge.ActRequeueHold && a.Kind != bridge.ActSetShare {
			return
		}
		// A job that arrived in the round the crash cut short: the
		// journal is all that says the hold (or the shard request) is the
		// daemon's.
		js = &jobState{key: key, name: key.String(), firstSeen: e.Created, received: map[string]float64{}, replayed: true}
		c.jobs[key] = js
		c.order = append(c.order, key)
	}
	switch a.Kind {
	case bridge.ActSignal:
		if js.pre.phase == notPreempted {
			js.pre = preemption{phase: inGrace, start: e.Created, restarts: a.Restarts, forTE: a.ForTE}
		}
	case bridge.ActRequeueHold, bridge.ActRequeue:
		if js.pre.phase != requeued {
			forTE := js.pre.forTE
			if a.ForTE != 0 {
				forTE = a.ForTE
			}
			js.pre = preemption{phase: requeued, start: e.Created, target: js.pre.target, restarts: a.Restarts, forTE: forTE}
		}
	}
	c.noteHolds([]Action{a})
}

// records are the persisted view of every tracked job.
func (c *Core) records(now time.Time) []Record {
	out := make([]Record, 0, len(c.order))
	for _, key := range c.order {
		js := c.jobs[key]
		if js.arrayOf != 0 {
			// A slot: nothing of it outlives a restart (it never ran,
			// and its arrival is its array record's).
			continue
		}
		rec := Record{JobID: js.name, FirstSeen: js.firstSeen, Received: copyMap(js.received),
			LastDecision: js.decision, Reason: js.reason, UpdatedAt: now, HeldByDaemon: js.heldByDaemon, SharedByDaemon: js.shareSet,
			Preempt: string(js.mode), RestartCostS: js.restartMeasured.Seconds()}
		if js.pre.phase != notPreempted {
			rec.GraceStart, rec.GraceTarget = js.pre.start, js.pre.target
			rec.GracePhase, rec.GraceRestarts = phaseNames[js.pre.phase], js.pre.restarts
			if js.pre.forTE != 0 {
				rec.GraceForTE = js.pre.forTE.String()
			}
		}
		out = append(out, rec)
	}
	return out
}
