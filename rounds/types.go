package rounds

import (
	"fmt"

	"github.com/gavel-slurm/gavel-slurm/policy"
)

// Server is one machine of the cluster: GPUs of a single type.
type Server struct {
	ID   string
	Type string
	GPUs int
}

// Cluster is the set of servers the mechanism places jobs on.
type Cluster struct {
	Servers []Server
}

// Class is a job's scheduling class. Only ClassDefault is acted on today;
// the other values are accepted and stored so that class-aware rules
// (protecting trial-and-error jobs, choosing best-effort victims) can be
// added without changing the API.
type Class uint8

const (
	// ClassDefault is an ordinary job scheduled purely by priority.
	ClassDefault Class = iota
	// ClassTrialAndError marks a short interactive experiment whose latency
	// matters more than its throughput.
	ClassTrialAndError
	// ClassBestEffort marks a long job that may be preempted in favour of
	// trial-and-error jobs.
	ClassBestEffort
)

// Job is one training job as the mechanism sees it.
type Job struct {
	ID string
	// ScaleFactor is the number of GPUs of one type the job needs at once.
	ScaleFactor int
	// Throughputs is the job's step rate per GPU type; 0 or missing means
	// the job never runs on that type.
	Throughputs map[string]float64
	Class       Class
	// RestartCost is the time (seconds) the job loses each time it is
	// stopped and started again: saving the checkpoint, the requeue, the
	// start and the reload. With Options.RestartHold it weighs every
	// preemption and move of the job (restart.go); 0, a free restart,
	// leaves the job's decisions as they are without the rule.
	RestartCost float64
	// Limits names the limits (SetLimits) the job counts in: its QOS's
	// per-user cap, its association's group caps, ... A name no limit
	// has constrains nothing until SetLimits defines it; a name given
	// twice counts once.
	Limits []string
}

// NoCap marks a Limit cap that is not set.
const NoCap = -1

// Limit is a cap on what a set of jobs may hold at once: one QOS's
// per-user cap, an association's group cap, ... Jobs name the limits
// they count in (Job.Limits, SetJobLimits). Each round a job is selected
// only if every limit it counts in stays within its caps; jobs that keep
// their GPUs whatever the priorities (pinned, PinOutside) count but are
// never stopped. A pair counts each member in that member's limits as one
// job holding the pair's whole scale factor: the site's GPU caps must hold
// as if each member had the GPUs it shares to itself.
type Limit struct {
	// Name identifies the limit for jobs and in decisions, e.g. "qos gpu4
	// user alice".
	Name string
	// GPUs is the most GPUs its jobs may hold at once; Jobs the most of its
	// jobs that may run at once. NoCap: none. 0 is a cap of zero: nothing
	// runs under it.
	GPUs, Jobs int
	// UsedGPUs and UsedJobs are held by running jobs the mechanism does not
	// know (other partitions, other schedulers). Jobs it knows, PinOutside
	// ones included, count by themselves and must not be included here.
	UsedGPUs, UsedJobs int
}

// Pair is a co-location of two jobs on the same GPUs (space sharing).
type Pair struct {
	// Jobs are the two members, in the order the allocation row names them.
	Jobs [2]string
	// Throughputs per GPU type: each member's step rate while sharing. The
	// pair never runs on a type where either rate is 0 or missing.
	Throughputs map[string][2]float64
}

// Key is the pair's row key, as policy.Row.Key spells it.
func (p Pair) Key() string { return PairKey(p.Jobs[0], p.Jobs[1]) }

// PairKey names the combination of jobs a and b: "a+b", matching
// policy.Row.Key for a two-job row.
func PairKey(a, b string) string { return a + "+" + b }

// Slot is one GPU: the server's ID and the GPU's index on that server
// (0 ≤ GPU < Server.GPUs).
type Slot struct {
	Server string
	GPU    int
}

