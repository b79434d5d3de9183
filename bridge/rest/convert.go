package rest

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// rawNode and rawJob are what every API version adapter extracts from its
// generated types; convert.go turns them into the bridge types once, so the
// per-version code stays a plain field copy.
type rawNode struct {
	Name       string
	Partitions []string
	Gres       string
	GresUsed   string
	Features   []string
	States     []string
}

type rawJob struct {
	ID          int64
	User        string
	Account     string
	QOS         string
	Name        string
	Partition   string
	States      []string
	Reason      string
	TresPerNode string
	TresPerJob  string
	NodeCount   int64
	Constraints string
	AllocNodes  []string
	GresDetail  []string
	Restarts    int64
	Priority    int64
	PrioritySet bool
	Hold        *bool
	// Requeue is Slurm's "may be requeued" (false for --no-requeue).
	Requeue    *bool
	SubmitTime int64
	StartTime  int64
	// EligibleTime is Slurm's eligible_time (seconds; 0 unset).
	EligibleTime int64
	Dependency   string
	Comment      string
	// RequiredNodes is the job's --nodelist ("" for none).
	RequiredNodes string
	// ArrayJobID is the job array's id (0: not part of an array);
	// ArrayTaskID the task's, when ArrayTaskSet (Slurm leaves it unset
	// on the array's own record while that holds tasks not started);
	// ArrayTasks the tasks that record holds ("2-7%2": with the limit);
	// ArrayLimit the array's limit on tasks running at once.
	ArrayJobID   int64
	ArrayTaskID  int64
	ArrayTaskSet bool
	ArrayTasks   string
	ArrayLimit   int64
	// HetJobID is a heterogeneous job's leader's id (0: not one),
	// HetJobOffset the component's index.
	HetJobID     int64
	HetJobOffset int64
	// Unreadable is set when the generated types refused the job's record
	// (see streamJobs): the fields above are then only those that
	// could be read leniently.
	Unreadable error
}

// jobUpdate is the subset of a job update the actions use.
type jobUpdate struct {
	Priority    *uint32
	Hold        *bool
	Constraints *string
	BeginTime   *int64
	// Nodes sets the minimum and maximum node count; TresPerNode and
	// TresPerJob the GPU request ("" clears one).
	Nodes       *int32
	TresPerNode *string
	TresPerJob  *string
	// ArrayLimit sets a job array's limit on tasks running at once: the
	// update's "array" field holds the number alone ("0": none), as
	// scontrol's ArrayTaskThrottle sends it.
	ArrayLimit *string
	// RequiredNodes sets the job's --nodelist; [""] clears it (Slurm
	// ignores an empty list).
	RequiredNodes *[]string
	// Dependency sets the job's dependency list ("" clears it);
	// Deadline the time (Unix seconds) by which slurmctld cancels a job
	// that cannot have ended (the lease job's, lease.go).
	Dependency *string
	Deadline   *int64
}

// maxGPUs bounds every GPU count read from Slurm, per node and per job.
// No cluster comes near it, and below it the products and sums of counts
// stay far from overflowing an int.
const maxGPUs = 1 << 20

// stateUnknown is the state given to a job whose record has none, so that
// it can still be listed (a snapshot requires a state per job). It is not
// one of the states the scheduler acts on.
const stateUnknown bridge.JobState = "UNKNOWN"

// latestTime bounds the times read from Slurm: later ones are not times
// Slurm means, and would not survive a JSON round trip of the job.
var latestTime = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)

func convertNode(r rawNode) (bridge.Node, error) {
	n := bridge.Node{Name: r.Name, Partitions: r.Partitions, Features: r.Features, State: r.States}
	count, gpuType, err := gresGPUs(r.Gres)
	if err != nil {
		return n, fmt.Errorf("node %s: %w", r.Name, err)
	}
	usedCount, _, err := gresGPUs(r.GresUsed)
	if err != nil {
		return n, fmt.Errorf("node %s used: %w", r.Name, err)
	}
	n.GPUs, n.GPUType, n.GPUsUsed = count, gpuType, usedCount
	if err := nodeShards(&n, r); err != nil {
		return n, fmt.Errorf("node %s: %w", r.Name, err)
	}
	return n, nil
}

