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
	"strings"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/limits"
	"github.com/gavel-slurm/gavel-slurm/internal/siterules"
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
	// MinResetInterval batches allocation recomputations (with the
	// improved mechanism: resets of the time received).
	MinResetInterval time.Duration
	// Mechanism is the round mechanism's variant; empty is
	// rounds.VariantGavel.
	Mechanism rounds.Variant
	// DefaultGrace is the time between the preemption signal and the
	// requeue unless a job's tag sets its own.
	DefaultGrace time.Duration
	// DefaultRestart is what a restart costs a job that has not been
	// measured and whose tag states none (restartcost.go).
	DefaultRestart time.Duration
	// RestartHoldMin is the restart mechanism's shortest hold of a job
	// whose restart costs anything (0: rounds.DefaultRestartHoldRounds
	// rounds).
	RestartHoldMin time.Duration
	// GraceSignal is the signal name sent when a grace period starts.
	GraceSignal string
	// DefaultPreempt is how jobs whose tag names no preempt= mode take
	// preemption; unset means never (safe: nothing is stopped).
	DefaultPreempt bridge.PreemptMode
	// Rules are the site's bounds on what a tag may set (weight, grace,
	// class, preemption mode) and where entities and weights come from.
	Rules siterules.Rules
	// MinRunTime is the least time a job runs (since it started, or since
	// the daemon first saw it running) before it may be preempted.
	MinRunTime time.Duration
	// Lease is how long the daemon's lease lasts after each round
	// (bridge/rest/lease.go); 0 when jobs are kept waiting with holds. A
	// job that starts while it waits on a lease that still lives left it
	// by its owner's hand, ahead of the allocation: nothing pins it.
	Lease time.Duration
	// Seed drives the type-order shuffle of heterogeneity-agnostic
	// policies and the randomized policies, so runs are reproducible.
	Seed int64
	// Instance (0 to 999) marks the priorities this daemon sets, so that
	// another daemon acting on the same jobs is noticed (trust.go).
	Instance int
	// TrialAndError configures class=te jobs (te.go).
	TrialAndError TESettings
	// RefillPoll is how often the daemon looks between rounds for GPUs
	// freed by jobs that ended, to start the waiting jobs the round would
	// have started there (refill.go); 0 leaves them idle until the next
	// round.
	RefillPoll time.Duration
	// ShareOffPartitions are the partitions whose jobs never share a GPU
	// under a packing policy (share.go).
	ShareOffPartitions []string
	// AdoptAdminHolds: in the first round, managed jobs held by an admin
	// that no saved record names are taken for the daemon's own holds
	// (recovery after the state directory was lost).
	AdoptAdminHolds bool
}

// RunPriority is the Slurm priority given to jobs chosen to run: far above
// what priority/multifactor with small weights gives ordinary jobs, so
// slurmctld starts them first.
const RunPriority = 1_000_000

// instanceMarks is how many daemons' run priorities are told apart: a
// daemon gives chosen jobs RunPriority plus its instance number, so a job
// carrying another number in that band was chosen by another daemon.
const instanceMarks = 1000

