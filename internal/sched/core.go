// Package sched is gavel-slurm's scheduling step, shared by the daemon
// and the simulator. It is pure: given a Slurm snapshot and the time, Core
// updates the scheduling state (jobs and their admission, time received,
// the allocation, the round mechanism, each job's ledger of holds and
// preemptions) and returns the Slurm actions that make Slurm match the
// next round's plan, the records to persist and a view for status. It
// does no I/O, reads no clock and knows nothing of the API or the store.
//
// Holds: the daemon holds the managed jobs that wait and releases them
// when they are chosen. A hold it did not send (the user's `scontrol hold`
// or `sbatch --hold`, or an admin's) is never released: such a job is kept
// out of the allocation, status says "held by user" (or admin), and it
// competes again once its owner releases it. Which holds are the daemon's
// is recorded in each job's ledger and replayed from the journal after a
// crash.
//
// Preemption: see ledger.go.
package sched

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
	"github.com/gavel-slurm/gavel-slurm/policy"
	"github.com/gavel-slurm/gavel-slurm/rounds"
)

// Settings are the parts of the configuration the core needs.
type Settings struct {
	Policy string
	// Partitions whose jobs are managed; jobs elsewhere are ignored.
	Partitions []string
	// GPUTypes restricts scheduling to these types; empty means all.
	GPUTypes []string
	// CostPerGPUHour feeds the cost policies.
	CostPerGPUHour map[string]float64
	Round          time.Duration
	// MinResetInterval batches allocation recomputations.
	MinResetInterval time.Duration
	// DefaultGrace is the time between the preemption signal and the
	// requeue unless a job's tag sets its own.
	DefaultGrace time.Duration
	// GraceSignal is the signal name sent when a grace period starts.
	GraceSignal string
	// DefaultPreempt is how jobs whose tag names no preempt= mode take
	// preemption; unset means never (safe: nothing is stopped).
	DefaultPreempt bridge.PreemptMode
	// MinRunTime is the least time a job runs (since it started, or since
	// the daemon first saw it running) before it may be preempted.
	MinRunTime time.Duration
	// Seed drives the type-order shuffle of heterogeneity-agnostic
	// policies and the randomized policies, so runs are reproducible.
	Seed int64
	// AdoptAdminHolds: in the first round, managed jobs held by an admin
	// that no saved record names are taken for the daemon's own holds
	// (recovery after the state directory was lost).
	AdoptAdminHolds bool
}

// RunPriority is the Slurm priority given to jobs chosen to run: far above
// what priority/multifactor with small weights gives ordinary jobs, so
// slurmctld starts them first.
const RunPriority = 1_000_000

// vanishFraction and vanishMinimum decide when a snapshot that lost many
// managed jobs at once (without Slurm reporting them finished) is
// distrusted: Slurm forgets finished jobs only after MinJobAge, so a mass
// disappearance means a partial answer, not mass completion.
const (
	vanishFraction = 0.5
	vanishMinimum  = 3
)

// jobState is what the core tracks about one managed, active job.
type jobState struct {
	id          string
	model       string // resolved table model, or the tag's text
	scale       int
	throughputs map[string]float64
	source      string
	tag         bridge.Tag
	firstSeen   time.Time
	// received is the seconds of service per type since arrival.
	received map[string]float64
	decision string
	reason   string
	// mode is the preemption mode the tag asks for (unset: the site's).
	mode bridge.PreemptMode
	// ledger is what the daemon did to the job (holds, preemption).
	ledger
	// heldBy is non-empty ("held by user") while such a foreign hold keeps
	// the job out of scheduling.
	heldBy string
}

