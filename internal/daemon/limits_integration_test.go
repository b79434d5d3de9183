//go:build integration

package daemon

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/siterules"
	"github.com/gavel-slurm/gavel-slurm/internal/slurmtest"
)

// alice and bob are the account tree's two users (scripts/slurm/
// accounts.sh): alice in physics, bob in biology. Root may submit as
// either. (Not nobody: Slurm 26.05 finds no association for uid 65534.)
var (
	alice = []string{"--uid=5001", "--gid=5001"}
	bob   = []string{"--uid=5002", "--gid=5002"}
)

// A QOS caps alice at 4 GPUs (gpu4: MaxTRESPerUser=gres/gpu=4). She
// submits 8 jobs first, bob 6 after her, on 8 GPUs, and no job may be
// preempted. Without the limits in the round, the first round chose
// alice's 8 jobs: Slurm started 4 and kept 4 for QOSMaxGRESPerUser, and 4
// GPUs idled while bob's jobs waited on the daemon. Now the round knows
// the cap: alice never runs more than 4, bob's jobs take the other 4 GPUs
// at once, and status says why alice's others wait.
func TestQOSCapIsAConstraintOfTheRound(t *testing.T) {
	env := slurmtest.FromEnv(t)
	env.RequireAccounting(t)
	part := ownPartition(t, env, "v100-1", "v100-2")
	const tag = "--comment=gavel: model=resnet50-bs64 steps=100k preempt=never"
	var alices []int
	for range 8 {
		alices = append(alices, submitHeld(t, env, "#!/bin/sh\nsleep 600\n", append([]string{"--partition=" + part,
			"--gres=gpu:1", "--qos=gpu4", "--output=/dev/null", tag}, alice...)...))
	}
	for range 6 {
		submitHeld(t, env, "#!/bin/sh\nsleep 600\n", append([]string{"--partition=" + part,
			"--gres=gpu:1", "--output=/dev/null", tag}, bob...)...)
	}

	set := Settings{Policy: "max_min_fairness_perf", AdoptAdminHolds: true, Partitions: []string{part}, Round: 15 * time.Second,
		DefaultGrace: time.Second, GraceSignal: "USR1"}
	p := newInProcess(t, restClient(t, env, env.URL, part), set)
	runDaemon(t, p)

	observer := restClient(t, env, env.URL, part)
	var idle idleWatch
	var started time.Time
	mostAlice, sawLimitReason := 0, false
	watch(t, observer, 32*time.Second, func(snap *bridge.Snapshot) bool {
		running := map[string]int{}
		bobWaits := false
		for _, j := range snap.Jobs {
			switch {
			case j.State == bridge.JobRunning:
				running[j.User]++
			case j.State == bridge.JobPending && j.User == "bob":
				bobWaits = true
			}
			if j.State == bridge.JobPending && j.User == "alice" && strings.HasPrefix(j.Reason, "QOSMax") {
				t.Errorf("alice's job %d was let go into Slurm's QOS limit (%s)", j.ID, j.Reason)
			}
		}
		mostAlice = max(mostAlice, running["alice"])
		if running["alice"]+running["bob"] > 0 && started.IsZero() {
			started = time.Now()
		}
		idle.look(!started.IsZero() && time.Since(started) > 3*time.Second && bobWaits && busyGPUs(snap) < 8)
		for _, js := range p.board.Status().Jobs {
			if strings.Contains(js.Reason, "qos gpu4 user alice") {
				sawLimitReason = true
			}
		}
		return false
	})
	t.Logf("alice ran at most %d jobs; GPUs idle at most %.1f s while bob's jobs waited; rounds %d",
		mostAlice, idle.longest.Seconds(), p.board.Status().Round.Number)
	if mostAlice > 4 {
		t.Errorf("alice ran %d jobs at once past her QOS cap of 4 GPUs", mostAlice)
	}
	if mostAlice < 4 {
		t.Errorf("alice ran at most %d jobs; her cap and her share allow 4", mostAlice)
	}
	// Jobs start within a second or two of their release; a round is 15 s.
	if idle.longest > 5*time.Second {
		t.Errorf("GPUs sat idle %.1f s while bob's jobs waited", idle.longest.Seconds())
	}
	if !sawLimitReason {
		t.Errorf("no waiting job's status names the cap: %s", statusReasons(p))
	}
}

// statusReasons lists each job's status reason, for failure messages.
func statusReasons(p *inProcess) string {
	var b strings.Builder
	for _, js := range p.board.Status().Jobs {
		fmt.Fprintf(&b, "\n  %s: %s", js.JobID, js.Reason)
	}
	return b.String()
}