// jobState is what the core tracks about one managed, active job.
type jobState struct {
	key jobKey
	// name is key.String(): the job's name to the rounds, the policy,
	// the store and status.
	name        string
	model       string // resolved table model, or the tag's text
	scale       int
	throughputs map[string]float64
	source      string
	// perType is each type's rate with its own source (status).
	perType   map[string]Rate
	tag       bridge.Tag
	firstSeen time.Time
	// received is the seconds of service per type since arrival.
	received map[string]float64
	decision string
	reason   string
	// mode is the preemption mode the tag asks for and the site allows
	// (unset: the site's default).
	mode bridge.PreemptMode
	// weight, entity and grace are the tag's values as the site's rules
	// let them stand (grace 0: the default); notes say what the rules
	// changed, for status.
	weight float64
	entity string
	grace  time.Duration
	notes  []string
	// jumped is set for a job that started while the daemon kept it
	// waiting on a lease that still lived (its owner removed the
	// dependency): no minimum run time or restart hold keeps it where it
	// got ahead of the allocation.
	jumped bool
	// restartTag is the tag's restart cost as the site lets it stand,
	// restartMax the site's limit on any cost of the job; restartMeasured
	// is the cost measured at its last restart (restartcost.go).
	restartTag, restartMax, restartMeasured time.Duration
	// noRequeue is set when Slurm may not requeue the job: it is never
	// preempted, whatever its mode.
	noRequeue bool
	// ledger is what the daemon did to the job (holds, preemption).
	ledger
	// tagEdited is set once the job's comment lost its tag while it ran
	// (keepsAdmission).
	tagEdited bool
	// replayed is set on a job known only from the journal's replay at
	// start (no saved record) until a snapshot shows it: the hold the
	// journal says the daemon sent may since have become its user's, so
	// such a job's hold is never released blind (forgetUnseen).
	replayed bool
	// absent is set while the last round's snapshot did not show the job
	// at all (forgetUnseen).
	absent bool
	// heldBy is non-empty ("held by user") while such a foreign hold keeps
	// the job out of scheduling.
	heldBy string
	// facts are what admission judged (partition, user, account, QOS,
	// tag): a pending job whose facts change is admitted again.
	facts siterules.JobFacts
	// single is a mixed=ok job's own GPU request (Nodes, GPUsPerNode or
	// GPUs), kept to give it back when a mix ends (mixed.go).
	single bridge.Action
	// arrayOf is set on a job array's waiting task (a slot): the array's
	// record, which Slurm acts on for it (arrays.go).
	arrayOf bridge.JobID
	// shareSet is set while the job's request is the daemon's shard
	// request for a pair (share.go); canShare while it may be paired,
	// shareNote says why it may not; partners are the jobs it forms
	// registered pairs with, partner the one it shares a GPU with now.
	shareSet  bool
	canShare  bool
	shareNote string
	partners  []jobKey
	partner   string
	// arrayHead is set on a job array's record while it holds tasks not
	// started; slots are the keys of those that compete, arrayWaiting
	// how many wait in all and arrayRoom how many compete.
	arrayHead               bool
	slots                   []jobKey
	arrayWaiting, arrayRoom int
	// limitNames are the accounting caps the job counts against, as the
	// mechanism has them (limits.go); replaced, never changed in place.
	limitNames []string
}

// Core is the pure scheduling state of the daemon. One goroutine drives
// it. Its state is split into parts, each owned by the file that changes
// it and copied by its own clone when a step forks the core
// (proposal.go):
//
//   - jobTable (jobs.go): the managed jobs, each with its ledger;
//   - roundState (core.go): the round mechanism, its clock and plan;
//   - allocationState (fallback.go): the allocation in force and the
//     policy's failures;
//   - typeIndex (constraint.go): the GPU types and their nodes;
//   - trustState (trust.go): what makes a snapshot or a round suspect;
//   - teClaims (te.go): room claimed for trial-and-error jobs;
//   - releaseQueue (jobs.go): releases owed to jobs no longer tracked;
//   - arrayLimits (arrays.go): the job arrays' own limits.
type Core struct {
	set Settings
	pol policy.Policy
	est Estimator
	// standIn computes the allocation when the configured policy fails.
	standIn policy.Policy

	jobTable
	roundState
	allocationState
	typeIndex
	trustState
	teClaims
	releaseQueue
	// share is where pairs can run and where the last round put them
	// (share.go).
	share sharing
	// arrayLimits are the limits on tasks running at once that the job
	// arrays the daemon manages had when it first saw them (their
	// users'), by array id (arrays.go).
	arrayLimits map[bridge.JobID]int
	// limitTable is this round's reading of slurmdbd's caps (limits.go),
	// made afresh from each snapshot.
	limitTable *limits.Table
	// entityWeights are the accounts' fair-share weights, by entity,
	// where the site takes entities from slurmdbd's tree (limits.go);
	// replaced, never changed in place.
	entityWeights map[string]float64

	// adopted is set after the first round that could adopt admin holds
	// (Settings.AdoptAdminHolds): later admin holds are the admin's.
	adopted bool
	// preemptionOff says why no new preemption may start ("" when they
	// may): the shell has not proven that its requeues work. Every job
	// not already being preempted is then treated as preempt=never.
	preemptionOff string
	// estVersion is the estimator's version the jobs' rates were last
	// refreshed against (Versioned estimators); ratesSig is the type
	// index's signature they were refreshed against (refreshRates).
	estVersion uint64
	ratesSig   string
	// version counts the commits; base is, on a fork, the version it was
	// forked from (Commit refuses a proposal from another state).
	version, base uint64
}

