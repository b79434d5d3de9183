package sched

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/rounds"
)

// Space sharing (docs/space-sharing.md). Under a packing policy the core
// offers the policy pairs of single-GPU jobs that gain from sharing one
// GPU, and runs a pair the rounds choose on one GPU through Slurm's
// gres/shard: both members ask for half a GPU's shards on one node, and
// with one_sharing on the site's shard lines every shard job of a node
// runs on the same GPU. A pair is offered only where its members' rates
// while sharing, each as a fraction of its rate alone, add up to more
// than 1: sharing then does more work than taking turns on the GPU.

// maxPartners bounds the pairs offered for one job. Every pair is a row
// of the packing policy's program, and n jobs could form n²/2 of them;
// the first partners that gain are kept.
const maxPartners = 16

// PairEstimator is an Estimator that knows how two jobs do while they
// share a GPU.
type PairEstimator interface {
	// PairRates returns, for each of types where the estimator knows it,
	// the rates of a and b while they share one GPU of that type, each as
	// a fraction of the job's rate alone on that type. Fractions rather
	// than rates let a pair's figures come from one source (the table's
	// co-located entries, say) and each job's rate alone from another
	// (its measurements) without mixing their scales.
	PairRates(a, b JobQuery, types []string, now time.Time) map[string][2]Rate
}

// PairRates implements PairEstimator from the table's co-located entries,
// each over the table's rate of the model alone (single-GPU jobs only:
// the table pairs equal scale factors, and Slurm takes a job's shards
// from one GPU).
func (e TableEstimator) PairRates(a, b JobQuery, types []string, _ time.Time) map[string][2]Rate {
	if a.Scale != 1 || b.Scale != 1 {
		return nil
	}
	models := e.Table.Models()
	ma, okA := bridge.ResolveModel(a.Model, models)
	mb, okB := bridge.ResolveModel(b.Model, models)
	if !okA || !okB {
		return nil
	}
	aloneA, okA := e.Table.IsolatedRates(ma, 1)
	aloneB, okB := e.Table.IsolatedRates(mb, 1)
	if !okA || !okB {
		return nil
	}
	tableTypes := e.Table.Types()
	out := map[string][2]Rate{}
	for _, t := range types {
		i := indexOf(tableTypes, t)
		if i < 0 || !(aloneA[i] > 0) || !(aloneB[i] > 0) {
			continue
		}
		ra, rb, ok := e.Table.Pair(ma, mb, 1, t)
		if !ok {
			rb, ra, ok = e.Table.Pair(mb, ma, 1, t)
		}
		if !ok {
			continue
		}
		detail := fmt.Sprintf("reference table: %s with %s", ma, mb)
		out[t] = [2]Rate{{StepsPerSecond: ra / aloneA[i], Source: "table", Detail: detail},
			{StepsPerSecond: rb / aloneB[i], Source: "table", Detail: detail}}
	}
	return out
}

// sharing is what the core knows of space sharing between rounds.
type sharing struct {
	// types are the GPU types with a usable node that offers at least two
	// shards per GPU, so that two jobs can share one of its GPUs.
	types map[string]bool
	// places are where the last round put each member of a pair it
	// started, by job name.
	places map[string]pairPlace
}

func (s sharing) clone() sharing {
	return sharing{types: maps.Clone(s.types), places: maps.Clone(s.places)}
}

// pairPlace is where a pair chosen to start runs: node's shared GPU, each
// member asking for shards shards; node "" when no node can take it, why
// says so.
type pairPlace struct {
	key, partner string
	gpuType      string
	node         string
	shards       int
	why          string
}

// packs reports whether the policy shares GPUs between jobs.
func (c *Core) packs() bool { return c.pol.Traits().Packs }

// noteSharedTypes finds the types on which pairs can run.
func (c *Core) noteSharedTypes(snap *bridge.Snapshot) {
	c.share.types = map[string]bool{}
	if !c.packs() {
		return
	}
	for _, n := range snap.Nodes {
		if c.nodeUsable(n) && c.shardsPerGPU(n) >= 2 {
			c.share.types[n.GPUType] = true
		}
	}
}

// shardsPerGPU is how many shards each GPU of n offers.
func (c *Core) shardsPerGPU(n bridge.Node) int {
	if len(n.ShardUse) > 0 && n.ShardUse[0].Total > 0 {
		return int(n.ShardUse[0].Total)
	}
	if n.GPUs <= 0 {
		return 0
	}
	return n.Shards / n.GPUs
}

