package sched

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/rounds"
)

// Refilling GPUs freed between rounds.
//
// A round holds every managed job it does not choose, so when a job ends
// in the middle of a round its GPUs stay idle until the next one: up to a
// whole round (6 minutes by default) per completion, a real loss on a
// cluster of short jobs. Between rounds the daemon therefore looks every
// Settings.RefillPoll at what is free, and starts the waiting jobs the
// round would have started there: for each managed GPU type with free
// GPUs, the held jobs with a share of that type (a positive priority on
// it), highest priority first, as long as they fit. Nothing is preempted
// and no allocation is computed; the next round takes the jobs started
// this way as running ones (their time counts from when they started) and
// decides about them as about any other.
//
// GPUs that some job may still take are not free: a job the round chose
// that Slurm has not started yet (all of its type's GPUs while it does not
// fit), a job the round moves to another type once its grace period ends,
// a TE job's claim (nothing is refilled while one waits), or any job Slurm
// may start by itself (not held, waiting only for resources or priority)
// where it fits.
//
// What it cannot see: jobs of partitions the daemon does not manage that
// share its nodes (the snapshot holds only the managed partitions' jobs;
// Slurm may start one of them on a freed GPU first, and the refilled job
// then waits, released, for the next round), and GPU types the round's
// mechanism left out because no GPU of them was free for managed jobs.

// slurmWillStart reports whether Slurm may start pending job j by itself
// as soon as it has room, as of at: not held, and waiting only for
// resources or priority, or released by a daemon at its run priority and
// waiting only for Slurm's requeue delay, which the daemon lifts; not a
// job that waits for a dependency, a limit or its owner's begin time.
func slurmWillStart(j bridge.Job, at time.Time) bool {
	if j.State != bridge.JobPending || j.Held || j.GPUs <= 0 || blockedBy(j, at) != "" {
		return false
	}
	if startableReason(j.Reason) {
		return true
	}
	return j.Priority >= RunPriority
}

// holdsAny reports whether some managed job is held by the daemon: the
// only jobs a refill could start.
func (c *Core) holdsAny() bool {
	for _, js := range c.jobs {
		if js.heldByDaemon {
			return true
		}
	}
	return false
}