// gresGPUs parses a GRES list and returns its GPU count and type. Each
// entry's count and the total are bounded by maxGPUs, so that a corrupt
// count cannot overflow into a negative total. On a list mixing GPU types
// it returns the (bounded) total with the error, since the number of GPUs
// is still known.
func gresGPUs(s string) (int, string, error) {
	list, err := bridge.ParseGRESList(s)
	if err != nil {
		return 0, "", err
	}
	for _, g := range list {
		if g.Name == "gpu" && g.Count > maxGPUs {
			return 0, "", fmt.Errorf("gres %q: %d GPUs in one entry is more than the %d this scheduler reads", s, g.Count, maxGPUs)
		}
	}
	// The entries are bounded, so the sum cannot overflow (a string holds
	// far fewer than 2^40 entries).
	count, gpuType, err := bridge.GPUs(list)
	if count > maxGPUs {
		return 0, "", fmt.Errorf("gres %q: %d GPUs in all is more than the %d this scheduler reads", s, count, maxGPUs)
	}
	if err != nil {
		return int(count), "", fmt.Errorf("gres %q: %w", s, err)
	}
	return int(count), gpuType, nil
}

// convertJob turns one job record into a bridge.Job. Only a record without
// a usable job id is an error: such a job cannot be named, and leaving it
// out would make the daemon believe it ended. Every other problem with the
// record (a GRES list naming several GPU types, an out-of-range count, no
// state) leaves the job in the snapshot, filled as far as it could be read,
// with Unreadable saying why, so that one odd job does not stop the
// scheduling of every other.
func convertJob(r rawJob, nodes map[string]bridge.Node) (bridge.Job, error) {
	if r.ID <= 0 || r.ID > math.MaxUint32 {
		if r.Unreadable != nil {
			return bridge.Job{}, fmt.Errorf("job record without a usable job id (%d): %w", r.ID, r.Unreadable)
		}
		return bridge.Job{}, fmt.Errorf("job with id %d", r.ID)
	}
	j := bridge.Job{
		ID:          bridge.JobID(r.ID),
		User:        r.User,
		Account:     r.Account,
		QOS:         r.QOS,
		Name:        r.Name,
		Partition:   r.Partition,
		Reason:      r.Reason,
		Constraints: r.Constraints,
		Restarts:    int(min(max(r.Restarts, 0), math.MaxInt32)),
		Priority:    r.Priority,
		Nodes:       int(min(max(r.NodeCount, 1), math.MaxInt32)),
		NoRequeue:   r.Requeue != nil && !*r.Requeue,
	}
	var problems []error
	if r.Unreadable != nil {
		problems = append(problems, r.Unreadable)
	}
	if len(r.States) == 0 || r.States[0] == "" {
		j.State = stateUnknown
		problems = append(problems, errors.New("no state"))
	} else {
		j.State, j.StateFlags = bridge.JobState(r.States[0]), r.States[1:]
	}
	switch {
	case r.Hold != nil:
		j.Held = *r.Hold
	default:
		j.Held = r.PrioritySet && r.Priority == 0 && j.State == bridge.JobPending
	}
	var err error
	if j.SubmitTime, err = unixTime(r.SubmitTime); err != nil {
		problems = append(problems, fmt.Errorf("submit_time: %w", err))
	}
	if j.StartTime, err = unixTime(r.StartTime); err != nil {
		problems = append(problems, fmt.Errorf("start_time: %w", err))
	}
	if j.EligibleTime, err = unixTime(r.EligibleTime); err != nil {
		problems = append(problems, fmt.Errorf("eligible_time: %w", err))
	}
	j.Dependency = r.Dependency
	j.RequiredNodes = r.RequiredNodes
	if err := requestedGPUs(&j, r); err != nil {
		problems = append(problems, err)
	}
	if err := requestedShards(&j, r); err != nil {
		problems = append(problems, err)
	}
	if err := placement(&j, r, nodes); err != nil {
		problems = append(problems, err)
	}
	if err := jobSharedGPUs(&j, r); err != nil {
		problems = append(problems, err)
	}
	if err := arrayAndHet(&j, r); err != nil {
		problems = append(problems, err)
	}
	j = j.WithComment(r.Comment)
	j.Unreadable = joinProblems(problems...)
	return j, nil
}

// unixTime converts Slurm's seconds since the epoch; 0 or less means
// unset.
func unixTime(sec int64) (time.Time, error) {
	if sec <= 0 {
		return time.Time{}, nil
	}
	if sec > latestTime.Unix() {
		return time.Time{}, fmt.Errorf("%d is not a time", sec)
	}
	return time.Unix(sec, 0).UTC(), nil
}

// problemList is several reasons a job record could not be read, on one
// line (the daemon shows the reason in status and logs).
type problemList []error

func (p problemList) Error() string {
	msgs := make([]string, len(p))
	for i, e := range p {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "; ")
}

func (p problemList) Unwrap() []error { return p }

// joinProblems returns nil, the one error, or the list of the non-nil
// errors.
func joinProblems(errs ...error) error {
	var list problemList
	for _, e := range errs {
		if e != nil {
			list = append(list, e)
		}
	}
	switch len(list) {
	case 0:
		return nil
	case 1:
		return list[0]
	}
	return list
}

