// Package tepreempt decides which running best-effort (BE) jobs to preempt
// so that a trial-and-error (TE) job can start at once. The main rule is
// FitGpp's (Fitting Grace Period Preemption): prefer one victim whose
// resources, added to what its node already has free, are enough for the
// TE job on their own; among those, prefer small jobs with short grace
// periods; never touch a job already preempted the configured maximum
// number of times. Two baselines from the same paper share the interface:
// longest remaining time first (LRTP, Big-C's rule) and random victims.
//
// The package is pure: no clock and no global randomness. The caller
// describes the cluster as it will be once the preemptions already under
// way have ended (Node.Free) and lists the jobs it may preempt; the random
// chooser draws from a generator the caller seeds.
package tepreempt

import (
	"errors"
	"fmt"
	"time"
)

// Resources is a demand or a capacity on one node. A resource the caller
// does not track is left at 0 everywhere: it then never limits a fit and
// never counts in a job's size, so a caller that knows only GPUs passes
// only GPUs.
type Resources struct {
	GPUs  int
	CPUs  int
	MemMB int64
}

// Add returns r + o, component by component.
func (r Resources) Add(o Resources) Resources {
	return Resources{GPUs: r.GPUs + o.GPUs, CPUs: r.CPUs + o.CPUs, MemMB: r.MemMB + o.MemMB}
}

// Sub returns r - o, component by component.
func (r Resources) Sub(o Resources) Resources {
	return Resources{GPUs: r.GPUs - o.GPUs, CPUs: r.CPUs - o.CPUs, MemMB: r.MemMB - o.MemMB}
}

// Covers reports whether every component of d fits in r.
func (r Resources) Covers(d Resources) bool {
	return d.GPUs <= r.GPUs && d.CPUs <= r.CPUs && d.MemMB <= r.MemMB
}

func (r Resources) negative() bool { return r.GPUs < 0 || r.CPUs < 0 || r.MemMB < 0 }

// String spells the non-zero components, GPUs first.
func (r Resources) String() string {
	s := fmt.Sprintf("%d GPUs", r.GPUs)
	if r.CPUs != 0 {
		s += fmt.Sprintf(", %d CPUs", r.CPUs)
	}
	if r.MemMB != 0 {
		s += fmt.Sprintf(", %d MB", r.MemMB)
	}
	return s
}

// Node is one machine a TE job may run on.
type Node struct {
	ID string
	// Capacity is the node's total; it normalizes a job's demand (a
	// job of 4 GPUs weighs more on a 4-GPU node than on an 8-GPU one).
	Capacity Resources
	// Free is what the node will have free once the grace periods
	// already running on it have ended, less what is already promised
	// to other TE jobs waiting for those grace periods. Counting grace
	// periods in flight keeps two TE jobs that arrive together from
	// preempting twice for the same room.
	Free Resources
}

// Candidate is a running BE job that could be preempted. Jobs already in
// their grace period are not candidates: their resources are in Node.Free.
type Candidate struct {
	Job  string
	Node string
	// Demand is what the job holds on its node.
	Demand Resources
	// Grace is the time the job is given to save its state between the
	// preemption signal and the stop; the TE job waits that long.
	Grace time.Duration
	// Preemptions counts the times the job has been preempted so far.
	Preemptions int
	// Remaining is the job's remaining run time. Only LRTP reads it:
	// FitGpp needs no run-time estimate, which is its point.
	Remaining time.Duration
}

// Request asks for room for one TE job.
type Request struct {
	Job    string
	Demand Resources
	// Nodes, in the caller's order; ties between equally good nodes go
	// to the one listed first.
	Nodes []Node
	// Candidates, in the caller's order (start order reads best); ties
	// between equal scores go to the one listed first.
	Candidates []Candidate
}

// Victim is one job to preempt, with the reason to show for it.
type Victim struct {
	Job   string
	Node  string
	Grace time.Duration
	// Score is the FitGpp score (0 for the baselines).
	Score float64
	// Reason says why this job was chosen, for the job's status.
	Reason string
}