// refill starts held jobs on GPUs freed since the round (see above).
// Every held job with a share of a type that has free GPUs is a
// candidate there; the candidates are taken highest priority first, each
// job at most once (on the first type it fits of its best ones), so that
// a job with shares of two types that both freed GPUs starts on the one
// where it stands highest.
//
// earlier are the actions this look decided before (requeues, TE jobs):
// the jobs they make eligible are about to take GPUs the snapshot still
// shows free.
func (c *Core) refill(snap *bridge.Snapshot, earlier []Action) []Action {
	if c.set.RefillPoll <= 0 || snap == nil || c.plan == nil || c.lastSkip != "" ||
		len(c.teWaits) > 0 || c.looksPartial(snap) {
		return nil
	}
	room := c.freeGPUs(snap, earlier)
	if room == nil {
		return nil
	}
	type candidate struct {
		job      bridge.Job
		js       *jobState
		gpuType  string
		priority float64
		arrival  int
	}
	var cands []candidate
	for n, key := range c.order {
		js := c.jobs[key]
		jid, isJob := key.Job()
		j, ok := jobOf(snap, key)
		holder := js // whose hold the daemon's is
		switch {
		case js.arrayOf != 0:
			// A job array's waiting task: started through its array's
			// record, when the daemon holds that.
			j, ok = snap.Job(js.arrayOf)
			holder = c.jobs[keyOf(js.arrayOf)]
			ok = ok && holder != nil && holder.arrayHead && j.HoldsArrayTasks()
		case ok && j.ArrayJobID != 0:
			// A task of an array on a record of its own: the array's
			// limit, set at the round, may keep it from starting, and
			// the GPU would stay idle. It waits for a round.
			continue
		}
		if !ok || js.scale == 0 || j.State != bridge.JobPending || !j.Held || !holder.heldByDaemon ||
			js.pre.phase != notPreempted || (isJob && c.teWaiting(jid)) || j.Tag.MixedOK() {
			continue
		}
		if ok, _ := c.eligible(j); !ok {
			continue
		}
		if _, paired := c.share.places[js.name]; paired || j.Shards > 0 && j.RequiredNodes != "" {
			// A pair's member starts with its partner on the node a round
			// gives the pair, and one pinned to a node by its shard
			// request can take no other GPU: a GPU claimed for either
			// here would stay idle. Pairs wait for a round.
			continue
		}
		for _, t := range c.mech.Types() {
			if room.total(t) == 0 || (j.RequestedGPUType != "" && j.RequestedGPUType != t) {
				continue
			}
			st, err := c.mech.State(js.name, t)
			if err != nil || st.Priority <= 0 {
				continue // no share of t: its allocation puts it elsewhere
			}
			cands = append(cands, candidate{job: j, js: js, gpuType: t, priority: st.Priority, arrival: n})
		}
	}
	slices.SortStableFunc(cands, func(a, b candidate) int {
		if by := cmp.Compare(b.priority, a.priority); by != 0 {
			return by
		}
		return cmp.Compare(a.arrival, b.arrival)
	})
	started := map[jobKey]bool{}
	caps := capRoomOf(snap)
	arrays := map[bridge.JobID]*arrayStart{} // the arrays' waiting tasks started, by array record
	var out []Action
	for _, cand := range cands {
		t := cand.gpuType
		if started[cand.js.key] || room.total(t) == 0 {
			continue
		}
		a := arrays[cand.job.ID]
		if cand.js.arrayOf != 0 && a != nil && a.gpuType != t {
			continue // an array's record takes one type at a time
		}
		m := memberOf(cand.job)
		m.GPUs = cand.js.scale // a task of an array counts one task's GPUs
		fits, capNames := caps.fits(m)
		if !fits {
			continue // an accounting cap would keep it: the GPU goes to the next
		}
		if !c.claim(room, t, cand.job) { // candidates are eligible: their features read
			continue
		}
		caps.take(m, capNames)
		started[cand.js.key] = true
		why := rounds.Reason{Code: rounds.ReasonSelected, Type: t, Priority: cand.priority}.String() +
			" (GPUs freed between rounds)"
		cand.js.decision, cand.js.reason = rounds.Run.String(), why
		if cand.js.arrayOf != 0 {
			if a == nil {
				a = &arrayStart{record: cand.job, gpuType: t, why: why}
				arrays[cand.job.ID] = a
			}
			a.tasks++
			continue
		}
		out = append(out, c.runActions(cand.job, t, why)...)
	}
	if len(arrays) > 0 {
		running := arrayRunning(snap)
		for _, id := range slices.Sorted(maps.Keys(arrays)) {
			out = append(out, c.startArrayTasks(arrays[id], running[arrays[id].record.ArrayJobID])...)
		}
	}
	return out
}

// arrayStart is the waiting tasks of one array record a refill starts.
type arrayStart struct {
	record  bridge.Job
	gpuType string
	tasks   int
	why     string
}

// startArrayTasks lets Slurm start a.tasks more tasks of a held array
// record beside the running ones: its limit first, then its release onto
// the type, as a round does (arrays.go).
func (c *Core) startArrayTasks(a *arrayStart, running int) []Action {
	m := a.record
	limit := running + a.tasks
	if u := c.arrayLimits[m.ArrayJobID]; u > 0 {
		limit = min(limit, u)
	}
	why := fmt.Sprintf("job array: %d of its waiting tasks start on %s, at most %d of its tasks at once; %s",
		a.tasks, a.gpuType, limit, a.why)
	if head := c.jobs[keyOf(m.ID)]; head != nil {
		head.decision, head.reason = rounds.Run.String(), why
	}
	var out []Action
	if m.ArrayLimit != limit {
		out = append(out, Action{Action: bridge.Action{Kind: bridge.ActSetArrayLimit, Job: m.ID, Tasks: limit}, Why: why, Restarts: m.Restarts})
	}
	return append(out, c.runActions(m, a.gpuType, why)...)
}

// freeRoom is the free GPUs of each usable node, by GPU type.
type freeRoom struct {
	nodes map[string][]*freeNode // by GPU type, in snapshot order
}

type freeNode struct {
	bridge.Node
	free int
}

func (r *freeRoom) total(t string) int {
	sum := 0
	for _, n := range r.nodes[t] {
		sum += n.free
	}
	return sum
}

