package sched

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/siterules"
	"github.com/gavel-slurm/gavel-slurm/internal/tepreempt"
	"github.com/gavel-slurm/gavel-slurm/rounds"
)

// TESettings configure trial-and-error jobs (class=te, FitGpp): a user
// debugging a model wants it to start now, so when no GPU fits a waiting
// TE job the daemon preempts best-effort jobs for it between rounds,
// instead of letting it wait for the next round's priorities.
type TESettings struct {
	// Enabled turns the class on; off, class=te jobs are scheduled like
	// any other.
	Enabled bool
	// Weight is FitGpp's s: how much a victim's grace period counts
	// against its size.
	Weight float64
	// MaxPreemptions is FitGpp's cap: a job requeued that many times
	// (Slurm's restart count, which counts every preemption the job has
	// had) is never chosen again; 0 is no cap.
	MaxPreemptions int
	// MaxPerUser caps how many of one user's TE jobs may hold room made
	// for them at once, from the preemption until the job ends; 0 is no
	// cap.
	MaxPerUser int
	// Poll is how often the daemon looks for waiting TE jobs between
	// rounds.
	Poll time.Duration
}

// teWait is a TE job waiting for the room its victims' grace periods
// free: the next rounds neither hold it nor give that room away in the
// cluster the TE check sees.
type teWait struct {
	node  string
	gpus  int
	until time.Time
	// why is the job's status reason while it waits.
	why string
}

// teClaims is the room claimed for trial-and-error jobs.
type teClaims struct {
	// teWaits are the TE jobs waiting for the room their victims free,
	// by job id.
	teWaits map[bridge.JobID]teWait
	// teTried are the TE jobs that had their choice of victims since the
	// last round.
	teTried map[bridge.JobID]bool
	// teRoom are the TE jobs room was made for, with their users, while
	// they live (TESettings.MaxPerUser counts them).
	teRoom map[bridge.JobID]string
}

func (t teClaims) clone() teClaims {
	return teClaims{teWaits: maps.Clone(t.teWaits), teTried: maps.Clone(t.teTried), teRoom: maps.Clone(t.teRoom)}
}

// teWaitSlack is how long past its victims' grace periods a TE job keeps
// its claim on the room they free: Slurm needs a few seconds to stop a
// requeued job and start the TE job.
const teWaitSlack = time.Minute

// classOf is the job's class once the site's rules are applied (a class
// the site does not allow is dropped).
func (c *Core) classOf(j bridge.Job) bridge.Class {
	if j.TagErr != nil {
		return bridge.ClassUnset
	}
	eff := c.set.Rules.Apply(siterules.JobFacts{Partition: j.Partition, User: j.User, Account: j.Account, QOS: j.QOS, Tag: j.Tag})
	return eff.Class
}

// refreshTEClaims brings the waiting TE jobs' claims up to date with snap
// before a look or a round acts on them: claims rebuilt after a restart,
// claims of TE jobs that started, left or waited too long dropped. Not on
// a view that lost many jobs at once, which would drop live claims.
func (c *Core) refreshTEClaims(snap *bridge.Snapshot, now time.Time) {
	if !c.set.TrialAndError.Enabled || c.looksPartial(snap) {
		return
	}
	c.reclaimTE(snap, now)
	c.expireTEWaits(snap, now)
}

// forLiveTE reports whether js is preempted for a TE job that still waits
// for the room: only then does the preemption stand whatever the rounds
// decide. Once that job started, left or gave up its claim, the victim's
// preemption is an ordinary one.
func (c *Core) forLiveTE(js *jobState) bool {
	return js.pre.forTE != 0 && c.teWaiting(js.pre.forTE)
}

// anyVictimOf reports whether some job is being preempted for TE job te.
func (c *Core) anyVictimOf(te bridge.JobID) bool {
	for _, js := range c.jobs {
		if js.pre.forTE == te && js.pre.phase != notPreempted {
			return true
		}
	}
	return false
}

