// Package api serves the daemon's view over HTTP: /v1/status and
// /v1/allocation as JSON, /metrics for Prometheus and /healthz. It also
// defines those JSON documents, which the status command decodes.
//
// The daemon publishes a new Status after every round; the server only
// reads the latest one, so a slow client never delays a round.
package api

import "time"

// Status is the body of GET /v1/status.
type Status struct {
	Round Round `json:"round"`
	// Jobs are the jobs of the managed partitions, managed or not, in
	// job id order.
	Jobs []JobStatus `json:"jobs"`
	// Types summarizes each GPU type, in name order.
	Types []TypeSummary `json:"types"`
	// Warnings are problems outside any one job (a node whose GPUs
	// cannot be read, left out of scheduling).
	Warnings []string `json:"warnings,omitempty"`
	// Preemption says whether the daemon may preempt running jobs now.
	Preemption Preemption `json:"preemption"`
	// Lease is the daemon's lease, nil while it keeps jobs waiting with
	// Slurm holds (scheduler.lease = 0) or sends nothing (dry run).
	Lease *Lease `json:"lease,omitempty"`
	// Token is what the daemon knows of its slurmrestd JWT.
	Token *Token `json:"token,omitempty"`
	// Accounting says what of slurmdbd's limits and account tree the
	// last round used, or why it had none (docs/limits.md).
	Accounting string `json:"accounting,omitempty"`
	// Entities are the policy's entities (accounts, users or tags' groups),
	// in name order.
	Entities []EntityStatus `json:"entities,omitempty"`
}

// EntityStatus is one entity: its weight in the policy, what the
// allocation gives its jobs and what they received since they arrived.
type EntityStatus struct {
	Name   string  `json:"name"`
	Weight float64 `json:"weight"`
	Jobs   int     `json:"jobs"`
	// AllocatedGPUs is the GPUs the allocation gives its jobs, by type;
	// ReceivedGPUSeconds the GPU-seconds they ran, by type.
	AllocatedGPUs      map[string]float64 `json:"allocated_gpus,omitempty"`
	ReceivedGPUSeconds map[string]float64 `json:"received_gpu_seconds,omitempty"`
	// EffectiveGPUs and EffectiveGPUSeconds count each type at the speed
	// of each job's fastest type: comparable between entities whose jobs
	// gain differently from newer GPUs.
	EffectiveGPUs       float64 `json:"effective_gpus"`
	EffectiveGPUSeconds float64 `json:"effective_gpu_seconds"`
}

// Lease is how long the jobs the daemon keeps waiting stay waiting if it
// stops: each waits on the lease job, which slurmctld ends at Expires
// unless the daemon renews it, and Slurm then schedules them itself.
type Lease struct {
	// Job is the lease job's id (0 before the first renewal).
	Job int64 `json:"job,omitempty"`
	// Expires is when the lease runs out unless renewed.
	Expires time.Time `json:"expires"`
	// LengthSeconds is how far each renewal moves it.
	LengthSeconds float64 `json:"length_seconds"`
	// Error says why the last renewal failed; empty when it worked.
	Error string `json:"error,omitempty"`
}

// Token is the slurmrestd JWT's lifetime as read from its exp claim.
type Token struct {
	// Expires is when slurmrestd stops accepting it; zero when the token
	// has no exp claim or cannot be read.
	Expires time.Time `json:"expires"`
	// Warning is set when it expires within the warning window (or has
	// expired, or cannot be read): every round then soon sends nothing.
	Warning string `json:"warning,omitempty"`
}

