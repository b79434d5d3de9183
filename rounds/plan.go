package rounds

import (
	"fmt"
	"strconv"
)

// Action is what happens to one job at the round boundary.
type Action uint8

const (
	// Wait: the job did not run and does not run next round.
	Wait Action = iota
	// Run: the job starts on Decision.Type / Decision.Slots.
	Run
	// Keep: the job keeps running on the GPUs it holds (lease extended).
	Keep
	// Preempt: the job held GPUs and must stop. When Decision.Type is set
	// it restarts there next round (moved to another type or other GPUs).
	Preempt
)

func (a Action) String() string {
	switch a {
	case Wait:
		return "wait"
	case Run:
		return "run"
	case Keep:
		return "keep"
	case Preempt:
		return "preempt"
	}
	return "action(" + strconv.Itoa(int(a)) + ")"
}

// ReasonCode classifies a decision. New codes may be added (job classes,
// task-level placement); callers that switch on codes need a default case.
type ReasonCode uint8

const (
	// ReasonSelected: chosen on Type with the given priority.
	ReasonSelected ReasonCode = iota + 1
	// ReasonLeaseExtended: chosen again on the type it ran on, same GPUs.
	ReasonLeaseExtended
	// ReasonMovedType: chosen on another type than the one it ran on.
	ReasonMovedType
	// ReasonMovedGPUs: chosen on the same type but must restart on other
	// GPUs (it joins or leaves a co-located pair).
	ReasonMovedGPUs
	// ReasonLowPriority: its best priority lost to the Selected winners.
	ReasonLowPriority
	// ReasonNoFit: it needs Needed GPUs of Type and only Free were left.
	ReasonNoFit
	// ReasonNoAllocation: it arrived after the allocation was computed and
	// waits for the next reset (Options.HoldUnallocated).
	ReasonNoAllocation
	// ReasonZeroPriority: its priority is 0 on every type it can use and
	// priority-0 entries are skipped (Options.SkipZeroPriority).
	ReasonZeroPriority
	// ReasonNoUsableType: its throughput is 0 on every type of the cluster
	// (or the cluster has no type with enough GPUs for it).
	ReasonNoUsableType
	// ReasonPinned: kept where it runs because it is pinned (Pin says
	// why), whatever its priority.
	ReasonPinned
	// ReasonLimit: a candidate of the job that the GPUs left had room for
	// was refused because it would take Limit over its cap (SetLimits).
	ReasonLimit
)

// Reason explains a decision. It is plain data so that a plan for thousands
// of jobs costs no formatting; String renders it for people.
type Reason struct {
	Code ReasonCode
	// Type is the GPU type the reason is about.
	Type string
	// Priority is the job's priority on Type this round.
	Priority float64
	// Selected is the number of jobs and pairs selected on Type.
	Selected int
	// Needed and Free are GPU counts for ReasonNoFit.
	Needed, Free int
	// Preempted is set when the job held GPUs before this decision.
	Preempted bool
	// Pin is why a ReasonPinned job kept its GPUs.
	Pin Pin
	// Limit names, for ReasonLimit, the limit that stopped the job; its
	// jobs hold Held of its Cap next round: GPUs, or running jobs when
	// JobCap is set. Needed is then the job's GPUs.
	Limit     string
	Held, Cap int
	JobCap    bool
}

