package sched

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// A round that preempts job 1 (a grace signal) and holds newcomer job 3,
// committed with each outcome: the state moves only for what landed. An
// action sent without an answer (lost) moves nothing at first; proposed
// again as landed (Unanswered), it moves the state once reconciliation
// finds it in Slurm, and not when it does not.
func TestCommitMovesStateOnlyForAcceptedActions(t *testing.T) {
	const comment = tag + " preempt=checkpoint"
	nodes := []bridge.Node{node("a1", "v100", 1, 1)}
	// propose builds the core up to the preempting round and proposes
	// it; job 3 arrives in that round and waits.
	propose := func(t *testing.T) (*Core, *Proposal) {
		t.Helper()
		c := newCore(t, settings())
		step(c, snapshot(t, epoch, nodes, running(1, comment, "a1", "v100", 0), pending(2, tag)), epoch, c.Solve)
		now := epoch.Add(time.Minute)
		p := c.Step(Input{Snap: snapshot(t, now, nodes, running(1, comment, "a1", "v100", 0), pending(2, tag), pending(3, tag)),
			Now: now, Solve: c.Solve})
		if got := actionsOf(p.Actions, 1); got != "signal:USR1" {
			t.Fatalf("job 1 in the preempting round: %q, want its signal", got)
		}
		if got := actionsOf(p.Actions, 3); got != "hold" {
			t.Fatalf("job 3 in the preempting round: %q, want its hold", got)
		}
		return c, p
	}
	tests := map[string]struct {
		outcome Outcome
		// reconciled is, for a lost outcome, what reconciliation then
		// finds of the actions.
		reconciled Outcome
		// wantGrace and wantHeld are job 1's grace period and the
		// daemon's ownership of job 3's hold after the commits.
		wantGrace, wantHeld bool
	}{
		"accepted":              {outcome: Accepted, wantGrace: true, wantHeld: true},
		"refused":               {outcome: Refused, wantGrace: false, wantHeld: false},
		"unsent":                {outcome: Unsent, wantGrace: false, wantHeld: false},
		"lost, found landed":    {outcome: Lost, reconciled: Accepted, wantGrace: true, wantHeld: true},
		"lost, found not to be": {outcome: Lost, reconciled: Refused, wantGrace: false, wantHeld: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, p := propose(t)
			outcomes := make([]Outcome, len(p.Actions))
			for i := range outcomes {
				outcomes[i] = tc.outcome
			}
			c.Commit(p, outcomes)
			if tc.outcome == Lost {
				if c.jobs[keyOf(1)].pre.phase == inGrace || c.jobs[keyOf(3)].heldByDaemon {
					t.Errorf("actions without an answer moved the state before reconciliation: job 1 phase %v, job 3 held by the daemon %t",
						c.jobs[keyOf(1)].pre.phase, c.jobs[keyOf(3)].heldByDaemon)
				}
				entries := make([]JournalEntry, len(p.Actions))
				verdicts := make([]Outcome, len(p.Actions))
				for i, a := range p.Actions {
					entries[i] = JournalEntry{Created: p.now, Pending: true, Seq: uint64(100 + i), Action: a}
					verdicts[i] = tc.reconciled
				}
				u := c.Unanswered(entries)
				if u == nil || len(u.Journal) != len(entries) {
					t.Fatalf("unanswered actions proposed as %+v, want one action per entry", u)
				}
				c.Commit(u, verdicts)
			}
			if grace := c.jobs[keyOf(1)].pre.phase == inGrace; grace != tc.wantGrace {
				t.Errorf("job 1 in its grace period: %t, want %t", grace, tc.wantGrace)
			}
			if held := c.jobs[keyOf(3)].heldByDaemon; held != tc.wantHeld {
				t.Errorf("job 3's hold is the daemon's: %t, want %t", held, tc.wantHeld)
			}
			// The records persisted say the same as the state.
			for _, r := range c.records(p.now) {
				switch r.JobID {
				case "1":
					if (r.GracePhase == "grace") != tc.wantGrace {
						t.Errorf("job 1's record: grace phase %q", r.GracePhase)
					}
				case "3":
					if r.HeldByDaemon != tc.wantHeld {
						t.Errorf("job 3's record: held by daemon %t", r.HeldByDaemon)
					}
				}
			}
			// Either way the round happened: its number and the jobs it
			// took up are the core's.
			if c.Round() != p.Round || !c.Tracks(3) {
				t.Errorf("after the commit: round %d (proposal %d), tracks job 3 %t", c.Round(), p.Round, c.Tracks(3))
			}
		})
	}
}

