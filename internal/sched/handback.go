package sched

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// Handing back on purpose (gavel-slurm handback): before maintenance or
// removal, every job the daemon touched is put back as its owner
// submitted it, with the same restore a job gets when it leaves
// management (handBack), and what could not be restored is listed.

// HandBackAll returns the actions that give every job the daemon keeps a
// record of, or that waits on its lease, all of itself back: its owner's
// request, Slurm's own priority, no hold or lease of the daemon's, and
// each array's own limit. It changes no record: running it again on a
// later view shows what is left (HandBackLeft).
func (c *Core) HandBackAll(snap *bridge.Snapshot) []Action {
	saved := c.released
	c.released = nil
	defer func() { c.released = saved }()
	find := func(id bridge.JobID) (bridge.Job, bool) {
		if j, ok := snap.Job(id); ok {
			return j, true
		}
		return snap.ElsewhereJob(id)
	}
	for _, key := range c.order {
		id, isJob := key.Job()
		if !isJob {
			continue
		}
		j, ok := find(id)
		if !ok {
			continue
		}
		js := *c.jobs[key] // a copy: the records stay as they are
		js.heldByDaemon = js.heldByDaemon || j.LeaseHeld
		c.handBack(j, &js)
	}
	for _, jobs := range [][]bridge.Job{snap.Jobs, snap.Elsewhere} {
		for _, j := range jobs {
			if j.LeaseHeld && j.State == bridge.JobPending && c.jobs[keyOf(j.ID)] == nil {
				// Waiting on the lease with no record (the state directory
				// was lost or replaced): the lease is the daemon's alone.
				c.released = append(c.released, queuedRelease{Action: Action{Action: bridge.Action{Kind: bridge.ActRelease, Job: j.ID},
					Why: "lease dropped: handed back", Restarts: j.Restarts}})
			}
		}
	}
	for _, a := range slices.Sorted(maps.Keys(c.arrayLimits)) {
		u := c.arrayLimits[a]
		if j, ok := find(a); ok && j.Active() && j.ArrayJobID == a && j.ArrayLimit != u {
			c.released = append(c.released, queuedRelease{Action: Action{Action: bridge.Action{Kind: bridge.ActSetArrayLimit, Job: a, Tasks: u},
				Why: "array limit put back to its user's: handed back", Restarts: j.Restarts}})
		}
	}
	out := make([]Action, len(c.released))
	for i, r := range c.released {
		out[i] = r.Action
	}
	return out
}

// HandBackLeft describes, one line per job, what a hand-back has not
// restored on view snap: the actions HandBackAll would still send.
func (c *Core) HandBackLeft(snap *bridge.Snapshot) []string {
	var left []string
	var todo []string
	actions := c.HandBackAll(snap)
	for i, a := range actions {
		todo = append(todo, strings.TrimPrefix(a.Action.String(), fmt.Sprintf("%s job %s", a.Kind, a.Job)))
		todo[len(todo)-1] = string(a.Kind) + todo[len(todo)-1]
		if i+1 == len(actions) || actions[i+1].Job != a.Job {
			left = append(left, fmt.Sprintf("job %s: %s still to do", a.Job, strings.Join(todo, ", ")))
			todo = nil
		}
	}
	return left
}
