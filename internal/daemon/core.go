// Package daemon runs gavel-slurm's round loop beside slurmctld.
//
// It is split in two. Core is the pure part: given a Slurm snapshot and
// the time, it updates the scheduling state (jobs, time received, the
// allocation, the round mechanism) and returns the Slurm actions that make
// Slurm match the next round's plan, plus the documents the API serves. It
// does no I/O and reads no clock. Daemon is the thin shell around it: it
// takes snapshots, journals and applies the actions, persists the state,
// publishes status and metrics, and sleeps between rounds on an injected
// clock.
//
// Holds: the daemon holds the managed jobs that wait and releases them
// when they are chosen. A hold it did not send (the user's `scontrol hold`
// or `sbatch --hold`, or an admin's) is never released: such a job is kept
// out of the allocation, status says "held by user" (or admin), and it
// competes again once its owner releases it. Which holds are the daemon's
// is recorded per job and replayed from the journal after a crash.
//
// Durability: every round's actions are journaled in one transaction
// before any is sent, and their outcomes written in one more; the state
// (job records, the round mechanism's Saved state, the allocation, the
// time of the last round) is written after every round. A restart
// reconciles pending entries against Slurm (see Reconcile) and carries the
// round mechanism on where it stopped.
package daemon

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/api"
	"github.com/gavel-slurm/gavel-slurm/internal/store"
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
	// graceStart is when the preemption signal was sent (zero when not
	// being preempted); graceTarget is the type to restart on, if any.
	graceStart  time.Time
	graceTarget string
	// requeueSent is set once the grace period's requeue was sent this
	// round, so mid-round checks do not repeat it.
	requeueSent bool
	// recheckAt is when to look again at a job requeued mid-round: Slurm
	// sets the requeue's start delay only once the job has stopped (after
	// its KillWait), which can undo the begin-now sent with the requeue.
	recheckAt time.Time
	// heldByDaemon is set while the job's hold is one the daemon sent
	// (journaled); any other hold belongs to the user or an admin and is
	// never released by the daemon.
	heldByDaemon bool
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
	if err := policy.CheckDaemonSupport(set.Policy); err != nil {
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
func (c *Core) Restore(records map[string]store.JobRecord, round uint64) {
	c.round = round
	for id, r := range records {
		js := &jobState{id: id, firstSeen: r.FirstSeen, received: copyMap(r.Received),
			decision: r.LastDecision, reason: r.Reason, graceStart: r.GraceStart, graceTarget: r.GraceTarget,
			heldByDaemon: r.HeldByDaemon}
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
	Records []store.JobRecord
	Forget  []string
	State   State
	// Status and Allocation are the API documents for this round.
	Status     api.Status
	Allocation api.Allocation
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
	c.round++
	res := Result{Round: c.round}
	if why, cause := c.distrust(snap); why != "" {
		res.Skipped, res.SkipCause = why, cause
		res.Status = c.status(snap, now, &res)
		return res
	}
	nowS := seconds(now)
	c.noteTypes(snap)
	servers := c.clusterOf(snap)
	if err := c.syncCluster(servers, nowS); err != nil {
		res.Skipped, res.SkipCause = "cluster: "+err.Error(), "cluster_error"
		res.Status = c.status(snap, now, &res)
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
			res.Status = c.status(snap, now, &res)
			return res
		}
		if err := c.mech.SetAllocation(alloc, nowS); err != nil {
			res.Skipped, res.SkipCause = "allocation: "+err.Error(), "solver_error"
			res.Status = c.status(snap, now, &res)
			return res
		}
		c.allocation, c.allocationComputed, res.Solved = alloc, now, true
	}

	running := c.running(snap)
	plan, err := c.mech.Plan(nowS, running)
	if err != nil {
		res.Skipped, res.SkipCause = "plan: "+err.Error(), "plan_error"
		res.Status = c.status(snap, now, &res)
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
	res.Status = c.status(snap, now, &res)
	res.Allocation = c.allocationDoc()
	return res
}

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
	missing := 0
	for id := range c.jobs {
		known++
		jid, err := parseJobID(id)
		if err != nil {
			continue
		}
		if _, ok := snap.Job(jid); !ok {
			missing++
		}
	}
	if missing >= vanishMinimum && float64(missing) > vanishFraction*float64(known) {
		return fmt.Sprintf("%d of %d managed jobs vanished from Slurm's answer at once", missing, known), "jobs_vanished"
	}
	return "", ""
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
		if !ok || !j.Active() {
			continue
		}
		id := j.ID.String()
		seen[id] = true
		js := c.jobs[id]
		if js != nil && j.State == bridge.JobPending && !j.Held {
			// Whatever hold the daemon sent is gone; a later hold is
			// someone else's.
			js.heldByDaemon = false
		}
		if js == nil && j.State == bridge.JobPending && j.Held && j.Reason == "JobHeldAdmin" && c.set.AdoptAdminHolds && !c.adopted {
			// Recovery: the hold is taken for one the daemon sent and
			// lost the record of; the job is scheduled like any other.
			js = &jobState{id: id, firstSeen: now, received: map[string]float64{}, heldByDaemon: true}
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
		js.tag, js.scale = j.Tag, j.GPUs
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
func (c *Core) RestoreJournal(entries []store.Entry, records map[string]store.JobRecord) {
	for _, e := range entries {
		if e.State == store.Failed {
			continue
		}
		js := c.jobs[e.JobID]
		if js == nil || e.Created.Before(records[e.JobID].UpdatedAt) {
			continue
		}
		var a Action
		if err := json.Unmarshal(e.Payload, &a); err != nil {
			continue
		}
		if a.Kind == bridge.ActSignal && js.graceStart.IsZero() {
			js.graceStart = e.Created
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
func (c *Core) running(snap *bridge.Snapshot) []rounds.Assignment {
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
		a := rounds.Assignment{Key: js.id, Jobs: []string{js.id}, Type: j.RunningGPUType}
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
func (c *Core) records(now time.Time) []store.JobRecord {
	out := make([]store.JobRecord, 0, len(c.order))
	for _, id := range c.order {
		js := c.jobs[id]
		rec := store.JobRecord{JobID: id, FirstSeen: js.firstSeen, Received: copyMap(js.received),
			LastDecision: js.decision, Reason: js.reason, UpdatedAt: now,
			GraceStart: js.graceStart, GraceTarget: js.graceTarget, HeldByDaemon: js.heldByDaemon}
		if len(js.throughputs) > 0 {
			rec.Estimates = map[string]store.Estimate{}
			for t, v := range js.throughputs {
				rec.Estimates[t] = store.Estimate{StepsPerSecond: v, Source: js.source}
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

// status builds the /v1/status document.
func (c *Core) status(snap *bridge.Snapshot, now time.Time, res *Result) api.Status {
	st := api.Status{Round: api.Round{
		Number: c.round, Policy: c.set.Policy, Started: now, LengthSeconds: c.set.Round.Seconds(),
		NextAt: now.Add(c.set.Round), AllocationComputed: c.allocationComputed, Skipped: res.Skipped,
	}}
	if snap == nil {
		return st
	}
	alloc := map[string]map[string]float64{}
	if c.allocation != nil {
		alloc = c.allocation.Map()
	}
	summary := map[string]*api.TypeSummary{}
	for _, n := range snap.Nodes {
		if !c.nodeUsable(n) {
			continue
		}
		ts := summary[n.GPUType]
		if ts == nil {
			ts = &api.TypeSummary{Type: n.GPUType, CostPerHour: c.set.CostPerGPUHour[n.GPUType]}
			summary[n.GPUType] = ts
		}
		ts.GPUs += n.GPUs
		ts.Busy += n.GPUsUsed
	}
	for _, j := range snap.Jobs {
		if !c.inPartitions(j.Partition) || !j.Active() {
			// Finished jobs stay in Slurm's answer for MinJobAge; like
			// squeue, status shows only the live ones.
			continue
		}
		res.Jobs++
		js := JobStatusOf(j)
		if ok, why := c.eligible(j); !ok {
			js.Reason = why
		} else if s := c.jobs[j.ID.String()]; s != nil && s.heldBy != "" && j.Held {
			js.Managed = true
			js.Model = s.model
			js.Reason = s.heldBy
			js.Received = copyMap(s.received)
			js.SinceArrival = now.Sub(s.firstSeen).Seconds()
		} else if s != nil && s.scale != 0 {
			res.Managed++
			js.Managed = true
			js.Model = s.model
			js.Decision, js.Reason = s.decision, s.reason
			js.Allocation = alloc[s.id]
			js.Received = copyMap(s.received)
			js.SinceArrival = now.Sub(s.firstSeen).Seconds()
			js.ThroughputSource = s.source
			for t, f := range js.Allocation {
				if ts := summary[t]; ts != nil {
					ts.AllocatedGPUs += f * float64(s.scale)
				}
			}
			switch {
			case j.State == bridge.JobRunning:
				if ts := summary[j.RunningGPUType]; ts != nil {
					ts.Running++
				}
			case j.State == bridge.JobPending && j.Constraints != "" && !j.Held:
				if ts := summary[constraintType(j.Constraints, c.isGPUType)]; ts != nil {
					ts.Pending++
				}
			}
		} else if !j.Active() {
			js.Reason = "finished"
		}
		st.Jobs = append(st.Jobs, js)
	}
	for _, t := range sortedKeys(summary) {
		st.Types = append(st.Types, *summary[t])
	}
	return st
}

// JobStatusOf fills the Slurm-side fields of a job's status line.
func JobStatusOf(j bridge.Job) api.JobStatus {
	js := api.JobStatus{JobID: j.ID.String(), User: j.User, State: string(j.State), GPUs: j.GPUs}
	if j.State == bridge.JobRunning || j.State == bridge.JobSuspended {
		js.GPUType = j.RunningGPUType
	}
	if j.TagErr == nil {
		js.Model = j.Tag.Model
	}
	return js
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// allocationDoc is the /v1/allocation document.
func (c *Core) allocationDoc() api.Allocation {
	if c.allocation == nil {
		return api.Allocation{Policy: c.set.Policy, Rows: map[string]map[string]float64{}}
	}
	return api.Allocation{Policy: c.allocation.Policy, Computed: c.allocationComputed,
		Types: c.allocation.Types, Objective: c.allocation.Objective, Rows: c.allocation.Map()}
}

// describe renders a plan decision's reason, prefixed by its action.
func describe(d *rounds.Decision) string {
	r := d.Reason.String()
	if d.Action == rounds.Preempt && !strings.HasPrefix(r, "preempted") {
		r = "preempted: " + r
	}
	return r
}
