package bridge

import (
	"fmt"
	"sort"
	"strconv"
	"time"
)

// Snapshot is an immutable view of the managed partitions at one moment.
// Readers build a fresh one per call and never change it afterwards;
// consumers must not modify its slices or maps either (Clone gives a copy to
// change).
type Snapshot struct {
	// Taken is when the reader asked Slurm for this view.
	Taken time.Time `json:"taken"`
	// APIVersion is the slurmrestd API version the view was read through
	// ("v0.0.42"), empty for in-memory readers.
	APIVersion string `json:"api_version,omitempty"`
	// Nodes sorted by name.
	Nodes []Node `json:"nodes"`
	// Jobs sorted by ID.
	Jobs []Job `json:"jobs"`
	// Elsewhere are pending jobs with a gavel: tag outside the managed
	// partitions, sorted by ID: a job the daemon managed that was moved
	// there, or whose partition it no longer manages, is handed back from
	// what they show. Readers that cannot tell leave it empty.
	Elsewhere []Job `json:"elsewhere,omitempty"`
	// Accounting is slurmdbd's limits and account tree, nil where the
	// reader cannot tell: no slurmdbd, or it did not answer this time
	// (AccountingError says why). The daemon then judges limits from the
	// jobs' reasons alone.
	Accounting      *Accounting `json:"accounting,omitempty"`
	AccountingError string      `json:"accounting_error,omitempty"`
	// RunningOutside are the running jobs with GPUs outside the managed
	// partitions, sorted by ID, whose GPUs count against the same limits;
	// filled only where Accounting is.
	RunningOutside []Running `json:"running_outside,omitempty"`
}

// Node is one compute node.
type Node struct {
	Name       string   `json:"name"`
	Partitions []string `json:"partitions,omitempty"`
	// GPUType is the node's GPU type from its GRES ("v100"); empty when the
	// node has no GPUs or only untyped ones.
	GPUType string `json:"gpu_type,omitempty"`
	// GPUs is the number of GPUs the node has.
	GPUs int `json:"gpus"`
	// GPUsUsed is the number of those GPUs allocated to jobs now, whole
	// or in shards: a GPU any of whose shards is allocated counts, since
	// no job can get it whole.
	GPUsUsed int `json:"gpus_used"`
	// Shards is the number of GPU shards (gres/shard) the node offers, 0
	// where its GPUs are not shared; ShardUse is how every GPU's shards
	// are used, by GPU index, when Slurm says (docs/space-sharing.md).
	Shards   int         `json:"shards,omitempty"`
	ShardUse []GPUShards `json:"shard_use,omitempty"`
	Features []string    `json:"features,omitempty"`
	// State holds Slurm's base state then its flags ("IDLE", "MIXED",
	// "DRAIN", "DOWN", "NOT_RESPONDING", ...).
	State []string `json:"state"`
	// Unreadable is set when the node's GPUs cannot be read (its GRES
	// names several GPU types, which one GPU type per node cannot
	// describe): the node is left out of scheduling, with this reason,
	// instead of failing the whole snapshot.
	Unreadable error `json:"-"`
}

// Available reports whether new work may be placed on the node: it is up
// and neither drained nor being drained.
func (n Node) Available() bool {
	if n.Unreadable != nil {
		return false
	}
	for _, s := range n.State {
		switch s {
		case "DOWN", "DRAIN", "DRAINING", "DRAINED", "FAIL", "FAILING", "NOT_RESPONDING",
			"FUTURE", "INVALID", "INVALID_REG", "MAINTENANCE", "REBOOT_REQUESTED", "REBOOT_ISSUED",
			"POWERED_DOWN", "POWERING_DOWN", "POWER_DOWN", "POWER_DOWN_ASAP", "POWER_DOWN_FORCE",
			// API v0.0.44 on: a node blocked by a reservation's or a
			// topology's rules, or one Slurm does not schedule itself.
			"BLOCKED", "EXTERNAL", "UNKNOWN":
			return false
		}
	}
	return len(n.State) > 0
}

// JobID is a Slurm job id.
type JobID uint32

func (id JobID) String() string { return strconv.FormatUint(uint64(id), 10) }

// ParseJobID reads a Slurm job id as String writes it: decimal, with no
// sign, leading zero or space, so that each id has one spelling.
func ParseJobID(s string) (JobID, error) {
	id, err := strconv.ParseUint(s, 10, 32)
	if err != nil || strconv.FormatUint(id, 10) != s {
		return 0, fmt.Errorf("job id %q is not a Slurm job id", s)
	}
	return JobID(id), nil
}