// Core is the pure scheduling state of the daemon. One goroutine drives
// it.
type Core struct {
	set   Settings
	pol   policy.Policy
	table *throughputs.Table

	mech      *rounds.Mechanism
	cluster   []rounds.Server
	shuffle   *rand.Rand
	jobs      map[string]*jobState
	order     []string // managed job ids in arrival order
	lastRound time.Time

	allocation         *policy.Allocation
	allocationComputed time.Time
	plan               *rounds.Plan
	round              uint64
	// restored is the saved state waiting for the first Step, which
	// rebuilds the mechanism before loading it.
	restored *State
	// gpuTypes are the GPU type names seen on nodes or configured; a
	// constraint term naming one is the daemon's choice (constraint.go).
	gpuTypes map[string]bool
	// typeList is gpuTypes sorted (knownTypes, addTypes).
	typeList []string
	// typeNodes are the latest snapshot's nodes by GPU type.
	typeNodes map[string][]bridge.Node
	// typesSig describes the known types and their nodes' features;
	// ratesSig is the description the jobs' rates were last refreshed
	// against (refreshRates).
	typesSig, ratesSig string
	// released are the releases of daemon holds on jobs that stopped
	// being managed this round (syncJobs), sent with the round's actions.
	released []Action
	// adopted is set after the first round that could adopt admin holds
	// (Settings.AdoptAdminHolds): later admin holds are the admin's.
	adopted bool
	// suspects are the managed jobs missing from the last distrusted
	// snapshot (distrust).
	suspects map[string]bool
	// undo holds every job's ledger as it was before the last Step or
	// Graces, for Abandon.
	undo map[string]ledger
}

// State is what the core saves each round beside the job records, so that
// a restart carries the round mechanism on where it stopped: its clock of
// resets, time received since the last reset and deficits, the allocation
// in force and when the last round ran (service since then is credited on
// the first round after a restart, at most two rounds' worth).
type State struct {
	LastRound          time.Time          `json:"last_round"`
	Rounds             *rounds.Saved      `json:"rounds,omitempty"`
	Allocation         *policy.Allocation `json:"allocation,omitempty"`
	AllocationComputed time.Time          `json:"allocation_computed"`
}

// RestoreState hands the core the State saved by an earlier run; call it
// after Restore, before the first Step.
func (c *Core) RestoreState(s State) {
	c.lastRound = s.LastRound
	c.allocation, c.allocationComputed = s.Allocation, s.AllocationComputed
	c.restored = &s
}

// NewCore returns a core for the settings. table is the reference
// throughput table used for tagged models.
func NewCore(set Settings, table *throughputs.Table) (*Core, error) {
	pol, err := policy.New(set.Policy, policy.Options{Seed: set.Seed})
	if err != nil {
		return nil, fmt.Errorf("scheduler.policy: %w", err)
	}
	if set.Round <= 0 {
		return nil, fmt.Errorf("scheduler.round: %s is not positive", set.Round)
	}
	if table == nil {
		return nil, fmt.Errorf("no throughput table")
	}
	return &Core{
		set:     set,
		pol:     pol,
		table:   table,
		shuffle: rand.New(rand.NewPCG(uint64(set.Seed), 0x6761_7665_6c)),
		jobs:    map[string]*jobState{},
	}, nil
}

// Restore seeds the core with the records saved by an earlier run, so
// time received and grace periods survive a restart. Call before the
// first Step.
func (c *Core) Restore(records map[string]Record, round uint64) {
	c.round = round
	for id, r := range records {
		js := &jobState{id: id, firstSeen: r.FirstSeen, received: copyMap(r.Received),
			decision: r.LastDecision, reason: r.Reason, mode: bridge.PreemptMode(r.Preempt)}
		js.heldByDaemon = r.HeldByDaemon
		if !r.GraceStart.IsZero() {
			js.pre = preemption{phase: parsePhase(r.GracePhase), start: r.GraceStart, target: r.GraceTarget, restarts: r.GraceRestarts}
			if js.pre.phase == notPreempted {
				js.pre.phase = inGrace // saved before phases were recorded
			}
		}
		if js.received == nil {
			js.received = map[string]float64{}
		}
		c.jobs[id] = js
		c.order = append(c.order, id)
	}
	// Arrival order of restored jobs: by first sighting, then id.
	sort.Slice(c.order, func(i, j int) bool {
		a, b := c.jobs[c.order[i]], c.jobs[c.order[j]]
		if !a.firstSeen.Equal(b.firstSeen) {
			return a.firstSeen.Before(b.firstSeen)
		}
		return a.id < b.id
	})
}

// seconds is the mechanism's clock: seconds since the Unix epoch.
func seconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// Result is what one Step decided.
type Result struct {
	Round uint64
	// Skipped is non-empty when the round sends nothing because the
	// snapshot cannot be trusted; SkipCause is its short metric label.
	Skipped   string
	SkipCause string
	// Actions to send, in order.
	Actions []Action
	// Solved is true when the allocation was recomputed this round.
	Solved bool
	// Preemptions counts the grace signals among Actions.
	Preemptions int
	Managed     int
	Jobs        int
	// Records are the job records to persist; Forget the ids to delete;
	// State the rest of the core's state.
	Records []Record
	Forget  []string
	State   State
	// View is what status shows of this round.
	View View
}

