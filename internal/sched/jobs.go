package sched

import (
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/siterules"
	"github.com/gavel-slurm/gavel-slurm/rounds"
)

// Restore seeds the core with the records saved by an earlier run, so
// time received and grace periods survive a restart. Call before the
// first Step.
func (c *Core) Restore(records map[string]Record, round uint64) {
	c.round = round
	for name, r := range records {
		id, err := bridge.ParseJobID(name)
		if err != nil {
			// Slots are never saved (records); any other name is no job
			// the daemon could have saved: the first round forgets it.
			c.strays = append(c.strays, name)
			continue
		}
		key := keyOf(id)
		forTE, _ := bridge.ParseJobID(r.GraceForTE) // 0 for none ("")
		js := &jobState{key: key, name: name, firstSeen: r.FirstSeen, received: copyMap(r.Received),
			decision: r.LastDecision, reason: r.Reason, mode: bridge.PreemptMode(r.Preempt),
			restartMeasured: time.Duration(r.RestartCostS * float64(time.Second))}
		js.heldByDaemon, js.shareSet = r.HeldByDaemon, r.SharedByDaemon
		if !r.GraceStart.IsZero() {
			js.pre = preemption{phase: parsePhase(r.GracePhase), start: r.GraceStart, target: r.GraceTarget,
				restarts: r.GraceRestarts, forTE: forTE}
			if js.pre.phase == notPreempted {
				js.pre.phase = inGrace // saved before phases were recorded
			}
		}
		if js.received == nil {
			js.received = map[string]float64{}
		}
		c.jobs[key] = js
		c.order = append(c.order, key)
	}
	// Arrival order of restored jobs: by first sighting, then name.
	sort.Slice(c.order, func(i, j int) bool {
		a, b := c.jobs[c.order[i]], c.jobs[c.order[j]]
		if !a.firstSeen.Equal(b.firstSeen) {
			return a.firstSeen.Before(b.firstSeen)
		}
		return a.name < b.name
	})
}

// syncJobs adds arriving managed jobs to the mechanism and removes those
// that finished or left; it returns the names to forget.
func (c *Core) syncJobs(snap *bridge.Snapshot, now time.Time) []string {
	seen := map[jobKey]bool{}
	var running map[bridge.JobID]int
	for _, j := range snap.Jobs {
		ok, _ := c.managed(j)
		key := keyOf(j.ID)
		js := c.jobs[key]
		if ok && j.HoldsArrayTasks() && j.State == bridge.JobPending {
			// A job array's tasks not started: each one a job (arrays.go).
			if running == nil {
				running = arrayRunning(snap)
			}
			seen[key] = true
			c.syncArray(j, js, running[j.ArrayJobID], now, seen)
			continue
		}
		if ok && !j.Active() && js != nil && js.pre.phase != notPreempted && endedInGrace(j) {
			// Ended during its grace period: preempted, not finished; it
			// stays tracked until its requeue lands (advance).
			seen[key] = true
			continue
		}
		if !ok || !j.Active() {
			continue
		}
		seen[key] = true
		c.noteArray(j)
		c.syncJob(j, js, now)
		c.noteSingleShape(j, c.jobs[key])
	}
	forget := c.forgetUnseen(snap, seen, seconds(now))
	forget, c.strays = append(forget, c.strays...), nil
	return forget
}

// keepsAdmission says whether a job the daemon scheduled stays managed
// although its comment no longer carries a valid tag: its owner may edit
// the comment of a running job (scontrol update), and dropping the tag
// must not take the job out of a preemption under way or keep it from
// being preempted at all. It keeps the tag it was admitted with until it
// is pending again (requeued), when the comment as it is then decides.
// Nothing else a running job's owner can change decides admission.
func (c *Core) keepsAdmission(js *jobState, j bridge.Job) bool {
	if js == nil || j.State == bridge.JobPending || (js.scale == 0 && js.pre.phase == notPreempted) {
		return false
	}
	if js.tag.MixedOK() {
		// A job on a mix is never preempted anyway, and the rounds read
		// whether it is on one from its live tag: as an unmanaged job it
		// keeps its GPUs out of the rounds' cluster.
		return false
	}
	switch c.admit(j).Code {
	case NoTag, BadTag:
		if !js.tagEdited {
			js.tagEdited = true
			js.notes = append(js.notes, "comment changed while running: the tag it started with applies until it is pending again")
		}
		return true
	}
	return false
}

