//go:build integration

package daemon

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/api"
	"github.com/gavel-slurm/gavel-slurm/internal/slurmtest"
)

// pairProbeScript records, from inside the job, the node and GPU it was
// given at each start, then reports 50 steps/s until the grace signal.
const pairProbeScript = `#!/bin/bash
trap 'exit 0' USR1
f=DIR/$SLURM_JOB_ID.${SLURM_RESTART_COUNT:-0}
printf 'node=%s\njob_gpus=%s\ncuda=%s\nshards=%s\n' "$SLURMD_NODENAME" "$SLURM_JOB_GPUS" "$CUDA_VISIBLE_DEVICES" "$SLURM_SHARDS_ON_NODE" >"$f.tmp"
mv "$f.tmp" "$f"
start=$(date +%s.%N)
while true; do
	sleep 1 & wait $!
	now=$(date +%s.%N)
	awk -v s="$start" -v n="$now" 'BEGIN { printf "%d %s\n", (n - s) * 50, n }' >>"$GAVEL_PROGRESS_FILE"
done
`

// sharedNodeOf finds an available v100 node whose GPUs offer an even
// number of shards each (sharingNodesOf); the test skips without one.
func sharedNodeOf(t *testing.T, env *slurmtest.Env) bridge.Node {
	t.Helper()
	nodes := sharingNodesOf(t, env)
	if len(nodes) == 0 {
		t.Skip("no available v100 node offers an even number of shards per GPU")
	}
	return nodes[0]
}

// sharingNodesOf lists the available v100 nodes whose GPUs offer an even
// number of shards each, by name, on a local Slurm started with
// SLURM_GPU_SHARDS and one_sharing (docs/space-sharing.md); the test skips
// without shards.
func sharingNodesOf(t *testing.T, env *slurmtest.Env) []bridge.Node {
	t.Helper()
	if os.Getenv("SLURM_GPU_SHARDS") == "" {
		t.Skip("SLURM_GPU_SHARDS is not set: the local Slurm shares no GPUs")
	}
	if os.Getenv("SLURM_SHARD_FLAGS") == "none" {
		t.Skip("the local Slurm's shards may use every GPU of a node (SLURM_SHARD_FLAGS=none): pairs need one_sharing")
	}
	snap, err := restClient(t, env, env.URL, env.Partition).Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []bridge.Node
	for _, n := range snap.Nodes {
		if n.Available() && n.GPUs >= 2 && n.Shards >= 2*n.GPUs && (n.Shards/n.GPUs)%2 == 0 && n.GPUType == "v100" {
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(x, y bridge.Node) int { return strings.Compare(x.Name, y.Name) })
	return out
}

// probeOf reads what pairProbeScript recorded inside job id at its start
// after restarts requeues, waiting for it a little.
func probeOf(t *testing.T, dir string, id, restarts int) map[string]string {
	t.Helper()
	path := filepath.Join(dir, fmt.Sprintf("%d.%d", id, restarts))
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		data, err := os.ReadFile(path)
		if err == nil {
			kv := map[string]string{}
			for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
				k, v, _ := strings.Cut(line, "=")
				kv[k] = v
			}
			return kv
		}
		if time.Now().After(end) {
			t.Fatalf("job %d wrote nothing at %s: %v", id, path, err)
		}
	}
}

// Under max_min_fairness_packed, on a node of four v100 GPUs that offer
// shards: two jobs that gain from sharing (A3C and ResNet-18) and three
// tagged share=no. The daemon pairs the two on one GPU, checked from
// inside both jobs and in the Prolog's record; the share=no jobs never
// ask for shards; the collector's reports of the pair are kept as the
// pair's rates, and status shows the pair, its measured rates and why the
// others never share.
func TestPackedPolicyRunsAPairOnOneGPU(t *testing.T) {
	env := slurmtest.FromEnv(t)
	if env.CollectorDir == "" {
		t.Skip("the local Slurm runs no collector Prolog (SLURM_COLLECTOR_DIR unset); restart it with scripts/slurm-up.sh")
	}
	n := sharedNodeOf(t, env)
	bin := buildBinary(t)
	// The improved mechanism, and the daemon's default, the restart
	// mechanism, whose hold (40 times a 1 s restart) keeps the jobs Slurm
	// started alone about as long as the minimum run time does.
	for _, mechanism := range []string{"improved", "restart"} {
		t.Run(mechanism, func(t *testing.T) { runPackedPair(t, env, n, bin, mechanism) })
	}
}