// Action is one Slurm action and why it is sent.
type Action struct {
	bridge.Action
	// Why is a short explanation for the log and the journal.
	Why string
	// Restarts is the job's restart count when the action was decided:
	// a requeue's effect is visible as a higher count.
	Restarts int
}

// Solver computes the allocation; the shell passes one that times the
// call, tests pass Core.Solve directly.
type Solver func(p *policy.Problem) (*policy.Allocation, error)

// Step runs one round on snap at time now. solve computes allocations
// (normally c.Solve wrapped in a timer).
func (c *Core) Step(snap *bridge.Snapshot, now time.Time, solve Solver) Result {
	c.saveLedgers()
	c.round++
	res := Result{Round: c.round}
	if why, cause := c.distrust(snap); why != "" {
		res.Skipped, res.SkipCause = why, cause
		res.View = c.view(snap, now, &res)
		return res
	}
	nowS := seconds(now)
	c.noteTypes(snap)
	servers := c.clusterOf(snap)
	if err := c.syncCluster(servers, nowS); err != nil {
		res.Skipped, res.SkipCause = "cluster: "+err.Error(), "cluster_error"
		res.View = c.view(snap, now, &res)
		return res
	}
	res.Forget = c.syncJobs(snap, now)
	c.adopted = true
	c.refreshRates(snap)
	if c.restored != nil {
		if c.restored.Rounds != nil {
			c.mech.Load(*c.restored.Rounds)
		}
		c.restored = nil
	}
	c.account(snap, now)

	if c.mech.NeedsReset(nowS) && c.mech.Len() > 0 {
		alloc, err := solve(c.problem(snap, now))
		if err != nil {
			res.Skipped, res.SkipCause = "allocation: "+err.Error(), "solver_error"
			res.View = c.view(snap, now, &res)
			return res
		}
		if err := c.mech.SetAllocation(alloc, nowS); err != nil {
			res.Skipped, res.SkipCause = "allocation: "+err.Error(), "solver_error"
			res.View = c.view(snap, now, &res)
			return res
		}
		c.allocation, c.allocationComputed, res.Solved = alloc, now, true
	}

	running := c.running(snap, now)
	plan, err := c.mech.Plan(nowS, running)
	if err != nil {
		res.Skipped, res.SkipCause = "plan: "+err.Error(), "plan_error"
		res.View = c.view(snap, now, &res)
		return res
	}
	c.plan = plan
	res.Actions, res.Preemptions = c.translate(snap, plan, now)
	// Releases found in a round that stopped early wait for this one;
	// only those whose job is still held go out.
	for _, a := range c.released {
		if j, ok := snap.Job(a.Job); ok && j.State == bridge.JobPending && j.Held && c.jobs[a.Job.String()] == nil {
			res.Actions = append(res.Actions, a)
		}
	}
	c.released = nil
	c.noteHolds(res.Actions)
	c.lastRound = now
	res.Records = c.records(now)
	saved := c.mech.Save()
	res.State = State{LastRound: c.lastRound, Rounds: &saved, Allocation: c.allocation, AllocationComputed: c.allocationComputed}
	res.View = c.view(snap, now, &res)
	return res
}

// Settings returns the settings the step runs with.
func (c *Core) Settings() Settings { return c.set }

// MechanismState is the round mechanism's view of a job on a GPU type
// (allocation, time received, priority), for inspection.
func (c *Core) MechanismState(key, gpuType string) (rounds.State, error) {
	if c.mech == nil {
		return rounds.State{}, fmt.Errorf("no round has run yet")
	}
	return c.mech.State(key, gpuType)
}

// Round is the number of the last round stepped.
func (c *Core) Round() uint64 { return c.round }

// Solve computes an allocation with the configured policy.
func (c *Core) Solve(p *policy.Problem) (*policy.Allocation, error) {
	a, err := c.pol.Allocate(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.pol.Name(), err)
	}
	return a, nil
}

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
	var gone []string
	for id := range c.jobs {
		known++
		jid, err := parseJobID(id)
		if err != nil {
			continue
		}
		if _, ok := snap.Job(jid); !ok {
			gone = append(gone, id)
		}
	}
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

// Check says why snap must not be acted on, or "" when it is usable; a
// caller that gets cause "jobs_vanished" reads Slurm again: the same jobs
// missing from the second read are taken as gone.
func (c *Core) Check(snap *bridge.Snapshot) (why, cause string) {
	return c.distrust(snap)
}

