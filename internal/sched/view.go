package sched

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/policy"
)

// View is what status shows after a round: the round, every live job of
// the managed partitions (managed or not) and a summary per GPU type.
type View struct {
	Round              uint64
	Policy             string
	Started            time.Time
	Length             time.Duration
	AllocationComputed time.Time
	// AllocationFallback is non-empty while Allocation is the stand-in
	// policy's (StandInPolicy) because the configured policy failed; it
	// says how.
	AllocationFallback string
	Skipped            string
	Jobs               []JobView
	Types              []TypeView
	// Allocation is the policy's answer in use; nil before the first.
	Allocation *policy.Allocation
	// Warnings are problems outside any one job (a node left out).
	Warnings []string
	// Accounting says what of slurmdbd's limits and tree the round used,
	// or why it had none (docs/limits.md).
	Accounting string
	// Entities are the policy's entities with their weight, what the
	// allocation gives them and what they received (entities.go).
	Entities []EntityView
}

// JobView is one job's line in status.
type JobView struct {
	Job     bridge.Job
	Managed bool
	// Model is the resolved model name (or the tag's text).
	Model string
	// Decision and Reason are the last decision and why, or why the job
	// is not managed.
	Decision, Reason string
	Allocation       map[string]float64
	Received         map[string]float64
	SinceArrival     time.Duration
	ThroughputSource string
	// Throughputs are the job's rates on each type the policy sees, each
	// with its source.
	Throughputs map[string]Rate
	// Preempt is the job's effective preemption mode; Grace where its
	// preemption stands.
	Preempt, Grace string
	// StepsDone is the job's reported progress (-1 when it reports
	// none); StepsRemaining what the policies take it to have left (0
	// when unknown); StepsTotal the steps its tag announced (0: none).
	StepsDone, StepsRemaining, StepsTotal int64
	// RestartCost is what a restart is taken to cost the job, and
	// RestartSource where the figure comes from: "measured" (its last
	// restart), "tag" (restart=) or "default" (the site's).
	RestartCost   time.Duration
	RestartSource string
	// SharesWith is the job it shares a GPU with now, as its pair
	// (docs/space-sharing.md); PairAllocation is the time the allocation
	// gives the pairs it belongs to, per type; Sharing says why it is
	// never paired, under a packing policy.
	SharesWith     string
	PairAllocation map[string]float64
	Sharing        string
	// SharedRate is the job's rate while it shares its GPU with
	// SharesWith, where the estimator knows it: measured by the
	// collectors while the two ran together, else the table's.
	SharedRate *Rate
}

// TypeView is one GPU type's line in status.
type TypeView struct {
	Type             string
	GPUs, Busy       int
	Running, Pending int
	AllocatedGPUs    float64
	CostPerHour      float64
}

// Refresh is the view of the last round, started at started, against a
// newer snapshot: what status shows after the checks between rounds acted
// (a job started on freed GPUs, room made for a trial-and-error job), so
// that it does not show the round's stale decisions until the next one.
// It reports false for a snapshot that lost many managed jobs at once,
// which must not replace the round's view.
func (c *Core) Refresh(snap *bridge.Snapshot, started time.Time) (View, bool) {
	if snap == nil || c.looksPartial(snap) {
		return View{}, false
	}
	res := Result{Round: c.round, Skipped: c.lastSkip}
	return c.view(snap, started, &res), true
}

