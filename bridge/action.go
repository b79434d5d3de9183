package bridge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"
)

// Reader gives the daemon its view of Slurm.
type Reader interface {
	// Snapshot reads the managed partitions now. An error means the view
	// could not be trusted; the daemon then acts on nothing this round.
	Snapshot(ctx context.Context) (*Snapshot, error)
}

// Actuator carries out one action on Slurm. Apply returns an error wrapped
// with the action (job id and kind); an action whose effect is already in
// place succeeds again, so replaying a journal is harmless.
type Actuator interface {
	Apply(ctx context.Context, a Action) error
}

// BatchActuator is an Actuator that can also carry out many actions in fewer
// calls to Slurm, where updating jobs one by one costs a round trip each.
// A batch holds at most one request per job (see Requests): one action, or
// a run of that job's updates that SharesRequest joins, which the
// actuator carries out in order, as one update where Slurm takes one.
// Requests of different jobs are independent of each other, so they may
// be carried out in any order. ApplyBatch returns one error per action, in
// the actions' order, each nil or wrapped with its action as Apply's are;
// a failure of one request does not stop the others, and within a run an
// action after a failed one is not carried out (it gets an error too).
type BatchActuator interface {
	Actuator
	ApplyBatch(ctx context.Context, actions []Action) []error
}

// UpdateField reports whether kind is a change Slurm takes as one field of
// a job update (scontrol update's Features=, Priority=, StartTime=), so
// that several for one job can share one request: one RPC to slurmctld
// instead of one each. A release cannot join them: slurmctld reads it as
// a priority, and refuses any other priority on a held job.
func UpdateField(kind ActionKind) bool {
	switch kind {
	case ActSetConstraints, ActSetPriority, ActBeginNow:
		return true
	}
	return false
}

// SharesRequest reports whether next, which follows prev in a job's
// actions, may go to Slurm in the same update request as prev: both are
// update fields of the same job, and next does not set a field prev
// already sets.
func SharesRequest(prev, next Action) bool {
	return prev.Job == next.Job && prev.Kind != next.Kind && UpdateField(prev.Kind) && UpdateField(next.Kind)
}

// ApplyOneByOne carries out a batch with apply, one action after the
// other in the batch's order, for actuators without a batch call of their
// own: within a request of several updates (Requests), an action after a
// failed one is not carried out, as Slurm would not apply the rest of a
// refused update either. It returns one error per action.
func ApplyOneByOne(ctx context.Context, actions []Action, apply func(context.Context, Action) error) []error {
	errs := make([]error, len(actions))
	for _, req := range Requests(actions) {
		var failed error
		for _, i := range req {
			if failed != nil {
				errs[i] = fmt.Errorf("%s: not carried out, its request failed: %w", actions[i], failed)
				continue
			}
			errs[i] = apply(ctx, actions[i])
			failed = errs[i]
		}
	}
	return errs
}

// Requests splits actions into the requests that carry them, as index
// lists in order: each run of consecutive actions that SharesRequest
// joins (every pair of the run, so that no field repeats), and every
// other action alone.
func Requests(actions []Action) [][]int {
	var out [][]int
	for i := range actions {
		if n := len(out); n > 0 && joins(actions, out[n-1], i) {
			out[n-1] = append(out[n-1], i)
			continue
		}
		out = append(out, []int{i})
	}
	return out
}

// joins reports whether actions[i] may join the request run.
func joins(actions []Action, run []int, i int) bool {
	if run[len(run)-1] != i-1 {
		return false
	}
	for _, k := range run {
		if !SharesRequest(actions[k], actions[i]) {
			return false
		}
	}
	return true
}

// Slurm is a Reader and an Actuator: what the daemon needs.
type Slurm interface {
	Reader
	Actuator
}

// ActionKind names what an action does.
type ActionKind string

