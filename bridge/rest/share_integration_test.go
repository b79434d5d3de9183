//go:build integration

package rest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// Space sharing on the local Slurm started with GPU sharing, for example
//
//	SLURM_GPU_NODES="v100:1:4 p100:1:4 k80:1:4" SLURM_GPU_SHARDS="v100:2" make slurm-up
//
// and again with SLURM_SHARD_FLAGS=none, which lets shards use every GPU
// of a node (docs/space-sharing.md). The tests skip where SLURM_GPU_SHARDS
// names no type, and check the placement of the setting the stack has.

// shardType is one GPU type whose nodes share their GPUs: its first node,
// its shards per GPU, and whether shards use one GPU of a node at a time
// (Slurm's one_sharing, which holds for every node or none).
type shardType struct {
	gpuType    string
	node       string
	perGPU     int
	oneSharing bool
}

// shardTypes reads SLURM_GPU_SHARDS and finds a node of each type in the
// snapshot.
func shardTypes(t *testing.T, c *Client) []shardType {
	t.Helper()
	spec := os.Getenv("SLURM_GPU_SHARDS")
	if spec == "" {
		t.Skip("SLURM_GPU_SHARDS is not set: the local Slurm shares no GPUs")
	}
	snap, err := c.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []shardType
	for _, entry := range strings.Fields(spec) {
		gpuType, count, _ := strings.Cut(entry, ":")
		perGPU, err := strconv.Atoi(count)
		if err != nil {
			t.Fatalf("SLURM_GPU_SHARDS entry %q: %v", entry, err)
		}
		st := shardType{gpuType: gpuType, perGPU: perGPU, oneSharing: os.Getenv("SLURM_SHARD_FLAGS") != "none"}
		for _, n := range snap.Nodes {
			if n.GPUType == st.gpuType && n.Shards > 0 && n.Available() {
				st.node = n.Name
				if n.Shards != perGPU*n.GPUs || len(n.ShardUse) != n.GPUs {
					t.Fatalf("node %s: %d shards, use %v; want %d per GPU of %d", n.Name, n.Shards, n.ShardUse, perGPU, n.GPUs)
				}
				break
			}
		}
		if st.node == "" {
			t.Fatalf("no available node of type %s offers shards: %+v", st.gpuType, snap.Nodes)
		}
		out = append(out, st)
	}
	return out
}

// pickShardType returns a type whose one_sharing setting is oneSharing,
// or skips.
func pickShardType(t *testing.T, c *Client, oneSharing bool) shardType {
	t.Helper()
	for _, st := range shardTypes(t, c) {
		if st.oneSharing == oneSharing && st.perGPU%2 == 0 {
			return st
		}
	}
	if types := shardTypes(t, c); len(types) > 0 && types[0].oneSharing != oneSharing {
		t.Skipf("the local Slurm has SLURM_SHARD_FLAGS=%s; start it with the other setting to check this case", os.Getenv("SLURM_SHARD_FLAGS"))
	}
	t.Skipf("SLURM_GPU_SHARDS names no type with an even number of shards per GPU")
	return shardType{}
}

