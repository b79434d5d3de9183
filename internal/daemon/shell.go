package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/api"
	"github.com/gavel-slurm/gavel-slurm/internal/sched"
	"github.com/gavel-slurm/gavel-slurm/internal/store"
)

// The scheduling step lives in internal/sched; the daemon drives it and
// turns what it returns into the store's records and the API's documents.
type (
	// Core is the scheduling step the daemon drives.
	Core = sched.Core
	// Settings are the step's settings.
	Settings = sched.Settings
	// Action is one Slurm action and why it is sent.
	Action = sched.Action
	// Result is what one step decided.
	Result = sched.Result
	// State is the step's state saved beside the job records.
	State = sched.State
)

// RunPriority is the Slurm priority of jobs chosen to run.
const RunPriority = sched.RunPriority

// NewCore returns a scheduling step for the settings (sched.NewCore).
var NewCore = sched.NewCore

// journalEntries decodes the journal for the step's replay; entries that
// do not decode are left out (they changed nothing the step can know of).
func journalEntries(entries []store.Entry) []sched.JournalEntry {
	out := make([]sched.JournalEntry, 0, len(entries))
	for _, e := range entries {
		var a Action
		if err := json.Unmarshal(e.Payload, &a); err != nil {
			continue
		}
		out = append(out, sched.JournalEntry{Created: e.Created, Failed: e.State == store.Failed,
			Pending: e.State == store.Pending, Seq: e.Seq, Action: a})
	}
	return out
}

// statusDoc is the /v1/status document of a step's view.
func statusDoc(v sched.View) api.Status {
	st := api.Status{Round: api.Round{
		Number: v.Round, Policy: v.Policy, Started: v.Started, LengthSeconds: v.Length.Seconds(),
		NextAt: v.Started.Add(v.Length), AllocationComputed: v.AllocationComputed,
		AllocationFallback: v.AllocationFallback, Skipped: v.Skipped,
	}, Warnings: v.Warnings,
		// Empty lists, not null, when there is nothing to show (a round
		// with no job, or whose snapshot failed): `jq '.jobs[]'` and the
		// like must not break on them.
		Jobs: []api.JobStatus{}, Types: []api.TypeSummary{}}
	for _, jv := range v.Jobs {
		st.Jobs = append(st.Jobs, jobStatus(jv))
	}
	for _, t := range v.Types {
		st.Types = append(st.Types, api.TypeSummary{Type: t.Type, GPUs: t.GPUs, Busy: t.Busy, Running: t.Running,
			Pending: t.Pending, AllocatedGPUs: t.AllocatedGPUs, CostPerHour: t.CostPerHour})
	}
	st.Accounting = v.Accounting
	for _, e := range v.Entities {
		st.Entities = append(st.Entities, api.EntityStatus{Name: e.Name, Weight: e.Weight, Jobs: e.Jobs,
			AllocatedGPUs: e.Allocated, ReceivedGPUSeconds: e.Received,
			EffectiveGPUs: e.EffectiveAllocated, EffectiveGPUSeconds: e.EffectiveReceived})
	}
	return st
}

func jobStatus(jv sched.JobView) api.JobStatus {
	j := jv.Job
	js := api.JobStatus{JobID: j.ID.String(), User: j.User, State: string(j.State), GPUs: j.GPUs,
		Model: jv.Model, Managed: jv.Managed, Decision: jv.Decision, Reason: jv.Reason,
		Allocation: jv.Allocation, Received: jv.Received, ThroughputSource: jv.ThroughputSource,
		Preempt: jv.Preempt, Grace: jv.Grace}
	if j.State == bridge.JobRunning || j.State == bridge.JobSuspended {
		js.GPUType = j.RunningGPUType
	}
	if jv.Managed {
		js.SinceArrival = jv.SinceArrival.Seconds()
		js.StepsRemaining, js.StepsTotal = jv.StepsRemaining, jv.StepsTotal
		if jv.StepsDone >= 0 {
			done := jv.StepsDone
			js.StepsDone = &done
		}
		js.RestartCostS, js.RestartSource = jv.RestartCost.Seconds(), jv.RestartSource
		js.SharesGPUWith, js.PairAllocation, js.Sharing = jv.SharesWith, jv.PairAllocation, jv.Sharing
		if r := jv.SharedRate; r != nil {
			js.SharedRate = &api.Throughput{StepsPerS: r.StepsPerSecond, Source: r.Source, Detail: r.Detail}
		}
	}
	if len(jv.Throughputs) > 0 {
		js.Throughputs = make(map[string]api.Throughput, len(jv.Throughputs))
		for t, r := range jv.Throughputs {
			js.Throughputs[t] = api.Throughput{StepsPerS: r.StepsPerSecond, Source: r.Source, Detail: r.Detail}
		}
	}
	return js
}

// allocationDoc is the /v1/allocation document of a step's view.
func allocationDoc(v sched.View) api.Allocation {
	if v.Allocation == nil {
		return api.Allocation{Policy: v.Policy, Rows: map[string]map[string]float64{}}
	}
	doc := api.Allocation{Policy: v.Allocation.Policy, Computed: v.AllocationComputed,
		Types: v.Allocation.Types, Rows: v.Allocation.Map()}
	if o := v.Allocation.Objective; !math.IsNaN(o) && !math.IsInf(o, 0) {
		doc.Objective = &o
	}
	return doc
}

// Instance is the number this daemon marks its run priorities with (see
// sched.Settings.Instance): drawn once, then kept in the state store, so
// a restart keeps it and a second daemon with its own state directory
// gets another.
func Instance(st *store.Store) (int, error) {
	var n int
	switch err := st.GetMeta("instance", &n); {
	case err == nil:
		return n, nil
	case !errors.Is(err, store.ErrNotFound):
		return 0, fmt.Errorf("instance number: %w", err)
	}
	n = 1 + rand.IntN(998)
	if err := st.PutMeta("instance", n); err != nil {
		return 0, fmt.Errorf("instance number: %w", err)
	}
	return n, nil
}
