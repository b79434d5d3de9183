package sched

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/hadar"
	"github.com/gavel-slurm/gavel-slurm/rounds"
)

// Mixed types (Hadar's task-level heterogeneity, docs/hadar.md): after a
// round's plan, a pending multi-GPU job whose tag says mixed=ok, left
// waiting because no single GPU type has room for it, may start on the
// GPUs the plan leaves idle across several types. Slurm is told through
// the job's own request (ActSetShape): the node count, the GPUs per node
// and a counted constraint ("[v100*1&k80*1]": one V100 node and one K80
// node) when every node gets the same share, otherwise the GPUs per job
// and a constraint allowing each chosen type ("v100|k80"), where Slurm
// splits the GPUs over the nodes as it finds room. When a round later
// places the job on one type, its request goes back to one type.
//
// A job started on a mix keeps its GPUs until it ends: the round
// mechanism knows placements on one type only, so it cannot move or
// preempt the job, and its GPUs are not offered to the rounds meanwhile.
// Its time is credited per type as hadar does: GPU time over its scale.

// mixSpanFactor is the penalty hadar charges a placement spread over
// servers, the reference table's median (docs/hadar.md). Every mix spans
// servers here (one GPU type per node), so it only matters when comparing
// a mix with a spread single-type placement.
const mixSpanFactor = 0.75

// mixChoice is the mix chosen for a waiting job this round.
type mixChoice struct {
	counts map[string]int // GPUs per type
	shape  bridge.Action  // the ActSetShape that asks Slurm for it
}

// describeCounts renders type counts as status shows them: "2 k80 + 2 v100".
func describeCounts(counts map[string]int) string {
	types := slices.Sorted(maps.Keys(counts))
	parts := make([]string, len(types))
	for i, t := range types {
		parts[i] = fmt.Sprintf("%d %s", counts[t], t)
	}
	return strings.Join(parts, " + ")
}

// shapeFor is the request that asks Slurm for the placement's parts.
func shapeFor(job bridge.JobID, parts []hadar.Part, gpus int) bridge.Action {
	a := bridge.Action{Kind: bridge.ActSetShape, Job: job, Nodes: len(parts)}
	servers := map[string]int{}
	even := true
	for _, p := range parts {
		servers[p.Type]++
		even = even && p.GPUs == parts[0].GPUs
	}
	types := slices.Sorted(maps.Keys(servers))
	if even {
		a.GPUsPerNode = parts[0].GPUs
		terms := make([]string, len(types))
		for i, t := range types {
			terms[i] = t + "*" + strconv.Itoa(servers[t])
		}
		a.Constraints = "[" + strings.Join(terms, "&") + "]"
		return a
	}
	a.GPUs = gpus
	a.Constraints = strings.Join(types, "|")
	return a
}

// isMixConstraint reports whether constraint c is one shapeFor writes:
// "[t*n&...]" or "t|t|..." over GPU type names only. Only mixed=ok jobs'
// constraints are read this way; for any other job such an expression is
// the user's.
func isMixConstraint(c string, isType func(string) bool) bool {
	_, ok := mixTypes(c, isType)
	return ok
}

// mixTypes lists the GPU types of a mix constraint (see isMixConstraint),
// each once; ok is false for any other constraint.
func mixTypes(c string, isType func(string) bool) (types []string, ok bool) {
	add := func(term string) bool {
		name := strings.TrimSpace(term)
		if !isType(name) {
			return false
		}
		if !slices.Contains(types, name) {
			types = append(types, name)
		}
		return true
	}
	if inner, ok := strings.CutPrefix(c, "["); ok {
		inner, ok = strings.CutSuffix(inner, "]")
		if !ok || inner == "" {
			return nil, false
		}
		for _, term := range strings.Split(inner, "&") {
			name, count, ok := strings.Cut(term, "*")
			if n, err := strconv.Atoi(count); !ok || err != nil || n < 1 || !add(name) {
				return nil, false
			}
		}
		return types, true
	}
	terms := strings.Split(c, "|")
	if len(terms) < 2 {
		return nil, false
	}
	for _, t := range terms {
		if !add(t) {
			return nil, false
		}
	}
	return types, true
}

// inMixShape reports whether pending job j carries a request the daemon
// shaped for a mix.
func (c *Core) inMixShape(j bridge.Job) bool {
	return j.Tag.MixedOK() && j.RequestedGPUType == "" && isMixConstraint(j.Constraints, c.isGPUType)
}