// probeScript writes, from inside a job, what the job sees of its GPUs,
// then sleeps. It returns the script's path inside the jobs.
func probeScript(t *testing.T) (jobPath string) {
	t.Helper()
	hostDir, jobDir := os.Getenv("SLURM_SHARED_DIR"), os.Getenv("SLURM_SHARED_DIR_IN_JOB")
	if hostDir == "" || jobDir == "" {
		t.Skip("SLURM_SHARED_DIR is not set: cannot see files that jobs write")
	}
	if err := os.MkdirAll(filepath.Join(hostDir, "share-probe"), 0o777); err != nil {
		t.Fatal(err)
	}
	script := `#!/bin/sh
f=` + jobDir + `/share-probe/$SLURM_JOB_ID
printf 'node=%s\njob_gpus=%s\ncuda=%s\nshards=%s\n' "$SLURMD_NODENAME" "$SLURM_JOB_GPUS" "$CUDA_VISIBLE_DEVICES" "$SLURM_SHARDS_ON_NODE" >"$f.tmp"
mv "$f.tmp" "$f"
exec sleep 300
`
	if err := os.WriteFile(filepath.Join(hostDir, "share-probe", "probe.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return jobDir + "/share-probe/probe.sh"
}

// submitScript submits a batch script with sbatch's arguments and cancels
// the job when the test ends.
func submitScript(t *testing.T, script string, args ...string) bridge.JobID {
	t.Helper()
	all := append([]string{"--parsable", "-p", partition(), "-t", "10", "-o", "/dev/null"}, args...)
	all = append(all, script)
	out, err := exec.Command(os.Getenv("SBATCH"), all...).CombinedOutput()
	if err != nil {
		t.Fatalf("sbatch %v: %v: %s", all, err, out)
	}
	id, err := strconv.ParseUint(strings.TrimSpace(strings.Split(string(out), ";")[0]), 10, 32)
	if err != nil {
		t.Fatalf("sbatch output %q: %v", out, err)
	}
	t.Cleanup(func() { cancelJob(bridge.JobID(id)) })
	return bridge.JobID(id)
}

func cancelJob(id bridge.JobID) { _ = exec.Command(os.Getenv("SCANCEL"), id.String()).Run() }

// seenInside reads what job id wrote from inside (probeScript), and the
// Prolog's record of its GPUs on its node, waiting for both.
func seenInside(t *testing.T, id bridge.JobID, node string) (env map[string]string, prologGPUs string) {
	t.Helper()
	path := filepath.Join(os.Getenv("SLURM_SHARED_DIR"), "share-probe", id.String())
	prolog := filepath.Join(os.Getenv("SLURM_COLLECTOR_DIR"), node, "jobs", id.String())
	deadline := time.Now().Add(20 * time.Second)
	for {
		data, err := os.ReadFile(path)
		gpus, perr := os.ReadFile(prolog)
		if err == nil && (perr == nil || os.Getenv("SLURM_COLLECTOR_DIR") == "") {
			env = map[string]string{}
			for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
				k, v, _ := strings.Cut(line, "=")
				env[k] = v
			}
			return env, strings.TrimSpace(string(gpus))
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d: nothing from inside the job (%v) or from the Prolog (%v)", id, err, perr)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// sharePair sends the daemon's way of starting a pair: each held job is
// made a shard request on node (half a GPU's shards), then released.
func sharePair(t *testing.T, c *Client, st shardType, ids ...bridge.JobID) {
	t.Helper()
	ctx := context.Background()
	for _, id := range ids {
		share := bridge.Action{Kind: bridge.ActSetShare, Job: id, Shards: st.perGPU / 2, Node: st.node, Constraints: st.gpuType}
		if err := c.Apply(ctx, share); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		if err := c.Apply(ctx, bridge.Action{Kind: bridge.ActRelease, Job: id}); err != nil {
			t.Fatal(err)
		}
	}
}

func running(j bridge.Job) bool { return j.State == bridge.JobRunning }

// A pair started as shard requests on one node of a type whose shards use
// one GPU at a time runs on one GPU: the same GPU index in Slurm's record
// of both jobs, in SLURM_JOB_GPUS and CUDA_VISIBLE_DEVICES inside both,
// and in the Prolog's files; never the GPU a whole-GPU job holds.
func TestIntegrationSharedPairRunsOnOneGPU(t *testing.T) {
	c := integrationClient(t)
	st := pickShardType(t, c, true)
	script := probeScript(t)
	ctx := context.Background()

	whole := submitScript(t, script, "--gres=gpu:1", "--nodelist="+st.node)
	w := waitJob(t, c, whole, "running", running)
	wholeEnv, _ := seenInside(t, whole, st.node)

	a := submitScript(t, script, "--hold", "--gres=gpu:1")
	b := submitScript(t, script, "--hold", "--gres=gpu:1")
	for _, id := range []bridge.JobID{a, b} {
		j := waitJob(t, c, id, "held", func(j bridge.Job) bool { return j.Held })
		if j.Shards != 0 || j.GPUs != 1 {
			t.Fatalf("job %d before sharing: %+v", id, j)
		}
	}
	sharePair(t, c, st, a, b)
	ja := waitJob(t, c, a, "running", running)
	jb := waitJob(t, c, b, "running", running)

	// Slurm's record, as the bridge reads it.
	for _, j := range []bridge.Job{ja, jb} {
		if j.Shards != st.perGPU/2 || j.GPUs != 1 || j.RequiredNodes != st.node || j.RunningGPUType != st.gpuType ||
			len(j.SharedGPUs) != 1 || j.RunningNodes[0] != st.node {
			t.Fatalf("shared job as read: %+v", j)
		}
	}
	if !bridge.SharesGPUWith(ja, jb) {
		t.Fatalf("jobs %d and %d run on GPUs %v and %v of %s", a, b, ja.SharedGPUs, jb.SharedGPUs, st.node)
	}
	gpu := strconv.Itoa(ja.SharedGPUs[0])

	// Inside the jobs, and the Prolog's record.
	for _, id := range []bridge.JobID{a, b} {
		env, prolog := seenInside(t, id, st.node)
		if env["node"] != st.node || env["job_gpus"] != gpu || env["cuda"] != gpu || env["shards"] != strconv.Itoa(st.perGPU/2) {
			t.Fatalf("job %d sees %v; want GPU %s of %s", id, env, gpu, st.node)
		}
		if prolog != "" && prolog != gpu {
			t.Fatalf("the Prolog recorded GPUs %q for job %d, want %s", prolog, id, gpu)
		}
	}
	if wholeEnv["job_gpus"] == gpu || w.RunningNodes[0] != st.node {
		t.Fatalf("the pair shares GPU %s, which job %d holds whole (%v)", gpu, whole, wholeEnv)
	}
	t.Logf("jobs %d and %d share GPU %s of %s; job %d holds GPU %s whole", a, b, gpu, st.node, whole, wholeEnv["job_gpus"])

	// The node counts the shared GPU as used, with both shards on it.
	snap, err := c.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := snap.Node(st.node)
	if k := ja.SharedGPUs[0]; k >= len(n.ShardUse) || n.ShardUse[k].Used < int64(st.perGPU) || n.GPUsUsed < 2 {
		t.Fatalf("node as read: %+v", n)
	}

	// Back to a whole GPU: the request and the node list are as before.
	c3 := submitScript(t, script, "--hold", "--gres=gpu:1")
	waitJob(t, c, c3, "held", func(j bridge.Job) bool { return j.Held })
	if err := c.Apply(ctx, bridge.Action{Kind: bridge.ActSetShare, Job: c3, Shards: 1, Node: st.node, Constraints: st.gpuType}); err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, c3, "a shard request", func(j bridge.Job) bool { return j.Shards == 1 && j.RequiredNodes == st.node })
	if err := c.Apply(ctx, bridge.Action{Kind: bridge.ActSetShare, Job: c3, Constraints: st.gpuType}); err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, c3, "a whole-GPU request on any node", func(j bridge.Job) bool {
		return j.Shards == 0 && j.GPUs == 1 && j.RequiredNodes == "" && j.Constraints == st.gpuType
	})
}

// Where shards may use every GPU of a node (SLURM_SHARD_FLAGS=none), Slurm
// gives a shard request the first GPU (by index) with room. When one
// member of a pair runs on a half-used GPU and a lower GPU is free, its
// partner lands on the free one: the pair is split. Where shards use one
// GPU of a node at a time (one_sharing), the same steps put the partner
// beside it. Node pinning alone does not place a pair; one_sharing does.
func TestIntegrationShardPlacementNeedsOneSharing(t *testing.T) {
	for _, oneSharing := range []bool{false, true} {
		t.Run("one_sharing="+strconv.FormatBool(oneSharing), func(t *testing.T) {
			c := integrationClient(t)
			st := pickShardType(t, c, oneSharing)
			script := probeScript(t)
			args := []string{"--gres=shard:" + strconv.Itoa(st.perGPU/2), "--nodelist=" + st.node}

			// Two jobs fill the node's first free GPU.
			x1 := submitScript(t, script, args...)
			x2 := submitScript(t, script, args...)
			j1 := waitJob(t, c, x1, "running", running)
			j2 := waitJob(t, c, x2, "running", running)
			if !bridge.SharesGPUWith(j1, j2) {
				t.Fatalf("two shard jobs on an idle node: GPUs %v and %v", j1.SharedGPUs, j2.SharedGPUs)
			}
			// The first member of the next pair: beside them there is no
			// room, so it goes to the next GPU, or (one GPU at a time)
			// waits for theirs.
			y := submitScript(t, script, args...)
			waitJob(t, c, y, "considered", func(j bridge.Job) bool { return running(j) || j.Reason == "Resources" })
			cancelJob(x1)
			cancelJob(x2)
			jy := waitJob(t, c, y, "running", running)
			// Its partner, pinned to the same node.
			z := submitScript(t, script, args...)
			jz := waitJob(t, c, z, "running", running)

			together := bridge.SharesGPUWith(jy, jz)
			envY, _ := seenInside(t, y, st.node)
			envZ, _ := seenInside(t, z, st.node)
			if (envY["job_gpus"] == envZ["job_gpus"]) != together {
				t.Fatalf("Slurm's record (GPUs %v, %v) and the jobs (%v, %v) disagree", jy.SharedGPUs, jz.SharedGPUs, envY, envZ)
			}
			t.Logf("one_sharing=%v: the pair's first member on GPU %s, its partner on GPU %s", oneSharing, envY["job_gpus"], envZ["job_gpus"])
			if together != oneSharing {
				t.Fatalf("one_sharing=%v: the pair runs on GPUs %v and %v of %s; want together=%v", oneSharing, jy.SharedGPUs, jz.SharedGPUs, st.node, oneSharing)
			}
			if slices.Equal(jy.SharedGPUs, jz.SharedGPUs) != together {
				t.Fatalf("SharesGPUWith disagrees with the GPU lists %v and %v", jy.SharedGPUs, jz.SharedGPUs)
			}
		})
	}
}
