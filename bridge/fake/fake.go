// Package fake is an in-memory Slurm that implements bridge.Reader and
// bridge.Actuator, for unit tests of the daemon's logic. It follows the
// behaviour of a real Slurm 24.11 that the daemon relies on (what may be
// changed on pending or running jobs, what a requeue does) and lets tests
// inject failures.
package fake

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// ErrNotPending mirrors Slurm's refusal to change a started job.
var ErrNotPending = errors.New("job is no longer pending execution")

// ErrNotRunning is returned for signals and requeues of jobs that do not run.
var ErrNotRunning = errors.New("job is not running")

// ErrHeld mirrors Slurm's refusal (error 2042) to set the priority of a
// held job.
var ErrHeld = errors.New("job is in held state, pending scheduler release")

// ErrNoJob is returned for an unknown job id.
var ErrNoJob = errors.New("invalid job id specified")

// ErrNotArray is the fake's answer to a job array's limit set on a job
// that is not part of an array.
var ErrNotArray = errors.New("job is not a job array")

// ErrArrayLimit is the fake's answer to a start of an array task while
// the array runs as many tasks as its limit (ArrayTaskThrottle) allows.
var ErrArrayLimit = errors.New("job array is at its limit of tasks running at once")

// ErrNotSingleGPU is the fake's answer to a share asked for a job of more
// than one GPU: Slurm takes a job's shards on a node from one GPU.
var ErrNotSingleGPU = errors.New("only a single-GPU job can share a GPU")

// Slurm is the in-memory cluster. The zero value is not usable; call New.
type Slurm struct {
	mu      sync.Mutex
	now     func() time.Time
	nodes   map[string]bridge.Node
	jobs    map[bridge.JobID]bridge.Job
	nextID  bridge.JobID
	applied []bridge.Action
	signals map[bridge.JobID][]string
	// onSignal says what each job's script does with a signal (OnSignal).
	onSignal map[bridge.JobID]SignalResponse

	snapshotErr error
	// hide and reads: see HideJobs.
	hide       func(read int) []bridge.JobID
	reads      int
	failAction func(bridge.Action) error
	// unlogged: see StopLogging.
	unlogged bool
	// loseReply: see LoseReplies.
	loseReply func(bridge.Action) (lost, landed bool)
	// batches holds the size of every ApplyBatch call, in order.
	batches []int
	// adminHeld are the held jobs whose hold an administrator placed
	// (ActHold, sent by an admin): their owner cannot release them.
	// A requeue-hold alone leaves a hold the owner may release.
	adminHeld map[bridge.JobID]bool
}

// ErrAccessDenied mirrors Slurm's refusal of a user's release of an
// administrator's hold.
var ErrAccessDenied = errors.New("access/permission denied")

// New returns an empty cluster whose Snapshot times come from now.
func New(now func() time.Time) *Slurm {
	return &Slurm{
		now:       now,
		nodes:     map[string]bridge.Node{},
		jobs:      map[bridge.JobID]bridge.Job{},
		nextID:    1,
		signals:   map[bridge.JobID][]string{},
		adminHeld: map[bridge.JobID]bool{},
		onSignal:  map[bridge.JobID]SignalResponse{},
	}
}

// SignalResponse is what a job's batch script does when it receives a
// signal, as real scripts do (seen on a Slurm 24.11).
type SignalResponse uint8

const (
	// SignalTrapAndWait: the script traps the signal, saves a checkpoint
	// and keeps running until it is requeued (the default).
	SignalTrapAndWait SignalResponse = iota
	// SignalDies: no trap; the script dies of the signal and the job
	// ends FAILED (reason RaisedSignal).
	SignalDies
	// SignalExitsOK: the script traps the signal and exits 0 after its
	// checkpoint; the job ends COMPLETED.
	SignalExitsOK
	// SignalExitsFailed: the script traps the signal and exits 1; the
	// job ends FAILED.
	SignalExitsFailed
	// SignalRequeuesItself: the script saves a checkpoint and runs
	// `scontrol requeue $SLURM_JOB_ID` (PyTorch Lightning's SLURM
	// support): the job is pending again with a start delay.
	SignalRequeuesItself
)