// syncJob brings one live managed job up to date: whose hold keeps it,
// and whether the mechanism schedules it.
func (c *Core) syncJob(j bridge.Job, js *jobState, now time.Time) {
	key := keyOf(j.ID)
	if js != nil {
		// The last task of an array takes over the array's record and
		// id: from then on it is a job like any other.
		js.arrayHead, js.slots = false, nil
	}
	if js != nil && j.State == bridge.JobPending && !j.Held {
		// Whatever hold the daemon sent is gone; a later hold is
		// someone else's.
		js.heldByDaemon = false
	}
	if js != nil && js.heldByDaemon && isRunning(j) && c.leaseLives(now) {
		// Started without the daemon's release while its lease lived:
		// its owner took it off the lease. It is scheduled like any
		// running job, but nothing it did not earn keeps it.
		js.heldByDaemon, js.jumped = false, true
		js.notes = append(js.notes, "started ahead of its turn: its dependency on the daemon's lease was removed, "+
			"so no minimum run time or restart hold keeps it")
	}
	if js != nil && j.State == bridge.JobPending {
		js.jumped = false
	}
	if j.State == bridge.JobPending && j.LeaseHeld {
		// Waiting on the daemon's lease: the daemon's alone, whatever
		// its records say (a state directory lost or replaced).
		if js == nil {
			js = c.track(key, now)
		}
		js.heldByDaemon = true
	}
	if js == nil && j.State == bridge.JobPending && j.Held && j.Reason == "JobHeldAdmin" && c.set.AdoptAdminHolds && !c.adopted {
		// Recovery: the hold is taken for one the daemon sent and lost
		// the record of; the job is scheduled like any other.
		js = c.track(key, now)
		js.heldByDaemon = true
	}
	if j.State == bridge.JobPending && j.Held && (js == nil || !js.heldByDaemon) {
		// Held by its user or an admin: left as Slurm has it and kept out
		// of the allocation until released.
		if js == nil {
			js = c.track(key, now)
		}
		js.heldBy = holdOwner(j)
		js.decision, js.reason = "", js.heldBy
		c.unschedule(js, seconds(now))
		return
	}
	if js == nil {
		js = c.track(key, now)
		if j.IsArrayTask() {
			if slot := c.jobs[slotKey(j.ArrayJobID, j.ArrayTaskID)]; slot != nil {
				// A task just out of its array's record: it arrived with
				// the array, as its slot did.
				js.firstSeen = slot.firstSeen
			}
		}
	}
	c.schedule(j, js, now)
}