// JobState is a job's base state as Slurm names it.
type JobState string

// The job states the scheduler acts on; Slurm has more (COMPLETING is a flag
// in newer versions), which pass through unchanged.
const (
	JobPending   JobState = "PENDING"
	JobRunning   JobState = "RUNNING"
	JobSuspended JobState = "SUSPENDED"
	JobCompleted JobState = "COMPLETED"
	JobCancelled JobState = "CANCELLED"
	JobFailed    JobState = "FAILED"
	JobTimeout   JobState = "TIMEOUT"
	JobNodeFail  JobState = "NODE_FAIL"
	JobPreempted JobState = "PREEMPTED"
	JobOOM       JobState = "OUT_OF_MEMORY"
	JobBootFail  JobState = "BOOT_FAIL"
	JobDeadline  JobState = "DEADLINE"
)

// Job is one Slurm job in a managed partition.
type Job struct {
	ID   JobID  `json:"id"`
	User string `json:"user"`
	// Account and QOS are the Slurm account and QOS the job is charged
	// to; site rules map them to entities and weights.
	Account   string   `json:"account,omitempty"`
	QOS       string   `json:"qos,omitempty"`
	Name      string   `json:"name"`
	Partition string   `json:"partition"`
	State     JobState `json:"state"`
	// StateFlags are the flags Slurm adds to the base state (COMPLETING,
	// REQUEUED, ...).
	StateFlags []string `json:"state_flags,omitempty"`
	// Reason is Slurm's state reason ("Priority", "Resources",
	// "JobHeldUser", "None").
	Reason string `json:"reason,omitempty"`
	// GPUs is the number of GPUs the job asks for in all (per node times
	// nodes, or per job).
	GPUs int `json:"gpus"`
	// GPUsPerNode is the per-node request when the job gives one, else 0.
	GPUsPerNode int `json:"gpus_per_node,omitempty"`
	// Nodes is the number of nodes the job asks for (or runs on).
	Nodes int `json:"nodes"`
	// Shards is the number of GPU shards (gres/shard) the job asks for on
	// each node: it shares a GPU with other jobs. Slurm takes a job's
	// shards on a node from one GPU, so a job that asks for shards and no
	// GPUs counts as one GPU per node in GPUs and GPUsPerNode.
	Shards int `json:"shards,omitempty"`
	// SharedGPUs are the indices, on its node, of the GPUs a running job's
	// shards live on (from its gres_detail); two jobs on one node with the
	// same index share that GPU.
	SharedGPUs []int `json:"shared_gpus,omitempty"`
	// RequiredNodes is the job's --nodelist as Slurm shows it ("v100-1"),
	// empty when it names none.
	RequiredNodes string `json:"required_nodes,omitempty"`
	// RequestedGPUType is the type of a typed request ("gpu:v100:2"); empty
	// for untyped requests, which the scheduler steers with constraints.
	RequestedGPUType string `json:"requested_gpu_type,omitempty"`
	// Constraints is the job's --constraint expression.
	Constraints string `json:"constraints,omitempty"`
	// RunningGPUType and RunningNodes say where a running job is.
	RunningGPUType string   `json:"running_gpu_type,omitempty"`
	RunningNodes   []string `json:"running_nodes,omitempty"`
	// Restarts counts requeues (Slurm's restart_cnt).
	Restarts int `json:"restarts"`
	// NoRequeue is set when Slurm may not requeue the job (sbatch
	// --no-requeue, or JobRequeue=0 without --requeue): preempting it
	// would end it for good, so it is never preempted.
	NoRequeue bool `json:"no_requeue,omitempty"`
	// Priority is the job's current priority.
	Priority int64 `json:"priority"`
	// Held is true for a user or admin hold (priority 0), and for a job
	// that waits on the daemon's lease (LeaseHeld).
	Held bool `json:"held"`
	// LeaseHeld is set for a pending job that depends on the daemon's
	// lease job: the daemon keeps it waiting, and only until its lease
	// runs out (bridge/rest/lease.go). Dependency then leaves the lease
	// out.
	LeaseHeld  bool      `json:"lease_held,omitempty"`
	SubmitTime time.Time `json:"submit_time"`
	// Dependency is the job's dependency list as Slurm shows it
	// ("afterok:12(unfulfilled)"); empty when it has none. Slurm shows it
	// on held jobs too, whose reason names only the hold.
	Dependency string `json:"dependency,omitempty"`
	// EligibleTime is the earliest time Slurm may start a pending job: a
	// begin time its owner set (--begin), or the delay Slurm puts on a
	// requeued job; zero when none is set.
	EligibleTime time.Time `json:"eligible_time,omitempty"`
	// StartTime is when the job started, or Slurm's expected start for a
	// pending job; zero when unknown.
	StartTime time.Time `json:"start_time,omitempty"`
	Comment   string    `json:"comment,omitempty"`
	// Tag is the parsed gavel: tag; meaningful only when TagErr is nil.
	Tag Tag `json:"tag"`
	// TagErr says why the job is not managed: ErrNoTag when the comment has
	// no tag, another error when the tag does not parse.
	TagErr error `json:"-"`
	// Unreadable is set when Slurm's record of the job could not be read
	// (a GRES list naming several GPU types, a count that overflows): the
	// job is left to Slurm with this reason instead of failing the whole
	// snapshot.
	Unreadable error `json:"-"`

	// Job arrays. Slurm keeps an array's tasks that have not started in
	// one record, the array's own (its id is the array's id, ArrayTasks
	// lists the tasks, and its request is each task's), and gives every
	// task it starts, or that is updated on its own, a record of its own
	// (ArrayTaskID set, a job id of its own, except the last task, which
	// takes over the array's record and id). ArrayJobID is 0 for a job
	// that is not part of an array.
	ArrayJobID  JobID  `json:"array_job_id,omitempty"`
	ArrayTaskID uint32 `json:"array_task_id,omitempty"`
	// ArrayTasks is Slurm's expression of the tasks the array's own
	// record still holds ("2-7", "1,3,5-9:2"), without the "%N" of its
	// limit; empty for every other record ("?" for a record of an array
	// that names neither its task nor its tasks: it is unreadable).
	ArrayTasks string `json:"array_tasks,omitempty"`
	// ArrayLimit is the most tasks of the array Slurm runs at once
	// (ArrayTaskThrottle, "--array=0-7%2"); 0 for none. Slurm shows it on
	// every record of the array.
	ArrayLimit int `json:"array_limit,omitempty"`
	// HetJobID is the leader's job id for a component of a heterogeneous
	// job (0 otherwise), HetJobOffset the component's index. Each
	// component is a record of its own; Slurm starts them together.
	HetJobID     JobID `json:"het_job_id,omitempty"`
	HetJobOffset int   `json:"het_job_offset,omitempty"`
}