// view builds the status view of the round in res.
func (c *Core) view(snap *bridge.Snapshot, now time.Time, res *Result) View {
	v := View{Round: c.round, Policy: c.set.Policy, Started: now, Length: c.set.Round,
		AllocationComputed: c.allocationComputed, AllocationFallback: c.fallback, Skipped: res.Skipped, Allocation: c.allocation}
	if snap == nil {
		return v
	}
	v.Accounting = accountingNote(snap)
	alloc := map[string]map[string]float64{}
	if c.allocation != nil {
		alloc = c.allocation.Map()
	}
	summary := map[string]*TypeView{}
	for _, n := range snap.Nodes {
		if n.Unreadable != nil && c.inPartitions(n.Partitions...) {
			v.Warnings = append(v.Warnings, fmt.Sprintf("node %s left out: %v", n.Name, n.Unreadable))
		}
		if !c.nodeUsable(n) {
			continue
		}
		ts := summary[n.GPUType]
		if ts == nil {
			ts = &TypeView{Type: n.GPUType, CostPerHour: c.set.CostPerGPUHour[n.GPUType]}
			summary[n.GPUType] = ts
		}
		ts.GPUs += n.GPUs
		ts.Busy += n.GPUsUsed
	}
	for _, j := range snap.Jobs {
		s := c.jobs[keyOf(j.ID)]
		preempting := s != nil && s.pre.phase != notPreempted
		if !c.inPartitions(j.Partition) || (!j.Active() && !preempting) {
			// Finished jobs stay in Slurm's answer for MinJobAge; like
			// squeue, status shows only the live ones.
			continue
		}
		res.Jobs++
		jv := JobView{Job: j}
		if j.TagErr == nil {
			jv.Model = j.Tag.Model
		}
		switch ok, why := c.managed(j); {
		case !ok:
			jv.Reason = why
		case s == nil:
			// Only in a view refreshed between rounds: it arrived since.
			jv.Managed, jv.Reason = true, "arrived since the last round: the next round schedules it"
		case s != nil && s.heldBy != "" && j.Held:
			jv.Managed, jv.Model, jv.Reason = true, s.model, s.heldBy
			jv.Received, jv.SinceArrival = copyMap(s.received), now.Sub(s.firstSeen)
		case s != nil && s.scale != 0:
			res.Managed++
			jv.Managed, jv.Model = true, s.model
			jv.Decision, jv.Reason = s.decision, s.reason
			for _, n := range s.notes {
				jv.Reason += "; " + n
			}
			if c.allocation != nil && c.allocation.Notes[s.name] != "" {
				// The policy could not honour something of the job's
				// (an SLO it cannot meet): said here, not a stalled round.
				jv.Reason += "; " + c.allocation.Notes[s.name]
			}
			jv.Allocation = alloc[s.name]
			jv.Received, jv.SinceArrival = copyMap(s.received), now.Sub(s.firstSeen)
			jv.ThroughputSource = s.source
			jv.Throughputs = make(map[string]Rate, len(s.throughputs))
			for t, v := range s.throughputs {
				r := s.perType[t]
				r.StepsPerSecond = v
				jv.Throughputs[t] = r
			}
			jv.Preempt, jv.Grace = string(c.modeOf(s)), c.graceStatus(s)
			jv.StepsDone, jv.StepsRemaining, jv.StepsTotal = -1, c.stepsRemaining(s), s.tag.Steps
			if done, ok := c.stepsDone(s); ok {
				jv.StepsDone = done
			}
			jv.RestartCost, jv.RestartSource = c.restartCost(s), restartSource(s)
			jv.SharesWith, jv.Sharing = s.partner, s.shareNote
			if s.partner != "" {
				jv.Reason += "; shares its GPU with " + s.partner
				if jv.SharedRate = c.sharedRate(s, j, now); jv.SharedRate != nil {
					jv.Reason += fmt.Sprintf(" (%.4g steps/s, %s)", jv.SharedRate.StepsPerSecond, jv.SharedRate.Source)
				}
			}
			for _, k := range s.partners {
				o := c.jobs[k]
				if o == nil || c.mech == nil {
					continue
				}
				key, ok := c.mech.PairOf(s.name, o.name)
				if !ok {
					continue
				}
				for t, f := range alloc[key] {
					if f > 0 {
						if jv.PairAllocation == nil {
							jv.PairAllocation = map[string]float64{}
						}
						jv.PairAllocation[t] += f
					}
				}
			}
			c.summarize(summary, j, s, jv.Allocation)
		case s.arrayHead:
			// A job array's tasks not started: each one a job to the
			// rounds (arrays.go); the line sums them up.
			res.Managed += len(s.slots)
			jv.Managed, jv.Model, jv.Decision, jv.Reason = true, s.model, s.decision, s.reason
			if jv.Reason == "" {
				jv.Reason = "arrived since the last round: the next round schedules it"
			}
			jv.SinceArrival = now.Sub(s.firstSeen)
			for _, key := range s.slots {
				slot := c.jobs[key]
				if slot == nil {
					continue
				}
				for t, f := range alloc[slot.name] {
					if jv.Allocation == nil {
						jv.Allocation = map[string]float64{}
					}
					jv.Allocation[t] += f
					if ts := summary[t]; ts != nil {
						ts.AllocatedGPUs += f * float64(slot.scale)
					}
				}
				if jv.Throughputs == nil && len(slot.throughputs) > 0 {
					jv.ThroughputSource = slot.source
					jv.Throughputs = make(map[string]Rate, len(slot.throughputs))
					for t, v := range slot.throughputs {
						r := slot.perType[t]
						r.StepsPerSecond = v
						jv.Throughputs[t] = r
					}
					jv.Preempt = string(c.modeOf(slot))
				}
			}
			jv.StepsDone, jv.StepsTotal = -1, s.tag.Steps
		default:
			// Tracked but out of the rounds: a job that ended in its grace
			// period and waits for its requeue (after a restart, before
			// the requeue lands), or one whose admission failed.
			jv.Managed, jv.Model, jv.Reason = true, s.model, s.reason
			if jv.Reason == "" {
				jv.Reason = "not in this round's schedule"
			}
			jv.Preempt, jv.Grace = string(c.modeOf(s)), c.graceStatus(s)
			jv.Received, jv.SinceArrival = copyMap(s.received), now.Sub(s.firstSeen)
		}
		v.Jobs = append(v.Jobs, jv)
	}
	for _, t := range slices.Sorted(maps.Keys(summary)) {
		v.Types = append(v.Types, *summary[t])
	}
	v.Entities = c.entityViews()
	return v
}

// summarize adds a managed job to its type's line.
func (c *Core) summarize(summary map[string]*TypeView, j bridge.Job, s *jobState, alloc map[string]float64) {
	for t, f := range alloc {
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
		if ts := summary[ConstraintType(j.Constraints, c.isGPUType)]; ts != nil {
			ts.Pending++
		}
	}
}