// OnSignal sets what job id's script does with the signals it receives.
func (s *Slurm) OnSignal(id bridge.JobID, r SignalResponse) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onSignal[id] = r
}

// AddNode adds or replaces a node.
func (s *Slurm) AddNode(n bridge.Node) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(n.State) == 0 {
		n.State = []string{"IDLE"}
	}
	s.nodes[n.Name] = n
}

// Submit adds a pending job and returns its id. A zero ID gets the next
// free one; the comment is parsed into the job's tag.
func (s *Slurm) Submit(j bridge.Job) bridge.JobID {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j.ID == 0 {
		for s.jobs[s.nextID].ID != 0 {
			s.nextID++
		}
		j.ID = s.nextID
		s.nextID++
	}
	j = j.WithComment(j.Comment)
	if j.ArrayTasks != "" && j.ArrayJobID == 0 {
		// A job array: its own record carries the array's id.
		j.ArrayJobID = j.ID
	}
	if j.State == "" {
		j.State = bridge.JobPending
	}
	if j.SubmitTime.IsZero() {
		j.SubmitTime = s.now()
	}
	if j.Priority == 0 && !j.Held {
		j.Priority = 1
	}
	if j.Nodes == 0 {
		j.Nodes = 1
	}
	s.jobs[j.ID] = j
	return j.ID
}

// Start makes a pending job run on the given nodes, as slurmctld would when
// it schedules it (see place). A task of a job array on a record of its
// own starts only within the array's limit of tasks running at once; an
// array's own record starts its tasks through StartArrayTask.
func (s *Slurm) Start(id bridge.JobID, nodes ...string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[id]
	if !ok {
		return fmt.Errorf("start job %d: %w", id, ErrNoJob)
	}
	if j.State != bridge.JobPending || j.Held {
		return fmt.Errorf("start job %d: %w", id, ErrNotPending)
	}
	if j.HoldsArrayTasks() {
		return fmt.Errorf("start job %d: a job array's record starts its tasks one at a time (StartArrayTask)", id)
	}
	if j.IsArrayTask() && s.atArrayLimit(j.ArrayJobID, j.ArrayLimit) {
		return fmt.Errorf("start job %d: %w", id, ErrArrayLimit)
	}
	if err := s.place(&j, nodes); err != nil {
		return fmt.Errorf("start job %d: %w", id, err)
	}
	s.jobs[id] = j
	return nil
}

// StartArrayTask starts the first waiting task of the job array whose
// own record is id on nodes, as slurmctld does, and returns the job id
// the task runs under. The array runs no more tasks at once than its
// limit (ArrayLimit, 0: none). The task gets a record of its own, with
// the array record's request, tag and priority, under a new job id;
// the array's last waiting task takes over the array's record and id.
func (s *Slurm) StartArrayTask(id bridge.JobID, nodes ...string) (bridge.JobID, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.jobs[id]
	switch {
	case !ok:
		return 0, fmt.Errorf("start a task of job %d: %w", id, ErrNoJob)
	case !rec.HoldsArrayTasks():
		return 0, fmt.Errorf("start a task of job %d: %w", id, ErrNotArray)
	case rec.State != bridge.JobPending || rec.Held:
		return 0, fmt.Errorf("start a task of job %d: %w", id, ErrNotPending)
	case s.atArrayLimit(rec.ArrayJobID, rec.ArrayLimit):
		return 0, fmt.Errorf("start a task of job %d: %w", id, ErrArrayLimit)
	}
	tasks, total, err := bridge.ArrayTaskIDs(rec.ArrayTasks, bridge.MaxArrayTask+1)
	if err != nil {
		return 0, fmt.Errorf("start a task of job %d: %w", id, err)
	}
	task := rec
	task.ArrayTaskID, task.ArrayTasks = tasks[0], ""
	if total > 1 {
		task.ID = s.freeID()
	}
	if err := s.place(&task, nodes); err != nil {
		return 0, fmt.Errorf("start task %d_%d: %w", rec.ArrayJobID, tasks[0], err)
	}
	if total > 1 {
		rec.ArrayTasks = taskExpression(tasks[1:])
		s.jobs[id] = rec
		s.nextID = task.ID + 1
	}
	s.jobs[task.ID] = task
	return task.ID, nil
}

