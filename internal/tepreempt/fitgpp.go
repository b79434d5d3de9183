package tepreempt

import (
	"cmp"
	"fmt"
	"slices"
)

// FitGpp is the paper's rule. Each running BE job j gets the score
//
//	size(j)/max size + Weight × grace(j)/max grace
//
// where size is the job's demand relative to its node's capacity, summed
// over the resources, and both maxima run over every candidate: the two
// terms then lie in [0, 1] whatever the cluster, and Weight alone says how
// much a long grace period counts against a small demand.
//
// Small jobs come first because a preempted job goes back to the head of
// the queue: a small one finds room again quickly, a large one blocks the
// queue behind it. Short grace periods come first because the TE job
// waits for them.
type FitGpp struct {
	// Weight is the paper's s: the importance of the grace period
	// relative to the demand.
	Weight float64
	// MaxPreemptions is the paper's P: a job preempted that many times
	// is never chosen again (0: no cap).
	MaxPreemptions int
}

// Name is "fitgpp".
func (FitGpp) Name() string { return "fitgpp" }

// Choose applies, in order:
//
//  1. a node whose free resources already hold the TE job: no victim;
//  2. the lowest-scored candidate whose own resources, with its node's
//     free ones, hold the TE job (the fit rule: one preemption);
//  3. otherwise, on each node, candidates in score order until the node
//     holds the TE job; the node needing the fewest victims wins, then the
//     lowest total score. The paper falls back to a random job here and
//     reports the case never arose; a deterministic choice that still
//     makes room keeps the daemon's decisions reproducible.
//
// Candidates over the cap are skipped, but still count in the maxima:
// the score scale is the cluster's, not the eligible subset's.
// Equal scores go to the candidate listed first.
func (f FitGpp) Choose(req Request) (Choice, error) {
	index, err := checked(req)
	if err != nil {
		return Choice{}, err
	}
	if i := roomNow(req); i >= 0 {
		return Choice{Node: req.Nodes[i].ID, Rule: RuleFree}, nil
	}
	scores := f.scores(req, index)

	best := -1
	for i, c := range req.Candidates {
		if !allowed(c.Preemptions, f.MaxPreemptions) {
			continue
		}
		if !req.Nodes[index[c.Node]].Free.Add(c.Demand).Covers(req.Demand) {
			continue
		}
		if best < 0 || scores[i] < scores[best] {
			best = i
		}
	}
	if best >= 0 {
		c := req.Candidates[best]
		return Choice{Node: c.Node, Rule: RuleFitAlone, Victims: []Victim{{
			Job: c.Job, Node: c.Node, Grace: c.Grace, Score: scores[best],
			Reason: fmt.Sprintf("%s %s on node %s, %s (frees enough alone, score %.3f)", reasonPrefix, req.Job, c.Node, graceText(c.Grace), scores[best]),
		}}}, nil
	}
	return f.combined(req, index, scores)
}

// scores computes every candidate's score, in candidate order.
func (f FitGpp) scores(req Request, index map[string]int) []float64 {
	sizes := make([]float64, len(req.Candidates))
	maxSize, maxGrace := 0.0, 0.0
	for i, c := range req.Candidates {
		sizes[i] = share(c.Demand, req.Nodes[index[c.Node]].Capacity)
		maxSize = max(maxSize, sizes[i])
		maxGrace = max(maxGrace, c.Grace.Seconds())
	}
	scores := make([]float64, len(req.Candidates))
	for i, c := range req.Candidates {
		// A zero maximum means every candidate has 0 there: the term
		// separates nobody, so it is left out rather than divided by 0.
		if maxSize > 0 {
			scores[i] = sizes[i] / maxSize
		}
		if maxGrace > 0 {
			scores[i] += f.Weight * c.Grace.Seconds() / maxGrace
		}
	}
	return scores
}

// combined is step 3 of Choose.
func (f FitGpp) combined(req Request, index map[string]int, scores []float64) (Choice, error) {
	perNode := make([][]int, len(req.Nodes))
	for i, c := range req.Candidates {
		if allowed(c.Preemptions, f.MaxPreemptions) {
			n := index[c.Node]
			perNode[n] = append(perNode[n], i)
		}
	}
	bestNode, bestSet, bestTotal := -1, []int(nil), 0.0
	for n, cands := range perNode {
		// Stable: equal scores keep the caller's order.
		slices.SortStableFunc(cands, func(a, b int) int { return cmp.Compare(scores[a], scores[b]) })
		free, total := req.Nodes[n].Free, 0.0
		for k, i := range cands {
			free = free.Add(req.Candidates[i].Demand)
			total += scores[i]
			if !free.Covers(req.Demand) {
				continue
			}
			set := cands[:k+1]
			if bestNode < 0 || len(set) < len(bestSet) || (len(set) == len(bestSet) && total < bestTotal) {
				bestNode, bestSet, bestTotal = n, set, total
			}
			break
		}
	}
	if bestNode < 0 {
		return Choice{}, noRoom(req, "fitgpp")
	}
	node := req.Nodes[bestNode].ID
	ch := Choice{Node: node, Rule: RuleCombined}
	for _, i := range bestSet {
		c := req.Candidates[i]
		ch.Victims = append(ch.Victims, Victim{
			Job: c.Job, Node: c.Node, Grace: c.Grace, Score: scores[i],
			Reason: fmt.Sprintf("%s %s on node %s, %s (no single job frees enough; %d preempted there, score %.3f)", reasonPrefix, req.Job, node, graceText(c.Grace), len(bestSet), scores[i]),
		})
	}
	return ch, nil
}