// schedule puts a job the daemon schedules in the mechanism, if it is not
// there yet: its tag, scale and the site's rules on them, its rates. A
// job array's slot takes them from the array's record j.
func (c *Core) schedule(j bridge.Job, js *jobState, now time.Time) {
	js.heldBy = ""
	if j.State == bridge.JobPending && js.pre.phase == notPreempted {
		if why := blockedBy(j, now); why != "" && !c.placedWhereItCannotStart(j, why) {
			// Slurm would not start it: out of the allocation, left as
			// Slurm has it, until that clears (startable.go).
			js.decision, js.reason = "", "waits for Slurm: "+why
			c.unschedule(js, seconds(now))
			return
		}
		if why := c.blockedByLimit(j); why != "" {
			// A per-job cap: Slurm never starts it as it is.
			js.decision, js.reason = "", "waits for Slurm: "+why
			c.unschedule(js, seconds(now))
			return
		}
	}
	facts := siterules.JobFacts{Partition: j.Partition, User: j.User, Account: j.Account, QOS: j.QOS, Tag: j.Tag}
	if js.scale != 0 && changedSinceAdmission(js, j, facts) {
		// Its owner changed what admission judged (scontrol update of the
		// GPU count, the comment, the partition, the account or QOS):
		// admitted again, under the site's rules, as it is now.
		c.unschedule(js, seconds(now))
	}
	if js.scale != 0 {
		c.rereadRequeueFlag(js, j)
		return // already in the mechanism
	}
	js.tag, js.scale, js.facts = j.Tag, j.GPUs, facts
	eff := c.set.Rules.Apply(facts)
	js.mode, js.weight, js.entity, js.grace, js.notes = eff.Preempt, eff.Weight, eff.Entity, eff.Grace, eff.Notes
	js.restartTag, js.restartMax = eff.Restart, eff.MaxRestart
	if j.Tag.MixedOK() && !c.mixAllowed(js) {
		js.notes = append(js.notes, mixRefusedNote)
	}
	js.noRequeue = false
	c.rereadRequeueFlag(js, j)
	js.model, js.throughputs, js.perType, js.source = c.rates(j, now)
	js.limitNames = nil // a job joins the mechanism with no caps; syncLimits gives them
	if err := c.mech.AddJob(rounds.Job{ID: js.name, ScaleFactor: js.scale, Throughputs: js.throughputs,
		RestartCost: c.restartCost(js).Seconds()}, seconds(now)); err != nil {
		// Cannot happen for a checked job; keep it out rather than act on
		// a job the mechanism does not know.
		js.reason = "not scheduled: " + err.Error()
		js.scale = 0
		return
	}
	c.offerPairs(js, j, now)
}

// jobOf is the snapshot's record of a tracked job, false for a slot
// (no Slurm job) or a job the snapshot does not show.
func jobOf(snap *bridge.Snapshot, key jobKey) (bridge.Job, bool) {
	id, ok := key.Job()
	if !ok {
		return bridge.Job{}, false
	}
	return snap.Job(id)
}

// track starts tracking the job of key, first seen now.
func (c *Core) track(key jobKey, now time.Time) *jobState {
	js := &jobState{key: key, name: key.String(), firstSeen: now, received: map[string]float64{}}
	if key.slot {
		js.arrayOf = key.id
	}
	c.jobs[key] = js
	c.order = append(c.order, key)
	return js
}

// unschedule takes a job out of the mechanism, if it is in.
func (c *Core) unschedule(js *jobState, now float64) {
	if js.scale != 0 {
		c.forgetPartners(js)
		c.mech.RemoveJob(js.name, now) //nolint:errcheck // known to the mechanism
		js.scale = 0
	}
}

// forgetUnseen drops the tracked jobs that are no longer live and
// managed, releasing the daemon's holds on those still in Slurm; it
// returns their names.
func (c *Core) forgetUnseen(snap *bridge.Snapshot, seen map[jobKey]bool, now float64) []string {
	var forget []string
	kept := c.order[:0]
	for _, key := range c.order {
		js := c.jobs[key]
		if seen[key] {
			js.absent, js.replayed = false, false
			kept = append(kept, key)
			continue
		}
		c.unschedule(js, now)
		id, isJob := key.Job()
		if !isJob {
			// A waiting task of an array that started (it has a record
			// of its own now), was cancelled, or no longer competes: a
			// slot is the daemon's alone, with nothing in Slurm or the
			// store to keep.
			delete(c.jobs, key)
			continue
		}
		j, shown := snap.Job(id)
		elsewhere := false
		if !shown {
			// Moved to a partition the daemon does not manage (or one
			// dropped from its settings): it is not gone.
			j, elsewhere = snap.ElsewhereJob(id)
		}
		if !shown && !elsewhere && !js.absent {
			// Missing from this answer without Slurm saying it ended: one
			// partial reply must not forget a job with its grace period
			// or the daemon's hold. It is forgotten when the next round
			// does not show it either (Slurm dropped it after MinJobAge).
			js.absent = true
			kept = append(kept, key)
			continue
		}
		if shown || elsewhere {
			c.handBack(j, js)
		}
		if !shown && !elsewhere && js.heldByDaemon && !js.replayed {
			// Held by the daemon and gone from two answers: moved to a
			// partition the daemon does not read, or Slurm's answers were
			// broken twice. The record of whose hold it is goes now, so
			// the hold goes too, sent blind (a job that no longer exists
			// makes it fail, which is harmless).
			c.released = append(c.released, queuedRelease{blind: true, Action: Action{Action: bridge.Action{Kind: bridge.ActRelease, Job: id},
				Why: "hold released: the job is no longer in the managed partitions' answer", Restarts: js.pre.restarts}})
		}
		delete(c.jobs, key)
		forget = append(forget, js.name)
	}
	c.order = kept
	return forget
}

