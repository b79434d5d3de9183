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
	"github.com/gavel-slurm/gavel-slurm/internal/sched"
	"github.com/gavel-slurm/gavel-slurm/internal/slurmtest"
	"github.com/gavel-slurm/gavel-slurm/rounds"
)

// sleeperScript is a job the daemon does not manage: it only holds its GPU.
const sleeperScript = "#!/bin/bash\nsleep 100000\n"

// A pair sent to a node that fills before the pair starts must not stay
// pinned there while another node that shares GPUs has room. Under
// max_min_fairness_packed, on two v100 nodes that offer shards: the
// second is full of jobs the daemon does not manage, the first of managed
// jobs tagged share=no and pinned to it. A job the daemon does not manage
// waits for the first node at a priority above the daemon's run priority.
// Two jobs that gain from sharing arrive; with no GPU free anywhere the
// daemon sends the pair to the first node and preempts a share=no job
// there to make room, and the waiting job takes that GPU before the pair
// can: the pair is left pinned to a full node. Then a GPU of the second
// node frees. Every round that chooses the pair from then on must send it
// there, one must within three rounds, and the pair then runs on one GPU
// of it, checked in Slurm's record and from inside both jobs.
func TestPackedPairMovesOffANodeThatFilled(t *testing.T) {
	env := slurmtest.FromEnv(t)
	nodes := sharingNodesOf(t, env)
	if len(nodes) < 2 {
		t.Skipf("%d available v100 node(s) offer an even number of shards per GPU: the pair needs two", len(nodes))
	}
	first, second := nodes[0], nodes[1]
	bin := buildBinary(t)
	part := ownPartition(t, env, first.Name, second.Name)

	const round = 10 * time.Second
	dir := t.TempDir()
	apiAddr := freeAddr(t)
	config := filepath.Join(dir, "gavel-slurm.toml")
	err := os.WriteFile(config, []byte(fmt.Sprintf(`[slurm]
rest_url = %q
token_file = %q
user = %q
scontrol = %q
partitions = [%q]
[scheduler]
policy = "max_min_fairness_packed"
mechanism = "improved"
round = %q
min_run_time = "10s"
default_preempt = "checkpoint"
default_grace = "2s"
default_restart_cost = "1s"
restart_hold_min = "1s"
[daemon]
state_dir = %q
listen = %q
`, env.URL, os.Getenv("SLURM_JWT_FILE"), env.UserName, env.ScontrolPath, part, round.String(),
		filepath.Join(dir, "state"), apiAddr)), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	probes := filepath.Join(env.SharedDir, "pair-move-probe-"+strconv.Itoa(os.Getpid()))
	if err := os.MkdirAll(probes, 0o777); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(probes) })
	script := strings.ReplaceAll(pairProbeScript, "DIR", env.JobPath(probes))

	d := startDaemon(t, bin, "--config", config)
	d.waitFor(t, 60*time.Second, "first round", func(l logLine) bool { return l.Message == "round" })
	go func() {
		for l := range d.lines { // keep the daemon writing
			if os.Getenv("PAIR_TRACE") != "" && (l.Action != "" || l.Message == "round") {
				t.Logf("daemon: %s", l.raw)
			}
		}
	}()
	client := restClient(t, env, env.URL, part)
	snapshot := func() *bridge.Snapshot {
		snap, err := client.Snapshot(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return snap
	}
	runsOn := func(j bridge.Job, node string) bool {
		return j.State == bridge.JobRunning && slices.Equal(j.RunningNodes, []string{node})
	}
	var a, b int
	story := func() string {
		out, _ := exec.Command(bin, "status", "--server", apiAddr).CombinedOutput()
		var s strings.Builder
		snap := snapshot()
		for _, id := range []int{a, b} {
			j, _ := snap.Job(bridge.JobID(id))
			fmt.Fprintf(&s, "job %d: %s on %v, held %v, %d shards, nodelist %q, reason %q\n",
				id, j.State, j.RunningNodes, j.Held, j.Shards, j.RequiredNodes, j.Reason)
		}
		for _, n := range snap.Nodes {
			fmt.Fprintf(&s, "node %s: %d/%d GPUs in use, shards %+v\n", n.Name, n.GPUsUsed, n.GPUs, n.ShardUse)
		}
		return s.String() + "status:\n" + string(out)
	}

	// The second node full of jobs the daemon leaves alone, the first of
	// managed jobs that never share and never leave it.
	var others, alone []int
	for range second.GPUs {
		others = append(others, env.Submit(t, sleeperScript, "--partition="+part, "--gres=gpu:1",
			"--output=/dev/null", "--nodelist="+second.Name))
	}
	for range first.GPUs {
		alone = append(alone, env.Submit(t, script, "--partition="+part, "--gres=gpu:1", "--output=/dev/null",
			"--nodelist="+first.Name, "--comment=gavel: model=a3c steps=100000000 share=no"))
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		snap := snapshot()
		started := 0
		for _, id := range others {
			if j, ok := snap.Job(bridge.JobID(id)); ok && runsOn(j, second.Name) {
				started++
			}
		}
		for _, id := range alone {
			if j, ok := snap.Job(bridge.JobID(id)); ok && runsOn(j, first.Name) {
				started++
			}
		}
		if started == len(others)+len(alone) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of the %d jobs that fill both nodes run", started, len(others)+len(alone))
		}
	}

	// The job that will take the first GPU the first node frees: Slurm
	// starts the highest priority first, and this one outranks every job
	// the daemon chooses.
	blocker := env.Submit(t, sleeperScript, "--partition="+part, "--gres=gpu:1", "--output=/dev/null",
		"--nodelist="+first.Name)
	env.Scontrol(t, "update", "JobId="+itoa(blocker), fmt.Sprintf("Priority=%d", 10*sched.RunPriority))

	a = env.Submit(t, script, "--partition="+part, "--gres=gpu:1", "--output=/dev/null",
		"--comment=gavel: model=a3c steps=100000000")
	b = env.Submit(t, script, "--partition="+part, "--gres=gpu:1", "--output=/dev/null",
		`--comment=gavel: model="ResNet-18 (batch size 32)" steps=100000000`)

	// The pair sent to the first node, and that node filled before the
	// pair could start there.
	pinnedTo := func(snap *bridge.Snapshot, node string) bool {
		for _, id := range []int{a, b} {
			j, ok := snap.Job(bridge.JobID(id))
			if !ok || j.State != bridge.JobPending || j.Shards == 0 || j.RequiredNodes != node {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		snap := snapshot()
		for _, id := range []int{a, b} {
			if j, _ := snap.Job(bridge.JobID(id)); j.State == bridge.JobRunning || j.State == bridge.JobSuspended {
				t.Fatalf("job %d started before the first node filled, so the test shows nothing:\n%s", id, story())
			}
		}
		if j, _ := snap.Job(bridge.JobID(blocker)); runsOn(j, first.Name) && pinnedTo(snap, first.Name) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pair never waited on %s while job %d filled it:\n%s", first.Name, blocker, story())
		}
	}
	t.Logf("jobs %d and %d wait pinned to %s, which job %d filled", a, b, first.Name, blocker)

	// A GPU of the second node frees. Every round from then on that
	// chooses the pair must send it there: the rounds may keep the pair
	// waiting a round for fairness, but never leave it chosen and pinned
	// to the full node. One must choose it within three rounds, and the
	// pair then runs on one GPU of the second node.
	env.Run(t, env.ScancelPath, itoa(others[0]))
	var freed time.Time
	for deadline := time.Now().Add(30 * time.Second); freed.IsZero(); time.Sleep(200 * time.Millisecond) {
		for _, n := range snapshot().Nodes {
			if n.Name == second.Name && n.GPUsUsed < n.GPUs {
				freed = time.Now()
			}
		}
		if freed.IsZero() && time.Now().After(deadline) {
			t.Fatalf("no GPU of %s freed after job %d was cancelled:\n%s", second.Name, others[0], story())
		}
	}
	sentThere := func(j bridge.Job) bool {
		return runsOn(j, second.Name) ||
			j.State == bridge.JobPending && !j.Held && j.Shards > 0 && j.RequiredNodes == second.Name
	}
	var moved time.Time
	var ja, jb bridge.Job
	var checked uint64 // the last round whose choice was checked
	for deadline := freed.Add(4*round + 30*time.Second); ; time.Sleep(500 * time.Millisecond) {
		// Status first: the round published it after its actions, so the
		// snapshot read next shows what the round sent.
		st := fetchStatusDoc(t, apiAddr)
		snap := snapshot()
		ja, _ = snap.Job(bridge.JobID(a))
		jb, _ = snap.Job(bridge.JobID(b))
		if r := st.Round; r.Number > checked && r.Started.After(freed) {
			checked = r.Number
			sa, sb := findJob(t, st, a), findJob(t, st, b)
			if sa.Decision == rounds.Run.String() && sb.Decision == rounds.Run.String() && !(sentThere(ja) && sentThere(jb)) {
				t.Fatalf("round %d chose the pair (%q) but left it off %s, where a GPU is free:\n%s",
					r.Number, sa.Reason, second.Name, story())
			}
		}
		if moved.IsZero() && sentThere(ja) && sentThere(jb) {
			moved = time.Now()
			t.Logf("the pair was sent to %s %v after a GPU there freed", second.Name, moved.Sub(freed).Round(time.Second))
		}
		for _, j := range []bridge.Job{ja, jb} {
			if (j.State == bridge.JobRunning || j.State == bridge.JobSuspended) && !runsOn(j, second.Name) {
				t.Fatalf("job %d runs on %v, not on %s where a GPU freed:\n%s", j.ID, j.RunningNodes, second.Name, story())
			}
		}
		if moved.IsZero() && time.Since(freed) > 3*round+5*time.Second {
			t.Fatalf("the pair stayed pinned to the full node %s for three rounds after a GPU of %s freed:\n%s",
				first.Name, second.Name, story())
		}
		if bridge.SharesGPUWith(ja, jb) && runsOn(ja, second.Name) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobs %d and %d never shared a GPU of %s:\n%s", a, b, second.Name, story())
		}
	}
	if j, _ := snapshot().Job(bridge.JobID(blocker)); !runsOn(j, first.Name) {
		t.Errorf("job %d, which filled %s, no longer runs there: %+v", blocker, first.Name, j)
	}

	// From inside: the same node and GPU, by Slurm's index, and by the
	// Prolog's record where the local Slurm keeps one.
	inA, inB := probeOf(t, probes, a, ja.Restarts), probeOf(t, probes, b, jb.Restarts)
	t.Logf("inside %d: %v; inside %d: %v", a, inA, b, inB)
	if inA["node"] != second.Name || inB["node"] != second.Name || inA["job_gpus"] == "" ||
		inA["job_gpus"] != inB["job_gpus"] || inA["cuda"] != inB["cuda"] || inA["shards"] == "" {
		t.Fatalf("the pair does not see one GPU of %s: %v and %v", second.Name, inA, inB)
	}
	if env.CollectorDir != "" {
		for _, id := range []int{a, b} {
			prolog, err := os.ReadFile(filepath.Join(env.CollectorDir, second.Name, "jobs", strconv.Itoa(id)))
			if err != nil || strings.TrimSpace(string(prolog)) != inA["job_gpus"] {
				t.Errorf("Prolog's record of job %d: %q, %v; want GPU %s", id, prolog, err, inA["job_gpus"])
			}
		}
	}

	// The daemon knows the pair it started.
	for end := time.Now().Add(2*round + 10*time.Second); ; time.Sleep(time.Second) {
		st := fetchStatusDoc(t, apiAddr)
		if findJob(t, st, a).SharesGPUWith == itoa(b) && findJob(t, st, b).SharesGPUWith == itoa(a) {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("status never showed jobs %d and %d as a pair:\n%s", a, b, story())
		}
	}
}