// Preemption is whether the daemon may preempt, and why not. The daemon
// signals no job for preemption until it has proven that the requeue
// that must follow would work: a job told to checkpoint and exit that is
// then not requeued ends for good.
type Preemption struct {
	// Enabled is set while new preemptions may start. While it is not,
	// pending jobs are still scheduled but every running job is treated
	// as preempt=never; preemptions already under way still end in their
	// requeue.
	Enabled bool `json:"enabled"`
	// Path is how requeues are sent: "slurmrestd v0.0.45" or
	// "scontrol (/usr/bin/scontrol)".
	Path string `json:"path,omitempty"`
	// Reason says why preemption is off; empty while it is on.
	Reason string `json:"reason,omitempty"`
	// Failing is set when a check of the requeue path or a requeue
	// failed (not merely "not proven yet"); /healthz is then not ok.
	Failing bool `json:"failing,omitempty"`
	// CheckedAt is when the requeue path was last checked; zero before
	// the first check.
	CheckedAt time.Time `json:"checked_at"`
	// Waiting are the jobs already signalled whose requeue failed: each
	// is tried again every round while Slurm keeps its record, and
	// preemption stays off until one of them (or, once none waits, a
	// check) succeeds.
	Waiting []RequeueWaiting `json:"waiting,omitempty"`
}

// RequeueWaiting is a preempted job whose requeue failed.
type RequeueWaiting struct {
	JobID string `json:"job_id"`
	// Error is the last requeue's error.
	Error string `json:"error"`
	// Since is when its requeue first failed.
	Since time.Time `json:"since"`
}

// Round describes the last round.
type Round struct {
	Number uint64 `json:"number"`
	Policy string `json:"policy"`
	// Started is when the last round began; zero before the first one.
	Started time.Time `json:"started"`
	// DurationSeconds is how long the round took (snapshot to applied).
	DurationSeconds float64 `json:"duration_seconds"`
	// SolveSeconds is the time spent computing the allocation (0 when the
	// cached allocation was reused).
	SolveSeconds float64 `json:"solve_seconds"`
	// Length is the configured round length in seconds.
	LengthSeconds float64 `json:"length_seconds"`
	// NextAt is when the next round starts.
	NextAt time.Time `json:"next_at"`
	// AllocationComputed is when the allocation in use was computed.
	AllocationComputed time.Time `json:"allocation_computed"`
	// AllocationFallback is non-empty while the allocation in use is the
	// stand-in policy's because the configured policy failed; it says how.
	// The configured policy is tried again at the next chance.
	AllocationFallback string `json:"allocation_fallback,omitempty"`
	DryRun             bool   `json:"dry_run"`
	// Skipped is non-empty when the last round sent nothing on purpose
	// (the snapshot failed or looked wrong); it says why.
	Skipped string `json:"skipped,omitempty"`
	// Standby is set while this daemon waits for another one to release
	// the state; it runs no rounds until then, and Skipped says why.
	Standby bool `json:"standby,omitempty"`
	// ActionsSent and ActionsFailed count the last round's Slurm actions.
	ActionsSent   int `json:"actions_sent"`
	ActionsFailed int `json:"actions_failed"`
}

