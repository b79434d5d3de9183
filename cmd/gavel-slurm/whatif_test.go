package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/api"
	"github.com/gavel-slurm/gavel-slurm/internal/history"
)

func TestParseWhen(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"-7d":                  now.Add(-7 * 24 * time.Hour),
		"-36h":                 now.Add(-36 * time.Hour),
		"-90m":                 now.Add(-90 * time.Minute),
		"2026-11-01T08:00:00Z": time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC),
	} {
		got, err := parseWhen(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("%q: %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "-7x", "-d", "yesterday", "-1e400d"} {
		if _, err := parseWhen(bad, now); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestParseRatios(t *testing.T) {
	got, err := parseRatios("--speed", "v100=1, a100=2.5")
	if err != nil || got["v100"] != 1 || got["a100"] != 2.5 || len(got) != 2 {
		t.Fatalf("%v, %v", got, err)
	}
	for _, bad := range []string{"v100", "v100=0", "v100=-1", "v100=x", "=2", "v100=1,v100=2", "v100=Inf"} {
		if _, err := parseRatios("--speed", bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestPeakUseCountsGPUsHeldAtOnce(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(int64(1e9+s), 0) }
	h := &history.History{Jobs: []history.Job{
		{GPUType: "v100", GPUs: 2, Start: at(0), End: at(10)},
		{GPUType: "v100", GPUs: 1, Start: at(5), End: at(20)},
		{GPUType: "v100", GPUs: 4, Start: at(20), End: at(30)}, // starts as the 1-GPU job ends
		{GPUType: "k80", GPUs: 1, Start: at(0), End: at(30)},
		{GPUType: "k80,v100", GPUs: 2, Start: at(0), End: at(30)}, // two types: left out, as the replay leaves it
		{Nodes: "p100-[1-2]", GPUs: 2, Start: at(0), End: at(30)}, // typed by its nodes
		{Nodes: "unknown-1", GPUs: 2, Start: at(0), End: at(30)},  // no type at all
	}}
	cl := peakUse(h, map[string]string{"p100-1": "p100", "p100-2": "p100"}, map[string]int{"v100": 4, "k80": 2})
	if cl.GPUs["v100"] != 4 || cl.GPUs["k80"] != 2 || cl.GPUs["p100"] != 2 || len(cl.GPUs) != 3 {
		t.Errorf("peak use %v, want v100=4, k80=2 (1, in whole nodes of 2), p100=2", cl.GPUs)
	}
	if cl.PerServer["v100"] != 4 || cl.PerServer["k80"] != 2 {
		t.Errorf("GPUs per node %v", cl.PerServer)
	}
	if err := cl.Validate(); err != nil {
		t.Error(err)
	}
}

func TestClusterOfNodes(t *testing.T) {
	cl := clusterOfNodes([]bridge.Node{
		{Name: "a1", GPUType: "a100", GPUs: 8}, {Name: "a2", GPUType: "a100", GPUs: 8},
		{Name: "v1", GPUType: "v100", GPUs: 4}, {Name: "v2", GPUType: "v100", GPUs: 2},
		{Name: "cpu", GPUs: 0}, {Name: "x", GPUType: "k80", GPUs: 4, Unreadable: fmt.Errorf("two types")},
	})
	if cl.GPUs["a100"] != 16 || cl.GPUs["v100"] != 6 || len(cl.GPUs) != 2 {
		t.Errorf("GPUs %v", cl.GPUs)
	}
	// Nodes of one size give it; mixed sizes give none (one GPU each).
	if cl.PerServer["a100"] != 8 || cl.PerServer["v100"] != 0 {
		t.Errorf("per node %v", cl.PerServer)
	}
}

func TestMeasuredRatesFromTheDaemonsStatus(t *testing.T) {
	st := api.Status{Jobs: []api.JobStatus{
		{JobID: "1", Model: "ResNet-50 (batch size 64)", GPUs: 1, Throughputs: map[string]api.Throughput{
			"v100": {StepsPerS: 10, Source: "measured"}, "k80": {StepsPerS: 2, Source: "estimated"}, "p100": {StepsPerS: 99, Source: "table"}}},
		{JobID: "2", Model: "resnet50-bs64", GPUs: 1, Throughputs: map[string]api.Throughput{"v100": {StepsPerS: 12, Source: "measured"}}},
		{JobID: "3", Model: "resnet50-bs64", GPUs: 2, Throughputs: map[string]api.Throughput{"v100": {StepsPerS: 30, Source: "measured"}}},
	}}
	raw, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "status.json")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	rates, err := measuredRates(path)
	if err != nil {
		t.Fatal(err)
	}
	got := rates("RESNET50 bs64", 1)
	// The mean of the two jobs' measured v100 rates, the estimate on the
	// k80, and nothing from the table.
	if got["v100"] != 11 || got["k80"] != 2 || len(got) != 2 {
		t.Errorf("rates %v", got)
	}
	if got := rates("resnet50-bs64", 2); got["v100"] != 30 {
		t.Errorf("2-GPU rates %v", got)
	}
	if got := rates("a3c", 1); got != nil {
		t.Errorf("unknown model: %v", got)
	}
	if _, err := measuredRates(filepath.Join(t.TempDir(), "absent", "status.json")); err == nil {
		t.Error("a missing file was accepted")
	}
}

// --submit, with a fake sbatch that records what it is asked and hands out
// job ids; the test then runs the jobs' scripts here, as Slurm would on a
// node: every array task, then the report job.
func TestWhatifSubmitRunsTheSweepAsAnArrayAndAReportJob(t *testing.T) {
	dir := t.TempDir()
	sbatchLog := filepath.Join(dir, "sbatch.log")
	sbatch := filepath.Join(dir, "sbatch")
	script := `#!/bin/sh
n=$(wc -l < "` + sbatchLog + `" 2>/dev/null || echo 0)
printf '%s\0' "$@" >> "` + sbatchLog + `.args.$n"
echo >> "` + sbatchLog + `"
echo "$((700 + n));cluster"
`
	if err := os.WriteFile(sbatch, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "gavel-slurm")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	sweep := filepath.Join(dir, "sweep")
	var out, errOut bytes.Buffer
	args := []string{"--config", "none", "--sacct", filepath.Join("..", "..", "internal", "history", "testdata", "sacct-24.11.json"),
		"--cluster", "v100=8,p100=8,k80=8", "--gpus-per-node", "v100=4,p100=4,k80=4", "--policies", "max_min_fairness_perf,fifo",
		"--seeds", "0,1", "--round", "30s", "--submit", "--partition", "batch", "--dir", sweep, "--binary", bin, "--sbatch", sbatch}
	if rc := runWhatif(args, &out, &errOut); rc != 0 {
		t.Fatalf("exit %d: %s", rc, errOut.String())
	}
	if !regexp.MustCompile(`submitted 6 replays \(sweep \S+\) as array job 700 and the report as job 701 on partition batch`).MatchString(out.String()) {
		t.Errorf("output: %s", out.String())
	}
	readArgs := func(n int) []string {
		raw, err := os.ReadFile(fmt.Sprintf("%s.args.%d", sbatchLog, n))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00")
	}
	flagValue := func(args []string, name string) string {
		for i, a := range args {
			if a == name && i+1 < len(args) {
				return args[i+1]
			}
		}
		return ""
	}
	array, report := readArgs(0), readArgs(1)
	if flagValue(array, "--array") != "0-5" || flagValue(array, "--partition") != "batch" {
		t.Errorf("array job: %q", array)
	}
	if flagValue(report, "--dependency") != "afterany:700" || flagValue(report, "--partition") != "batch" {
		t.Errorf("report job: %q", report)
	}
	// What Slurm would run: each task with its index, then the report.
	for k := range 6 {
		cmd := exec.Command("sh", "-c", flagValue(array, "--wrap"))
		cmd.Env = append(os.Environ(), fmt.Sprintf("SLURM_ARRAY_TASK_ID=%d", k))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("task %d: %v\n%s", k, err, out)
		}
	}
	if out, err := exec.Command("sh", "-c", flagValue(report, "--wrap")).CombinedOutput(); err != nil {
		t.Fatalf("report job: %v\n%s", err, out)
	}
	var r struct {
		Jobs   int               `json:"jobs"`
		Runs   []json.RawMessage `json:"runs"`
		Failed map[string]string `json:"failed"`
	}
	raw, err := os.ReadFile(filepath.Join(sweep, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	if r.Jobs == 0 || len(r.Runs) != 4 || len(r.Failed) != 0 {
		t.Errorf("report: %d jobs, %d runs, failed %v", r.Jobs, len(r.Runs), r.Failed)
	}
	for _, f := range []string{"report.txt", "report.html"} {
		if st, err := os.Stat(filepath.Join(sweep, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if h, _ := filepath.Glob(filepath.Join(sweep, "history-*.json")); len(h) != 1 {
		t.Errorf("histories of the sweep: %v", h)
	}

	// A part that went missing (a task that failed) is the report's
	// failure of that replay, not the report's end; a part of another
	// sweep is refused; the baseline, when its part is missing, is
	// replayed by the report job itself.
	parts, _ := filepath.Glob(filepath.Join(sweep, "parts-*"))
	if len(parts) != 1 {
		t.Fatalf("parts folders %v", parts)
	}
	if err := os.Remove(filepath.Join(parts[0], "part-3.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(parts[0], "part-0.json")); err != nil {
		t.Fatal(err)
	}
	other, err := os.ReadFile(filepath.Join(parts[0], "part-4.json"))
	if err != nil {
		t.Fatal(err)
	}
	var p4 partFile
	if err := json.Unmarshal(other, &p4); err != nil {
		t.Fatal(err)
	}
	p4.Sweep = "an-earlier-sweep"
	if other, err = json.Marshal(p4); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(parts[0], "part-4.json"), other, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("sh", "-c", flagValue(report, "--wrap")).CombinedOutput(); err != nil {
		t.Fatalf("report job with a part missing: %v\n%s", err, out)
	}
	raw, _ = os.ReadFile(filepath.Join(sweep, "report.json"))
	r.Failed = nil
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Runs) != 2 || len(r.Failed) != 2 || !strings.Contains(r.Failed["fifo seed 0"], "an-earlier-sweep") {
		t.Errorf("with parts 0 and 3 missing and 4 of another sweep: %d runs, failed %v", len(r.Runs), r.Failed)
	}
}