// roundState is the round mechanism and what the rounds left: the last
// round's number, time, plan and why it sent nothing.
type roundState struct {
	mech    *rounds.Mechanism
	cluster []rounds.Server
	// shuffle draws from pcg; a fork copies the source so that a step
	// dropped unused leaves the draws as they were.
	pcg     *rand.PCG
	shuffle *rand.Rand
	round   uint64
	// lastRound is when the last round ran; plan is what it decided (the
	// looks between rounds refill by it).
	lastRound time.Time
	plan      *rounds.Plan
	// lastSkip is why the last round sent nothing ("" when it acted):
	// the checks between rounds start no preemption after such a round.
	lastSkip string
	// restored is the saved state waiting for the first Step, which
	// rebuilds the mechanism before loading it.
	restored *State
}

func (r roundState) clone() roundState {
	pcg := *r.pcg
	r.pcg = &pcg
	r.shuffle = rand.New(r.pcg)
	if r.mech != nil {
		r.mech = r.mech.Fork(r.shuffle)
	}
	r.cluster = slices.Clone(r.cluster)
	if r.restored != nil {
		restored := *r.restored
		r.restored = &restored
	}
	return r
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
	// AllocationFallback says why Allocation is the stand-in's, when it is.
	AllocationFallback string `json:"allocation_fallback,omitempty"`
	// ArrayLimits are the managed job arrays' own limits on tasks running
	// at once (0: none), by array id, put back when the daemon stops
	// managing them.
	ArrayLimits map[string]int `json:"array_limits,omitempty"`
}

// RestoreState hands the core the State saved by an earlier run; call it
// after Restore, before the first Step.
func (c *Core) RestoreState(s State) {
	c.lastRound = s.LastRound
	c.allocation, c.allocationComputed, c.fallback = s.Allocation, s.AllocationComputed, s.AllocationFallback
	for a, u := range s.ArrayLimits {
		if id, err := bridge.ParseJobID(a); err == nil {
			if c.arrayLimits == nil {
				c.arrayLimits = map[bridge.JobID]int{}
			}
			c.arrayLimits[id] = u
		}
	}
	c.restored = &s
}

// NewCore returns a core for the settings; est gives the throughputs of
// tagged models (TableEstimator for the reference table).
func NewCore(set Settings, est Estimator) (*Core, error) {
	pol, err := policy.New(set.Policy, policyOptions(set))
	if err != nil {
		return nil, fmt.Errorf("scheduler.policy: %w", err)
	}
	if pol.Traits().Objective == policy.ObjectiveStepsPerCost {
		// Without a positive price for every type the policy fails on
		// every problem, and every round would run on the stand-in's
		// equal shares. (A type found on nodes later without a price
		// makes it fail then, and status says which.)
		if err := checkPrices(set); err != nil {
			return nil, fmt.Errorf("scheduler.policy: %s buys steps per cost: %w", set.Policy, err)
		}
	}
	if set.Instance < 0 || set.Instance >= instanceMarks {
		return nil, fmt.Errorf("instance %d: must be in 0..%d", set.Instance, instanceMarks-1)
	}
	if set.Round <= 0 {
		return nil, fmt.Errorf("scheduler.round: %s is not positive", set.Round)
	}
	if est == nil {
		return nil, fmt.Errorf("no throughput estimator")
	}
	standIn, err := policy.New(StandInPolicy, policy.Options{Seed: set.Seed})
	if err != nil {
		return nil, fmt.Errorf("stand-in policy: %w", err)
	}
	pcg := rand.NewPCG(uint64(set.Seed), 0x6761_7665_6c)
	return &Core{
		set:        set,
		pol:        pol,
		standIn:    standIn,
		est:        est,
		roundState: roundState{pcg: pcg, shuffle: rand.New(pcg)},
		jobTable:   jobTable{jobs: map[jobKey]*jobState{}},
		teClaims:   teClaims{teWaits: map[bridge.JobID]teWait{}, teTried: map[bridge.JobID]bool{}},
	}, nil
}