// shareRefusal says why job j is never paired ("" when it may be).
func (c *Core) shareRefusal(js *jobState, j bridge.Job) string {
	switch {
	case !c.packs():
		return ""
	case js.scale != 1 || j.Nodes > 1:
		return "never shares a GPU: only single-GPU jobs do"
	case js.arrayOf != 0 || j.ArrayJobID != 0 || j.HetJobID != 0:
		return "never shares a GPU: array tasks and heterogeneous jobs run alone"
	case j.Tag.RefusesSharing():
		return "never shares a GPU: its tag says share=no"
	case slices.Contains(c.set.ShareOffPartitions, j.Partition):
		return "never shares a GPU: sharing is off in partition " + j.Partition
	case j.RequestedGPUType != "":
		return "never shares a GPU: its typed request (--gres=gpu:" + j.RequestedGPUType + ":1) is not rewritten"
	case j.Tag.Class == bridge.ClassTrialAndError:
		return "never shares a GPU: trial-and-error jobs run alone"
	case j.Shards > 0 && !js.shareSet:
		return "never paired: it asks for GPU shards itself"
	}
	if _, ok := c.est.(PairEstimator); !ok {
		return "never paired: no pair rates are known"
	}
	return ""
}

// offerPairs registers the pairs job js (just put in the mechanism, or
// first measured) forms with the other tracked jobs, where both may share
// and the pair gains, up to maxPartners on either side.
func (c *Core) offerPairs(js *jobState, j bridge.Job, now time.Time) {
	js.partners = nil
	js.shareNote = c.shareRefusal(js, j)
	js.canShare = c.packs() && js.shareNote == "" && js.scale == 1
	if !js.canShare {
		return
	}
	pe := c.est.(PairEstimator)
	types := slices.Sorted(maps.Keys(c.share.types))
	for _, key := range c.order {
		o := c.jobs[key]
		if len(js.partners) >= maxPartners {
			break
		}
		if o == js || !o.canShare || o.scale != 1 || len(o.partners) >= maxPartners || o.facts.Partition != js.facts.Partition {
			continue
		}
		rates := c.pairGain(pe, o, js, types, now)
		if rates == nil {
			continue
		}
		if err := c.mech.AddPair(rounds.Pair{Jobs: [2]string{o.name, js.name}, Throughputs: rates}, seconds(now)); err != nil {
			continue
		}
		o.partners = appendPartner(o.partners, js.key)
		js.partners = appendPartner(js.partners, o.key)
	}
}

func appendPartner(list []jobKey, k jobKey) []jobKey {
	return append(slices.Clone(list), k)
}

// forgetPartners drops js from its partners' lists: the mechanism drops
// the pairs themselves with the job.
func (c *Core) forgetPartners(js *jobState) {
	for _, k := range js.partners {
		if o := c.jobs[k]; o != nil {
			o.partners = slices.DeleteFunc(slices.Clone(o.partners), func(x jobKey) bool { return x == js.key })
		}
	}
	js.partners, js.canShare = nil, false
}

// pairGain is the pair's rates on the types where sharing one GPU does
// more of both jobs' work than taking turns on it (nil when none): each
// member's fraction of its rate alone while sharing, times its rate alone
// as the core knows it.
func (c *Core) pairGain(pe PairEstimator, a, b *jobState, types []string, now time.Time) map[string][2]float64 {
	known := pe.PairRates(JobQuery{ID: a.name, Model: a.tag.Model, Scale: 1}, JobQuery{ID: b.name, Model: b.tag.Model, Scale: 1}, types, now)
	var out map[string][2]float64
	for t, r := range known {
		alone := [2]float64{a.throughputs[t], b.throughputs[t]}
		frac := [2]float64{r[0].StepsPerSecond, r[1].StepsPerSecond}
		if !(alone[0] > 0 && alone[1] > 0 && frac[0] > 0 && frac[1] > 0) || frac[0]+frac[1] <= 1 {
			continue
		}
		if out == nil {
			out = map[string][2]float64{}
		}
		out[t] = [2]float64{frac[0] * alone[0], frac[1] * alone[1]}
	}
	return out
}