// Entities from the account tree ([entities] from = "fairshare"):
// physics has 3 shares and biology 1 (scripts/slurm/accounts.sh). Alice
// (physics) and bob (biology) each submit more one-GPU jobs than the 8
// GPUs hold, under the hierarchical policy. The allocation splits the
// GPUs 6:2, and the service the two accounts receive follows 3:1: their
// jobs are preempted and resumed round after round, so physics' share of
// the GPU time must come within 0.1 of 0.75.
func TestFairShareAccountsAreTheEntities(t *testing.T) {
	env := slurmtest.FromEnv(t)
	env.RequireAccounting(t)
	part := ownPartition(t, env, "v100-1", "v100-2")
	const tag = "--comment=gavel: model=resnet50-bs64"
	account := map[int]string{}
	for range 8 {
		for _, u := range []struct {
			name string
			args []string
		}{{"physics", alice}, {"biology", bob}} {
			id := submitHeld(t, env, checkpointScript(env, "fs", 1_000_000), append([]string{"--partition=" + part,
				"--gres=gpu:1", tag}, u.args...)...)
			account[id] = u.name
		}
	}
	set := Settings{Policy: "max_min_fairness_water_filling_perf", AdoptAdminHolds: true, Partitions: []string{part},
		Round: 10 * time.Second, DefaultPreempt: bridge.PreemptCheckpoint, DefaultGrace: time.Second, GraceSignal: "USR1",
		Rules: siterules.Rules{EntitiesFrom: siterules.EntitiesFromFairShare}}
	p := newInProcess(t, restClient(t, env, env.URL, part), set)
	p.run(t, 90*time.Second)

	st := p.board.Status()
	alloc := p.board.Allocation().Rows
	allocated, received := map[string]float64{}, map[string]float64{}
	for id, acc := range account {
		js := findJob(t, st, id)
		allocated[acc] += sum(alloc[js.JobID])
		received[acc] += sum(js.Received)
	}
	t.Logf("allocation (GPUs) %v; received (GPU-seconds) %v; rounds %d", allocated, received, st.Round.Number)
	if a := allocated["physics"]; a < 5.9 || a > 6.1 || allocated["biology"] < 1.9 || allocated["biology"] > 2.1 {
		t.Errorf("allocation %v GPUs; the shares 3:1 give 6 and 2", allocated)
	}
	total := received["physics"] + received["biology"]
	if total <= 0 {
		t.Fatal("no service received")
	}
	if share := received["physics"] / total; share < 0.65 || share > 0.85 {
		t.Errorf("physics received %.2f of the GPU time; its fair share is 0.75", share)
	}
}

// An administrator raises a cap with sacctmgr while the daemon runs: the
// next round counts it, without a reload. Alice (QOS gpu4, 4 GPUs) has 8
// jobs and bob 2 on 8 GPUs: 6 run and 2 GPUs idle, since alice is at her
// cap and bob has nothing more. Once the cap is 6, the next round starts
// 2 more of alice's jobs and every GPU is busy.
func TestCapChangedWithSacctmgrCountsNextRound(t *testing.T) {
	env := slurmtest.FromEnv(t)
	env.RequireAccounting(t)
	part := ownPartition(t, env, "v100-1", "v100-2")
	const tag = "--comment=gavel: model=resnet50-bs64 steps=100k preempt=never"
	for range 8 {
		submitHeld(t, env, "#!/bin/sh\nsleep 600\n", append([]string{"--partition=" + part,
			"--gres=gpu:1", "--qos=gpu4", "--output=/dev/null", tag}, alice...)...)
	}
	for range 2 {
		submitHeld(t, env, "#!/bin/sh\nsleep 600\n", append([]string{"--partition=" + part,
			"--gres=gpu:1", "--output=/dev/null", tag}, bob...)...)
	}
	setCap := func(gpus int) {
		t.Helper()
		env.Run(t, env.SacctmgrPath, "-i", "modify", "qos", "gpu4", "set", fmt.Sprintf("MaxTRESPerUser=gres/gpu=%d", gpus))
	}
	t.Cleanup(func() { setCap(4) })

	const round = 10 * time.Second
	set := Settings{Policy: "max_min_fairness_perf", AdoptAdminHolds: true, Partitions: []string{part}, Round: round,
		DefaultGrace: time.Second, GraceSignal: "USR1"}
	p := newInProcess(t, restClient(t, env, env.URL, part), set)
	runDaemon(t, p)
	observer := restClient(t, env, env.URL, part)
	runningOf := func(snap *bridge.Snapshot, user string) int {
		n := 0
		for _, j := range snap.Jobs {
			if j.State == bridge.JobRunning && j.User == user {
				n++
			}
		}
		return n
	}
	if !watch(t, observer, 3*round, func(s *bridge.Snapshot) bool { return runningOf(s, "alice") == 4 && runningOf(s, "bob") == 2 }) {
		t.Fatalf("alice and bob did not start 4 and 2 jobs: %s", statusReasons(p))
	}
	// A round or two more: alice stays at her cap.
	time.Sleep(round + 2*time.Second)
	snap, err := observer.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if n := runningOf(snap, "alice"); n != 4 {
		t.Fatalf("alice runs %d jobs under a cap of 4 GPUs", n)
	}
	setCap(6)
	changed := time.Now()
	if !watch(t, observer, 2*round+5*time.Second, func(s *bridge.Snapshot) bool { return runningOf(s, "alice") == 6 }) {
		t.Fatalf("the raised cap did not count within two rounds: %s", statusReasons(p))
	}
	t.Logf("alice ran 6 jobs %.1f s after the cap was raised (rounds of %s)", time.Since(changed).Seconds(), round)
}
