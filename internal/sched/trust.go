package sched

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// vanishFraction and vanishMinimum decide when a snapshot that lost many
// managed jobs at once (without Slurm reporting them finished) is
// distrusted: Slurm forgets finished jobs only after MinJobAge, so a mass
// disappearance means a partial answer, not mass completion.
const (
	vanishFraction = 0.5
	vanishMinimum  = 3
)

// trustState is what the core remembers to judge snapshots and rounds.
type trustState struct {
	// suspects are the managed jobs missing from the last distrusted
	// snapshot (distrust).
	suspects map[bridge.JobID]bool
	// foreignRounds counts the rounds in a row in which another daemon's
	// run priority was seen (otherWriter).
	foreignRounds int
}

func (t trustState) clone() trustState {
	return trustState{suspects: maps.Clone(t.suspects), foreignRounds: t.foreignRounds}
}

// distrust says why snap must not be acted on, or "" when it is usable,
// and which managed jobs a next read must show missing again for them to
// be taken as gone (suspects). vanished are the jobs an earlier read
// showed missing; without them, the suspects of the last round count.
func (c *Core) distrust(snap *bridge.Snapshot, vanished []bridge.JobID) (why, cause string, suspects map[bridge.JobID]bool) {
	if snap == nil {
		return "no snapshot", "snapshot_error", c.suspects
	}
	gpus := 0
	for _, n := range snap.Nodes {
		if c.nodeUsable(n) {
			gpus += n.GPUs
		}
	}
	if gpus == 0 {
		return "no usable GPU node in the managed partitions", "no_nodes", c.suspects
	}
	known := 0
	for key := range c.jobs {
		if _, ok := key.Job(); ok {
			known++ // a job array's waiting tasks (slots) are not Slurm's records
		}
	}
	gone := c.missingFrom(snap)
	missing := len(gone)
	if missing >= vanishMinimum && float64(missing) > vanishFraction*float64(known) {
		// Trusted when a second read shows the same jobs gone: jobs that
		// ended and were forgotten (MinJobAge), or were cancelled by
		// their owner, stay gone; a broken answer rarely repeats itself.
		earlier := c.suspects
		if vanished != nil {
			earlier = map[bridge.JobID]bool{}
			for _, id := range vanished {
				earlier[id] = true
			}
		}
		confirmed := len(earlier) > 0
		for _, id := range gone {
			confirmed = confirmed && earlier[id]
		}
		if confirmed {
			return "", "", nil
		}
		suspects = map[bridge.JobID]bool{}
		for _, id := range gone {
			suspects[id] = true
		}
		return fmt.Sprintf("%d of %d managed jobs vanished from Slurm's answer at once", missing, known), "jobs_vanished", suspects
	}
	return "", "", nil
}

// missingFrom lists the tracked jobs snap does not show.
func (c *Core) missingFrom(snap *bridge.Snapshot) []bridge.JobID {
	var gone []bridge.JobID
	for key := range c.jobs {
		id, ok := key.Job()
		if !ok {
			continue
		}
		if _, ok := snap.Job(id); !ok {
			gone = append(gone, id)
		}
	}
	return gone
}

// Trust is Check's judgement of a snapshot.
type Trust struct {
	// Why the snapshot must not be acted on, "" when it is usable; Cause
	// is its short metric label.
	Why, Cause string
	// Vanished are the managed jobs the snapshot does not show when that
	// is why (Cause "jobs_vanished"): the caller reads Slurm again and
	// passes them to Step (Input.Vanished), which takes the same jobs
	// missing again as gone.
	Vanished []bridge.JobID
}

// Check judges snap as the next Step would, and changes nothing.
func (c *Core) Check(snap *bridge.Snapshot) Trust {
	why, cause, suspects := c.distrust(snap, nil)
	t := Trust{Why: why, Cause: cause}
	if cause == "jobs_vanished" {
		t.Vanished = slices.Sorted(maps.Keys(suspects))
	}
	return t
}

// otherWriter says why it looks like another gavel-slurm daemon acts on
// the same jobs: jobs this daemon gave its run priority now carry a run
// priority marked with another instance number, in this round and the
// one before. Only jobs the daemon marked itself count, so a priority
// Slurm computed that happens to fall in the band is never taken for
// another daemon's; two rounds in a row, so that one stray change does
// not stop scheduling. Two daemons would undo each other's choices (and
// take each other's holds for an admin's), so the daemon stops acting
// until one is gone.
func (c *Core) otherWriter(snap *bridge.Snapshot) string {
	var foreign []string
	for _, j := range snap.Jobs {
		js := c.jobs[keyOf(j.ID)]
		mark := j.Priority - RunPriority
		if js == nil || !js.marked || mark < 0 || mark >= instanceMarks || mark == int64(c.set.Instance) {
			continue
		}
		foreign = append(foreign, fmt.Sprintf("%d (mark %d)", j.ID, mark))
	}
	if len(foreign) == 0 {
		c.foreignRounds = 0
		return ""
	}
	c.foreignRounds++
	if c.foreignRounds < 2 {
		return ""
	}
	if len(foreign) > 5 {
		foreign = append(foreign[:5], "...")
	}
	return fmt.Sprintf("another gavel-slurm daemon sets priorities on managed jobs %s (this one marks %d): "+
		"run one daemon per cluster; sending nothing until the other stops", strings.Join(foreign, ", "), c.set.Instance)
}