// singleShape is the request that puts job j (of gpus GPUs) back on
// GPU type t: the request the job had before the daemon shaped it for a
// mix when the core saw it, else as few nodes of t as hold the GPUs.
func (c *Core) singleShape(j bridge.Job, js *jobState, t, constraints string) bridge.Action {
	a := bridge.Action{Kind: bridge.ActSetShape, Job: j.ID, Constraints: constraints}
	if js != nil && js.single.Nodes > 0 {
		a.Nodes, a.GPUsPerNode, a.GPUs = js.single.Nodes, js.single.GPUsPerNode, js.single.GPUs
		return a
	}
	most := 0
	for _, n := range c.typeNodes[t] {
		most = max(most, n.GPUs)
	}
	gpus := max(j.GPUs, 1)
	a.Nodes = 1
	if most > 0 {
		a.Nodes = (gpus + most - 1) / most
	}
	if gpus%a.Nodes == 0 {
		a.GPUsPerNode = gpus / a.Nodes
	} else {
		a.GPUs = gpus
	}
	return a
}

// mixAllowed reports whether the site lets job js start on a mix of GPU
// types: a job on a mix is never preempted, so only where the site's rules
// allow preempt=never for it ([limits] allowed_preempt), or mixed=ok
// would be a way around them.
func (c *Core) mixAllowed(js *jobState) bool {
	facts := js.facts
	facts.Tag.Preempt = bridge.PreemptNever
	return c.set.Rules.Apply(facts).Preempt == bridge.PreemptNever
}

// mixRefusedNote is the status note of a mixed=ok job the site's rules
// keep off mixes.
const mixRefusedNote = "mixed=ok ignored: a job on a mix is never preempted, and preempt=never is not allowed here"

// noteSingleShape remembers a job's own request while it has one, so
// that a job shaped for a mix can be given it back.
func (c *Core) noteSingleShape(j bridge.Job, js *jobState) {
	if js == nil || j.State != bridge.JobPending || c.inMixShape(j) || !j.Tag.MixedOK() {
		return
	}
	js.single = bridge.Action{Nodes: max(j.Nodes, 1), GPUsPerNode: j.GPUsPerNode}
	if j.GPUsPerNode == 0 {
		js.single.GPUs = j.GPUs
	}
}

// mixCandidate reports whether the plan's decision d leaves a job waiting
// that may be placed on a mix.
func (c *Core) mixCandidate(d keyedDecision, snap *bridge.Snapshot) (bridge.Job, *jobState, bool) {
	js := c.jobs[d.key]
	jid, isJob := d.key.Job()
	if d.Action != rounds.Wait || !isJob || js.scale < 2 || js.heldBy != "" || c.teWaiting(jid) {
		return bridge.Job{}, nil, false
	}
	j, ok := snap.Job(jid)
	if !ok || j.State != bridge.JobPending || !j.Tag.MixedOK() || j.RequestedGPUType != "" || js.pre.phase != notPreempted ||
		!c.mixAllowed(js) {
		return bridge.Job{}, nil, false
	}
	// A job's own features could not be kept beside a counted
	// constraint without changing what it means.
	if own, ok := ownFeatures(j.Constraints, c.isGPUType); !c.inMixShape(j) && (!ok || len(own) > 0) {
		return bridge.Job{}, nil, false
	}
	return j, js, true
}

// placeMixes chooses mixes for the jobs the plan leaves waiting, on the
// GPUs it leaves idle: the most owed job first (best priority, then
// arrival), each only when no single type has room for it.
func (c *Core) placeMixes(snap *bridge.Snapshot, plan *rounds.Plan) map[jobKey]mixChoice {
	type candidate struct {
		job      bridge.Job
		js       *jobState
		priority float64
		order    int
	}
	var cands []candidate
	for i, d := range c.keyed(plan) {
		if j, js, ok := c.mixCandidate(d, snap); ok {
			cands = append(cands, candidate{j, js, d.Reason.Priority, i})
		}
	}
	if len(cands) == 0 {
		return nil
	}
	sort.SliceStable(cands, func(a, b int) bool { return cands[a].priority > cands[b].priority })
	idle, err := hadar.NewIdle(c.idleAfter(plan))
	if err != nil {
		return nil // a server listed twice: nothing is placed
	}
	out := map[jobKey]mixChoice{}
	for _, cand := range cands {
		job := hadar.Job{ID: cand.js.name, Scale: cand.js.scale, Rates: cand.js.throughputs}
		if job.Scale > idle.Total() {
			continue
		}
		if _, single, err := hadar.Best(job, idle, nil, hadar.Options{SpanFactor: mixSpanFactor, SingleType: true}); err != nil || single {
			continue // one type has room: the round chose to let it wait
		}
		placed, err := hadar.Fill([]hadar.Request{{Job: job}}, idle, hadar.Options{SpanFactor: mixSpanFactor})
		if err != nil || len(placed) != 1 || !hadar.Mixed(placed[0].Parts) {
			continue
		}
		out[cand.js.key] = mixChoice{counts: hadar.Counts(placed[0].Parts), shape: shapeFor(cand.job.ID, placed[0].Parts, cand.js.scale)}
	}
	return out
}