// Choice is the answer to a Request: the node the TE job will run on and
// the jobs to preempt first (none when the node already has room, or will
// once grace periods in flight end).
type Choice struct {
	Node    string
	Victims []Victim
	// Rule says how the choice was made: RuleFree, RuleFitAlone,
	// RuleCombined, RuleLRTP or RuleRandom.
	Rule string
}

// The rules a Choice can come from.
const (
	RuleFree     = "free"      // no preemption needed
	RuleFitAlone = "fit-alone" // FitGpp: one victim whose room alone fits
	RuleCombined = "combined"  // FitGpp fallback: several victims on one node
	RuleLRTP     = "lrtp"      // longest remaining time first, until it fits
	RuleRandom   = "random"    // random victims, until it fits
)

// reasonPrefix starts every victim's reason, so a status line reads the
// same whichever rule chose the victim.
const reasonPrefix = "preempted for TE job"

// ErrNoRoom is returned (wrapped) when no node can hold the TE job even
// after preempting every job the rule allows.
var ErrNoRoom = errors.New("no room")

// Chooser picks the victims for a TE job.
type Chooser interface {
	// Choose returns where the TE job runs and whom to preempt first. An
	// error wrapping ErrNoRoom means nothing allowed can make room; other
	// errors mean a malformed request.
	Choose(Request) (Choice, error)
	// Name is the rule's short name (fitgpp, lrtp, random).
	Name() string
}

// allowed reports whether a job preempted n times may be preempted again
// under cap (0: no cap).
func allowed(n, limit int) bool { return limit <= 0 || n < limit }

// checked validates a request and indexes its nodes by ID.
func checked(req Request) (map[string]int, error) {
	if req.Demand.negative() {
		return nil, fmt.Errorf("TE job %s: negative demand %v", req.Job, req.Demand)
	}
	index := make(map[string]int, len(req.Nodes))
	for i, n := range req.Nodes {
		if _, dup := index[n.ID]; dup {
			return nil, fmt.Errorf("TE job %s: node %s listed twice", req.Job, n.ID)
		}
		if n.Capacity.negative() {
			return nil, fmt.Errorf("TE job %s: node %s has negative capacity %v", req.Job, n.ID, n.Capacity)
		}
		index[n.ID] = i
	}
	seen := make(map[string]bool, len(req.Candidates))
	for _, c := range req.Candidates {
		if _, ok := index[c.Node]; !ok {
			return nil, fmt.Errorf("TE job %s: candidate %s runs on unknown node %q", req.Job, c.Job, c.Node)
		}
		if seen[c.Job] {
			return nil, fmt.Errorf("TE job %s: candidate %s listed twice", req.Job, c.Job)
		}
		if c.Demand.negative() || c.Grace < 0 || c.Preemptions < 0 {
			return nil, fmt.Errorf("TE job %s: candidate %s has a negative demand, grace or count", req.Job, c.Job)
		}
		seen[c.Job] = true
	}
	return index, nil
}

// roomNow returns the node whose free resources already hold the TE job,
// leaving the least room unused (so larger holes stay for larger jobs),
// or -1.
func roomNow(req Request) int {
	best, bestLeft := -1, 0.0
	for i, n := range req.Nodes {
		if !n.Free.Covers(req.Demand) {
			continue
		}
		left := share(n.Free.Sub(req.Demand), n.Capacity)
		if best < 0 || left < bestLeft {
			best, bestLeft = i, left
		}
	}
	return best
}

// share is the size of d relative to a node's capacity: the sum over the
// tracked resources of d/capacity, so that 4 CPUs and 64 GB compare on
// one scale whatever their units.
func share(d, capacity Resources) float64 {
	s := 0.0
	if capacity.GPUs > 0 {
		s += float64(d.GPUs) / float64(capacity.GPUs)
	}
	if capacity.CPUs > 0 {
		s += float64(d.CPUs) / float64(capacity.CPUs)
	}
	if capacity.MemMB > 0 {
		s += float64(d.MemMB) / float64(capacity.MemMB)
	}
	return s
}

func graceText(g time.Duration) string {
	return fmt.Sprintf("grace %d s", int64(g.Round(time.Second)/time.Second))
}

func noRoom(req Request, rule string) error {
	return fmt.Errorf("TE job %s needs %v: no node has room even after %s preemption: %w", req.Job, req.Demand, rule, ErrNoRoom)
}