const (
	// ActSetPriority sets the job's priority to Action.Priority (pending or
	// running jobs; an explicit priority stays until changed or released).
	// Slurm refuses it for a held job: release first.
	ActSetPriority ActionKind = "set-priority"
	// ActHold holds a pending job.
	ActHold ActionKind = "hold"
	// ActRelease releases a held job.
	ActRelease ActionKind = "release"
	// ActSetConstraints sets the --constraint of a pending job to
	// Action.Constraints (a GPU type feature such as "v100").
	ActSetConstraints ActionKind = "set-constraints"
	// ActSetShape sets how a pending job asks for its GPUs: Action.Nodes
	// nodes exactly, Action.GPUsPerNode GPUs on each (or, when that is 0,
	// Action.GPUs GPUs over all of them, placed as Slurm finds room), and
	// Action.Constraints. The daemon uses it to spread a mixed=ok job over
	// GPU types and to bring it back to one type (docs/hadar.md).
	ActSetShape ActionKind = "set-shape"
	// ActSetArrayLimit sets how many tasks of a job array Slurm runs at
	// once (its ArrayTaskThrottle) to Action.Tasks, 0 for no limit. It is
	// sent to the array's own record (the array's id). The daemon lets
	// an array's waiting tasks start only as far as the round gives them
	// GPUs, never the whole array at once.
	ActSetArrayLimit ActionKind = "set-array-limit"
	// ActBeginNow makes a pending job eligible now (after a requeue Slurm
	// would otherwise wait about two minutes).
	ActBeginNow ActionKind = "begin-now"
	// ActSignal sends Action.Signal to a running job (the warning before a
	// preemption).
	ActSignal ActionKind = "signal"
	// ActRequeue puts a running job back to pending, freeing its GPUs.
	ActRequeue ActionKind = "requeue"
	// ActRequeueHold requeues a running job and holds it, so that its next
	// placement can be chosen before it becomes eligible.
	ActRequeueHold ActionKind = "requeue-hold"
	// ActSetShare makes a pending single-GPU job share a GPU or stop
	// sharing one (space sharing, docs/space-sharing.md). With Shards > 0
	// it asks for Action.Shards shards of one GPU on node Action.Node
	// (gres/shard, --nodelist, one node) and Action.Constraints; with
	// Shards 0 it asks for one whole GPU again, on any node
	// (Action.Node must be empty). Where the site lets shards use one GPU
	// of a node at a time, the jobs the daemon sends to one node share one
	// GPU.
	ActSetShare ActionKind = "set-share"
	// ActResetPriority hands a pending job's priority back to Slurm's own
	// (its priority plugin's factors), which an explicit priority freezes:
	// a job leaving the daemon's management must not keep the run
	// priority it was given and jump the queue once Slurm may start it.
	// Slurm does this on a release, which also lifts a Slurm hold, so it
	// is sent only to jobs the daemon no longer keeps waiting.
	ActResetPriority ActionKind = "reset-priority"
)

// Kinds lists every action kind, for the code that must handle each.
var Kinds = []ActionKind{ActSetPriority, ActHold, ActRelease, ActSetConstraints, ActSetShape, ActSetArrayLimit,
	ActBeginNow, ActSignal, ActRequeue, ActRequeueHold, ActSetShare, ActResetPriority}

// Action is one change to one job. It is a plain comparable value so that it
// can be journaled, compared with the last one sent and replayed.
type Action struct {
	Kind ActionKind `json:"kind"`
	Job  JobID      `json:"job"`
	// Priority is the new priority for ActSetPriority.
	Priority uint32 `json:"priority,omitempty"`
	// Constraints is the new constraint for ActSetConstraints.
	Constraints string `json:"constraints,omitempty"`
	// Signal is the signal name for ActSignal ("USR1", "SIGTERM").
	Signal string `json:"signal,omitempty"`
	// Nodes, GPUsPerNode and GPUs are the request ActSetShape sets.
	Nodes       int `json:"nodes,omitempty"`
	GPUsPerNode int `json:"gpus_per_node,omitempty"`
	GPUs        int `json:"gpus,omitempty"`
	// Tasks is the limit ActSetArrayLimit sets (0: none).
	Tasks int `json:"tasks,omitempty"`
	// Node and Shards are what ActSetShare asks for.
	Node   string `json:"node,omitempty"`
	Shards int    `json:"shards,omitempty"`
}

// maxShapeGPUs bounds the counts of a shape, as the reader bounds what it
// reads, so that a corrupt journal entry cannot ask Slurm for absurd sizes.
const maxShapeGPUs = 1 << 20

// String renders the action for logs and errors: "set-priority job 42 (priority=100)".
func (a Action) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s job %d", a.Kind, a.Job)
	switch a.Kind {
	case ActSetPriority:
		fmt.Fprintf(&b, " (priority=%d)", a.Priority)
	case ActSetConstraints:
		fmt.Fprintf(&b, " (constraints=%q)", a.Constraints)
	case ActSignal:
		fmt.Fprintf(&b, " (signal=%s)", a.Signal)
	case ActSetArrayLimit:
		fmt.Fprintf(&b, " (tasks=%d)", a.Tasks)
	case ActSetShare:
		if a.Shards > 0 {
			fmt.Fprintf(&b, " (shards=%d node=%s constraints=%q)", a.Shards, a.Node, a.Constraints)
		} else {
			fmt.Fprintf(&b, " (whole GPU constraints=%q)", a.Constraints)
		}
	case ActSetShape:
		if a.GPUsPerNode > 0 {
			fmt.Fprintf(&b, " (nodes=%d gpus_per_node=%d constraints=%q)", a.Nodes, a.GPUsPerNode, a.Constraints)
		} else {
			fmt.Fprintf(&b, " (nodes=%d gpus=%d constraints=%q)", a.Nodes, a.GPUs, a.Constraints)
		}
	}
	return b.String()
}