func parseJobID(s string) (bridge.JobID, error) {
	var id uint32
	if _, err := fmt.Sscanf(s, "%d", &id); err != nil || fmt.Sprint(id) != s {
		return 0, fmt.Errorf("job id %q is not a Slurm job id", s)
	}
	return bridge.JobID(id), nil
}

func (c *Core) inPartitions(names ...string) bool {
	if len(c.set.Partitions) == 0 {
		return true
	}
	for _, n := range names {
		for _, p := range c.set.Partitions {
			if n == p {
				return true
			}
		}
	}
	return false
}

func (c *Core) typeManaged(t string) bool {
	if t == "" {
		return false
	}
	if len(c.set.GPUTypes) == 0 {
		return true
	}
	for _, x := range c.set.GPUTypes {
		if x == t {
			return true
		}
	}
	return false
}

func (c *Core) nodeUsable(n bridge.Node) bool {
	return n.Available() && n.GPUs > 0 && c.typeManaged(n.GPUType) && c.inPartitions(n.Partitions...)
}

// eligible says whether a job is one the daemon schedules, and if not why.
func (c *Core) eligible(j bridge.Job) (bool, string) {
	if !c.inPartitions(j.Partition) {
		return false, "not managed: partition " + j.Partition + " is not scheduled"
	}
	if j.Unreadable != nil {
		return false, "not managed: Slurm's record of the job could not be read: " + j.Unreadable.Error()
	}
	if j.TagErr != nil {
		return false, "not managed: " + j.TagErr.Error()
	}
	if j.GPUs <= 0 {
		return false, "not managed: requests no GPUs"
	}
	if t := j.RequestedGPUType; t != "" && !c.typeManaged(t) {
		return false, fmt.Sprintf("not managed: typed request for gpu:%s, a type this daemon does not schedule", t)
	}
	if j.RequestedGPUType == "" {
		own, ok := ownFeatures(j.Constraints, c.isGPUType)
		if !ok {
			return false, fmt.Sprintf("not managed: --constraint=%q uses operators other than & (the daemon adds the GPU type to a job's own features with &)", j.Constraints)
		}
		if len(own) > 0 && c.typeNodes != nil && len(c.typesWithFeatures(own)) == 0 {
			return false, fmt.Sprintf("not managed: no GPU node has all of its features %s", strings.Join(own, "&"))
		}
	}
	return true, ""
}

// clusterOf lists the servers the mechanism may place managed jobs on:
// usable nodes, less the GPUs that others hold. Others are the unmanaged
// jobs in the snapshot and, from the node's own count of GPUs in use, jobs
// the snapshot does not show (those of partitions that share the node).
func (c *Core) clusterOf(snap *bridge.Snapshot) []rounds.Server {
	unmanaged := map[string]int{}
	managed := map[string]int{}
	for _, j := range snap.Jobs {
		if j.State != bridge.JobRunning && j.State != bridge.JobSuspended {
			continue
		}
		per := perNode(j)
		ok, _ := c.eligible(j)
		for _, n := range j.RunningNodes {
			if ok {
				managed[n] += per
			} else {
				unmanaged[n] += per
			}
		}
	}
	var servers []rounds.Server
	for _, n := range snap.Nodes {
		if !c.nodeUsable(n) {
			continue
		}
		others := max(unmanaged[n.Name], n.GPUsUsed-managed[n.Name])
		if g := n.GPUs - others; g > 0 {
			servers = append(servers, rounds.Server{ID: n.Name, Type: n.GPUType, GPUs: g})
		}
	}
	return servers
}

func perNode(j bridge.Job) int {
	if j.GPUsPerNode > 0 {
		return j.GPUsPerNode
	}
	if len(j.RunningNodes) == 0 {
		return j.GPUs
	}
	return j.GPUs / len(j.RunningNodes)
}

func (c *Core) syncCluster(servers []rounds.Server, now float64) error {
	if c.mech != nil && equalServers(servers, c.cluster) {
		return nil
	}
	if c.mech == nil {
		opts := rounds.ForPolicy(c.set.Policy, c.shuffle)
		opts.Credit = c.set.Round.Seconds() / 2
		opts.MinResetInterval = c.set.MinResetInterval.Seconds()
		// A job that arrives between resets competes with priority 0
		// rather than leaving its GPUs idle: on a real cluster idle GPUs
		// cost more than a slightly unfair round.
		opts.HoldUnallocated = false
		m, err := rounds.New(rounds.Cluster{Servers: servers}, opts)
		if err != nil {
			return err
		}
		c.mech = m
	} else if err := c.mech.SetCluster(rounds.Cluster{Servers: servers}, now); err != nil {
		return err
	}
	c.addTypes(c.mech.Types()...)
	c.cluster = servers
	return nil
}