// refreshPairs recomputes the rates of every registered pair from the
// members' rates alone and the estimator's pair figures, after either
// changed (new measurements), and drops the pairs that no longer gain,
// measured to lose for instance. It reports whether anything changed.
func (c *Core) refreshPairs(now time.Time) bool {
	pe, ok := c.est.(PairEstimator)
	if !ok || !c.packs() {
		return false
	}
	types := slices.Sorted(maps.Keys(c.share.types))
	changed := false
	for _, pr := range c.mech.Pairs() {
		a, b := c.byNameKey(pr.Jobs[0]), c.byNameKey(pr.Jobs[1])
		if a == nil || b == nil {
			continue
		}
		rates := c.pairGain(pe, a, b, types, now)
		switch {
		case rates == nil:
			c.mech.RemovePair(pr.Key()) //nolint:errcheck // listed by the mechanism
			a.partners = slices.DeleteFunc(slices.Clone(a.partners), func(k jobKey) bool { return k == b.key })
			b.partners = slices.DeleteFunc(slices.Clone(b.partners), func(k jobKey) bool { return k == a.key })
			changed = true
		case !maps.Equal(rates, pr.Throughputs):
			if c.mech.SetPairThroughputs(pr.Key(), rates) == nil {
				changed = true
			}
		}
	}
	return changed
}

// byNameKey is the tracked job the rounds name name (nil when none).
func (c *Core) byNameKey(name string) *jobState {
	id, err := bridge.ParseJobID(name)
	if err != nil {
		return nil
	}
	return c.jobs[keyOf(id)]
}

// runningPairs maps each managed job that runs on a GPU it shares with
// its registered partner to that pair's key.
func (c *Core) runningPairs(snap *bridge.Snapshot) map[bridge.JobID]string {
	if !c.packs() || c.mech == nil {
		return nil
	}
	type gpu struct {
		node  string
		index int
	}
	on := map[gpu][]bridge.Job{}
	for _, j := range snap.Jobs {
		if j.State != bridge.JobRunning || j.Shards == 0 || len(j.RunningNodes) != 1 || len(j.SharedGPUs) != 1 {
			continue
		}
		if js := c.jobs[keyOf(j.ID)]; js == nil || js.scale != 1 {
			continue
		}
		g := gpu{j.RunningNodes[0], j.SharedGPUs[0]}
		on[g] = append(on[g], j)
	}
	out := map[bridge.JobID]string{}
	for _, jobs := range on {
		if len(jobs) != 2 {
			continue
		}
		a, b := c.jobs[keyOf(jobs[0].ID)], c.jobs[keyOf(jobs[1].ID)]
		if key, ok := c.mech.PairOf(a.name, b.name); ok {
			out[jobs[0].ID], out[jobs[1].ID] = key, key
		}
	}
	return out
}