// idleAfter lists every server the rounds place on with the GPUs the
// plan leaves unused.
func (c *Core) idleAfter(plan *rounds.Plan) []hadar.FreeServer {
	used := map[string]map[int]bool{}
	for _, a := range plan.Assignments {
		for _, s := range a.Slots {
			if used[s.Server] == nil {
				used[s.Server] = map[int]bool{}
			}
			used[s.Server][s.GPU] = true
		}
	}
	out := make([]hadar.FreeServer, 0, len(c.cluster))
	for _, s := range c.cluster {
		fs := hadar.FreeServer{ID: s.ID, Type: s.Type}
		for g := range s.GPUs {
			if !used[s.ID][g] {
				fs.GPUs = append(fs.GPUs, g)
			}
		}
		out = append(out, fs)
	}
	return out
}

// mixActions starts pending job j on the chosen mix: its request shaped
// for it, then released and raised like a job chosen for one type.
func (c *Core) mixActions(j bridge.Job, m mixChoice, why string) []Action {
	var out []Action
	add := func(a bridge.Action) {
		a.Job = j.ID
		out = append(out, Action{Action: a, Why: why, Restarts: j.Restarts})
	}
	if !hasShape(j, m.shape) {
		add(m.shape)
	}
	return append(out, c.eligibleActions(j, c.runPriority(), why)...)
}

// hasShape reports whether job j's request already is shape a, so that
// nothing is sent twice.
func hasShape(j bridge.Job, a bridge.Action) bool {
	if j.Nodes != a.Nodes || j.Constraints != a.Constraints || j.GPUsPerNode != a.GPUsPerNode {
		return false
	}
	return a.GPUsPerNode > 0 || j.GPUs == a.GPUs
}

// mixOf is the GPUs per type of a managed job running on nodes of more
// than one type, or nil. Slurm's record gives the GPUs per node only for
// a per-node request; a job-wide request is split evenly for the
// accounting, a close guess where the exact split is not read.
func (c *Core) mixOf(j bridge.Job, nodeTypes map[string]string) map[string]int {
	if !isRunning(j) || j.RunningGPUType != "" || len(j.RunningNodes) < 2 || !j.Tag.MixedOK() {
		return nil
	}
	counts := map[string]int{}
	left := j.GPUs
	for i, n := range j.RunningNodes {
		t := nodeTypes[n]
		if t == "" {
			return nil
		}
		share := j.GPUsPerNode
		if share == 0 {
			share = left / (len(j.RunningNodes) - i)
		}
		left -= share
		counts[t] += share
	}
	if len(counts) < 2 {
		return nil
	}
	return counts
}

// nodeTypes maps the snapshot's node names to their GPU types.
func nodeTypes(snap *bridge.Snapshot) map[string]string {
	out := make(map[string]string, len(snap.Nodes))
	for _, n := range snap.Nodes {
		out[n.Name] = n.GPUType
	}
	return out
}

// applyMixes turns the round's actions for the jobs given a mix from a
// hold into the mix's actions, and says so in their status; a job
// running on a mix is shown as such.
func (c *Core) applyMixes(snap *bridge.Snapshot, mixes map[jobKey]mixChoice, actions []Action) []Action {
	types := nodeTypes(snap)
	for _, key := range c.order {
		js := c.jobs[key]
		if js.scale == 0 {
			continue
		}
		j, ok := jobOf(snap, key)
		if !ok {
			continue
		}
		if mix := c.mixOf(j, types); mix != nil {
			js.decision, js.reason = rounds.Keep.String(), "running on a mix: "+describeCounts(mix)
			continue
		}
		m, ok := mixes[key]
		if !ok {
			continue
		}
		actions = slices.DeleteFunc(actions, func(a Action) bool { return a.Job == j.ID && a.Kind == bridge.ActHold })
		js.decision = rounds.Run.String()
		js.reason = fmt.Sprintf("starting on a mix: %s (no single type has %d GPUs free)", describeCounts(m.counts), js.scale)
		actions = append(actions, c.mixActions(j, m, js.reason)...)
	}
	return actions
}

// creditMix credits a job running on a mix with d of service, shared
// among its types as GPU time over its scale (hadar's accounting): 2 V100
// and 2 K80 for 360 s count 180 s on each.
func (c *Core) creditMix(js *jobState, j bridge.Job, mix map[string]int, d time.Duration, now time.Time) []rounds.Usage {
	if !j.StartTime.IsZero() && now.Sub(j.StartTime) < d {
		d = max(now.Sub(j.StartTime), 0)
	}
	total := 0
	for _, n := range mix {
		total += n
	}
	var out []rounds.Usage
	for _, t := range slices.Sorted(maps.Keys(mix)) {
		s := d.Seconds() * float64(mix[t]) / float64(total)
		js.received[t] += s
		out = append(out, rounds.Usage{Key: js.name, Type: t, Seconds: s})
	}
	return out
}
