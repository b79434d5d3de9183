package tepreempt

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
)

// LRTP preempts the job with the longest remaining run time, then the next
// longest, until some node holds the TE job (Big-C's rule, as the FitGpp
// paper simulates it: with exact remaining times, and blind to where the
// victims run, so jobs on other nodes may be preempted on the way).
type LRTP struct {
	// MaxPreemptions caps preemptions per job (0: no cap; the paper's
	// baselines have none).
	MaxPreemptions int
}

// Name is "lrtp".
func (LRTP) Name() string { return "lrtp" }

// Choose returns the victims in preemption order. Equal remaining times go
// to the candidate listed first.
func (l LRTP) Choose(req Request) (Choice, error) {
	index, err := checked(req)
	if err != nil {
		return Choice{}, err
	}
	if i := roomNow(req); i >= 0 {
		return Choice{Node: req.Nodes[i].ID, Rule: RuleFree}, nil
	}
	order := eligible(req, l.MaxPreemptions)
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Compare(req.Candidates[b].Remaining, req.Candidates[a].Remaining)
	})
	return untilFits(req, index, order, RuleLRTP, func(c Candidate) string {
		return fmt.Sprintf("longest remaining time first, %s left", c.Remaining)
	})
}

// Random preempts randomly drawn jobs until some node holds the TE job
// (the paper's RAND baseline). Rand is the caller's seeded generator, so a
// run can be repeated.
type Random struct {
	MaxPreemptions int
	Rand           *rand.Rand
}

// Name is "random".
func (Random) Name() string { return "random" }

// Choose draws a random order of the eligible candidates and preempts
// along it.
func (r Random) Choose(req Request) (Choice, error) {
	index, err := checked(req)
	if err != nil {
		return Choice{}, err
	}
	if r.Rand == nil {
		return Choice{}, fmt.Errorf("TE job %s: random chooser without a generator", req.Job)
	}
	if i := roomNow(req); i >= 0 {
		return Choice{Node: req.Nodes[i].ID, Rule: RuleFree}, nil
	}
	order := eligible(req, r.MaxPreemptions)
	r.Rand.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
	return untilFits(req, index, order, RuleRandom, func(Candidate) string { return "drawn at random" })
}

// eligible lists the indexes of the candidates under the cap.
func eligible(req Request, limit int) []int {
	var out []int
	for i, c := range req.Candidates {
		if allowed(c.Preemptions, limit) {
			out = append(out, i)
		}
	}
	return out
}

// untilFits preempts along order until the node of the latest victim holds
// the TE job (only that node's room changed, so it is the first to fit).
// Victims on other nodes stay preempted: the baselines do not look at
// placement, which is what the paper measures them with.
func untilFits(req Request, index map[string]int, order []int, rule string, why func(Candidate) string) (Choice, error) {
	freed := make([]Resources, len(req.Nodes))
	for k, i := range order {
		c := req.Candidates[i]
		n := index[c.Node]
		freed[n] = freed[n].Add(c.Demand)
		if !req.Nodes[n].Free.Add(freed[n]).Covers(req.Demand) {
			continue
		}
		ch := Choice{Node: c.Node, Rule: rule}
		for _, j := range order[:k+1] {
			v := req.Candidates[j]
			ch.Victims = append(ch.Victims, Victim{
				Job: v.Job, Node: v.Node, Grace: v.Grace,
				Reason: fmt.Sprintf("%s %s on node %s, %s (%s)", reasonPrefix, req.Job, c.Node, graceText(v.Grace), why(v)),
			})
		}
		return ch, nil
	}
	return Choice{}, noRoom(req, rule)
}