func equalServers(a, b []rounds.Server) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// syncJobs adds arriving managed jobs to the mechanism and removes those
// that finished or left; it returns the ids to forget.
func (c *Core) syncJobs(snap *bridge.Snapshot, now time.Time) []string {
	nowS := seconds(now)
	seen := map[string]bool{}
	for _, j := range snap.Jobs {
		ok, _ := c.eligible(j)
		id := j.ID.String()
		js := c.jobs[id]
		if ok && !j.Active() && js != nil && js.pre.phase != notPreempted && endedInGrace(j) {
			// Ended during its grace period: preempted, not finished; it
			// stays tracked until its requeue lands (advance).
			seen[id] = true
			continue
		}
		if !ok || !j.Active() {
			continue
		}
		seen[id] = true
		if js != nil && j.State == bridge.JobPending && !j.Held {
			// Whatever hold the daemon sent is gone; a later hold is
			// someone else's.
			js.heldByDaemon = false
		}
		if js == nil && j.State == bridge.JobPending && j.Held && j.Reason == "JobHeldAdmin" && c.set.AdoptAdminHolds && !c.adopted {
			// Recovery: the hold is taken for one the daemon sent and
			// lost the record of; the job is scheduled like any other.
			js = &jobState{id: id, firstSeen: now, received: map[string]float64{}, ledger: ledger{heldByDaemon: true}}
			c.jobs[id] = js
			c.order = append(c.order, id)
		}
		if j.State == bridge.JobPending && j.Held && (js == nil || !js.heldByDaemon) {
			// Held by its user or an admin: left as Slurm has it and kept
			// out of the allocation until released.
			if js == nil {
				js = &jobState{id: id, firstSeen: now, received: map[string]float64{}}
				c.jobs[id] = js
				c.order = append(c.order, id)
			}
			js.heldBy = holdOwner(j)
			js.decision, js.reason = "", js.heldBy
			if js.scale != 0 {
				c.mech.RemoveJob(id, nowS) //nolint:errcheck // known to the mechanism
				js.scale = 0
			}
			continue
		}
		if js != nil {
			js.heldBy = ""
		}
		if js != nil && js.scale != 0 {
			continue // already in the mechanism
		}
		if js == nil {
			js = &jobState{id: id, firstSeen: now, received: map[string]float64{}}
			c.jobs[id] = js
			c.order = append(c.order, id)
		}
		js.tag, js.scale, js.mode = j.Tag, j.GPUs, j.Tag.Preempt
		js.model, js.throughputs, js.source = c.rates(j)
		if err := c.mech.AddJob(rounds.Job{ID: id, ScaleFactor: js.scale, Throughputs: js.throughputs}, nowS); err != nil {
			// Cannot happen for a checked job; keep it out rather than
			// act on a job the mechanism does not know.
			js.reason = "not scheduled: " + err.Error()
			js.scale = 0
		}
	}
	var forget []string
	kept := c.order[:0]
	for _, id := range c.order {
		if seen[id] {
			kept = append(kept, id)
			continue
		}
		if c.jobs[id].scale != 0 {
			c.mech.RemoveJob(id, nowS) //nolint:errcheck // known to the mechanism
		}
		if c.jobs[id].heldByDaemon {
			c.releaseUnmanaged(snap, id)
		}
		delete(c.jobs, id)
		forget = append(forget, id)
	}
	c.order = kept
	return forget
}

