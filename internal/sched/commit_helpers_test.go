package sched

import (
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// step runs one round and commits it as though Slurm carried out every
// action.
func step(c *Core, snap *bridge.Snapshot, now time.Time, solve Solver) Result {
	p := c.Step(Input{Snap: snap, Now: now, Solve: solve})
	return c.Commit(p, accepted(p))
}

// look runs the check between rounds and commits it as though Slurm
// carried out every action.
func look(c *Core, snap *bridge.Snapshot, now time.Time) []Action {
	p := c.Look(snap, now)
	c.Commit(p, accepted(p))
	return p.Actions
}

// accepted says that every action of p landed.
func accepted(p *Proposal) []Outcome { return make([]Outcome, len(p.Actions)) }

// outcomesFor says that the actions of p listed in missed did not land
// (refused) and the others did.
func outcomesFor(p *Proposal, missed []Action) []Outcome {
	out := accepted(p)
	for i, a := range p.Actions {
		for _, m := range missed {
			if a.Action == m.Action {
				out[i] = Refused
			}
		}
	}
	return out
}