// take places job j on free GPUs of type t, on nodes of its partition that
// have every feature in own, and takes them: on one node for a one-node
// job, else on Nodes nodes (GPUsPerNode each when it says, else any
// split). It reports false, taking nothing, when j does not fit.
func (r *freeRoom) take(t string, j bridge.Job, own []string) bool {
	var fit []*freeNode
	for _, n := range r.nodes[t] {
		if n.free > 0 && slices.Contains(n.Partitions, j.Partition) &&
			!slices.ContainsFunc(own, func(f string) bool { return !slices.Contains(n.Features, f) }) {
			fit = append(fit, n)
		}
	}
	nodes := max(j.Nodes, 1)
	per := j.GPUsPerNode
	if per == 0 && nodes == 1 {
		per = j.GPUs
	}
	if per > 0 {
		// Nodes with the fewest free GPUs first, so small jobs leave
		// the emptier nodes to big ones.
		slices.SortStableFunc(fit, func(a, b *freeNode) int { return cmp.Compare(a.free, b.free) })
		var picked []*freeNode
		for _, n := range fit {
			if n.free >= per && len(picked) < nodes {
				picked = append(picked, n)
			}
		}
		if len(picked) < nodes {
			return false
		}
		for _, n := range picked {
			n.free -= per
		}
		return true
	}
	// Several nodes without a per-node count: Slurm splits the GPUs as it
	// likes, over at most Nodes nodes.
	slices.SortStableFunc(fit, func(a, b *freeNode) int { return cmp.Compare(b.free, a.free) })
	left := j.GPUs
	for i := 0; i < len(fit) && i < nodes && left > 0; i++ {
		left -= fit[i].free
	}
	if left > 0 {
		return false
	}
	left = j.GPUs
	for i := 0; i < len(fit) && left > 0; i++ {
		used := min(fit[i].free, left)
		fit[i].free -= used
		left -= used
	}
	return true
}

