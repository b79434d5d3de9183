package sched

import (
	"fmt"
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

// distrust says why snap must not be acted on, or "" when it is usable.
func (c *Core) distrust(snap *bridge.Snapshot) (why, cause string) {
	if snap == nil {
		return "no snapshot", "snapshot_error"
	}
	gpus := 0
	for _, n := range snap.Nodes {
		if c.nodeUsable(n) {
			gpus += n.GPUs
		}
	}
	if gpus == 0 {
		return "no usable GPU node in the managed partitions", "no_nodes"
	}
	known := 0
	for id := range c.jobs {
		if _, err := ParseJobID(id); err == nil {
			known++ // a job array's waiting tasks (slots) are not Slurm's records
		}
	}
	gone := c.missingFrom(snap)
	missing := len(gone)
	if missing >= vanishMinimum && float64(missing) > vanishFraction*float64(known) {
		// Trusted when a second read shows the same jobs gone: jobs that
		// ended and were forgotten (MinJobAge), or were cancelled by
		// their owner, stay gone; a broken answer rarely repeats itself.
		confirmed := len(c.suspects) > 0
		for _, id := range gone {
			confirmed = confirmed && c.suspects[id]
		}
		if confirmed {
			c.suspects = nil
			return "", ""
		}
		c.suspects = map[string]bool{}
		for _, id := range gone {
			c.suspects[id] = true
		}
		return fmt.Sprintf("%d of %d managed jobs vanished from Slurm's answer at once", missing, known), "jobs_vanished"
	}
	c.suspects = nil
	return "", ""
}

// missingFrom lists the tracked jobs snap does not show.
func (c *Core) missingFrom(snap *bridge.Snapshot) []string {
	var gone []string
	for id := range c.jobs {
		jid, err := ParseJobID(id)
		if err != nil {
			continue
		}
		if _, ok := snap.Job(jid); !ok {
			gone = append(gone, id)
		}
	}
	return gone
}

// Check says why snap must not be acted on, or "" when it is usable; a
// caller that gets cause "jobs_vanished" reads Slurm again: the same jobs
// missing from the second read are taken as gone.
func (c *Core) Check(snap *bridge.Snapshot) (why, cause string) {
	return c.distrust(snap)
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
		js := c.jobs[j.ID.String()]
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