// jobTable is the managed jobs: their state by key and their arrival
// order.
type jobTable struct {
	jobs  map[jobKey]*jobState
	order []jobKey // managed jobs in arrival order
	// strays are the names of saved records that name no job (Restore),
	// for the first round to forget.
	strays []string
}

func (t jobTable) clone() jobTable {
	jobs := make(map[jobKey]*jobState, len(t.jobs))
	for id, js := range t.jobs {
		jobs[id] = js.clone()
	}
	return jobTable{jobs: jobs, order: slices.Clone(t.order), strays: slices.Clone(t.strays)}
}

// byName maps the name each tracked job has to the rounds, the policy and
// the trial-and-error chooser back to its key.
func (t jobTable) byName() map[string]jobKey {
	out := make(map[string]jobKey, len(t.jobs))
	for key, js := range t.jobs {
		out[js.name] = key
	}
	return out
}

// releaseQueue is the releases (or the constraint changes before them) of
// daemon holds on jobs the core stopped tracking (forgetUnseen), waiting
// for the next Step to send them.
type releaseQueue struct {
	released []queuedRelease
}

func (q releaseQueue) clone() releaseQueue { return releaseQueue{slices.Clone(q.released)} }

// leaseLives reports whether the daemon's lease still held at now: a
// lease is configured and the last round, which renewed it, is less than
// its length ago. A job that starts while its lease has lapsed (the daemon
// was away) was started by Slurm in the daemon's absence, and is adopted.
func (c *Core) leaseLives(now time.Time) bool {
	return c.set.Lease > 0 && !c.lastRound.IsZero() && now.Sub(c.lastRound) < c.set.Lease
}

// handBack queues what gives pending job j, which the daemon no longer
// manages (its tag removed or broken, moved to another partition, its
// partition no longer managed), all of itself back at once: the request
// its owner made (the whole GPU of a shared one and any node, the shape
// of one the daemon spread over a mix, its own features without the GPU
// type the daemon added), the priority Slurm gives it rather than the
// daemon's run priority, and no hold or lease of the daemon's. Its
// array's limit comes back with forgetArrays. A job the daemon left as
// its owner made it gets nothing.
func (c *Core) handBack(j bridge.Job, js *jobState) {
	if j.State != bridge.JobPending {
		return
	}
	_, why := c.eligible(j)
	if why == "" {
		why = "handed back" // still managed: a hand-back on purpose
	}
	queue := func(a bridge.Action, prefix string) {
		a.Job = j.ID
		c.released = append(c.released, queuedRelease{Action: Action{Action: a, Why: prefix + why, Restarts: j.Restarts}})
	}
	own, plain := ownFeatures(j.Constraints, c.isGPUType)
	ownConstraint := strings.Join(own, "&")
	switch {
	case js.shareSet && j.Shards > 0:
		queue(bridge.Action{Kind: bridge.ActSetShare, Constraints: ownConstraint}, "whole GPU asked for again: ")
	case j.RequestedGPUType == "" && js.single.Nodes > 0 && isMixConstraint(j.Constraints, c.isGPUType):
		queue(bridge.Action{Kind: bridge.ActSetShape, Nodes: js.single.Nodes, GPUsPerNode: js.single.GPUsPerNode, GPUs: js.single.GPUs},
			"own request put back: ")
	case plain && j.RequestedGPUType == "" && ownConstraint != j.Constraints:
		queue(bridge.Action{Kind: bridge.ActSetConstraints, Constraints: ownConstraint}, "type constraint removed: ")
	}
	// A Slurm hold (an owner's, or one an earlier version of the daemon
	// sent) shows as held with its reason, lease or not.
	slurmHold := j.Held && (!j.LeaseHeld || strings.HasPrefix(j.Reason, "JobHeld"))
	if j.Priority >= RunPriority && !slurmHold {
		// Reset by a release, which would also lift a Slurm hold: where
		// there is one, its release (the daemon's below, or the owner's)
		// recomputes the priority anyway.
		queue(bridge.Action{Kind: bridge.ActResetPriority}, "priority handed back to Slurm: ")
	}
	if js.heldByDaemon && j.Held {
		queue(bridge.Action{Kind: bridge.ActRelease}, "hold released: ")
	}
}