// requestedGPUs reads the GPU request from tres_per_node (times the node
// count) or tres_per_job. It fills what it can read even when it returns
// an error: a request naming several GPU types still has a GPU count.
func requestedGPUs(j *bridge.Job, r rawJob) error {
	nodeGPUs, nodeType, nodeErr := gresGPUs(r.TresPerNode)
	if nodeErr != nil {
		nodeErr = fmt.Errorf("tres_per_node: %w", nodeErr)
	}
	jobGPUs, jobType, jobErr := gresGPUs(r.TresPerJob)
	if jobErr != nil {
		jobErr = fmt.Errorf("tres_per_job: %w", jobErr)
	}
	switch {
	case nodeGPUs > 0:
		j.GPUsPerNode = nodeGPUs
		j.RequestedGPUType = nodeType
		// Both factors are bounded, so the product cannot overflow; it
		// is bounded in turn.
		total := int64(nodeGPUs) * int64(j.Nodes)
		if total > maxGPUs {
			return joinProblems(nodeErr, jobErr, fmt.Errorf("%d GPUs per node on %d nodes is more than the %d this scheduler reads", nodeGPUs, j.Nodes, maxGPUs))
		}
		j.GPUs = int(total)
	case jobGPUs > 0:
		j.GPUs = jobGPUs
		j.RequestedGPUType = jobType
	}
	return joinProblems(nodeErr, jobErr)
}

// placement fills where a job runs: its allocated nodes and their GPU type,
// from gres_detail when it names a type, else from the nodes' own GRES.
func placement(j *bridge.Job, r rawJob, nodes map[string]bridge.Node) error {
	if len(r.AllocNodes) == 0 {
		return nil
	}
	if j.State != bridge.JobRunning && j.State != bridge.JobSuspended {
		// Finished jobs keep their allocation in the reply; only jobs that
		// hold GPUs now have a placement.
		return nil
	}
	j.RunningNodes = append([]string(nil), r.AllocNodes...)
	for i, name := range r.AllocNodes {
		gpuType := ""
		if i < len(r.GresDetail) {
			detail, err := bridge.ParseGRESList(r.GresDetail[i])
			if err != nil {
				return fmt.Errorf("gres_detail: %w", err)
			}
			if _, t, err := bridge.GPUs(detail); err == nil {
				gpuType = t
			}
		}
		if gpuType == "" {
			gpuType = nodes[name].GPUType
		}
		if gpuType == "" {
			continue
		}
		if j.RunningGPUType != "" && j.RunningGPUType != gpuType {
			// An untyped multi-node job may straddle types; it then has no
			// single type, which the scheduler treats as unknown.
			j.RunningGPUType = ""
			return nil
		}
		j.RunningGPUType = gpuType
	}
	return nil
}

// arrayAndHet fills what the record says of a job array or a
// heterogeneous job it is part of. Slurm writes 0 for "none" in both ids,
// and leaves the task id unset on an array's own record while that holds
// tasks not started; NO_VAL as a task id is read as unset too.
func arrayAndHet(j *bridge.Job, r rawJob) error {
	var problems []error
	if r.HetJobID > 0 && r.HetJobID <= math.MaxUint32 {
		j.HetJobID = bridge.JobID(r.HetJobID)
		j.HetJobOffset = int(min(max(r.HetJobOffset, 0), math.MaxInt32))
	}
	if r.ArrayJobID <= 0 || r.ArrayJobID > math.MaxUint32 {
		return nil
	}
	j.ArrayJobID = bridge.JobID(r.ArrayJobID)
	j.ArrayLimit = int(min(max(r.ArrayLimit, 0), bridge.MaxArrayTask+1))
	tasks, _, _ := strings.Cut(r.ArrayTasks, "%")
	switch {
	case r.ArrayTaskSet && r.ArrayTaskID >= 0 && r.ArrayTaskID <= bridge.MaxArrayTask:
		j.ArrayTaskID = uint32(r.ArrayTaskID)
	case r.ArrayTaskSet && r.ArrayTaskID < math.MaxUint32-1:
		problems = append(problems, fmt.Errorf("array task id %d is above any Slurm gives", r.ArrayTaskID))
		// Named as the array's own record, which the daemon never
		// names alone in a command.
		j.ArrayTasks = "?"
	case tasks == "":
		// The array's own record without its tasks: not a record the
		// daemon could act on without touching the whole array.
		j.ArrayTasks = "?"
		if j.Active() {
			problems = append(problems, errors.New("job array record without its task id or its tasks"))
		}
	default:
		j.ArrayTasks = tasks
		if _, _, err := bridge.ArrayTaskIDs(tasks, 0); err != nil {
			problems = append(problems, err)
		}
	}
	return joinProblems(problems...)
}
