//go:build integration

package slurmtest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/internal/slurmtest"
)

// restNode is the part of a v0.0.42 node record the tests check.
type restNode struct {
	Name       string   `json:"name"`
	Gres       string   `json:"gres"`
	Features   []string `json:"features"`
	Partitions []string `json:"partitions"`
	State      []string `json:"state"`
}

// The local Slurm must offer exactly the typed GPUs its layout promises:
// every node with gpu:<type>:<n>, Feature=<type>, in the partition.
func TestNodesHaveTypedGPUs(t *testing.T) {
	env := slurmtest.FromEnv(t)
	want, err := slurmtest.ParseGPUNodes(env.GPUNodes)
	if err != nil {
		t.Fatalf("SLURM_GPU_NODES: %v", err)
	}
	var reply struct {
		Nodes []restNode `json:"nodes"`
	}
	env.GetJSON(t, "/slurm/"+slurmtest.APIVersion+"/nodes", &reply)
	// The partition holds exactly the layout's nodes (the mixed node with
	// two GPU types sits in a partition of its own).
	inPartition := 0
	for _, n := range reply.Nodes {
		if slices.Contains(n.Partitions, env.Partition) {
			inPartition++
		}
	}
	if inPartition != len(want) {
		t.Errorf("REST lists %d nodes in %s, layout %q defines %d", inPartition, env.Partition, env.GPUNodes, len(want))
	}
	for _, node := range want {
		t.Run(node.Name, func(t *testing.T) {
			i := slices.IndexFunc(reply.Nodes, func(n restNode) bool { return n.Name == node.Name })
			if i < 0 {
				t.Fatalf("node %s missing from GET /nodes", node.Name)
			}
			got := reply.Nodes[i]
			if wantGres := fmt.Sprintf("gpu:%s:%d", node.GPUType, node.GPUs); got.Gres != wantGres {
				t.Errorf("gres = %q, want %q", got.Gres, wantGres)
			}
			if !slices.Contains(got.Features, node.GPUType) {
				t.Errorf("features = %v, want %s among them", got.Features, node.GPUType)
			}
			if !slices.Contains(got.Partitions, env.Partition) {
				t.Errorf("partitions = %v, want %s among them", got.Partitions, env.Partition)
			}
			for _, bad := range []string{"DOWN", "DRAIN", "INVALID", "NOT_RESPONDING", "FAIL"} {
				if slices.Contains(got.State, bad) {
					t.Errorf("state = %v", got.State)
				}
			}
		})
	}
}

// An untyped GPU job tagged with a gavel comment, steered to one type by a
// constraint, runs to completion and sees its GPU.
func TestGPUJobRunsToCompletion(t *testing.T) {
	env := slurmtest.FromEnv(t)
	nodes, err := slurmtest.ParseGPUNodes(env.GPUNodes)
	if err != nil {
		t.Fatalf("SLURM_GPU_NODES: %v", err)
	}
	gpuType := nodes[0].GPUType
	const comment = "gavel: model=resnet50 steps=1000"
	id := env.Submit(t, "#!/bin/bash\necho \"gpus=$CUDA_VISIBLE_DEVICES node=$SLURMD_NODENAME\"\n",
		"--gres=gpu:1", "--constraint="+gpuType, "--comment="+comment, "--time=1")

	job := env.WaitState(t, id, "COMPLETED", 60*time.Second)
	if job.Comment != comment {
		t.Errorf("comment = %q, want %q", job.Comment, comment)
	}
	if job.TresPerNode != "gres/gpu:1" {
		t.Errorf("tres_per_node = %q, want gres/gpu:1", job.TresPerNode)
	}
	if !strings.HasPrefix(job.Nodes, gpuType+"-") {
		t.Errorf("ran on %q, want a %s node", job.Nodes, gpuType)
	}
	out := env.JobOutput(t, id)
	if !regexp.MustCompile(`gpus=[0-9]`).MatchString(out) {
		t.Errorf("job output %q shows no CUDA_VISIBLE_DEVICES", out)
	}
	if !strings.Contains(out, "node="+job.Nodes) {
		t.Errorf("job output %q does not name node %s", out, job.Nodes)
	}
}

// A signal sent through REST reaches the batch script, which can trap it to
// checkpoint before a requeue.
func TestSIGUSR1ThroughRESTReachesBatchScript(t *testing.T) {
	env := slurmtest.FromEnv(t)
	marker := filepath.Join(env.SharedDir, fmt.Sprintf("usr1-%d", time.Now().UnixNano()))
	t.Cleanup(func() { os.Remove(marker) })
	script := fmt.Sprintf("#!/bin/bash\ntrap 'echo caught > %s; exit 0' USR1\nfor i in $(seq 600); do sleep 0.1; done\n",
		env.JobPath(marker))
	id := env.Submit(t, script, "--gres=gpu:1", "--time=2")
	env.WaitState(t, id, "RUNNING", 30*time.Second)
	// Give bash a moment to install the trap before the signal lands.
	time.Sleep(500 * time.Millisecond)
	env.Request(t, "DELETE", fmt.Sprintf("/slurm/%s/job/%d?signal=SIGUSR1", slurmtest.APIVersion, id), nil)
	env.WaitState(t, id, "COMPLETED", 30*time.Second)
	data, err := os.ReadFile(marker)
	if err != nil || strings.TrimSpace(string(data)) != "caught" {
		t.Fatalf("trap marker: %q, %v; want \"caught\"", data, err)
	}
}

// scontrol requeue frees a running job's GPU at once; setting begin_time to
// now through REST makes it eligible again, here on another GPU type.
func TestRequeueAndMoveToAnotherType(t *testing.T) {
	env := slurmtest.FromEnv(t)
	nodes, err := slurmtest.ParseGPUNodes(env.GPUNodes)
	if err != nil {
		t.Fatalf("SLURM_GPU_NODES: %v", err)
	}
	first, second := nodes[0].GPUType, nodes[len(nodes)-1].GPUType
	if first == second {
		t.Skip("the layout has a single GPU type")
	}
	id := env.Submit(t, "#!/bin/bash\nsleep 120\n", "--gres=gpu:1", "--constraint="+first, "--time=3")
	job := env.WaitState(t, id, "RUNNING", 30*time.Second)
	if !strings.HasPrefix(job.Nodes, first+"-") {
		t.Fatalf("ran on %q, want a %s node", job.Nodes, first)
	}

	env.Scontrol(t, "requeuehold", strconv.Itoa(id))
	// The job is PENDING at once but COMPLETING until its node reports it
	// gone; only then does Slurm set the ~120 s begin time that the update
	// below must override, so wait for that.
	job = env.WaitFor(t, id, "PENDING and done completing", 15*time.Second, func(j slurmtest.Job) bool {
		return j.HasState("PENDING") && !j.HasState("COMPLETING")
	})
	if job.RestartCount != 1 || !job.Hold {
		t.Fatalf("after requeuehold: restart_cnt=%d hold=%v, want 1 and true", job.RestartCount, job.Hold)
	}
	update := map[string]any{
		"constraints": second,
		"hold":        false,
		"begin_time":  map[string]any{"set": true, "number": time.Now().Unix()},
	}
	env.PostJSON(t, fmt.Sprintf("/slurm/%s/job/%d", slurmtest.APIVersion, id), update)
	job = env.WaitState(t, id, "RUNNING", 30*time.Second)
	if !strings.HasPrefix(job.Nodes, second+"-") {
		t.Fatalf("after the move it runs on %q, want a %s node", job.Nodes, second)
	}
	env.CancelAll(t)
	env.WaitState(t, id, "CANCELLED", 15*time.Second)
}