// freeID is the next job id not in use.
func (s *Slurm) freeID() bridge.JobID {
	id := s.nextID
	for s.jobs[id].ID != 0 {
		id++
	}
	return id
}

// atArrayLimit reports whether array runs as many tasks as limit allows
// (0: no limit).
func (s *Slurm) atArrayLimit(array bridge.JobID, limit int) bool {
	if limit <= 0 {
		return false
	}
	running := 0
	for _, j := range s.jobs {
		if j.ArrayJobID == array && (j.State == bridge.JobRunning || j.State == bridge.JobSuspended) {
			running++
		}
	}
	return running >= limit
}

// taskExpression writes task ids, in increasing order, as Slurm shows
// an array record's waiting tasks: "2-5,7".
func taskExpression(tasks []uint32) string {
	var b strings.Builder
	for i := 0; i < len(tasks); {
		k := i
		for k+1 < len(tasks) && tasks[k+1] == tasks[k]+1 {
			k++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if k == i {
			fmt.Fprintf(&b, "%d", tasks[i])
		} else {
			fmt.Fprintf(&b, "%d-%d", tasks[i], tasks[k])
		}
		i = k + 1
	}
	return b.String()
}

// place puts job j, pending, on nodes as slurmctld would start it there:
// the nodes' GPUs (or one GPU's shards, for a shard request) are marked
// in use and the job takes the type of its nodes (none when they
// differ, as the REST reader sees a job on a mix of types). A job with a
// --nodelist runs on that node.
func (s *Slurm) place(j *bridge.Job, nodes []string) error {
	if len(nodes) == 0 {
		return errors.New("no nodes")
	}
	if j.Shards > 0 {
		if err := s.startShared(j, nodes); err != nil {
			return err
		}
		j.State, j.Reason = bridge.JobRunning, "None"
		j.RunningNodes = []string{nodes[0]}
		j.RunningGPUType = s.nodes[nodes[0]].GPUType
		j.StartTime = s.now()
		return nil
	}
	if j.RequiredNodes != "" && !slices.Contains(nodes, j.RequiredNodes) {
		return fmt.Errorf("nodes %v leave out the job's --nodelist %s", nodes, j.RequiredNodes)
	}
	perNode := j.GPUs / len(nodes)
	for _, name := range nodes {
		n, ok := s.nodes[name]
		if !ok {
			return fmt.Errorf("unknown node %s", name)
		}
		if n.GPUs-n.GPUsUsed < perNode {
			return fmt.Errorf("node %s has %d free GPUs, job needs %d", name, n.GPUs-n.GPUsUsed, perNode)
		}
	}
	for _, name := range nodes {
		n := s.nodes[name]
		n.GPUsUsed += perNode
		s.nodes[name] = n
	}
	j.State = bridge.JobRunning
	j.Reason = "None"
	j.RunningNodes = append([]string(nil), nodes...)
	j.RunningGPUType = s.nodes[nodes[0]].GPUType
	for _, name := range nodes {
		if s.nodes[name].GPUType != j.RunningGPUType {
			j.RunningGPUType = ""
		}
	}
	j.StartTime = s.now()
	return nil
}

// startShared places a shard job as slurmctld does with one_sharing on
// the node's shard lines (docs/space-sharing.md): on its --nodelist node,
// on the GPU whose shards are in use when one is, else on a free GPU.
func (s *Slurm) startShared(j *bridge.Job, nodes []string) error {
	if len(nodes) != 1 {
		return fmt.Errorf("a shard job runs on one node, not %d", len(nodes))
	}
	n, ok := s.nodes[nodes[0]]
	switch {
	case !ok:
		return fmt.Errorf("unknown node %s", nodes[0])
	case j.RequiredNodes != "" && j.RequiredNodes != n.Name:
		return fmt.Errorf("node %s is not the job's --nodelist %s", n.Name, j.RequiredNodes)
	case n.Shards <= 0 || n.GPUs <= 0:
		return fmt.Errorf("node %s offers no shards", n.Name)
	}
	if len(n.ShardUse) != n.GPUs {
		n.ShardUse = make([]bridge.GPUShards, n.GPUs)
		for i := range n.ShardUse {
			n.ShardUse[i].Total = int64(n.Shards / n.GPUs)
		}
	} else {
		n.ShardUse = append([]bridge.GPUShards(nil), n.ShardUse...)
	}
	want := int64(j.Shards)
	gpu := -1
	shared := false
	for i, u := range n.ShardUse {
		if u.Used > 0 {
			shared = true
			if u.Used+want <= u.Total {
				gpu = i
				break
			}
		}
	}
	if gpu < 0 && !shared && n.GPUs-n.GPUsUsed >= 1 {
		for i, u := range n.ShardUse {
			if u.Used == 0 && want <= u.Total {
				gpu = i
				n.GPUsUsed++
				break
			}
		}
	}
	if gpu < 0 {
		return fmt.Errorf("node %s has no room for %d shards", n.Name, j.Shards)
	}
	n.ShardUse[gpu].Used += want
	s.nodes[n.Name] = n
	j.SharedGPUs = []int{gpu}
	return nil
}

// Job returns job id as the next snapshot shows it.
func (s *Slurm) Job(id bridge.JobID) (bridge.Job, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[id]
	if !ok {
		return bridge.Job{}, false
	}
	j.RunningNodes = slices.Clone(j.RunningNodes)
	j.SharedGPUs = slices.Clone(j.SharedGPUs)
	j.StateFlags = slices.Clone(j.StateFlags)
	return j, true
}

// Node returns node name as the next snapshot shows it.
func (s *Slurm) Node(name string) (bridge.Node, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.nodes[name]
	if !ok {
		return bridge.Node{}, false
	}
	n.Partitions = slices.Clone(n.Partitions)
	n.Features = slices.Clone(n.Features)
	n.State = slices.Clone(n.State)
	n.ShardUse = slices.Clone(n.ShardUse)
	return n, true
}

// SetComment is the job's owner changing its comment (scontrol update
// comment=...), the gavel: tag with it: removing the tag takes the job
// out of the daemon's management. A job array's id names every record of
// the array, as it does for scontrol.
func (s *Slurm) SetComment(id bridge.JobID, comment string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[id]
	if !ok {
		return fmt.Errorf("set the comment of job %d: %w", id, ErrNoJob)
	}
	if j.ArrayJobID != id {
		s.jobs[id] = j.WithComment(comment)
		return nil
	}
	for other, o := range s.jobs {
		if o.ArrayJobID == id {
			s.jobs[other] = o.WithComment(comment)
		}
	}
	return nil
}

// Finish ends a job with the given final state and frees its GPUs.
func (s *Slurm) Finish(id bridge.JobID, state bridge.JobState) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[id]
	if !ok {
		return fmt.Errorf("finish job %d: %w", id, ErrNoJob)
	}
	s.freeGPUs(j)
	j.State = state
	j.RunningNodes, j.RunningGPUType, j.SharedGPUs = nil, "", nil
	s.jobs[id] = j
	return nil
}