// teWaiting reports whether job id is a TE job waiting for its room.
func (c *Core) teWaiting(id bridge.JobID) bool {
	_, ok := c.teWaits[id]
	return ok
}

// trialAndError makes room for waiting TE jobs against a fresh snapshot
// (whose claims Graces brought up to date):
// for each managed class=te job that is pending with no claim yet, FitGpp
// chooses best-effort jobs to preempt (each gets its grace period, then is
// requeued held, to wait for a round), and the TE job is made eligible on
// the type of the node it gets, at the daemon's run priority, so Slurm
// starts it there as soon as the room is free. A TE job that already fits
// is only made eligible. Nothing happens when the class is off.
func (c *Core) trialAndError(snap *bridge.Snapshot, now time.Time) []Action {
	if !c.set.TrialAndError.Enabled || snap == nil {
		return nil
	}
	if c.lastSkip != "" || c.looksPartial(snap) {
		// The last round sent nothing (Slurm's view was not to be
		// trusted, or another daemon acts on these jobs), or this view
		// lost many jobs at once: no preemption starts on it.
		return nil
	}
	chooser := tepreempt.FitGpp{Weight: c.set.TrialAndError.Weight, MaxPreemptions: c.set.TrialAndError.MaxPreemptions}
	var out []Action
	for _, j := range snap.Jobs {
		id := j.ID
		if j.State != bridge.JobPending || c.teWaiting(id) || c.teTried[id] || c.classOf(j) != bridge.ClassTrialAndError ||
			j.ArrayJobID != 0 {
			// A job array's tasks are placed by the rounds: the array's
			// limit, set at a round, decides how many of them may start.
			continue
		}
		if ok, _ := c.eligible(j); !ok {
			continue
		}
		js := c.jobs[keyOf(id)]
		if j.Held && (js == nil || !js.heldByDaemon) {
			continue // its user's or an admin's hold
		}
		if blockedBy(j, now) != "" {
			continue // Slurm would not start it in the room made
		}
		if j.Restarts > 0 || (js != nil && hasRun(js)) {
			// Trial-and-error room is for a job's first start (FitGpp's
			// low-latency start); a TE job that already ran and was
			// stopped by a round waits for the rounds like any other.
			continue
		}
		if limit := c.set.TrialAndError.MaxPerUser; limit > 0 && c.teRoomHeld(snap, j.User) >= limit {
			if js != nil {
				js.reason = fmt.Sprintf("trial-and-error: %s already has %d job(s) started on room made for them (max_per_user): waits for a round", j.User, limit)
			}
			continue
		}
		req, ok := c.teRequest(snap, j, now)
		if !ok {
			continue
		}
		choice, err := chooser.Choose(req)
		if err != nil {
			// Either nothing allowed can make room, or the request was
			// malformed (a bug): the job waits for the rounds either way.
			why := "trial-and-error: no room even after preempting every job that may be: waits for a round"
			if !errors.Is(err, tepreempt.ErrNoRoom) {
				why = "trial-and-error: " + err.Error() + ": waits for a round"
			}
			if js := c.jobs[keyOf(id)]; js != nil {
				js.reason = why
			}
			continue
		}
		out = append(out, c.preemptForTE(snap, j, choice, now)...)
	}
	return out
}

