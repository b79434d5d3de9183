//go:build integration

package daemon

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/internal/slurmtest"
)

// whatifReport is the part of `whatif --json` the tests read.
type whatifReport struct {
	Jobs    int            `json:"jobs"`
	Skipped map[string]int `json:"skipped"`
	Sources map[string]int `json:"rate_sources"`
	Pinned  int            `json:"pinned_jobs"`
	Real    whatifFigures  `json:"real"`
	Slurm   whatifFigures  `json:"slurm_replay"`
	Error   struct {
		RelAvgJCT float64 `json:"rel_avg_jct"`
	} `json:"slurm_replay_error"`
	Runs   []whatifFigures   `json:"runs"`
	Failed map[string]string `json:"failed"`
}

type whatifFigures struct {
	Name     string                  `json:"name"`
	Jobs     int                     `json:"jobs"`
	AvgJCT   float64                 `json:"avg_jct_s"`
	AvgWait  float64                 `json:"avg_wait_s"`
	FTF      *struct{ Mean float64 } `json:"ftf"`
	Accounts []struct {
		Name  string  `json:"name"`
		Jobs  int     `json:"jobs"`
		Share float64 `json:"share"`
	} `json:"accounts"`
}

// baselineTolerance is how far the Slurm replay's average JCT may be from
// the measured one on the local Slurm: its jobs last 10-25 s, so the
// second or two slurmctld takes to start a job after another ends (which
// the replay does not model) weighs more than on a site's hours-long jobs.
const baselineTolerance = 0.25