// Assignment is a job or pair holding GPUs for a round.
type Assignment struct {
	// Key is the job ID, or PairKey(a, b) for a pair.
	Key string
	// Jobs are the member job IDs (one or two).
	Jobs []string
	// Type is the GPU type of every slot.
	Type  string
	Slots []Slot
	// Extended is set in a Plan when the assignment keeps the GPUs it held
	// in the previous round (lease extension: nothing to restart).
	Extended bool
	// Pin, in the running list passed to Plan, says the job or pair must
	// keep its GPUs this round whatever the priorities say; the plan
	// keeps it first and fills the rest around it.
	Pin Pin
	// Since is when the job or pair started its current run on these
	// GPUs (the caller's clock): a Plan sets it to its `now` for a fresh
	// start and keeps the running entry's for a lease extension, so a
	// caller that passes the plan back as running needs to do nothing.
	// The restart rule (Options.RestartHold) keeps a run until it has
	// paid for its restart; 0 on a wall clock reads as long ago.
	Since float64
}

// Pin says why a running job must keep its GPUs for the next round.
type Pin uint8

const (
	// NotPinned: the job may be preempted.
	NotPinned Pin = iota
	// PinNotPreemptible: the job cannot be stopped once it runs (its
	// preemption mode says so).
	PinNotPreemptible
	// PinMinRunTime: the job has not yet run the minimum time after a
	// start (or since the scheduler first saw it running).
	PinMinRunTime
	// PinOutside: the job runs where the mechanism cannot place it (on
	// GPUs of several types at once) and keeps those GPUs until it ends:
	// it is neither selected nor placed this round, and its Assignment
	// needs no Type or Slots (its GPUs are not in the cluster given to
	// the mechanism). Its decision is Wait, for the caller to show as it
	// sees fit.
	PinOutside
	// PinRestartUnpaid: set by the mechanism (Options.RestartHold), never
	// by callers: the job has not yet run long enough since its last
	// start to pay for that restart.
	PinRestartUnpaid
	// PinNearEnd: set by the mechanism (Options.RestartHold): the job's
	// remaining work is shorter than its restart hold, so it runs to its
	// end rather than restart later.
	PinNearEnd
)

// Usage reports that a job or pair ran on a GPU type for some seconds in
// the round that just ended.
type Usage struct {
	// Key is the job ID, or PairKey(a, b) for a pair.
	Key     string
	Type    string
	Seconds float64
}

// Event is a reason to recompute the allocation.
type Event uint8

const (
	EventArrival Event = iota + 1
	EventCompletion
	EventClusterChange
	// EventThroughputChange signals new throughput estimates.
	EventThroughputChange
	// EventOther covers causes the mechanism has no name for (a failure,
	// an operator request).
	EventOther
)

func (e Event) String() string {
	switch e {
	case EventArrival:
		return "arrival"
	case EventCompletion:
		return "completion"
	case EventClusterChange:
		return "cluster change"
	case EventThroughputChange:
		return "throughput change"
	case EventOther:
		return "other"
	}
	return "unknown"
}

// Shuffler permutes n items in place; *math/rand.Rand and
// *math/rand/v2.Rand satisfy it. A simulator that must reproduce another
// implementation's random stream supplies its own.
type Shuffler interface {
	Shuffle(n int, swap func(i, j int))
}

const (
	// DefaultRoundSeconds is the reference round length (6 minutes).
	DefaultRoundSeconds = 360.0
	// DefaultMinResetInterval is the reference simulator's minimum time
	// between allocation recomputations.
	DefaultMinResetInterval = 1920.0
)

