//go:build integration

package daemon

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/internal/api"
	"github.com/gavel-slurm/gavel-slurm/internal/reports"
	"github.com/gavel-slurm/gavel-slurm/internal/slurmtest"
)

// The measured-throughput loop end to end, with every part as a site runs
// it: the daemon and one collector per node are the real binary (the
// collectors on fake GPUs of their node's type), the node's Prolog maps
// the job to its GPUs and creates its progress file, the TaskProlog hands
// the job $GAVEL_PROGRESS_FILE, and the job writes its steps there at a
// rate that depends on the GPU type it runs on. The model is in no table.
//
// The job first runs on k80 (the v100 node is busy with a job the daemon
// does not manage): status shows its k80 rate measured, within 10%, and
// its v100 rate estimated. When the v100 node frees up, the allocation
// moves the job there, and status shows that rate measured too. Bad
// reports (wrong token, garbage, a huge body, a negative rate) are
// refused and counted, and change nothing the daemon believes.
func TestMeasuredThroughputsEndToEnd(t *testing.T) {
	env := slurmtest.FromEnv(t)
	if env.CollectorDir == "" {
		t.Skip("the local Slurm runs no collector Prolog (SLURM_COLLECTOR_DIR unset); restart it with scripts/slurm-up.sh")
	}
	bin := buildBinary(t)
	part := ownPartition(t, env, "v100-2", "k80-2")
	trueRate := map[string]float64{"v100": 400, "k80": 100}

	// The v100 node is taken by a job outside the daemon's partition.
	blocker := env.Submit(t, "#!/bin/sh\nsleep 600\n", "--partition="+env.Partition, "--nodelist=v100-2",
		"--gres=gpu:4", "--output=/dev/null")
	env.WaitState(t, blocker, "RUNNING", 30*time.Second)

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
mechanism = "improved" # preempts at once: the restart mechanism would hold these jobs
policy = "max_min_fairness_perf"
round = "4s"
min_run_time = "8s"
default_preempt = "requeue"
[daemon]
state_dir = %q
listen = %q
collector_listen = %q
collector_token_file = %q
collector_warm_up = "3s"
`, env.URL, os.Getenv("SLURM_JWT_FILE"), env.UserName, env.ScontrolPath, part,
		filepath.Join(dir, "state"), apiAddr, reportAddr, token)), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, bin, "--config", config)
	d.waitFor(t, 60*time.Second, "first round", func(l logLine) bool { return l.Message == "round" })

	for node, gpus := range map[string]string{"v100-2": "v100:4", "k80-2": "k80:4"} {
		startCollector(t, bin, "--fake-gpus", gpus, "--node", node,
			"--jobs-dir", filepath.Join(env.CollectorDir, node, "jobs"),
			"--progress-dir", filepath.Join(env.CollectorDir, node, "progress"),
			"--proc-root", t.TempDir(), "--interval", "2s",
			"--daemon-url", "http://"+reportAddr, "--token-file", token)
	}

	script := `#!/bin/bash
case $SLURMD_NODENAME in v100*) r=400 ;; *) r=100 ;; esac
[ -n "$GAVEL_PROGRESS_FILE" ] || { echo "no GAVEL_PROGRESS_FILE" >&2; exit 1; }
# Steps follow the clock, so the rate is r whatever the loop's overhead.
start=$(date +%s.%N)
while true; do
	sleep 1
	now=$(date +%s.%N)
	awk -v s="$start" -v n="$now" -v r="$r" 'BEGIN { printf "%d %s\n", (n - s) * r, n }' >>"$GAVEL_PROGRESS_FILE"