// noteHolds records which jobs the daemon itself holds after actions are
// sent, so that their holds are told apart from the users'.
func (c *Core) noteHolds(actions []Action) {
	for _, a := range actions {
		js := c.jobs[keyOf(a.Job)]
		if js == nil {
			continue
		}
		if held, changes := holdOwnership(a.Kind); changes {
			js.heldByDaemon = held
		}
		if a.Kind == bridge.ActSetPriority {
			js.marked = true
		}
		if a.Kind == bridge.ActSetShare {
			js.shareSet = a.Shards > 0
		}
	}
}

// holdOwnership says what an action of kind k does to the daemon's own
// hold on its job once Slurm carries it out: a hold or requeue-hold makes
// the job held by the daemon, a release ends that; other kinds change
// nothing (changes false).
func holdOwnership(k bridge.ActionKind) (held, changes bool) {
	switch k {
	case bridge.ActHold, bridge.ActRequeueHold:
		return true, true
	case bridge.ActRelease:
		return false, true
	}
	return false, false
}

// changedSinceAdmission reports whether a scheduled job differs from what
// its admission judged: any admission fact of a pending job (a running
// job keeps the tag it started with, see keepsAdmission), and the GPU
// count in either state, since that is what it holds or will hold. A job
// being preempted, or shaped for a mix of types (the daemon changes its
// request itself), is left as admitted.
func changedSinceAdmission(js *jobState, j bridge.Job, facts siterules.JobFacts) bool {
	if js.pre.phase != notPreempted || js.tag.MixedOK() {
		return false
	}
	if j.GPUs != js.scale {
		return true
	}
	return j.State == bridge.JobPending && facts != js.facts
}

// noRequeueNote is the status note of a job Slurm may not requeue.
const noRequeueNote = "never preempted: Slurm may not requeue it (--no-requeue, or requeue=0 set on the job)"

// rereadRequeueFlag follows Slurm's requeue flag every round: its owner
// may turn it off on a running job (scontrol update requeue=0), after
// which a requeue fails and a preemption would end the job. Such a job is
// treated as preempt=never from then on, whatever its tag or the site's
// rules ask, and status says so (job_submit.lua refuses the change where
// a site installs it).
func (c *Core) rereadRequeueFlag(js *jobState, j bridge.Job) {
	if j.NoRequeue == js.noRequeue {
		return
	}
	js.noRequeue = j.NoRequeue
	js.notes = slices.DeleteFunc(js.notes, func(n string) bool { return n == noRequeueNote })
	if js.noRequeue && c.askedMode(js) != bridge.PreemptNever {
		js.notes = append(js.notes, noRequeueNote)
	}
}