// Options tune the mechanism. Start from DefaultOptions or ForTraits.
type Options struct {
	// Credit is the time (seconds) credited as received to every new job or
	// pair and to every combination at an allocation reset. The reference
	// credits half a round (180 s of 360 s rounds), so fractions start
	// non-zero and early rounds do not swing priorities. With 0, a
	// combination that has not run since the reset has fraction 0 and
	// priority allocation × 1e9: unserved jobs go first.
	Credit float64
	// MinResetInterval is the least time between two allocation resets
	// triggered by events; 0 lets every event trigger one.
	MinResetInterval float64
	// ResetEveryRound makes NeedsReset true at every round, events or not.
	ResetEveryRound bool
	// TypeOrder is the order in which GPU types are filled. Types of the
	// cluster missing here follow in sorted order; names absent from the
	// cluster are ignored.
	TypeOrder []string
	// Shuffle, when set, permutes the type order every round. The
	// reference does this for heterogeneity-agnostic policies so that no
	// type is systematically filled first.
	Shuffle Shuffler
	// GlobalOrder walks one priority order across all types instead of
	// filling the types one after another.
	GlobalOrder bool
	// SkipZeroPriority never runs a job on a type where its priority is 0
	// (FIFO policies: a job runs only where the allocation puts it).
	SkipZeroPriority bool
	// HoldUnallocated reproduces a reference quirk: a job that arrived after
	// the current allocation was computed can win GPUs with priority 0, but
	// is then not started and its GPUs stay idle until the next reset. When
	// false such a job simply competes with priority 0.
	HoldUnallocated bool
	// ReallocateOnEvents separates the allocation from the accounting of
	// time received. NeedsReset is true as soon as an event is pending,
	// whatever MinResetInterval, so a job is given its share in the first
	// round after it arrives and a finished job's share goes to the others
	// at once. An allocation set less than MinResetInterval after the last
	// reset replaces the fractions but keeps the time received: jobs do
	// not all fall back to the credit at every arrival, which would leave
	// the largest allocation winning every round and the deficits, which
	// only break ties, unable to even out the service. The next reset
	// folds into the deficits the share each allocation owed while it was
	// in force.
	ReallocateOnEvents bool
	// UpgradeIdle moves, after the walk, a selected job to GPUs of a type
	// where it runs faster when nobody was selected for them: the job
	// makes more progress and no one loses a round. Its time is counted
	// on the type it runs on, so its priority where it was selected rises
	// and the allocation is followed again as soon as those GPUs are
	// wanted. Pairs and pinned jobs stay where they were selected.
	UpgradeIdle bool
	// RestartHold weighs preemptions against restart costs (restart.go):
	// a running job whose restart costs c (Job.RestartCost) keeps its
	// GPUs until it has run RestartHold × c since it started, so a restart
	// costs at most 1/RestartHold of the run it starts; a job with less
	// than RestartHold × c of work left runs to its end; and a move to
	// faster GPUs is made only when the time it saves over the time ahead
	// exceeds c. 0 turns the rule off: every restart is free, as the
	// reference assumes.
	RestartHold float64
	// RestartHoldMax caps RestartHold × c (seconds), and so bounds how
	// long the rule keeps any job on its GPUs against the priorities;
	// 0: no cap.
	RestartHoldMax float64
	// RestartHoldMin is the shortest hold (seconds) of a job whose restart
	// costs anything: H = max(RestartHold × c, RestartHoldMin), then
	// capped. Near saturation a cheap restart repeated every few rounds
	// still costs the cluster a few percent of its time, which queueing
	// turns into far more average JCT; the floor bounds that loss
	// further for cheap restarts. 0: no floor (VariantRestart: its
	// default, DefaultRestartHoldRounds rounds). A free restart (c = 0) is
	// never held, so the rule stays VariantImproved's for free restarts.
	RestartHoldMin float64
	// RoundSeconds is the caller's round length, which VariantRestart's
	// default floor is counted in (0: no default floor).
	RoundSeconds float64
	// RestartFinish scales the restart rule's "near its end": a job whose
	// remaining work takes at most RestartFinish × H (the hold above)
	// runs to its end. 0 means 1.
	RestartFinish float64
}

// Variant names a round mechanism: the reference's, or the one that
// realizes the allocation sooner and more closely.
type Variant string

