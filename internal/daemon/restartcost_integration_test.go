//go:build integration

package daemon

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/internal/slurmtest"
)

// slowRestartScript is a job that takes 10 s after each start before its
// first progress line (loading its model), then reports 100 steps/s. It
// exits at the grace signal: it has nothing to save, so the daemon
// requeues it at its next look.
const slowRestartScript = `#!/bin/bash
trap 'exit 0' USR1
[ -n "$GAVEL_PROGRESS_FILE" ] || { echo "no GAVEL_PROGRESS_FILE" >&2; exit 1; }
sleep 10 & wait $!
start=$(date +%s.%N)
while true; do
	sleep 1 & wait $!
	now=$(date +%s.%N)
	awk -v s="$start" -v n="$now" 'BEGIN { printf "%d %s\n", (n - s) * 100, n }' >>"$GAVEL_PROGRESS_FILE"
done
`

// Three jobs of two GPUs whose restarts take visibly long share one
// 4-GPU node for two minutes, with 4-second rounds and no minimum run
// time. Under the improved mechanism they are restarted round after
// round; under the restart mechanism the daemon measures each restart
// (the sleep before the first progress line and the grace period used)
// and keeps a job on its GPUs for 40 times
// that, so the jobs restart fewer times, and status shows the measured
// costs.
func TestSlowRestartsAreFewerUnderTheRestartMechanism(t *testing.T) {
	env := slurmtest.FromEnv(t)
	if env.CollectorDir == "" {
		t.Skip("the local Slurm runs no collector Prolog (SLURM_COLLECTOR_DIR unset); restart it with scripts/slurm-up.sh")
	}
	bin := buildBinary(t)
	restarts := map[string]int{}
	for _, mechanism := range []string{"improved", "restart"} {
		t.Run(mechanism, func(t *testing.T) {
			n, measured, text := runSlowRestarts(t, env, bin, mechanism)
			restarts[mechanism] = n
			t.Logf("%s: %d restarts; restart costs %v", mechanism, n, measured)
			if mechanism != "restart" {
				return
			}
			if len(measured) == 0 {
				t.Fatalf("no restart cost measured:\n%s", text)
			}
			for _, c := range measured {
				// At least the 10 s before the first progress line; at
				// most that, the second to the first line (whose own
				// time the collector reports), the 2 s grace and Slurm's
				// start, with room for a slow node. The collector's
				// intervals are no part of it.
				if c < 10 || c > 20 {
					t.Errorf("measured restart cost %gs, want 10 to 20 s", c)
				}
			}
			if !strings.Contains(text, "measured") {
				t.Errorf("status does not show a measured restart cost:\n%s", text)
			}
		})
	}
	if restarts["restart"] >= restarts["improved"] || restarts["improved"] < 3 {
		t.Errorf("restarts: %d under the restart mechanism, %d under the improved one; want fewer, and the improved one's visible (at least 3)",
			restarts["restart"], restarts["improved"])
	}
}

// runSlowRestarts runs the three jobs under mechanism for two minutes and
// returns their restarts, the measured restart costs (seconds) and the
// status text.
func runSlowRestarts(t *testing.T, env *slurmtest.Env, bin, mechanism string) (int, []float64, string) {
	const node = "p100-2"
	part := ownPartition(t, env, node)
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
policy = "max_min_fairness_perf"
mechanism = %q
round = "4s"
min_run_time = "0s"
default_preempt = "checkpoint"
default_grace = "2s"
default_restart_cost = "1s"
[daemon]
state_dir = %q
listen = %q
collector_listen = %q
collector_token_file = %q
collector_warm_up = "3s"
`, env.URL, os.Getenv("SLURM_JWT_FILE"), env.UserName, env.ScontrolPath, part, mechanism,
		filepath.Join(dir, "state"), apiAddr, reportAddr, token)), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, bin, "--config", config)
	d.waitFor(t, 60*time.Second, "first round", func(l logLine) bool { return l.Message == "round" })
	go func() {
		for range d.lines { // the log is not read further; keep the daemon writing
		}
	}()
	startCollector(t, bin, "--fake-gpus", "p100:4", "--node", node,
		"--jobs-dir", filepath.Join(env.CollectorDir, node, "jobs"),
		"--progress-dir", filepath.Join(env.CollectorDir, node, "progress"),
		"--proc-root", t.TempDir(), "--interval", "2s",
		"--daemon-url", "http://"+reportAddr, "--token-file", token)

	var ids []int
	for range 3 {
		ids = append(ids, env.Submit(t, slowRestartScript, "--partition="+part, "--gres=gpu:2", "--output=/dev/null",
			"--comment=gavel: model=slow-net steps=100000000"))
	}
	time.Sleep(2 * time.Minute)

	n := 0
	for _, id := range ids {
		n += env.Job(t, id).RestartCount
	}
	var measured []float64
	for _, js := range fetchStatusDoc(t, apiAddr).Jobs {
		if js.RestartSource == "measured" {
			measured = append(measured, js.RestartCostS)
		}
	}
	out, err := exec.Command(bin, "status", "--server", apiAddr).CombinedOutput()
	if err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	return n, measured, string(out)
}