// A proposal never committed (the daemon stopped between step and commit,
// or a step was only looked at) leaves the core exactly as it was: the
// same round proposed again gives the same actions.
func TestUncommittedProposalChangesNothing(t *testing.T) {
	const comment = tag + " preempt=checkpoint"
	nodes := []bridge.Node{node("a1", "v100", 1, 1)}
	c := newCore(t, settings())
	step(c, snapshot(t, epoch, nodes, running(1, comment, "a1", "v100", 0), pending(2, tag)), epoch, c.Solve)
	now := epoch.Add(time.Minute)
	snap := snapshot(t, now, nodes, running(1, comment, "a1", "v100", 0), pending(2, tag), pending(3, tag))
	before := c.records(now)
	beforeMech := c.mech.Save()

	lost := c.Step(Input{Snap: snap, Now: now, Solve: c.Solve})
	if len(lost.Actions) == 0 {
		t.Fatal("the round proposes nothing; the test needs actions")
	}
	if after := c.records(now); !reflect.DeepEqual(before, after) {
		t.Errorf("Step changed the core's records:\nbefore %+v\nafter  %+v", before, after)
	}
	if after := c.mech.Save(); !reflect.DeepEqual(beforeMech, after) {
		t.Errorf("Step changed the round mechanism's state")
	}
	if c.Round() != lost.Round-1 {
		t.Errorf("core at round %d after proposing round %d", c.Round(), lost.Round)
	}
	again := c.Step(Input{Snap: snap, Now: now, Solve: c.Solve})
	if got, want := describeActions(again.Actions), describeActions(lost.Actions); got != want {
		t.Errorf("the same round proposed again: %s, want %s", got, want)
	}
	c.Commit(again, accepted(again))
	if c.jobs[keyOf(1)].pre.phase != inGrace {
		t.Errorf("job 1 after the committed round: phase %v, want in grace", c.jobs[keyOf(1)].pre.phase)
	}
}

// A look proposes like a step: nothing moves until it is committed, and a
// proposal drawn from a state that has moved on is refused.
func TestCommitRefusesAStaleProposal(t *testing.T) {
	c := newCore(t, settings())
	nodes := []bridge.Node{node("a1", "v100", 1, 0)}
	snap := snapshot(t, epoch, nodes, pending(1, tag))
	stale := c.Step(Input{Snap: snap, Now: epoch, Solve: c.Solve})
	fresh := c.Look(snap, epoch)
	c.Commit(fresh, accepted(fresh))
	defer func() {
		if recover() == nil {
			t.Error("a proposal made before another commit was committed")
		}
	}()
	c.Commit(stale, accepted(stale))
}

// The journal's entries still pending at start are proposed, not taken
// for landed: reconciliation's verdicts decide what the core keeps.
func TestJournalReplayIsCommittedWithReconciliationsVerdicts(t *testing.T) {
	hold := func(id bridge.JobID, seq uint64) JournalEntry {
		return JournalEntry{Created: epoch, Pending: true, Seq: seq,
			Action: Action{Action: bridge.Action{Kind: bridge.ActHold, Job: id}}}
	}
	c := newCore(t, settings())
	c.Restore(map[string]Record{}, 1)
	p := c.RestoreJournal([]JournalEntry{hold(1, 10), hold(2, 11)}, map[string]Record{})
	if p == nil || !reflect.DeepEqual(p.Journal, []uint64{10, 11}) {
		t.Fatalf("replay proposal %+v, want entries 10 and 11", p)
	}
	if c.Tracks(1) || c.Tracks(2) {
		t.Fatal("pending journal entries were taken for landed before reconciliation")
	}
	c.Commit(p, []Outcome{Accepted, Refused})
	if !c.jobs[keyOf(1)].heldByDaemon {
		t.Error("job 1, whose hold reconciliation found in Slurm, is not held by the daemon")
	}
	if js := c.jobs[keyOf(2)]; js == nil || js.heldByDaemon {
		t.Errorf("job 2, whose hold did not land: %+v, want tracked and not held by the daemon", js)
	}
}

func describeActions(actions []Action) string {
	parts := make([]string, len(actions))
	for i, a := range actions {
		parts[i] = a.Action.String()
	}
	return strings.Join(parts, " ")
}

// A requeue-hold journaled before a crash and resent at restart landed,
// and the hold journaled after it was refused: the requeue-hold's own
// hold keeps the job, and it is the daemon's, so a later round releases
// it rather than taking it for its owner's.
func TestReplayedRequeueHoldKeepsItsHoldWhenTheHoldAfterItFails(t *testing.T) {
	entry := func(kind bridge.ActionKind, seq uint64) JournalEntry {
		return JournalEntry{Created: epoch, Pending: true, Seq: seq,
			Action: Action{Action: bridge.Action{Kind: kind, Job: 5}, Why: "grace period over"}}
	}
	c := newCore(t, settings())
	c.Restore(map[string]Record{}, 1)
	p := c.RestoreJournal([]JournalEntry{entry(bridge.ActRequeueHold, 10), entry(bridge.ActHold, 11)}, map[string]Record{})
	if p == nil {
		t.Fatal("no replay proposal for the pending entries")
	}
	c.Commit(p, []Outcome{Accepted, Refused})
	if js := c.jobs[keyOf(5)]; js == nil || !js.heldByDaemon {
		t.Errorf("job 5 after its requeue-hold landed and the hold after it failed: %+v, want held by the daemon", js)
	}
}