// freeGPUs is the room on the usable nodes once every pending job Slurm
// may start by itself has what it asks for: on its type, or for an
// untyped job on the first type where it fits. A job that fits nowhere
// now takes nothing (Slurm cannot start it either), except one a round
// chose: the GPUs of its type (of every type of its mix) are left for it.
// A running job the round moves to another type reserves its GPUs there
// for when its grace period ends. nil when nothing is free.
func (c *Core) freeGPUs(snap *bridge.Snapshot, earlier []Action) *freeRoom {
	r := &freeRoom{nodes: map[string][]*freeNode{}}
	anyFree := false
	for _, n := range snap.Nodes {
		if !c.nodeUsable(n) {
			continue
		}
		free := max(n.GPUs-n.GPUsUsed, 0)
		r.nodes[n.GPUType] = append(r.nodes[n.GPUType], &freeNode{Node: n, free: free})
		anyFree = anyFree || free > 0
	}
	if !anyFree {
		return nil
	}
	reserve := func(t string, j bridge.Job) {
		if !c.claim(r, t, j) {
			r.clear(t)
		}
	}
	// Jobs the earlier actions make eligible, with the type they name.
	starting := map[bridge.JobID]string{}
	for _, a := range earlier {
		switch a.Kind {
		case bridge.ActSetConstraints:
			starting[a.Job] = ConstraintType(a.Constraints, c.isGPUType)
		case bridge.ActRelease, bridge.ActSetPriority, bridge.ActBeginNow:
			if _, ok := starting[a.Job]; !ok {
				starting[a.Job] = ""
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(starting)) { // claims in a fixed order
		t := starting[id]
		j, ok := snap.Job(id)
		if !ok {
			continue
		}
		if t = cmp.Or(t, c.requestedType(j)); t != "" {
			reserve(t, j)
		}
	}
	hets := map[bridge.JobID][]bridge.Job{}
	for _, j := range snap.Jobs {
		if j.HetJobID != 0 && j.Active() {
			hets[j.HetJobID] = append(hets[j.HetJobID], j)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(hets)) {
		c.claimHetJob(r, hets[id], snap.Taken)
	}
	var running map[bridge.JobID]int
	for _, j := range snap.Jobs {
		if _, ok := starting[j.ID]; ok || !slurmWillStart(j, snap.Taken) || j.HetJobID != 0 {
			continue
		}
		if j.HoldsArrayTasks() {
			// A job array's record starts as many of its tasks as fit,
			// within its limit, each of them a job of j's request.
			if running == nil {
				running = arrayRunning(snap)
			}
			c.claimArray(r, j, startableTasks(j, running))
			continue
		}
		chosen := j.Priority >= RunPriority
		t := c.requestedType(j)
		mix, isMix := mixTypes(j.Constraints, c.isGPUType)
		switch {
		case t != "" && chosen:
			reserve(t, j)
		case t != "":
			c.claim(r, t, j)
		case isMix:
			// Shaped for a mix of types: Slurm starts it once every part
			// fits, so none of those types is free for others.
			for _, typ := range mix {
				r.clear(typ)
			}
		default:
			// Untyped: Slurm may start it on any type where it fits.
			for _, typ := range slices.Sorted(maps.Keys(r.nodes)) {
				if c.claim(r, typ, j) {
					break
				}
			}
		}
	}
	for _, key := range c.order {
		js := c.jobs[key]
		if js.pre.phase == notPreempted || js.pre.target == "" {
			continue
		}
		if j, ok := jobOf(snap, key); ok && !slurmWillStart(j, snap.Taken) {
			reserve(js.pre.target, j)
		}
	}
	return r
}

// claimHetJob takes the room of a heterogeneous job that Slurm may start
// now, all of its components or none: Slurm starts them together, so a
// component that fits while another does not takes nothing (counting its
// room as taken would leave GPUs idle that no job can use).
func (c *Core) claimHetJob(r *freeRoom, parts []bridge.Job, at time.Time) {
	for _, j := range parts {
		j.GPUs = max(j.GPUs, 1) // a component without GPUs starts with the others
		if !slurmWillStart(j, at) {
			return // held, or waiting for something else: none starts
		}
	}
	saved := r.save()
	for _, j := range parts {
		if j.GPUs <= 0 {
			continue
		}
		fits := false
		if t := c.requestedType(j); t != "" {
			fits = c.claim(r, t, j)
		} else {
			for _, typ := range slices.Sorted(maps.Keys(r.nodes)) {
				if fits = c.claim(r, typ, j); fits {
					break
				}
			}
		}
		if !fits {
			r.restore(saved)
			return
		}
	}
}

// claimArray takes the room of up to n tasks of array record j, each as
// the job j would be: on its type, or for untyped tasks on any type where
// one fits. Released by a round (at the run priority), its type stays
// free for nothing else while one of its tasks does not fit, as for any
// job a round chose.
func (c *Core) claimArray(r *freeRoom, j bridge.Job, n int) {
	t := c.requestedType(j)
	for range n {
		switch {
		case t != "" && j.Priority >= RunPriority:
			if !c.claim(r, t, j) {
				r.clear(t)
				return
			}
		case t != "":
			if !c.claim(r, t, j) {
				return
			}
		default:
			fits := false
			for _, typ := range slices.Sorted(maps.Keys(r.nodes)) {
				if fits = c.claim(r, typ, j); fits {
					break
				}
			}
			if !fits {
				return
			}
		}
	}
}

// save and restore keep and put back the free GPUs of every node.
func (r *freeRoom) save() map[*freeNode]int {
	out := map[*freeNode]int{}
	for _, nodes := range r.nodes {
		for _, n := range nodes {
			out[n] = n.free
		}
	}
	return out
}

func (r *freeRoom) restore(saved map[*freeNode]int) {
	for n, free := range saved {
		n.free = free
	}
}

// requestedType is the GPU type job j asks for: its typed request, or the
// type its constraint names ("" for neither).
func (c *Core) requestedType(j bridge.Job) string {
	return cmp.Or(j.RequestedGPUType, ConstraintType(j.Constraints, c.isGPUType))
}

// claim takes room of type t for job j on nodes with every feature of its
// own constraint (any node when the constraint cannot be read); false,
// taking nothing, when it does not fit.
func (c *Core) claim(r *freeRoom, t string, j bridge.Job) bool {
	own, _ := ownFeatures(j.Constraints, c.isGPUType)
	return r.take(t, j, own)
}

// clear leaves no GPU of type t free.
func (r *freeRoom) clear(t string) {
	for _, n := range r.nodes[t] {
		n.free = 0
	}
}