// ElsewhereJob returns the pending job id outside the managed partitions
// (Snapshot.Elsewhere), if the reader showed it.
func (s *Snapshot) ElsewhereJob(id JobID) (Job, bool) {
	i := sort.Search(len(s.Elsewhere), func(i int) bool { return s.Elsewhere[i].ID >= id })
	if i < len(s.Elsewhere) && s.Elsewhere[i].ID == id {
		return s.Elsewhere[i], true
	}
	return Job{}, false
}

// HoldsArrayTasks reports whether the record is a job array's own record
// that still holds tasks not started (ArrayTasks).
func (j Job) HoldsArrayTasks() bool { return j.ArrayJobID != 0 && j.ArrayTasks != "" }

// IsArrayTask reports whether the record is one task of a job array.
func (j Job) IsArrayTask() bool { return j.ArrayJobID != 0 && j.ArrayTasks == "" }

// SlurmName is how Slurm's commands name the job: "ARRAY_TASK" for a task
// of a job array (Slurm, like squeue, names the array's tasks so), the job
// id otherwise. Scontrol and slurmrestd's signal and requeue read a job
// array's own id as the whole array, every task included: a task whose
// record took over that id (the array's last) can only be named alone
// this way.
func (j Job) SlurmName() string {
	if j.IsArrayTask() {
		return fmt.Sprintf("%d_%d", j.ArrayJobID, j.ArrayTaskID)
	}
	return j.ID.String()
}

// Managed reports whether the job carries a valid gavel: tag.
func (j Job) Managed() bool { return j.TagErr == nil }

// Active reports whether the job still needs scheduling decisions.
func (j Job) Active() bool {
	return j.State == JobPending || j.State == JobRunning || j.State == JobSuspended
}