// releaseUnmanaged queues the release of a job the daemon held that is
// still in Slurm but no longer managed (its tag, features or partition
// changed): the hold would outlive the record that says it is the
// daemon's. The GPU type the daemon put in its constraint is removed
// first, so the job goes back to Slurm's normal handling with its own
// features only.
func (c *Core) releaseUnmanaged(snap *bridge.Snapshot, id string) {
	jid, err := parseJobID(id)
	if err != nil {
		return
	}
	j, ok := snap.Job(jid)
	if !ok || j.State != bridge.JobPending || !j.Held {
		return
	}
	_, why := c.eligible(j)
	queue := func(a bridge.Action, prefix string) {
		a.Job = jid
		c.released = append(c.released, Action{Action: a, Why: prefix + why, Restarts: j.Restarts})
	}
	if own, ok := ownFeatures(j.Constraints, c.isGPUType); ok && j.RequestedGPUType == "" {
		if want := strings.Join(own, "&"); want != j.Constraints {
			queue(bridge.Action{Kind: bridge.ActSetConstraints, Constraints: want}, "type constraint removed: ")
		}
	}
	queue(bridge.Action{Kind: bridge.ActRelease}, "hold released: ")
}

// holdOwner says whose hold keeps a job the daemon did not hold.
func holdOwner(j bridge.Job) string {
	if j.Reason == "JobHeldAdmin" {
		return "held by admin"
	}
	return "held by user"
}

// noteHolds records which jobs the daemon itself holds after actions are
// sent, so that their holds are told apart from the users'.
func (c *Core) noteHolds(actions []Action) {
	for _, a := range actions {
		js := c.jobs[a.Job.String()]
		if js == nil {
			continue
		}
		switch a.Kind {
		case bridge.ActHold, bridge.ActRequeueHold:
			js.heldByDaemon = true
		case bridge.ActRelease:
			js.heldByDaemon = false
		}
	}
}

// RestoreJournal replays the journaled actions that the persisted records
// may not reflect yet (a crash between sending and persisting), in journal
// order: holds and releases (whose hold is whose) and grace signals (a
// grace period that started, so it is neither signalled again nor
// forgotten). Failed entries changed nothing in Slurm and are skipped.
// Call after Restore, before the first Step.
func (c *Core) RestoreJournal(entries []JournalEntry, records map[string]Record) {
	for _, e := range entries {
		if e.Failed {
			continue
		}
		js := c.jobs[e.JobID]
		if js != nil && e.Created.Before(records[e.JobID].UpdatedAt) {
			continue
		}
		a := e.Action
		if js == nil {
			if a.Kind != bridge.ActHold && a.Kind != bridge.ActRequeueHold {
				continue
			}
			// A job that arrived in the round the crash cut short: the
			// journal is all that says the hold is the daemon's.
			js = &jobState{id: e.JobID, firstSeen: e.Created, received: map[string]float64{}}
			c.jobs[e.JobID] = js
			c.order = append(c.order, e.JobID)
		}
		switch a.Kind {
		case bridge.ActSignal:
			if js.pre.phase == notPreempted {
				js.pre = preemption{phase: inGrace, start: e.Created, restarts: a.Restarts}
			}
		case bridge.ActRequeueHold, bridge.ActRequeue:
			if js.pre.phase != requeued {
				js.pre = preemption{phase: requeued, start: e.Created, target: js.pre.target, restarts: a.Restarts}
			}
		}
		c.noteHolds([]Action{a})
	}
}

// rates is a job's estimate (see estimate) limited to the types it can
// run on: its typed request's type, or the types with a node that has its
// own constraint features.
func (c *Core) rates(j bridge.Job) (model string, rates map[string]float64, source string) {
	model, rates, source = c.estimate(j.Tag.Model, j.GPUs)
	if t := j.RequestedGPUType; t != "" {
		// A typed request (--gres=gpu:v100:N) can only run on its type,
		// and its request is never rewritten: the job takes part in the
		// policy pinned there.
		for other := range rates {
			if other != t {
				rates[other] = 0
			}
		}
		return model, rates, source + "; pinned to " + t + " by its typed request"
	}
	if own, _ := ownFeatures(j.Constraints, c.isGPUType); len(own) > 0 {
		fit := c.typesWithFeatures(own)
		for t := range rates {
			if !slices.Contains(fit, t) {
				rates[t] = 0
			}
		}
		source += "; only " + strings.Join(fit, ", ") + " have nodes with its features " + strings.Join(own, "&")
	}
	return model, rates, source
}