const (
	// VariantGavel is the reference mechanism as the options describe it
	// (DefaultOptions, ForTraits): what reproductions of the paper use.
	VariantGavel Variant = "gavel"
	// VariantImproved re-solves on every arrival and completion without
	// resetting the service counts (ReallocateOnEvents), walks one priority
	// order across all types so that a job runs where its allocation puts
	// it when several types have idle GPUs (GlobalOrder), and never holds
	// GPUs idle for a job without an allocation.
	VariantImproved Variant = "improved"
	// VariantRestart is VariantImproved that weighs every preemption and
	// move against the job's restart cost (Options.RestartHold, with
	// DefaultRestartHold and DefaultRestartHoldMax unless set). With
	// every restart cost 0 its choices are VariantImproved's.
	VariantRestart Variant = "restart"
)

// Variants lists the mechanism variants, the default first.
func Variants() []Variant { return []Variant{VariantImproved, VariantGavel, VariantRestart} }

// ParseVariant reads a variant name ("improved", "gavel" or "restart").
func ParseVariant(s string) (Variant, error) {
	for _, v := range Variants() {
		if string(v) == s {
			return v, nil
		}
	}
	return "", fmt.Errorf("rounds: unknown mechanism %q (want improved, gavel or restart)", s)
}

// Apply returns o adjusted to the variant. VariantGavel returns o as it
// is; VariantImproved keeps o's credit, type order, shuffle and FIFO rule
// and changes only how allocations are installed and walked.
// VariantRestart does what VariantImproved does and sets RestartHold,
// RestartHoldMax and RestartHoldMin (DefaultRestartHoldRounds ×
// RoundSeconds) to their defaults where o leaves them 0.
func (v Variant) Apply(o Options) Options {
	if v == VariantImproved || v == VariantRestart {
		o.ReallocateOnEvents = true
		o.GlobalOrder = true
		o.HoldUnallocated = false
		o.UpgradeIdle = true
	}
	if v == VariantRestart {
		if o.RestartHold == 0 {
			o.RestartHold = DefaultRestartHold
		}
		if o.RestartHoldMax == 0 {
			o.RestartHoldMax = DefaultRestartHoldMax
		}
		if o.RestartHoldMin == 0 {
			o.RestartHoldMin = DefaultRestartHoldRounds * o.RoundSeconds
		}
		if o.RestartFinish == 0 {
			o.RestartFinish = DefaultRestartFinish
		}
	}
	return o
}

// DefaultOptions are the reference simulator's settings for a
// heterogeneity-aware policy: 360 s rounds, resets at most every 1920 s,
// types filled v100, p100, k80.
func DefaultOptions() Options {
	return Options{
		Credit:           DefaultRoundSeconds / 2,
		MinResetInterval: DefaultMinResetInterval,
		TypeOrder:        []string{"v100", "p100", "k80"},
		HoldUnallocated:  true,
	}
}

// ForTraits returns DefaultOptions adjusted to a policy's traits the way
// the reference adjusts its mechanism: heterogeneity-agnostic policies
// shuffle the type order every round with shuffle, FIFO policies skip
// priority-0 entries. shuffle may be nil for type-aware policies, which do
// not shuffle.
func ForTraits(t policy.Traits, shuffle Shuffler) Options {
	o := DefaultOptions()
	if t.FIFO {
		// A queued job without allocation on a type must not overtake the
		// queue there.
		o.SkipZeroPriority = true
	}
	if !t.TypeAware {
		o.Shuffle = shuffle
	}
	return o
}

// ForPolicy is ForTraits for the registered policy of that name (see
// policy.Names), for callers that hold only the name. An unknown name gets
// the options of a heterogeneity-agnostic policy, the reference's default.
func ForPolicy(name string, shuffle Shuffler) Options {
	t, _ := policy.TraitsOf(name) // zero traits for an unknown name
	return ForTraits(t, shuffle)
}