done
`
	id := env.Submit(t, script, "--partition="+part, "--gres=gpu:1", "--output=/dev/null",
		"--comment=gavel: model=mystery-net steps=100000000")

	// On k80: measured there, estimated on v100.
	js := waitStatus(t, apiAddr, id, 90*time.Second, "its k80 rate measured", func(js api.JobStatus) bool {
		return measuredNear(js, "k80", trueRate["k80"])
	})
	if got := js.Throughputs["v100"]; got.Source != "estimated" || !(got.StepsPerS > 0) {
		t.Errorf("v100 while the job ran on k80: %+v, want a positive estimate", got)
	}
	t.Logf("on k80: %+v", js.Throughputs)
	// Its progress, from the same file, is what the policies count down.
	if js.StepsDone == nil || *js.StepsDone <= 0 || js.StepsRemaining != 100_000_000-*js.StepsDone {
		t.Errorf("progress in status: done %v, remaining %d; want the reported steps and the tag's total less them", js.StepsDone, js.StepsRemaining)
	}

	rejectedBefore := rejectedReports(t, apiAddr)
	sendBadReports(t, "http://"+reportAddr+reports.Path, token, id)
	rejected := rejectedReports(t, apiAddr)
	for _, kind := range []string{"unauthorized", "malformed", "too_large", "invalid"} {
		if rejected[kind] <= rejectedBefore[kind] {
			t.Errorf("rejected %q reports: %v before, %v after; want more", kind, rejectedBefore[kind], rejected[kind])
		}
	}
	// The lie ("v100: 10000 steps/s" with a wrong token, or a negative
	// rate) taught the daemon nothing.
	js = waitStatus(t, apiAddr, id, 20*time.Second, "a round after the bad reports", func(js api.JobStatus) bool { return true })
	if got := js.Throughputs["v100"]; got.Source == "measured" || got.StepsPerS >= 10000 {
		t.Errorf("v100 after the bad reports: %+v; they must change nothing", got)
	}

	// The v100 node frees up: the job moves to its fastest type.
	env.Run(t, env.ScancelPath, strconv.Itoa(blocker))
	js = waitStatus(t, apiAddr, id, 120*time.Second, "its v100 rate measured", func(js api.JobStatus) bool {
		return measuredNear(js, "v100", trueRate["v100"])
	})
	t.Logf("after the move: %+v", js.Throughputs)
	if j := env.Job(t, id); !strings.HasPrefix(j.Nodes, "v100") {
		t.Errorf("job %d on %q after its v100 rate was measured, want the v100 node", id, j.Nodes)
	}
	if got := js.Throughputs["k80"]; got.Source != "measured" || math.Abs(got.StepsPerS-trueRate["k80"]) > 0.1*trueRate["k80"] {
		t.Errorf("k80 after the move: %+v, want still measured near %.0f", got, trueRate["k80"])
	}
}

// measuredNear says whether status shows the job's rate on typ measured
// within 10% of want.
func measuredNear(js api.JobStatus, typ string, want float64) bool {
	got := js.Throughputs[typ]
	return got.Source == "measured" && math.Abs(got.StepsPerS-want) <= 0.1*want
}

// waitStatus polls the daemon's status until the job's entry satisfies ok.
func waitStatus(t *testing.T, addr string, id int, timeout time.Duration, what string, ok func(api.JobStatus) bool) api.JobStatus {
	t.Helper()
	var last api.JobStatus
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(time.Second) {
		for _, js := range fetchStatusDoc(t, addr).Jobs {
			if js.JobID == strconv.Itoa(id) {
				last = js
				if ok(js) {
					return js
				}
			}
		}
	}
	t.Fatalf("job %d: no %s after %v; last status: %s %q %+v", id, what, timeout, last.State, last.Reason, last.Throughputs)
	return last
}

// startCollector runs the binary's collector until the test ends.
func startCollector(t *testing.T, bin string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"collector"}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("collector %v:\n%s", args, out.String())
		}
	})
}

// sendBadReports posts what a broken or hostile sender would: each is
// answered with a 4xx.
func sendBadReports(t *testing.T, url, tokenFile string, id int) {
	t.Helper()
	secret, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	good := strings.TrimSpace(string(secret))
	report := func(rate float64) string {
		return fmt.Sprintf(`{"node":"v100-2","time":%q,"interval_s":2,"jobs":[{"job_id":"%d","gpu_type":"v100","gpus":1,"steps_per_s":%g,"sm_util":0.9,"mem_used_bytes":1}]}`,
			time.Now().UTC().Format(time.RFC3339), id, rate)
	}
	cases := []struct {
		name, token, body string
		want              int
	}{
		{"wrong token", "not-the-secret", report(10000), http.StatusUnauthorized},
		{"no token", "", report(10000), http.StatusUnauthorized},
		{"garbage", good, `{"node": "v100-2", "jobs": [}`, http.StatusBadRequest},
		{"huge body", good, `{"node":"` + strings.Repeat("x", 2<<20) + `"}`, http.StatusRequestEntityTooLarge},
		{"negative rate", good, report(-5), http.StatusBadRequest},
	}
	for _, c := range cases {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: HTTP %d %q, want %d", c.name, resp.StatusCode, strings.TrimSpace(string(msg)), c.want)
		}
	}
}

var rejectedLine = regexp.MustCompile(`^gavel_slurm_collector_reports_total\{result="([a-z_]+)"\} ([0-9.e+]+)$`)

// rejectedReports reads the collector report counters from /metrics.
func rejectedReports(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if m := rejectedLine.FindStringSubmatch(line); m != nil {
			v, err := strconv.ParseFloat(m[2], 64)
			if err != nil {
				t.Fatalf("metrics line %q: %v", line, err)
			}
			out[m[1]] = v
		}
	}
	return out
}