// checkPrices asks a positive price of every configured GPU type, and of
// at least one type when the types are found on the nodes.
func checkPrices(set Settings) error {
	if len(set.CostPerGPUHour) == 0 {
		return fmt.Errorf("set cluster.cost_per_gpu_hour for every GPU type")
	}
	for _, t := range set.GPUTypes {
		if _, ok := set.CostPerGPUHour[t]; !ok {
			return fmt.Errorf("cluster.cost_per_gpu_hour has no price for %s", t)
		}
	}
	for _, t := range slices.Sorted(maps.Keys(set.CostPerGPUHour)) {
		if v := set.CostPerGPUHour[t]; !(v > 0) {
			return fmt.Errorf("cluster.cost_per_gpu_hour.%s is %v: prices must be positive", t, v)
		}
	}
	return nil
}

// seconds is the mechanism's clock: seconds since the Unix epoch.
func seconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// Result is what one committed step or look did: the proposal's figures,
// the records to persist and the view for status.
type Result struct {
	Round uint64
	// Skipped is non-empty when the round sends nothing because the
	// snapshot cannot be trusted; SkipCause is its short metric label.
	Skipped   string
	SkipCause string
	// Actions are the actions the step proposed, in order.
	Actions []Action
	// Solved is true when the allocation was recomputed this round.
	Solved bool
	// Fallback is non-empty while the allocation in use is the stand-in
	// for a policy that failed (see reallocate); it says how it failed.
	Fallback string
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
	// ForTE names the trial-and-error job a preemption's signal or
	// requeue makes room for, so that a restart that finds it only in
	// the journal keeps the room claimed (RestoreJournal). The journal
	// spells it as a JSON string.
	ForTE bridge.JobID `json:",omitempty,string"`
	// ArrayOwn is, on a set-array-limit (with ArrayOwnSet), the array's
	// own limit as the core knew it when it sent the action (0: none), so
	// that a restart that finds the action only in the journal does not
	// take the daemon's limit for its user's (RestoreJournal).
	ArrayOwn    int  `json:",omitempty"`
	ArrayOwnSet bool `json:",omitempty"`
}

// Solver computes the allocation; the shell passes one that times the
// call, tests pass Core.Solve directly.
type Solver func(p *policy.Problem) (*policy.Allocation, error)

// Input is what one round steps on.
type Input struct {
	// Snap is Slurm now; nil when it could not be read.
	Snap *bridge.Snapshot
	Now  time.Time
	// Solve computes allocations (normally Core.Solve wrapped in a timer).
	Solve Solver
	// Vanished are the managed jobs an earlier read of this round did
	// not show (Check's Trust.Vanished): the same jobs missing from Snap
	// are taken as gone.
	Vanished []bridge.JobID
}

// Step works out one round on in.Snap at in.Now and proposes it; the
// core's state is left as it was until Commit.
func (c *Core) Step(in Input) *Proposal {
	w := c.fork()
	p := &Proposal{next: w, snap: in.Snap, now: in.Now}
	w.step(in, p)
	return p
}