// runPackedPair is TestPackedPolicyRunsAPairOnOneGPU under one round
// mechanism.
func runPackedPair(t *testing.T, env *slurmtest.Env, n bridge.Node, bin, mechanism string) {
	part := ownPartition(t, env, n.Name)
	dir := t.TempDir()
	token := filepath.Join(dir, "collector.token")
	if err := os.WriteFile(token, []byte("s3cret-for-the-test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	apiAddr, reportAddr := freeAddr(t), freeAddr(t)
	config := filepath.Join(dir, "gavel-slurm.toml")
	err := os.WriteFile(config, []byte(fmt.Sprintf(`[slurm]
rest_url = %q
token_file = %q
user = %q
scontrol = %q
partitions = [%q]
[scheduler]
policy = "max_min_fairness_packed"
mechanism = %q
round = "15s"
min_run_time = "30s"
default_preempt = "checkpoint"
default_grace = "2s"
default_restart_cost = "1s"
# These rounds last seconds: no floor of 12 rounds on the hold.
restart_hold_min = "1s"
[daemon]
state_dir = %q
listen = %q
collector_listen = %q
collector_token_file = %q
collector_warm_up = "2s"
`, env.URL, os.Getenv("SLURM_JWT_FILE"), env.UserName, env.ScontrolPath, part, mechanism,
		filepath.Join(dir, "state"), apiAddr, reportAddr, token)), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	probes := filepath.Join(env.SharedDir, "pair-probe-"+strconv.Itoa(os.Getpid()))
	if err := os.MkdirAll(probes, 0o777); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(probes) })
	script := strings.ReplaceAll(pairProbeScript, "DIR", env.JobPath(probes))

	d := startDaemon(t, bin, "--config", config)
	d.waitFor(t, 60*time.Second, "first round", func(l logLine) bool { return l.Message == "round" })
	go func() {
		for l := range d.lines { // keep the daemon writing
			if os.Getenv("PAIR_TRACE") != "" && (l.Action != "" || strings.Contains(l.raw, "share")) {
				t.Logf("daemon: %s", l.raw)
			}
		}
	}()
	startCollector(t, bin, "--fake-gpus", fmt.Sprintf("v100:%d", n.GPUs), "--node", n.Name,
		"--jobs-dir", filepath.Join(env.CollectorDir, n.Name, "jobs"),
		"--progress-dir", filepath.Join(env.CollectorDir, n.Name, "progress"),
		"--proc-root", t.TempDir(), "--interval", "2s",
		"--daemon-url", "http://"+reportAddr, "--token-file", token)

	submit := func(tag string) int {
		return env.Submit(t, script, "--partition="+part, "--gres=gpu:1", "--output=/dev/null", "--comment="+tag)
	}
	a := submit(`gavel: model=a3c steps=100000000`)
	b := submit(`gavel: model="ResNet-18 (batch size 32)" steps=100000000`)
	alone := []int{
		submit(`gavel: model=a3c steps=100000000 share=no`),
		submit(`gavel: model="ResNet-18 (batch size 32)" steps=100000000 share=no`),
		submit(`gavel: model="ResNet-50 (batch size 64)" steps=100000000 share=no`),
	}

	// The pair runs, each member on shards of the node.
	client := restClient(t, env, env.URL, part)
	deadline := time.Now().Add(time.Duration(envInt("PAIR_WAIT_S", 150)) * time.Second)
	var ja, jb bridge.Job
	for {
		snap, err := client.Snapshot(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range alone {
			if j, ok := snap.Job(bridge.JobID(id)); ok && (j.Shards > 0 || j.RequiredNodes != "") {
				t.Fatalf("job %d, tagged share=no, was made a shard request: %+v", id, j)
			}
		}
		ja, _ = snap.Job(bridge.JobID(a))
		jb, _ = snap.Job(bridge.JobID(b))
		if bridge.SharesGPUWith(ja, jb) {
			break
		}
		if time.Now().After(deadline) {
			out, _ := exec.Command(bin, "status", "--server", apiAddr).CombinedOutput()
			for _, js := range fetchStatusDoc(t, apiAddr).Jobs {
				t.Logf("job %s: sharing %q, pair allocation %v", js.JobID, js.Sharing, js.PairAllocation)
			}
			t.Fatalf("jobs %d and %d never shared a GPU: %+v / %+v\nstatus:\n%s", a, b, ja, jb, out)
		}
		if os.Getenv("PAIR_TRACE") != "" {
			for _, js := range fetchStatusDoc(t, apiAddr).Jobs {
				if js.JobID == strconv.Itoa(a) || js.JobID == strconv.Itoa(b) {
					t.Logf("%s %s %s: %s", time.Now().Format("15:04:05"), js.JobID, js.State, js.Reason)
				}
			}
		}
		time.Sleep(time.Second)
	}
	// From inside: the same node and GPU, by Slurm's index and by the
	// Prolog's record the collector reads.
	inA, inB := probeOf(t, probes, a, ja.Restarts), probeOf(t, probes, b, jb.Restarts)
	t.Logf("inside %d: %v; inside %d: %v", a, inA, b, inB)
	if inA["node"] != n.Name || inB["node"] != n.Name || inA["job_gpus"] == "" || inA["job_gpus"] != inB["job_gpus"] ||
		inA["cuda"] != inB["cuda"] || inA["shards"] == "" {
		t.Fatalf("the pair does not see one GPU: %v and %v", inA, inB)
	}
	for _, id := range []int{a, b} {
		prolog, err := os.ReadFile(filepath.Join(env.CollectorDir, n.Name, "jobs", strconv.Itoa(id)))
		if err != nil || strings.TrimSpace(string(prolog)) != inA["job_gpus"] {
			t.Fatalf("Prolog's record of job %d: %q, %v; want GPU %s", id, prolog, err, inA["job_gpus"])
		}
	}

	// Status: the pair with its rates measured while sharing, and why the
	// others never share.
	var st api.Status
	for end := time.Now().Add(60 * time.Second); ; time.Sleep(2 * time.Second) {
		st = fetchStatusDoc(t, apiAddr)
		byID := map[string]api.JobStatus{}
		for _, js := range st.Jobs {
			byID[js.JobID] = js
		}
		sa, sb := byID[strconv.Itoa(a)], byID[strconv.Itoa(b)]
		if sa.SharesGPUWith == strconv.Itoa(b) && sb.SharesGPUWith == strconv.Itoa(a) &&
			sa.SharedRate != nil && sa.SharedRate.Source == "measured" && sb.SharedRate != nil && sb.SharedRate.Source == "measured" {
			if r := sa.SharedRate.StepsPerS; r < 30 || r > 70 {
				t.Errorf("job %d's measured rate while sharing: %g steps/s, want about 50", a, r)
			}
			for _, id := range alone {
				if s := byID[strconv.Itoa(id)]; !strings.Contains(s.Sharing, "share=no") || s.SharesGPUWith != "" {
					t.Errorf("job %d tagged share=no: sharing %q, shares with %q", id, s.Sharing, s.SharesGPUWith)
				}
			}
			break
		}
		if time.Now().After(end) {
			t.Fatalf("status never showed the pair with measured rates: %+v / %+v", sa, sb)
		}
	}
	out, err := exec.Command(bin, "status", "--server", apiAddr).CombinedOutput()
	if err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "shares its GPU with "+strconv.Itoa(b)) {
		t.Errorf("status text does not show the pair:\n%s", out)
	}
	t.Logf("status:\n%s", out)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}