// placePairs chooses the node of every pair the plan starts: the node the
// pair was sent to already, else one of its type whose shards are all free
// and that has a free GPU (the rounds' choice first), else one whose
// shards are free, to wait on. With one_sharing a node shares one GPU at a
// time, so no two pairs get the same node, nor a node another pair uses.
func (c *Core) placePairs(snap *bridge.Snapshot, plan *rounds.Plan) map[string]pairPlace {
	if !c.packs() {
		return nil
	}
	places := map[string]pairPlace{}
	taken := map[string]bool{}
	running := c.runningPairs(snap)
	for _, n := range snap.Nodes {
		for _, u := range n.ShardUse {
			if u.Used > 0 {
				taken[n.Name] = true
			}
		}
	}
	jobsByName := map[string]bridge.Job{}
	for _, j := range snap.Jobs {
		if js := c.jobs[keyOf(j.ID)]; js != nil && js.canShare {
			jobsByName[js.name] = j
		}
	}
	for i := range plan.Decisions {
		d := &plan.Decisions[i]
		if d.Partner == "" || !d.Starts() {
			continue
		}
		if _, done := places[d.Job]; done {
			continue
		}
		key, ok := c.mech.PairOf(d.Job, d.Partner)
		a, okA := jobsByName[d.Job]
		b, okB := jobsByName[d.Partner]
		if !ok || !okA || !okB {
			continue
		}
		if running[a.ID] == key && running[b.ID] == key {
			continue // together already
		}
		pl := pairPlace{key: key, gpuType: d.Type}
		// A member already running on its shards holds the pair's GPU
		// there: its partner joins it. A node a pending member was sent to
		// earlier comes next, but only while it can still take the pair
		// (no other pair's or user's shards on it, a free GPU): a node that
		// filled since must not keep the pair waiting while another one
		// sits free.
		var runsOn, sentTo string
		ownShards := 0
		for _, j := range []bridge.Job{a, b} {
			switch {
			case isRunning(j) && j.Shards > 0 && len(j.RunningNodes) == 1:
				runsOn = j.RunningNodes[0]
				ownShards += j.Shards
			case j.Shards > 0 && j.RequiredNodes != "":
				sentTo = j.RequiredNodes
			}
		}
		usedBy := func(n *bridge.Node) int {
			used := 0
			for _, u := range n.ShardUse {
				used += int(u.Used)
			}
			return used
		}
		var best *bridge.Node
		score := func(n *bridge.Node) int {
			free := n.GPUs-n.GPUsUsed >= 1
			switch {
			case n.Name == runsOn:
				if usedBy(n) > ownShards {
					return -1 // another job shares that GPU already
				}
				return 0
			case taken[n.Name] || runsOn != "":
				return -1
			case n.Name == sentTo && free:
				return 1
			case free && len(d.Slots) > 0 && d.Slots[0].Server == n.Name:
				return 2
			case free:
				return 3
			}
			return 4
		}
		for k := range snap.Nodes {
			n := &snap.Nodes[k]
			if n.GPUType != d.Type || !c.nodeUsable(*n) || c.shardsPerGPU(*n) < 2 ||
				!slices.Contains(n.Partitions, a.Partition) || !slices.Contains(n.Partitions, b.Partition) {
				continue
			}
			if s := score(n); s >= 0 && (best == nil || cmp.Or(cmp.Compare(s, score(best)), strings.Compare(n.Name, best.Name)) < 0) {
				best = n
			}
		}
		if best == nil {
			pl.why = "no " + d.Type + " node can take a pair now (every node sharing GPUs already holds one)"
		} else {
			pl.node, pl.shards = best.Name, c.shardsPerGPU(*best)/2
			taken[best.Name] = true
		}
		pl.partner = d.Partner
		places[d.Job] = pl
		pl.partner = d.Job
		places[d.Partner] = pl
	}
	return places
}

// shareActions points pending job j at its pair's shared GPU, or back at
// a whole GPU when the daemon made it a shard request and it now runs
// alone; handled is false when neither applies.
func (c *Core) shareActions(j bridge.Job, js *jobState, t string, add func(bridge.Action)) (handled bool) {
	own, _ := ownFeatures(j.Constraints, c.isGPUType)
	want := constraintFor(own, t)
	if pl, ok := c.share.places[js.name]; ok && pl.gpuType == t && pl.node != "" {
		if j.Shards != pl.shards || j.RequiredNodes != pl.node || j.Constraints != want {
			add(bridge.Action{Kind: bridge.ActSetShare, Shards: pl.shards, Node: pl.node, Constraints: want})
		}
		return true
	}
	if j.Shards > 0 && js.shareSet {
		add(bridge.Action{Kind: bridge.ActSetShare, Constraints: want})
		return true
	}
	return false
}

// pairUnplaced says why pending job j, chosen to start with a partner,
// cannot be sent anywhere this round ("" when it can, or has no partner).
func (c *Core) pairUnplaced(js *jobState, t string) string {
	if pl, ok := c.share.places[js.name]; ok && pl.gpuType == t && pl.node == "" {
		return pl.why
	}
	return ""
}

// sharedRate is running job j's rate while it shares its GPU with its
// partner, as the estimator knows it (nil when it does not).
func (c *Core) sharedRate(js *jobState, j bridge.Job, now time.Time) *Rate {
	pe, ok := c.est.(PairEstimator)
	if !ok {
		return nil
	}
	o := c.byNameKey(js.partner)
	if o == nil {
		return nil
	}
	t := j.RunningGPUType
	r, ok := pe.PairRates(JobQuery{ID: js.name, Model: js.tag.Model, Scale: 1}, JobQuery{ID: o.name, Model: o.tag.Model, Scale: 1},
		[]string{t}, now)[t]
	if !ok {
		return nil
	}
	rate := r[0]
	rate.StepsPerSecond *= js.throughputs[t]
	return &rate
}