// step runs the round's phases on the fork w, filling p.
func (w *Core) step(in Input, p *Proposal) {
	snap, now := in.Snap, in.Now
	w.round++
	p.Round = w.round
	// A new round places TE jobs whose claim ran out; the next look
	// between rounds may choose victims for them again.
	clear(w.teTried)

	// 1. Trust: act only on a snapshot that shows Slurm as it is, and
	// only while no other daemon writes to the same jobs.
	why, cause, suspects := w.distrust(snap, in.Vanished)
	w.suspects = suspects
	if why != "" {
		p.Skipped, p.SkipCause = why, cause
		return
	}
	if why := w.otherWriter(snap); why != "" {
		p.Skipped, p.SkipCause = why, "second_writer"
		return
	}
	// 2. Cluster: GPU types and servers.
	nowS := seconds(now)
	w.noteTypes(snap)
	w.noteSharedTypes(snap)
	if err := w.syncCluster(w.clusterOf(snap), nowS); err != nil {
		p.Skipped, p.SkipCause = "cluster: "+err.Error(), "cluster_error"
		return
	}
	// 3. Jobs: admission, forgetting, rates, service received.
	w.limitsOf(snap)
	w.noteShares(snap)
	p.Forget = w.syncJobs(snap, now)
	w.adopted = true
	w.refreshRates(snap, now)
	w.loadRestored()
	w.account(snap, now)
	w.measureRestarts(snap)
	w.passProgress()

	// 4. Allocation: the policy's, recomputed when due.
	if w.fallback != "" && !now.Before(w.retryAt) {
		w.mech.NoteEvent(rounds.EventOther) // time to ask the failed policy again
	}
	if w.mech.NeedsReset(nowS) && w.mech.Len() > 0 {
		if err := w.reallocate(snap, now, in.Solve); err != nil {
			p.Skipped, p.SkipCause = "allocation: "+err.Error(), "solver_error"
			return
		}
		p.Solved = true
	}
	if w.mech.Len() == 0 {
		w.fallback, w.failures = "", 0 // no jobs, no allocation to stand in for
	}
	p.Fallback = w.fallback

	// 5. Plan: the round mechanism places jobs on GPUs.
	w.refreshTEClaims(snap, now) // after a restart: rounds leave waiting TE jobs alone
	if err := w.syncLimits(snap); err != nil {
		p.Skipped, p.SkipCause = "limits: "+err.Error(), "plan_error"
		return
	}
	plan, err := w.mech.Plan(nowS, w.placedAlready(snap, now))
	if err != nil {
		p.Skipped, p.SkipCause = "plan: "+err.Error(), "plan_error"
		return
	}
	w.plan = plan
	w.share.places = w.placePairs(snap, plan)
	mixes := w.placeMixes(snap, plan)

	// 6. Actions: what makes Slurm match the plan, then the releases
	// queued for jobs no longer tracked.
	p.Actions, p.Preemptions = w.translate(snap, plan, now)
	p.Actions = w.applyMixes(snap, mixes, p.Actions)
	// Releases found in a round that stopped early wait for this one;
	// only those whose job is still held go out.
	for _, r := range w.released {
		if r.due(snap, w) {
			p.Actions = append(p.Actions, r.Action)
			p.releases = append(p.releases, r)
		}
	}
	w.released = nil
	w.noteHolds(p.Actions)
	w.noteArrayOwn(p.Actions)
	w.lastRound = now
}

// keyedDecision is a plan's decision with the key of the job it is for.
type keyedDecision struct {
	key jobKey
	*rounds.Decision
}

// keyed is the plan's decisions for tracked jobs, in the plan's order:
// the rounds name jobs by jobState.name, and this is where the names
// become keys again.
func (c *Core) keyed(plan *rounds.Plan) []keyedDecision {
	keys := c.byName()
	out := make([]keyedDecision, 0, len(plan.Decisions))
	for i := range plan.Decisions {
		if key, ok := keys[plan.Decisions[i].Job]; ok {
			out = append(out, keyedDecision{key, &plan.Decisions[i]})
		}
	}
	return out
}

// loadRestored hands the round mechanism the state saved by an earlier
// run, on the first round after a restart (RestoreState).
func (w *Core) loadRestored() {
	if w.restored == nil {
		return
	}
	if w.restored.Rounds != nil {
		w.mech.Load(*w.restored.Rounds)
	}
	if w.allocation != nil && w.fallback == "" && w.allocation.Policy != w.set.Policy {
		// The saved allocation is another policy's (the policy was
		// changed by a reload or a restart): this round computes the
		// new one rather than waiting for jobs to arrive or leave.
		w.mech.NoteEvent(rounds.EventOther)
	}
	w.restored = nil
}

// placedAlready are the jobs that hold GPUs as the round starts: the
// running ones, and the trial-and-error jobs waiting for the room made
// for them, which the round must not choose again (that would preempt
// other jobs to make room for them a second time).
func (w *Core) placedAlready(snap *bridge.Snapshot, now time.Time) []rounds.Assignment {
	running := w.running(snap, now)
	for _, id := range slices.Sorted(maps.Keys(w.teWaits)) {
		if js := w.jobs[keyOf(id)]; js != nil && js.scale != 0 {
			running = append(running, rounds.Assignment{Key: js.name, Jobs: []string{js.name}, Pin: rounds.PinOutside})
		}
	}
	return running
}