// teRequest describes the room a TE job needs and the best-effort jobs
// that may give it, as the cluster will be once the grace periods already
// running have ended and the claims of other waiting TE jobs are met.
// false when the job cannot be placed by the rule (it spans nodes).
func (c *Core) teRequest(snap *bridge.Snapshot, te bridge.Job, now time.Time) (tepreempt.Request, bool) {
	if te.Nodes > 1 {
		return tepreempt.Request{}, false
	}
	freeing := map[string]int{} // GPUs of jobs in a grace period, per node
	var candidates []tepreempt.Candidate
	for _, key := range c.order {
		js := c.jobs[key]
		if js == nil || js.scale == 0 {
			continue
		}
		j, ok := jobOf(snap, key)
		if !ok || !isRunning(j) || len(j.RunningNodes) != 1 {
			continue
		}
		node := j.RunningNodes[0]
		if js.pre.phase != notPreempted {
			freeing[node] += j.GPUs
			continue
		}
		if c.classOf(j) == bridge.ClassTrialAndError || c.pinOf(js, j, now) != rounds.NotPinned {
			continue // TE jobs are not victims; nor are pinned ones
		}
		candidates = append(candidates, tepreempt.Candidate{Job: js.name, Node: node, Demand: tepreempt.Resources{GPUs: j.GPUs},
			Grace: c.graceOf(js), Preemptions: j.Restarts})
	}
	claimed := map[string]int{}
	for _, w := range c.teWaits {
		claimed[w.node] += w.gpus
	}
	req := tepreempt.Request{Job: te.ID.String(), Demand: tepreempt.Resources{GPUs: te.GPUs}}
	// Only nodes the job can start on: of its partition, of its type when
	// its request names one, with every feature of its own constraint.
	own, ok := ownFeatures(te.Constraints, c.isGPUType)
	if !ok {
		return tepreempt.Request{}, false
	}
	known := map[string]bool{}
	for _, n := range snap.Nodes {
		if !c.nodeUsable(n) || !slices.Contains(n.Partitions, te.Partition) ||
			(te.RequestedGPUType != "" && n.GPUType != te.RequestedGPUType) ||
			slices.ContainsFunc(own, func(f string) bool { return !slices.Contains(n.Features, f) }) {
			continue
		}
		// Negative where claims exceed what will be free (something the
		// daemon does not manage took claimed GPUs): a victim there must
		// make up that debt before it makes room for this job.
		free := n.GPUs - n.GPUsUsed + freeing[n.Name] - claimed[n.Name]
		req.Nodes = append(req.Nodes, tepreempt.Node{ID: n.Name, Capacity: tepreempt.Resources{GPUs: n.GPUs},
			Free: tepreempt.Resources{GPUs: free}})
		known[n.Name] = true
	}
	for _, cand := range candidates {
		if known[cand.Node] {
			req.Candidates = append(req.Candidates, cand)
		}
	}
	return req, len(req.Nodes) > 0
}

// preemptForTE starts the victims' grace periods and makes the TE job
// eligible on its node's GPU type.
func (c *Core) preemptForTE(snap *bridge.Snapshot, te bridge.Job, choice tepreempt.Choice, now time.Time) []Action {
	id := te.ID
	var longest time.Duration
	for _, v := range choice.Victims {
		longest = max(longest, v.Grace)
	}
	// The claim comes first: the victims' preemptions stand only while a
	// TE job waits for their room (forLiveTE).
	c.teWaits[id] = teWait{node: choice.Node, gpus: te.GPUs, until: now.Add(longest + teWaitSlack)}
	var out []Action
	keys := c.byName() // the chooser names victims as teRequest did
	for _, v := range choice.Victims {
		key := keys[v.Job]
		js := c.jobs[key]
		j, ok := jobOf(snap, key)
		if js == nil || !ok {
			continue
		}
		js.decision, js.reason = "preempt", v.Reason
		acts := c.startPreemption(js, j, "", now)
		js.pre.forTE = id
		acts = append(acts, c.advance(js, j, now, true)...) // preempt=requeue: at once
		for i := range acts {
			acts[i].ForTE = id
		}
		out = append(out, acts...)
	}
	typ := ""
	for _, n := range snap.Nodes {
		if n.Name == choice.Node {
			typ = n.GPUType
		}
	}
	why := fmt.Sprintf("trial-and-error job: starts on %s", choice.Node)
	if n := len(choice.Victims); n > 0 {
		why += fmt.Sprintf(" once %d job(s) preempted for it have stopped (grace up to %d s)", n, int(longest.Seconds()))
	}
	w := c.teWaits[id]
	w.why = why
	c.teWaits[id] = w
	// One choice per TE job between two rounds: if its claim expires
	// before it starts, the rounds place it rather than a second set of
	// victims.
	c.teTried[id] = true
	if js := c.jobs[keyOf(id)]; js != nil {
		js.decision, js.reason = "run", why
	}
	if c.teRoom == nil {
		c.teRoom = map[bridge.JobID]string{}
	}
	c.teRoom[id] = te.User
	if typ == "" {
		return out
	}
	return append(out, c.teRunActions(te, typ, why)...)
}

