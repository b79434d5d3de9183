package rest

import (
	"fmt"
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
	SubmitTime  int64
	StartTime   int64
	Comment     string
}

// jobUpdate is the subset of a job update the actions use.
type jobUpdate struct {
	Priority    *uint32
	Hold        *bool
	Constraints *string
	BeginTime   *int64
}

func convertNode(r rawNode) (bridge.Node, error) {
	n := bridge.Node{Name: r.Name, Partitions: r.Partitions, Features: r.Features, State: r.States}
	total, err := bridge.ParseGRESList(r.Gres)
	if err != nil {
		return n, fmt.Errorf("node %s: %w", r.Name, err)
	}
	count, gpuType, err := bridge.GPUs(total)
	if err != nil {
		return n, fmt.Errorf("node %s: %w", r.Name, err)
	}
	used, err := bridge.ParseGRESList(r.GresUsed)
	if err != nil {
		return n, fmt.Errorf("node %s used: %w", r.Name, err)
	}
	usedCount, _, err := bridge.GPUs(used)
	if err != nil {
		return n, fmt.Errorf("node %s used: %w", r.Name, err)
	}
	n.GPUs, n.GPUType, n.GPUsUsed = int(count), gpuType, int(usedCount)
	return n, nil
}

func convertJob(r rawJob, nodes map[string]bridge.Node) (bridge.Job, error) {
	if r.ID <= 0 || r.ID > 1<<32-1 {
		return bridge.Job{}, fmt.Errorf("job with id %d", r.ID)
	}
	j := bridge.Job{
		ID:          bridge.JobID(r.ID),
		User:        r.User,
		Name:        r.Name,
		Partition:   r.Partition,
		Reason:      r.Reason,
		Constraints: r.Constraints,
		Restarts:    int(r.Restarts),
		Priority:    r.Priority,
		Nodes:       int(max(r.NodeCount, 1)),
	}
	if len(r.States) == 0 {
		return j, fmt.Errorf("job %d: no state", r.ID)
	}
	j.State, j.StateFlags = bridge.JobState(r.States[0]), r.States[1:]
	switch {
	case r.Hold != nil:
		j.Held = *r.Hold
	default:
		j.Held = r.PrioritySet && r.Priority == 0 && j.State == bridge.JobPending
	}
	if r.SubmitTime > 0 {
		j.SubmitTime = time.Unix(r.SubmitTime, 0).UTC()
	}
	if r.StartTime > 0 {
		j.StartTime = time.Unix(r.StartTime, 0).UTC()
	}
	if err := requestedGPUs(&j, r); err != nil {
		return j, fmt.Errorf("job %d: %w", r.ID, err)
	}
	if err := placement(&j, r, nodes); err != nil {
		return j, fmt.Errorf("job %d: %w", r.ID, err)
	}
	return j.WithComment(r.Comment), nil
}

// requestedGPUs reads the GPU request from tres_per_node (times the node
// count) or tres_per_job.
func requestedGPUs(j *bridge.Job, r rawJob) error {
	perNode, err := bridge.ParseGRESList(r.TresPerNode)
	if err != nil {
		return fmt.Errorf("tres_per_node: %w", err)
	}
	perJob, err := bridge.ParseGRESList(r.TresPerJob)
	if err != nil {
		return fmt.Errorf("tres_per_job: %w", err)
	}
	nodeGPUs, nodeType, err := bridge.GPUs(perNode)
	if err != nil {
		return fmt.Errorf("tres_per_node: %w", err)
	}
	jobGPUs, jobType, err := bridge.GPUs(perJob)
	if err != nil {
		return fmt.Errorf("tres_per_job: %w", err)
	}
	switch {
	case nodeGPUs > 0:
		j.GPUsPerNode = int(nodeGPUs)
		j.GPUs = int(nodeGPUs) * j.Nodes
		j.RequestedGPUType = nodeType
	case jobGPUs > 0:
		j.GPUs = int(jobGPUs)
		j.RequestedGPUType = jobType
	}
	return nil
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