// Validate checks that the action is complete before it is sent.
func (a Action) Validate() error {
	if a.Job == 0 {
		return fmt.Errorf("%s: no job id", a)
	}
	switch a.Kind {
	case ActSetPriority, ActHold, ActRelease, ActBeginNow, ActRequeue, ActRequeueHold, ActResetPriority:
	case ActSetConstraints:
		if strings.ContainsAny(a.Constraints, "\n\x00") {
			return fmt.Errorf("%s: constraints hold a control character", a)
		}
	case ActSetArrayLimit:
		if a.Tasks < 0 || a.Tasks > MaxArrayTask+1 {
			return fmt.Errorf("%s: limit out of range", a)
		}
	case ActSignal:
		if _, err := SignalNumber(a.Signal); err != nil {
			return fmt.Errorf("%s: %w", a, err)
		}
	case ActSetShare:
		if err := a.validateShare(); err != nil {
			return err
		}
	case ActSetShape:
		if strings.ContainsAny(a.Constraints, "\n\x00") {
			return fmt.Errorf("%s: constraints hold a control character", a)
		}
		if a.Nodes < 1 || a.Nodes > maxShapeGPUs || a.GPUsPerNode < 0 || a.GPUsPerNode > maxShapeGPUs || a.GPUs > maxShapeGPUs {
			return fmt.Errorf("%s: counts out of range", a)
		}
		if a.GPUsPerNode == 0 && a.GPUs < a.Nodes {
			// Slurm refuses fewer job-wide GPUs than nodes ("--gpus < -N").
			return fmt.Errorf("%s: fewer GPUs than nodes", a)
		}
		if a.GPUsPerNode > 0 && a.GPUs != 0 && a.GPUs != a.Nodes*a.GPUsPerNode {
			return fmt.Errorf("%s: %d GPUs is not %d nodes times %d", a, a.GPUs, a.Nodes, a.GPUsPerNode)
		}
	default:
		return fmt.Errorf("%s: unknown action kind", a)
	}
	return nil
}

// signals lists the signals an action may send, by name without "SIG".
var signals = map[string]syscall.Signal{
	"HUP": syscall.SIGHUP, "INT": syscall.SIGINT, "QUIT": syscall.SIGQUIT, "KILL": syscall.SIGKILL,
	"USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2, "TERM": syscall.SIGTERM,
	"CONT": syscall.SIGCONT, "STOP": syscall.SIGSTOP,
}

// ErrUnknownSignal is returned for a signal name outside the supported set.
var ErrUnknownSignal = errors.New("unknown signal")

// SignalNumber maps "USR1", "SIGUSR1" or "10" to the signal number.
func SignalNumber(name string) (int, error) {
	upper := strings.TrimPrefix(strings.ToUpper(name), "SIG")
	if s, ok := signals[upper]; ok {
		return int(s), nil
	}
	for _, s := range signals {
		if fmt.Sprint(int(s)) == name {
			return int(s), nil
		}
	}
	return 0, fmt.Errorf("%w %q", ErrUnknownSignal, name)
}

// Lease is where the daemon's lease stands: the Slurm job that the jobs
// it keeps waiting depend on, and when slurmctld ends it unless renewed
// (bridge/rest/lease.go).
type Lease struct {
	// Job is the lease job; 0 when there is none.
	Job JobID `json:"job,omitempty"`
	// Expires is when slurmctld ends it, and every job waiting on it
	// becomes eligible, unless the daemon renews it first.
	Expires time.Time `json:"expires"`
}

// Leaser is a Slurm whose waiting jobs the daemon keeps with a lease
// rather than with holds (bridge/rest/lease.go).
type Leaser interface {
	// Leasing reports whether holds go through the lease.
	Leasing() bool
	// RenewLease makes the lease last until until, submitting a lease
	// job when there is none; it needs a snapshot first.
	RenewLease(ctx context.Context, until time.Time) (Lease, error)
	// EndLease ends the lease now: every job waiting on it becomes
	// eligible.
	EndLease(ctx context.Context) error
}
