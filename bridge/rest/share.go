package rest

import (
	"fmt"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// Space sharing through Slurm's gres/shard (docs/space-sharing.md): what
// the snapshot reads of nodes' and jobs' shards, and the update that makes
// a pending job ask for shards of one GPU on one node, or for a whole GPU
// again.

// maxShards bounds every shard count read from Slurm, as maxGPUs bounds
// GPU counts.
const maxShards = 1 << 24

// nodeShards fills the node's shards from its gres ("shard:v100:8") and
// their use from its gres_used ("shard:v100:2(2/2,0/2,0/2,0/2)"), and
// counts a GPU whose shards are in use as used: Slurm's gres_used counts
// it under shard only, and no job can get it whole.
func nodeShards(n *bridge.Node, r rawNode) error {
	list, err := bridge.ParseGRESList(r.Gres)
	if err != nil {
		return err
	}
	count, _, err := bridge.Shards(list)
	if err != nil {
		return fmt.Errorf("gres %q: %w", r.Gres, err)
	}
	if count > maxShards {
		return fmt.Errorf("gres %q: %d shards is more than the %d this scheduler reads", r.Gres, count, maxShards)
	}
	n.Shards = int(count)
	if count == 0 {
		return nil
	}
	used, err := bridge.ParseGRESList(r.GresUsed)
	if err != nil {
		return err
	}
	_, perGPU, err := bridge.Shards(used)
	if err != nil {
		return fmt.Errorf("gres_used %q: %w", r.GresUsed, err)
	}
	if len(perGPU) > n.GPUs {
		return fmt.Errorf("gres_used %q: shards of %d GPUs on a node of %d", r.GresUsed, len(perGPU), n.GPUs)
	}
	n.ShardUse = perGPU
	n.GPUsUsed = min(n.GPUs, n.GPUsUsed+len(bridge.SharedGPUs(perGPU)))
	return nil
}

// requestedShards reads the shards a job asks for per node from
// tres_per_node ("gres/shard:1"). A job that asks for shards and no GPUs
// is counted as one GPU per node: Slurm takes a job's shards on a node
// from a single GPU (unless the site sets MULTIPLE_SHARING_GRES_PJ).
func requestedShards(j *bridge.Job, r rawJob) error {
	list, err := bridge.ParseGRESList(r.TresPerNode)
	if err != nil {
		// requestedGPUs has reported it.
		return nil
	}
	count, _, err := bridge.Shards(list)
	if err != nil {
		return fmt.Errorf("tres_per_node: %w", err)
	}
	if count > maxShards {
		return fmt.Errorf("tres_per_node %q: %d shards is more than the %d this scheduler reads", r.TresPerNode, count, maxShards)
	}
	j.Shards = int(count)
	if count > 0 && j.GPUs == 0 {
		j.GPUsPerNode, j.GPUs = 1, j.Nodes
	}
	return nil
}

// jobSharedGPUs fills the indices of the GPUs whose shards a running
// single-node job holds, from its gres_detail ("shard:1(0/2,1/2,0/2,0/2)":
// GPU 1).
func jobSharedGPUs(j *bridge.Job, r rawJob) error {
	if j.Shards == 0 || len(j.RunningNodes) != 1 || len(r.GresDetail) == 0 {
		return nil
	}
	detail, err := bridge.ParseGRESList(r.GresDetail[0])
	if err != nil {
		// placement has reported it.
		return nil
	}
	_, perGPU, err := bridge.Shards(detail)
	if err != nil {
		return fmt.Errorf("gres_detail: %w", err)
	}
	j.SharedGPUs = bridge.SharedGPUs(perGPU)
	return nil
}

// shareUpdate fills the update ActSetShare sends, in one request so that
// the job is never seen half changed: shards of one GPU on the action's
// node, or one whole GPU on any node. The node list is cleared with [""]:
// Slurm ignores an empty list.
func shareUpdate(u *jobUpdate, act bridge.Action) {
	one := int32(1)
	perNode, perJob, nodes := "gres/gpu:1", "", []string{""}
	if act.Shards > 0 {
		perNode, nodes = fmt.Sprintf("gres/shard:%d", act.Shards), []string{act.Node}
	}
	constraints := act.Constraints
	u.Nodes, u.TresPerNode, u.TresPerJob, u.Constraints, u.RequiredNodes = &one, &perNode, &perJob, &constraints, &nodes
}