// Remove forgets a job, as Slurm does after MinJobAge.
func (s *Slurm) Remove(id bridge.JobID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j, ok := s.jobs[id]; ok {
		s.freeGPUs(j)
		delete(s.jobs, id)
	}
}

// HideJobs makes later snapshots leave out jobs, as a partial answer from
// slurmrestd would: hide gets the number of snapshots read before this one
// and returns the jobs to leave out (nil removes it).
func (s *Slurm) HideJobs(hide func(read int) []bridge.JobID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hide = hide
}

// FailSnapshot makes every later Snapshot fail with err (nil heals it).
func (s *Slurm) FailSnapshot(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snapshotErr = err
}

// FailActions installs a hook that may fail any action before it takes
// effect (nil removes it). A failed action is not recorded as applied.
func (s *Slurm) FailActions(hook func(bridge.Action) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failAction = hook
}

// LoseReplies installs a hook that may lose the answer to any action (nil
// removes it): when it says lost, Apply returns an error marked
// bridge.ErrNoReply, as a timeout would, and the action takes effect only
// if it also says landed. Lost answers come after FailActions' refusals.
func (s *Slurm) LoseReplies(hook func(bridge.Action) (lost, landed bool)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loseReply = hook
}

// FailKind is a FailActions hook that fails every action of one kind.
func FailKind(kind bridge.ActionKind, err error) func(bridge.Action) error {
	return func(a bridge.Action) error {
		if a.Kind == kind {
			return err
		}
		return nil
	}
}