// teRunActions makes a TE job eligible on type typ like runActions, at a
// priority above the run priority of the jobs a round releases: when the
// victims' GPUs free up, Slurm starts the TE job on them, not a
// best-effort job released meanwhile. The priority lies above the band
// that tells daemons apart (trust.go), so it is never taken for another
// daemon's mark.
func (c *Core) teRunActions(te bridge.Job, typ, why string) []Action {
	return append(c.placeActions(te, typ, why), c.eligibleActions(te, c.runPriority()+instanceMarks, why)...)
}

// reclaimTE rebuilds the claims of TE jobs whose victims' preemptions
// outlived a restart (the claims live in memory; the victims' ledgers are
// saved with the TE job's id): the room stays theirs, rounds leave them
// alone, and no second set of victims is chosen.
func (c *Core) reclaimTE(snap *bridge.Snapshot, now time.Time) {
	for _, key := range c.order {
		js := c.jobs[key]
		te := js.pre.forTE
		if te == 0 || js.pre.phase == notPreempted || c.teWaiting(te) {
			continue
		}
		tj, ok := snap.Job(te)
		until := js.pre.start.Add(c.graceOf(js) + teWaitSlack)
		if !ok || tj.State != bridge.JobPending || now.After(until) {
			continue
		}
		node := ""
		if vj, ok := jobOf(snap, key); ok && len(vj.RunningNodes) == 1 {
			node = vj.RunningNodes[0]
		}
		c.teWaits[te] = teWait{node: node, gpus: tj.GPUs, until: until,
			why: "trial-and-error job: waits for the job(s) preempted for it to stop"}
		c.teTried[te] = true
	}
}

// looksPartial reports whether snap lost most of the managed jobs at once,
// which a between-rounds look must not act on (distrust, without its
// memory of suspects, which belongs to the rounds).
func (c *Core) looksPartial(snap *bridge.Snapshot) bool {
	gone := len(c.missingFrom(snap))
	return gone >= vanishMinimum && float64(gone) > vanishFraction*float64(len(c.jobs))
}

// expireTEWaits drops the claims of TE jobs that started, left, or waited
// past their victims' grace periods (their room is then the rounds' to
// give).
func (c *Core) expireTEWaits(snap *bridge.Snapshot, now time.Time) {
	for id, w := range c.teWaits {
		j, ok := snap.Job(id)
		if !ok || j.State != bridge.JobPending || now.After(w.until) {
			delete(c.teWaits, id)
		}
	}
}

// hasRun reports whether the daemon saw the job receive service.
func hasRun(js *jobState) bool {
	for _, s := range js.received {
		if s > 0 {
			return true
		}
	}
	return false
}

// teRoomHeld counts the jobs of user that were given trial-and-error
// room and are still live in snap (waiting for it or running on it); it
// forgets the others.
func (c *Core) teRoomHeld(snap *bridge.Snapshot, user string) int {
	n := 0
	for id, owner := range c.teRoom {
		j, ok := snap.Job(id)
		if !ok || !j.Active() {
			delete(c.teRoom, id)
			continue
		}
		if owner == user {
			n++
		}
	}
	return n
}