// refreshRates recomputes the rates of the jobs in the mechanism when the
// known GPU types or the nodes' features changed since they were
// estimated: a job that arrived while its type had no node can then run
// there.
func (c *Core) refreshRates(snap *bridge.Snapshot) {
	if c.typesSig == c.ratesSig {
		return
	}
	c.ratesSig = c.typesSig
	changed := false
	for _, id := range c.order {
		js := c.jobs[id]
		jid, err := parseJobID(id)
		if js == nil || js.scale == 0 || err != nil {
			continue
		}
		j, ok := snap.Job(jid)
		if !ok {
			continue
		}
		_, rates, source := c.rates(j)
		if maps.Equal(rates, js.throughputs) {
			continue
		}
		if err := c.mech.SetThroughputs(id, rates); err != nil {
			continue
		}
		js.throughputs, js.source, changed = rates, source, true
	}
	if changed {
		c.mech.NoteEvent(rounds.EventThroughputChange)
	}
}

// estimate returns a job's throughput per cluster type and where it came
// from: the reference table entry for the tagged model at the job's GPU
// count, or, when the table does not know it, the same rate on every type
// (a conservative default that treats the types as interchangeable rather
// than guessing a speed-up). Types the table lacks get the model's slowest
// known rate.
func (c *Core) estimate(model string, scale int) (string, map[string]float64, string) {
	types := c.knownTypes()
	out := make(map[string]float64, len(types))
	name, ok := bridge.ResolveModel(model, c.table.Models())
	if ok && c.table.Has(name, scale) {
		rates, _ := c.table.IsolatedRates(name, scale)
		slowest := 0.0
		for _, r := range rates {
			if r > 0 && (slowest == 0 || r < slowest) {
				slowest = r
			}
		}
		source := fmt.Sprintf("reference table: %s x%d", name, scale)
		filled := false
		tableTypes := c.table.Types()
		for _, t := range types {
			i := indexOf(tableTypes, t)
			if i >= 0 {
				out[t] = rates[i]
			} else {
				out[t] = slowest
				filled = true
			}
		}
		if filled {
			source += " (types outside the table assumed as slow as its slowest)"
		}
		return name, out, source
	}
	for _, t := range types {
		out[t] = 1
	}
	why := "model not in the reference table"
	if model == "" {
		why = "no model in the tag"
	} else if ok {
		why = fmt.Sprintf("%s has no entry for %d GPUs", name, scale)
		model = name
	}
	return model, out, "default: equal on every type (" + why + ")"
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

// account credits each running managed job with the time since the last
// round on the type it runs on, in the mechanism and in its lifetime
// totals. The gap is capped at two rounds so a daemon outage is not
// counted as service nobody observed.
func (c *Core) account(snap *bridge.Snapshot, now time.Time) {
	if c.lastRound.IsZero() || !now.After(c.lastRound) {
		return
	}
	gap := min(now.Sub(c.lastRound), 2*c.set.Round)
	var usages []rounds.Usage
	for _, j := range snap.Jobs {
		js := c.jobs[j.ID.String()]
		if js == nil || js.scale == 0 || j.State != bridge.JobRunning || !c.typeManaged(j.RunningGPUType) {
			continue
		}
		d := gap
		if !j.StartTime.IsZero() && now.Sub(j.StartTime) < d {
			d = max(now.Sub(j.StartTime), 0)
		}
		js.received[j.RunningGPUType] += d.Seconds()
		usages = append(usages, rounds.Usage{Key: js.id, Type: j.RunningGPUType, Seconds: d.Seconds()})
	}
	// Usages on types the mechanism does not know (a node that just left)
	// are dropped rather than failing the round.
	known := c.mech.Types()
	kept := usages[:0]
	for _, u := range usages {
		if indexOf(known, u.Type) >= 0 {
			kept = append(kept, u)
		}
	}
	c.mech.Record(kept) //nolint:errcheck // types checked above
}

// problem builds the policy's input from the managed jobs.
func (c *Core) problem(snap *bridge.Snapshot, now time.Time) *policy.Problem {
	p := &policy.Problem{GPUs: map[string]int{}, Costs: map[string]float64{}}
	for _, s := range c.cluster {
		p.GPUs[s.Type] += s.GPUs
	}
	for t := range p.GPUs {
		if v, ok := c.set.CostPerGPUHour[t]; ok {
			p.Costs[t] = v
		}
	}
	entities := map[string]policy.Entity{}
	for _, id := range c.order {
		js := c.jobs[id]
		if js.scale == 0 {
			continue
		}
		weight := js.tag.Weight
		if weight <= 0 {
			weight = 1
		}
		since := now.Sub(js.firstSeen).Seconds()
		// Estimates cover every known type; the policy sees the types
		// with GPUs for managed jobs now.
		rates := make(map[string]float64, len(p.GPUs))
		for t := range p.GPUs {
			rates[t] = js.throughputs[t]
		}
		job := policy.Job{
			ID: id, Throughputs: rates, ScaleFactor: js.scale, Weight: weight,
			TimeSinceStart: since, Arrival: seconds(js.firstSeen), Entity: js.tag.Entity,
		}
		if js.tag.Steps > 0 {
			job.StepsRemaining = float64(js.tag.Steps)
		}
		if js.tag.SLO > 0 {
			job.SLO = max(js.tag.SLO.Seconds()-since, 1)
		}
		// Isolated time (Themis' C_i) needs measured progress; without it
		// the job's time in the system is the best available stand-in.
		job.IsolatedTime = since
		if js.tag.Entity != "" {
			entities[js.tag.Entity] = policy.Entity{Weight: 1}
		}
		p.Jobs = append(p.Jobs, job)
	}
	if len(entities) > 0 {
		p.Entities = entities
	}
	return p
}

// running lists the managed jobs that hold GPUs now, as the mechanism
// expects them: GPU indices per node are assigned in job order, since
// Slurm's snapshot says how many GPUs a job holds on a node, not which.
func (c *Core) running(snap *bridge.Snapshot, now time.Time) []rounds.Assignment {
	servers := map[string]rounds.Server{}
	for _, s := range c.cluster {
		servers[s.ID] = s
	}
	next := map[string]int{}
	var out []rounds.Assignment
	for _, j := range snap.Jobs {
		js := c.jobs[j.ID.String()]
		if js == nil || js.scale == 0 || (j.State != bridge.JobRunning && j.State != bridge.JobSuspended) {
			continue
		}
		a := rounds.Assignment{Key: js.id, Jobs: []string{js.id}, Type: j.RunningGPUType, Pin: c.pinOf(js, j, now)}
		per := perNode(j)
		fits := true
		for _, n := range j.RunningNodes {
			s, ok := servers[n]
			if !ok || s.Type != j.RunningGPUType || next[n]+per > s.GPUs {
				fits = false
				break
			}
			for g := 0; g < per; g++ {
				a.Slots = append(a.Slots, rounds.Slot{Server: n, GPU: next[n] + g})
			}
		}
		if !fits || len(a.Slots) == 0 {
			// Running where the mechanism cannot see (a drained node):
			// it is left alone and competes as if waiting.
			continue
		}
		for _, n := range j.RunningNodes {
			next[n] += per
		}
		out = append(out, a)
	}
	return out
}

// records are the persisted view of every tracked job.
func (c *Core) records(now time.Time) []Record {
	out := make([]Record, 0, len(c.order))
	for _, id := range c.order {
		js := c.jobs[id]
		rec := Record{JobID: id, FirstSeen: js.firstSeen, Received: copyMap(js.received),
			LastDecision: js.decision, Reason: js.reason, UpdatedAt: now, HeldByDaemon: js.heldByDaemon,
			Preempt: string(js.mode)}
		if js.pre.phase != notPreempted {
			rec.GraceStart, rec.GraceTarget = js.pre.start, js.pre.target
			rec.GracePhase, rec.GraceRestarts = phaseNames[js.pre.phase], js.pre.restarts
		}
		if len(js.throughputs) > 0 {
			rec.Estimates = map[string]Estimate{}
			for t, v := range js.throughputs {
				rec.Estimates[t] = Estimate{StepsPerSecond: v, Source: js.source}
			}
		}
		out = append(out, rec)
	}
	return out
}

func copyMap(m map[string]float64) map[string]float64 {
	if m == nil {
		return nil
	}
	out := make(map[string]float64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// describe renders a plan decision's reason, prefixed by its action.
func describe(d *rounds.Decision) string {
	r := d.Reason.String()
	if d.Action == rounds.Preempt && !strings.HasPrefix(r, "preempted") {
		r = "preempted: " + r
	}
	return r
}

// saveLedgers keeps every job's ledger for Abandon.
func (c *Core) saveLedgers() {
	c.undo = make(map[string]ledger, len(c.jobs))
	for id, js := range c.jobs {
		c.undo[id] = js.ledger
	}
}

// Abandon takes back what the last Step or Graces recorded of its actions
// (grace periods started, holds owned, requeues sent) when those actions
// could not be journaled and so were not sent.
func (c *Core) Abandon() {
	for id, l := range c.undo {
		if js := c.jobs[id]; js != nil {
			js.ledger = l
		}
	}
	c.undo = nil
}