// StopLogging stops keeping the actions and signals that Applied and
// Signals return: a long simulation sends millions of actions, and the
// log would hold every one of them.
func (s *Slurm) StopLogging() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unlogged = true
	s.applied, s.signals = nil, map[bridge.JobID][]string{}
}

// Applied returns the actions that took effect, in order.
func (s *Slurm) Applied() []bridge.Action {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]bridge.Action(nil), s.applied...)
}

// Signals returns the signals sent to a job, in order.
func (s *Slurm) Signals(id bridge.JobID) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.signals[id]...)
}

// Snapshot implements bridge.Reader.
func (s *Slurm) Snapshot(ctx context.Context) (*bridge.Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("fake snapshot: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.snapshotErr != nil {
		return nil, fmt.Errorf("fake snapshot: %w", s.snapshotErr)
	}
	nodes := make([]bridge.Node, 0, len(s.nodes))
	for _, n := range s.nodes {
		nodes = append(nodes, n)
	}
	var hidden []bridge.JobID
	if s.hide != nil {
		hidden = s.hide(s.reads)
	}
	s.reads++
	jobs := make([]bridge.Job, 0, len(s.jobs))
	for _, j := range s.jobs {
		if !slices.Contains(hidden, j.ID) {
			jobs = append(jobs, j)
		}
	}
	snap, err := bridge.NewSnapshot(s.now(), "", nodes, jobs)
	if err != nil {
		return nil, fmt.Errorf("fake snapshot: %w", err)
	}
	// Hand out a copy so that nothing the caller holds aliases our state.
	return snap.Clone(), nil
}

// Apply implements bridge.Actuator.
func (s *Slurm) Apply(ctx context.Context, a bridge.Action) error {
	s.mu.Lock()
	hook := s.loseReply
	s.mu.Unlock()
	if hook == nil {
		return s.apply(ctx, a)
	}
	lost, landed := hook(a)
	if !lost {
		return s.apply(ctx, a)
	}
	if landed {
		if err := s.apply(ctx, a); err != nil {
			return err // refused: its answer is the refusal
		}
	}
	return bridge.NoReply(fmt.Errorf("%s: %w", a, context.DeadlineExceeded))
}