// state is the core's state as a round leaves it, for the store.
func (c *Core) state() State {
	saved := c.mech.Save()
	st := State{LastRound: c.lastRound, Rounds: &saved, Allocation: c.allocation,
		AllocationComputed: c.allocationComputed, AllocationFallback: c.fallback}
	for a, u := range c.arrayLimits {
		if st.ArrayLimits == nil {
			st.ArrayLimits = map[string]int{}
		}
		st.ArrayLimits[a.String()] = u
	}
	return st
}

// runPriority is the priority this daemon gives jobs it chooses.
func (c *Core) runPriority() int64 { return RunPriority + int64(c.set.Instance) }

// SetPreemptionOff stops (a non-empty why) or allows (why "") new
// preemptions from the next Step or Graces on: while they are off every
// job not already being preempted is treated as preempt=never, so no
// grace signal goes out and no running job is requeued for another.
// Preemptions already under way go on (their jobs had the signal and
// must still be requeued). The shell turns them off while it cannot
// prove that a requeue would work: a job told to checkpoint and exit
// that is then not requeued ends for good.
func (c *Core) SetPreemptionOff(why string) { c.preemptionOff = why }

// PreemptionOff is why new preemptions are off, "" when they are allowed.
func (c *Core) PreemptionOff() string { return c.preemptionOff }

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

// queuedRelease is a release (or the constraint change before it) of a
// daemon hold on a job the core no longer tracks. A blind one is for a job
// no answer showed twice (moved out of the managed partitions): it goes
// out once, as it is; the others only while Slurm shows the job pending
// and held, and the core has not taken it up again.
type queuedRelease struct {
	Action
	blind bool
}

// due says whether the release still has to go out against snap.
func (r queuedRelease) due(snap *bridge.Snapshot, c *Core) bool {
	if r.blind {
		return true
	}
	j, ok := snap.Job(r.Job)
	if !ok {
		j, ok = snap.ElsewhereJob(r.Job)
	}
	if ok && r.Kind == bridge.ActSetArrayLimit {
		// An array's own limit put back: due while the array's record
		// still shows another and the daemon has not taken the array on
		// again (its tasks may still run and be tracked).
		_, managed := c.arrayLimits[r.Job]
		return j.Active() && j.ArrayJobID == r.Job && j.ArrayLimit != r.Tasks && !managed
	}
	if !ok || j.State != bridge.JobPending || c.jobs[keyOf(r.Job)] != nil {
		return false
	}
	// Only what the job still needs goes out.
	switch r.Kind {
	case bridge.ActRelease:
		return j.Held
	case bridge.ActSetConstraints:
		return j.Constraints != r.Constraints
	case bridge.ActResetPriority:
		return j.Priority >= RunPriority
	case bridge.ActSetShare:
		return j.Shards > 0
	}
	return true
}

// Tracks reports whether the core keeps a record of job id: a managed job
// from its first round until it is forgotten.
func (c *Core) Tracks(id bridge.JobID) bool { return c.jobs[keyOf(id)] != nil }

// Round is the number of the last round stepped.
func (c *Core) Round() uint64 { return c.round }

// Solve computes an allocation with the configured policy.
func (c *Core) Solve(p *policy.Problem) (*policy.Allocation, error) {
	return allocateWith(c.pol, p)
}

// allocateWith runs pol on p, its errors named after it. (A panic in it
// is contained by guardedSolve, where the round calls every solver.)
func allocateWith(pol policy.Policy, p *policy.Problem) (*policy.Allocation, error) {
	a, err := pol.Allocate(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pol.Name(), err)
	}
	return a, nil
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

// describe renders a plan decision's reason, prefixed by its action.
func describe(d *rounds.Decision) string {
	r := d.Reason.String()
	if d.Action == rounds.Preempt && !strings.HasPrefix(r, "preempted") {
		r = "preempted: " + r
	}
	return r
}