// JobStatus is one job as status shows it.
type JobStatus struct {
	JobID string `json:"job_id"`
	User  string `json:"user"`
	// Model is the tagged model, empty when the job has no tag.
	Model   string `json:"model,omitempty"`
	Managed bool   `json:"managed"`
	// Reason explains the last decision, or why the job is not managed.
	Reason string `json:"reason"`
	// State is Slurm's job state (PENDING, RUNNING, ...).
	State string `json:"state"`
	// GPUType is the type the job runs on now; empty when not running.
	GPUType string `json:"gpu_type,omitempty"`
	GPUs    int    `json:"gpus"`
	// Decision is the round mechanism's last decision for the job.
	Decision string `json:"decision,omitempty"`
	// Allocation is the policy's share of time on each type.
	Allocation map[string]float64 `json:"allocation,omitempty"`
	// Received is the seconds of service on each type since the job
	// arrived.
	Received map[string]float64 `json:"received,omitempty"`
	// SinceArrival is the seconds since the daemon first saw the job.
	SinceArrival float64 `json:"since_arrival"`
	// ThroughputSource says where the job's throughput estimates come
	// from (reference table entry, default, measurement).
	ThroughputSource string `json:"throughput_source,omitempty"`
	// Throughputs are the job's rates per GPU type with their source
	// (measured, estimated, table, default).
	Throughputs map[string]Throughput `json:"throughputs,omitempty"`
	// Preempt is how the job takes preemption (checkpoint, requeue,
	// never), its tag's or the site's default.
	Preempt string `json:"preempt,omitempty"`
	// Grace says where a preemption in progress stands ("grace until
	// 2025-03-01T09:01:05Z", RFC 3339, or "requeued"); empty otherwise.
	Grace string `json:"grace,omitempty"`
	// StepsDone is the cumulative step count the job last reported
	// through its progress file; absent when it reported none.
	StepsDone *int64 `json:"steps_done,omitempty"`
	// StepsRemaining is what the policies take the job to have left: its
	// tag's steps= less StepsDone (at least 1 while it runs past them);
	// absent when the tag gives no total.
	StepsRemaining int64 `json:"steps_remaining,omitempty"`
	// StepsTotal is the steps its tag announced; absent when none.
	StepsTotal int64 `json:"steps_total,omitempty"`
	// RestartCostS is what a restart is taken to cost the job, in
	// seconds, and RestartSource where that comes from: "measured" (from
	// its last requeue to its first progress after it), "tag" (its
	// restart=) or "default" (scheduler.default_restart_cost); both
	// absent for a job out of the rounds.
	RestartCostS  float64 `json:"restart_cost_s,omitempty"`
	RestartSource string  `json:"restart_source,omitempty"`
	// SharesGPUWith is the job that shares the job's GPU as its pair
	// under a packing policy (docs/space-sharing.md); PairAllocation the
	// fraction of time the allocation gives the pairs the job belongs
	// to, per GPU type; Sharing why the job is never paired. All absent
	// when they do not apply.
	SharesGPUWith  string             `json:"shares_gpu_with,omitempty"`
	PairAllocation map[string]float64 `json:"pair_allocation,omitempty"`
	Sharing        string             `json:"sharing,omitempty"`
	// SharedRate is the job's rate while it shares its GPU with
	// SharesGPUWith, and where that figure comes from ("measured" while
	// the two ran together, else "table").
	SharedRate *Throughput `json:"shared_rate,omitempty"`
}

// Throughput is one job's step rate on one GPU type and where it comes
// from.
type Throughput struct {
	StepsPerS float64 `json:"steps_per_s"`
	// Source is measured, estimated, table or default.
	Source string `json:"source"`
	Detail string `json:"detail,omitempty"`
}

// TypeSummary is one GPU type's line in status.
type TypeSummary struct {
	Type string `json:"type"`
	// GPUs is the number of GPUs of the type on usable nodes.
	GPUs int `json:"gpus"`
	// Busy is the GPUs used by running jobs (managed or not).
	Busy int `json:"busy"`
	// Running and Pending count the managed jobs placed on, or waiting
	// for, the type.
	Running int `json:"running"`
	Pending int `json:"pending"`
	// AllocatedGPUs is Σ_jobs allocation × GPUs: how many GPUs of the
	// type the policy means to keep busy on average.
	AllocatedGPUs float64 `json:"allocated_gpus"`
	// CostPerHour is the configured price, when set.
	CostPerHour float64 `json:"cost_per_hour,omitempty"`
}

// Allocation is the body of GET /v1/allocation: the policy's answer in
// use, as {row key: {type: fraction}} (a row key is a job id, or "a+b"
// for a co-located pair).
type Allocation struct {
	Policy   string    `json:"policy"`
	Computed time.Time `json:"computed"`
	Types    []string  `json:"types"`
	// Objective is null where the policy's objective is not a finite
	// number (a makespan with a job that gets no GPU time).
	Objective *float64                      `json:"objective"`
	Rows      map[string]map[string]float64 `json:"rows"`
}