func (s *Slurm) apply(ctx context.Context, a bridge.Action) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", a, err)
	}
	if err := a.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failAction != nil {
		if err := s.failAction(a); err != nil {
			return fmt.Errorf("%s: %w", a, err)
		}
	}
	j, ok := s.jobs[a.Job]
	if !ok {
		return fmt.Errorf("%s: %w", a, ErrNoJob)
	}
	pending := j.State == bridge.JobPending
	running := j.State == bridge.JobRunning || j.State == bridge.JobSuspended
	switch a.Kind {
	case bridge.ActSetPriority:
		if !pending && !running {
			return fmt.Errorf("%s: %w", a, ErrNotPending)
		}
		if j.Held {
			return fmt.Errorf("%s: %w", a, ErrHeld)
		}
		j.Priority = int64(a.Priority)
	case bridge.ActHold:
		if !pending {
			return fmt.Errorf("%s: %w", a, ErrNotPending)
		}
		j.Held, j.Priority, j.Reason = true, 0, "JobHeldUser"
		s.adminHeld[j.ID] = true
	case bridge.ActRelease:
		if !pending {
			return fmt.Errorf("%s: %w", a, ErrNotPending)
		}
		if j.Held {
			// Slurm recomputes the priority on release.
			j.Held, j.Priority, j.Reason = false, 1, "Priority"
			delete(s.adminHeld, j.ID)
		}
	case bridge.ActResetPriority:
		if !pending {
			return fmt.Errorf("%s: %w", a, ErrNotPending)
		}
		// A release: Slurm recomputes the priority, and lifts a hold.
		j.Held, j.Priority = false, 1
		if j.Reason == "JobHeldUser" || j.Reason == "JobHeldAdmin" {
			j.Reason = "Priority"
		}
		delete(s.adminHeld, j.ID)
	case bridge.ActSetConstraints:
		if !pending {
			return fmt.Errorf("%s: %w", a, ErrNotPending)
		}
		j.Constraints = a.Constraints
	case bridge.ActSetShape:
		// Slurm 24.11 answers a node-count change on a running job with
		// no error and ignores it; the fake refuses it, so that a test
		// catches the daemon sending one.
		if !pending {
			return fmt.Errorf("%s: %w", a, ErrNotPending)
		}
		j.Nodes, j.GPUsPerNode, j.Constraints = a.Nodes, a.GPUsPerNode, a.Constraints
		j.GPUs = a.GPUs
		if a.GPUsPerNode > 0 {
			j.GPUs = a.Nodes * a.GPUsPerNode
		}
	case bridge.ActSetShare:
		if !pending {
			return fmt.Errorf("%s: %w", a, ErrNotPending)
		}
		if j.Shards == 0 && (j.GPUs != 1 || j.Nodes > 1) {
			return fmt.Errorf("%s: %w", a, ErrNotSingleGPU)
		}
		j.Shards, j.RequiredNodes, j.Constraints = a.Shards, a.Node, a.Constraints
	case bridge.ActSetArrayLimit:
		// Slurm keeps the limit with the array and shows it on every
		// record of it.
		if j.ArrayJobID == 0 {
			return fmt.Errorf("%s: %w", a, ErrNotArray)
		}
		for id, other := range s.jobs {
			if other.ArrayJobID == j.ArrayJobID && id != a.Job {
				other.ArrayLimit = a.Tasks
				s.jobs[id] = other
			}
		}
		j.ArrayLimit = a.Tasks
	case bridge.ActBeginNow:
		if !pending {
			return fmt.Errorf("%s: %w", a, ErrNotPending)
		}
		if j.Reason == "BeginTime" {
			j.Reason = "Priority"
		}
	case bridge.ActSignal:
		if !running {
			return fmt.Errorf("%s: %w", a, ErrNotRunning)
		}
		if !s.unlogged {
			s.signals[a.Job] = append(s.signals[a.Job], a.Signal)
		}
		j = s.respond(j, s.onSignal[a.Job])
	case bridge.ActRequeue, bridge.ActRequeueHold:
		// Slurm requeues running and finished batch jobs alike (a
		// finished one keeps its exit code and gains a restart).
		if pending {
			return fmt.Errorf("%s: %w", a, ErrNotRunning)
		}
		s.freeGPUs(j)
		j.State, j.Restarts = bridge.JobPending, j.Restarts+1
		j.RunningNodes, j.RunningGPUType, j.SharedGPUs = nil, "", nil
		j.StartTime = time.Time{}
		j.Reason = "BeginTime"
		if a.Kind == bridge.ActRequeueHold {
			j.Held, j.Priority, j.Reason = true, 0, "JobHeldUser"
			delete(s.adminHeld, j.ID)
		}
	}
	s.jobs[a.Job] = j
	if !s.unlogged {
		s.applied = append(s.applied, a)
	}
	return nil
}