// A mixed workload of two users runs on two GPU types under Slurm alone:
// typed and untyped jobs, an array, a dependency, a job that never
// started and one without GPUs. whatif reads its history back from
// slurmdbd through slurmrestd, replays Slurm's order within the stated
// tolerance of what happened, and replays two policies, saying where each
// job's rates came from. The same what-if then runs on the cluster itself
// (--submit): a job array of replays and a job that writes the report.
func TestWhatifReplaysTheHistoryOfTheLocalSlurm(t *testing.T) {
	env := slurmtest.FromEnv(t)
	env.RequireAccounting(t)
	part := ownPartition(t, env, "v100-1", "k80-1")
	// slurmdbd keeps whole seconds: the window starts a second early.
	from := time.Now().Add(-time.Second)
	sleep := func(s int) string { return "#!/bin/sh\nsleep " + strconv.Itoa(s) + "\n" }
	common := []string{"--partition=" + part, "--output=/dev/null", "--time=2"}
	submit := func(script string, args ...string) int {
		return env.Submit(t, script, append(append([]string{}, common...), args...)...)
	}
	const tagged = "--comment=gavel: model=resnet50-bs64"
	var ids []int
	// alice (physics): typed v100 jobs, tagged, that queue for the v100s,
	// and an array of untyped jobs.
	for range 3 {
		ids = append(ids, submit(sleep(20), append([]string{"--gres=gpu:v100:2", tagged}, alice...)...))
	}
	ids = append(ids, submit(sleep(12), append([]string{"--gres=gpu:1", "--array=0-3"}, alice...)...))
	// bob (biology): untyped and k80 jobs, one depending on another.
	first := submit(sleep(15), append([]string{"--gres=gpu:k80:2"}, bob...)...)
	ids = append(ids, first,
		submit(sleep(10), append([]string{"--gres=gpu:1", "--dependency=afterok:" + strconv.Itoa(first)}, bob...)...),
		submit(sleep(25), append([]string{"--gres=gpu:3"}, bob...)...),
		submit(sleep(10), append([]string{"--gres=gpu:k80:1"}, bob...)...))
	// Left out, with their reasons: no GPUs, and never started.
	cpuOnly := submit(sleep(2), bob...)
	// Eligible but never started: all of the v100s, behind alice's jobs
	// (a job held until it is cancelled was never eligible, and slurmdbd
	// lists it in no window).
	neverRan := submit(sleep(2), append([]string{"--gres=gpu:v100:4", "--nice=1000"}, bob...)...)
	time.Sleep(3 * time.Second)
	env.Run(t, env.ScancelPath, strconv.Itoa(neverRan))
	ids = append(ids, cpuOnly)

	deadline := time.Now().Add(4 * time.Minute)
	waitQueueEmpty(t, env, part, time.Until(deadline))
	// A finished job reaches slurmdbd moments after it ends.
	time.Sleep(3 * time.Second)
	to := time.Now().Add(time.Second)

	bin := buildBinary(t)
	cfg := daemonConfig(t, env, "")
	dir := t.TempDir()
	args := []string{"whatif", "--config", cfg, "--from", from.Format(time.RFC3339), "--to", to.Format(time.RFC3339),
		"--partitions", part, "--policies", "max_min_fairness_perf,finish_time_fairness_perf", "--seeds", "0,1",
		"--round", "10s", "--min-run-time", "0s", "--restart-overhead", "1s", "--speed", "v100=2,p100=1.5,k80=1",
		"--save-history", filepath.Join(dir, "history.json"), "--html", filepath.Join(dir, "report.html")}
	var r whatifReport
	runJSON(t, bin, append(args, "--json"), &r)

	// 3 typed + 4 array tasks + 4 of bob's ran with GPUs.
	if r.Jobs != 11 {
		t.Errorf("%d jobs replayed, want 11 (skipped %v)", r.Jobs, r.Skipped)
	}
	if r.Skipped["no GPUs"] != 1 || r.Skipped["never started"] != 1 {
		t.Errorf("skipped %v, want one job without GPUs and one that never started", r.Skipped)
	}
	if r.Sources["reference table"] != 3 || r.Sources["speed ratios"] != 8 {
		t.Errorf("rate sources %v, want the reference table for the 3 tagged jobs and the speed ratios for 8", r.Sources)
	}
	if r.Pinned != 5 {
		t.Errorf("%d jobs kept on the type they asked for, want 5", r.Pinned)
	}
	if r.Real.Jobs != 11 || r.Slurm.Jobs != 11 {
		t.Errorf("history %d jobs, replay %d", r.Real.Jobs, r.Slurm.Jobs)
	}
	t.Logf("history avg JCT %.1f s wait %.1f s; Slurm replay avg JCT %.1f s wait %.1f s (%+.1f%%)",
		r.Real.AvgJCT, r.Real.AvgWait, r.Slurm.AvgJCT, r.Slurm.AvgWait, 100*r.Error.RelAvgJCT)
	if math.Abs(r.Error.RelAvgJCT) > baselineTolerance {
		t.Errorf("the Slurm replay's avg JCT %.1f s is %+.1f%% from the measured %.1f s, beyond %.0f%%",
			r.Slurm.AvgJCT, 100*r.Error.RelAvgJCT, r.Real.AvgJCT, 100*baselineTolerance)
	}
	if len(r.Runs) != 4 || len(r.Failed) != 0 {
		t.Fatalf("%d policy runs, failed %v", len(r.Runs), r.Failed)
	}
	for _, run := range r.Runs {
		if run.Jobs != 11 || !(run.AvgJCT > 0) || run.FTF == nil || len(run.Accounts) != 2 {
			t.Errorf("%s: %d jobs, avg JCT %v, FTF %v, %d accounts", run.Name, run.Jobs, run.AvgJCT, run.FTF, len(run.Accounts))
		}
	}
	for _, f := range []string{"history.json", "report.html"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s not written: %v", f, err)
		}
	}

	// The saved history gives the same what-if offline.
	var offline whatifReport
	runJSON(t, bin, []string{"whatif", "--config", "none", "--sacct", filepath.Join(dir, "history.json"), "--partitions", part,
		"--cluster", "v100=4,k80=4", "--gpus-per-node", "v100=4,k80=4", "--policies", "max_min_fairness_perf", "--round", "10s",
		"--min-run-time", "0s", "--restart-overhead", "1s", "--speed", "v100=2,p100=1.5,k80=1", "--json"}, &offline)
	if offline.Jobs != r.Jobs || offline.Slurm.AvgJCT != r.Slurm.AvgJCT {
		t.Errorf("offline: %d jobs, Slurm replay avg JCT %v; online %d, %v", offline.Jobs, offline.Slurm.AvgJCT, r.Jobs, r.Slurm.AvgJCT)
	}

	// On the cluster: the binary and the sweep's folder where jobs see
	// them, the replays as an array, the report after it.
	shared := filepath.Join(env.SharedDir, "whatif-"+part)
	if err := os.MkdirAll(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	jobBin := filepath.Join(shared, "gavel-slurm")
	copyFile(t, bin, jobBin)
	sweep := filepath.Join(shared, "sweep")
	out := runBinary(t, bin, append(args[:len(args)-4:len(args)-4], "--submit", "--partition", part, "--dir", sweep,
		"--job-dir", env.JobPath(sweep), "--binary", env.JobPath(jobBin), "--sbatch", env.SbatchPath)...)
	t.Logf("%s", out)
	report := filepath.Join(sweep, "report.json")
	waitFile(t, report, 3*time.Minute, func() string {
		logs, _ := filepath.Glob(filepath.Join(sweep, "logs", "*"))
		var b strings.Builder
		for _, l := range logs {
			data, _ := os.ReadFile(l)
			b.WriteString(l + ": " + string(data) + "\n")
		}
		return b.String() + env.Run(t, env.SqueuePath, "-p", part)
	})
	var onCluster whatifReport
	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &onCluster); err != nil {
		t.Fatalf("report.json: %v", err)
	}
	if onCluster.Jobs != r.Jobs || len(onCluster.Runs) != len(r.Runs) || len(onCluster.Failed) != 0 {
		t.Errorf("on the cluster: %d jobs, %d runs, failed %v; here %d jobs, %d runs", onCluster.Jobs, len(onCluster.Runs), onCluster.Failed, r.Jobs, len(r.Runs))
	}
	for k := range onCluster.Runs {
		if k < len(r.Runs) && onCluster.Runs[k].AvgJCT != r.Runs[k].AvgJCT {
			t.Errorf("%s: avg JCT %v on the cluster, %v here", r.Runs[k].Name, onCluster.Runs[k].AvgJCT, r.Runs[k].AvgJCT)
		}
	}
	if st, err := os.Stat(filepath.Join(sweep, "report.html")); err != nil || st.Size() == 0 {
		t.Errorf("report.html not written on the cluster: %v", err)
	}
}

// waitQueueEmpty waits until partition has no job pending or running.
func waitQueueEmpty(t *testing.T, env *slurmtest.Env, partition string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if len(partitionQueue(t, env, partition)) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("partition %s still has jobs after %v: %v", partition, timeout, partitionQueue(t, env, partition))
		}
		time.Sleep(time.Second)
	}
}

func runBinary(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("gavel-slurm %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

func runJSON(t *testing.T, bin string, args []string, into any) {
	t.Helper()
	out := runBinary(t, bin, args...)
	if err := json.Unmarshal([]byte(out), into); err != nil {
		t.Fatalf("gavel-slurm %s: %v: %.400s", strings.Join(args, " "), err, out)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err == nil {
		err = os.WriteFile(to, data, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// waitFile waits for path to exist, and fails with what explain says.
func waitFile(t *testing.T, path string, timeout time.Duration, explain func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if st, err := os.Stat(path); err == nil && st.Size() > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not written after %v:\n%s", path, timeout, explain())
		}
		time.Sleep(2 * time.Second)
	}
}