// String renders the reason, e.g. "waiting: needs 8 v100 GPUs, 3 free".
func (r Reason) String() string {
	prefix := "waiting"
	if r.Preempted {
		prefix = "preempted"
	}
	switch r.Code {
	case ReasonSelected:
		return fmt.Sprintf("selected on %s: priority %s", r.Type, formatPriority(r.Priority))
	case ReasonLeaseExtended:
		return "lease extended on " + r.Type
	case ReasonMovedType:
		return "preempted: moved to " + r.Type
	case ReasonMovedGPUs:
		return "preempted: moved to other " + r.Type + " GPUs"
	case ReasonLowPriority:
		return fmt.Sprintf("%s: priority %s below the %d selected on %s",
			prefix, formatPriority(r.Priority), r.Selected, r.Type)
	case ReasonNoFit:
		return fmt.Sprintf("%s: needs %d %s GPUs, %d free", prefix, r.Needed, r.Type, r.Free)
	case ReasonNoAllocation:
		return prefix + ": no allocation yet (arrived after the last reset)"
	case ReasonZeroPriority:
		return prefix + ": priority 0 on every usable type"
	case ReasonNoUsableType:
		return prefix + ": no GPU type of the cluster can run it"
	case ReasonPinned:
		switch r.Pin {
		case PinNotPreemptible:
			return "kept running on " + r.Type + ": it cannot be preempted"
		case PinMinRunTime:
			return "kept running on " + r.Type + ": minimum run time not reached"
		case PinRestartUnpaid:
			return "kept running on " + r.Type + ": its last restart is not yet paid for"
		case PinNearEnd:
			return "kept running on " + r.Type + ": near its end, it finishes rather than restart"
		}
		return "kept running on " + r.Type
	case ReasonLimit:
		switch {
		case r.JobCap:
			return fmt.Sprintf("%s: limit %s (%d of %d jobs)", prefix, r.Limit, r.Held, r.Cap)
		case r.Needed > 1:
			return fmt.Sprintf("%s: limit %s (%d of %d GPUs, needs %d)", prefix, r.Limit, r.Held, r.Cap, r.Needed)
		}
		return fmt.Sprintf("%s: limit %s (%d of %d GPUs)", prefix, r.Limit, r.Held, r.Cap)
	}
	return prefix
}

// formatPriority prints ordinary priorities with two decimals and the
// "never ran" priorities (allocation × 1e9) as such.
func formatPriority(p float64) string {
	if p >= newJobPriorityScale/1000 {
		return "new"
	}
	return strconv.FormatFloat(p, 'f', 2, 64)
}

// Decision is the plan's entry for one job.
type Decision struct {
	Job    string
	Action Action
	// Type and Slots are where the job runs next round (Run, Keep, or a
	// Preempt that restarts elsewhere); empty otherwise.
	Type  string
	Slots []Slot
	// Partner is the job sharing the GPUs next round, if any.
	Partner string
	// FromType and FromSlots are what the job held before (Keep, Preempt),
	// as the caller reported it.
	FromType  string
	FromSlots []Slot
	Reason    Reason
}

// Starts reports whether the job must be launched on Type/Slots.
func (d *Decision) Starts() bool {
	return d.Action == Run || (d.Action == Preempt && d.Type != "")
}

// Stops reports whether the job must be stopped on FromSlots.
func (d *Decision) Stops() bool { return d.Action == Preempt }

// Plan is the mechanism's answer for one round.
type Plan struct {
	// Time is the `now` the plan was computed for.
	Time float64
	// Decisions has one entry per job, in arrival order.
	Decisions []Decision
	// Assignments lists what runs next round, one entry per job or pair.
	Assignments []Assignment
	// Types are the cluster's GPU types (sorted); Idle[i] counts the GPUs
	// of Types[i] left unused next round.
	Types []string
	Idle  []int
	// Order is the type order walked this round (after any shuffle).
	Order []string

	// Backing arrays reused by PlanInto.
	slotBuf []Slot
	jobBuf  []string
}

// Count returns the number of decisions with action a.
func (p *Plan) Count(a Action) int {
	n := 0
	for i := range p.Decisions {
		if p.Decisions[i].Action == a {
			n++
		}
	}
	return n
}

// Find returns the decision for job id, or nil.
func (p *Plan) Find(id string) *Decision {
	for i := range p.Decisions {
		if p.Decisions[i].Job == id {
			return &p.Decisions[i]
		}
	}
	return nil
}