// ApplyBatch implements bridge.BatchActuator: each action as Apply would
// carry it out, the batch recorded for Batches. Within a request of
// several updates (bridge.Requests), an action after a failed one is not
// carried out.
func (s *Slurm) ApplyBatch(ctx context.Context, actions []bridge.Action) []error {
	s.mu.Lock()
	s.batches = append(s.batches, len(actions))
	s.mu.Unlock()
	return bridge.ApplyOneByOne(ctx, actions, s.Apply)
}

// Batches returns the size of every ApplyBatch call, in order.
func (s *Slurm) Batches() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.batches...)
}

// respond carries out a script's response to a signal on job j.
func (s *Slurm) respond(j bridge.Job, r SignalResponse) bridge.Job {
	end := func(state bridge.JobState, reason string) {
		s.freeGPUs(j)
		j.State, j.Reason = state, reason
		j.RunningNodes, j.RunningGPUType, j.SharedGPUs = nil, "", nil
	}
	switch r {
	case SignalDies:
		end(bridge.JobFailed, "RaisedSignal:10(User_defined_signal_1)")
	case SignalExitsOK:
		end(bridge.JobCompleted, "None")
	case SignalExitsFailed:
		end(bridge.JobFailed, "NonZeroExitCode")
	case SignalRequeuesItself:
		end(bridge.JobPending, "BeginTime")
		j.Restarts++
		j.StartTime = time.Time{}
	}
	return j
}

func (s *Slurm) freeGPUs(j bridge.Job) {
	if len(j.RunningNodes) == 0 {
		return
	}
	if j.Shards > 0 {
		n, ok := s.nodes[j.RunningNodes[0]]
		if !ok {
			return
		}
		n.ShardUse = append([]bridge.GPUShards(nil), n.ShardUse...)
		for _, g := range j.SharedGPUs {
			if g >= 0 && g < len(n.ShardUse) {
				n.ShardUse[g].Used = max(0, n.ShardUse[g].Used-int64(j.Shards))
				if n.ShardUse[g].Used == 0 {
					n.GPUsUsed = max(0, n.GPUsUsed-1)
				}
			}
		}
		s.nodes[n.Name] = n
		return
	}
	perNode := j.GPUs / len(j.RunningNodes)
	for _, name := range j.RunningNodes {
		if n, ok := s.nodes[name]; ok {
			n.GPUsUsed = max(0, n.GPUsUsed-perNode)
			s.nodes[name] = n
		}
	}
}

var (
	_ bridge.Reader        = (*Slurm)(nil)
	_ bridge.Actuator      = (*Slurm)(nil)
	_ bridge.BatchActuator = (*Slurm)(nil)
)

// OwnerRelease is the job's owner running `scontrol release` on it: Slurm
// lets the owner release the hold a requeue-hold leaves, but not an
// administrator's hold.
func (s *Slurm) OwnerRelease(id bridge.JobID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[id]
	if !ok {
		return fmt.Errorf("release job %d: %w", id, ErrNoJob)
	}
	if !j.Held {
		return nil
	}
	if s.adminHeld[id] {
		return fmt.Errorf("release job %d: %w", id, ErrAccessDenied)
	}
	j.Held, j.Priority, j.Reason = false, 1, "Priority"
	s.jobs[id] = j
	return nil
}