// WithComment sets the comment and its parsed tag together, so the two
// never disagree.
func (j Job) WithComment(comment string) Job {
	j.Comment = comment
	j.Tag, j.TagErr = ParseTag(comment)
	return j
}

// Job returns the job with the given id.
func (s *Snapshot) Job(id JobID) (Job, bool) {
	i := sort.Search(len(s.Jobs), func(i int) bool { return s.Jobs[i].ID >= id })
	if i < len(s.Jobs) && s.Jobs[i].ID == id {
		return s.Jobs[i], true
	}
	return Job{}, false
}

// Node returns the node with the given name.
func (s *Snapshot) Node(name string) (Node, bool) {
	i := sort.Search(len(s.Nodes), func(i int) bool { return s.Nodes[i].Name >= name })
	if i < len(s.Nodes) && s.Nodes[i].Name == name {
		return s.Nodes[i], true
	}
	return Node{}, false
}

// GPUTypes returns the number of GPUs of each type over the available nodes.
func (s *Snapshot) GPUTypes() map[string]int {
	out := map[string]int{}
	for _, n := range s.Nodes {
		if n.GPUType != "" && n.GPUs > 0 && n.Available() {
			out[n.GPUType] += n.GPUs
		}
	}
	return out
}

// Clone returns a deep copy that the caller may change.
func (s *Snapshot) Clone() *Snapshot {
	c := *s
	c.Nodes = make([]Node, len(s.Nodes))
	for i, n := range s.Nodes {
		n.Partitions = append([]string(nil), n.Partitions...)
		n.Features = append([]string(nil), n.Features...)
		n.State = append([]string(nil), n.State...)
		n.ShardUse = append([]GPUShards(nil), n.ShardUse...)
		c.Nodes[i] = n
	}
	c.Jobs = make([]Job, len(s.Jobs))
	for i, j := range s.Jobs {
		j.StateFlags = append([]string(nil), j.StateFlags...)
		j.RunningNodes = append([]string(nil), j.RunningNodes...)
		j.SharedGPUs = append([]int(nil), j.SharedGPUs...)
		c.Jobs[i] = j
	}
	c.RunningOutside = append([]Running(nil), s.RunningOutside...)
	if s.Accounting != nil {
		acc := Accounting{QOS: append([]QOSLimits(nil), s.Accounting.QOS...),
			Associations: make([]Association, len(s.Accounting.Associations))}
		for i, a := range s.Accounting.Associations {
			a.QOS = append([]string(nil), a.QOS...)
			acc.Associations[i] = a
		}
		c.Accounting = &acc
	}
	return &c
}

// NewSnapshot sorts nodes and jobs and checks that the view is consistent:
// unique names and ids, a state for every job, GPU counts that add up.
// Readers call it last, so that the daemon never acts on a half-understood
// reply.
func NewSnapshot(taken time.Time, apiVersion string, nodes []Node, jobs []Job) (*Snapshot, error) {
	s := &Snapshot{Taken: taken, APIVersion: apiVersion, Nodes: nodes, Jobs: jobs}
	sort.Slice(s.Nodes, func(a, b int) bool { return s.Nodes[a].Name < s.Nodes[b].Name })
	sort.Slice(s.Jobs, func(a, b int) bool { return s.Jobs[a].ID < s.Jobs[b].ID })
	for i, n := range s.Nodes {
		if n.Name == "" {
			return nil, fmt.Errorf("snapshot: node without a name")
		}
		if i > 0 && s.Nodes[i-1].Name == n.Name {
			return nil, fmt.Errorf("snapshot: node %s listed twice", n.Name)
		}
		if n.GPUs < 0 || n.GPUsUsed < 0 || n.GPUsUsed > n.GPUs {
			return nil, fmt.Errorf("snapshot: node %s: %d of %d GPUs in use", n.Name, n.GPUsUsed, n.GPUs)
		}
	}
	for i, j := range s.Jobs {
		if j.ID == 0 {
			return nil, fmt.Errorf("snapshot: job without an id")
		}
		if i > 0 && s.Jobs[i-1].ID == j.ID {
			return nil, fmt.Errorf("snapshot: job %d listed twice", j.ID)
		}
		if j.State == "" {
			return nil, fmt.Errorf("snapshot: job %d has no state", j.ID)
		}
		if j.GPUs < 0 {
			return nil, fmt.Errorf("snapshot: job %d asks for %d GPUs", j.ID, j.GPUs)
		}
	}
	return s, nil
}
