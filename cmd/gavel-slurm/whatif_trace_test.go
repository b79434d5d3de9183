package main

import (
	"bytes"
	"encoding/json"
	"math"
	"path/filepath"
	"testing"
)

// A history made from a trace and replayed by whatif under a policy gives
// what the simulator gives on the same trace: the what-if's policy replay
// is the simulator, fed from Slurm's accounting records.
func TestWhatifOfATraceHistoryAgreesWithSimulate(t *testing.T) {
	dir := t.TempDir()
	trace, sacct, replayed := filepath.Join(dir, "seed0.trace"), filepath.Join(dir, "sacct.json"), filepath.Join(dir, "replayed.trace")
	cluster := "v100=4,p100=4,k80=4"
	run := func(name string, code func([]string, *bytes.Buffer, *bytes.Buffer) int, args ...string) []byte {
		t.Helper()
		var out, errOut bytes.Buffer
		if rc := code(args, &out, &errOut); rc != 0 {
			t.Fatalf("%s %v: exit %d: %s", name, args, rc, errOut.String())
		}
		return out.Bytes()
	}
	simulate := func(args []string, o, e *bytes.Buffer) int { return runSimulate(args, o, e) }
	toSacct := func(args []string, o, e *bytes.Buffer) int { return runWhatifTrace(args, o, e) }
	whatifCmd := func(args []string, o, e *bytes.Buffer) int { return runWhatif(args, o, e) }
	run("simulate", simulate, "--generate", "continuous", "--rate", "3", "--jobs", "40", "--seed", "0", "--cluster", cluster, "--write-trace", trace)
	run("whatif-trace", toSacct, "--trace", trace, "--cluster", cluster, "--sacct-out", sacct, "--trace-out", replayed)

	var sim struct {
		AvgJCT float64 `json:"avg_jct_s"`
		Jobs   int     `json:"jobs_measured"`
	}
	if err := json.Unmarshal(run("simulate", simulate, "--trace", replayed, "--cluster", cluster, "--policy", "max_min_fairness_perf", "--json"), &sim); err != nil {
		t.Fatal(err)
	}
	var report struct {
		Sources map[string]int `json:"rate_sources"`
		Real    struct {
			AvgJCT float64 `json:"avg_jct_s"`
		} `json:"real"`
		Slurm struct {
			AvgJCT float64 `json:"avg_jct_s"`
		} `json:"slurm_replay"`
		Runs []struct {
			Name   string  `json:"name"`
			Jobs   int     `json:"jobs"`
			AvgJCT float64 `json:"avg_jct_s"`
		} `json:"runs"`
	}
	out := run("whatif", whatifCmd, "--config", "none", "--sacct", sacct, "--cluster", cluster, "--typed", "free",
		"--policies", "max_min_fairness_perf", "--round", "6m", "--mechanism", "restart", "--min-reset-interval", "32m",
		"--restart-overhead", "0s", "--min-run-time", "0s", "--json", "--quiet")
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatal(err)
	}
	if report.Sources["reference table"] != 40 {
		t.Errorf("rates from %v, want the reference table for all 40 jobs", report.Sources)
	}
	if len(report.Runs) != 1 || report.Runs[0].Jobs != 40 || sim.Jobs != 40 {
		t.Fatalf("whatif runs %+v, simulate %d jobs", report.Runs, sim.Jobs)
	}
	// Whole steps are rounded from whole seconds of run time: a few steps
	// per job at most.
	if got := report.Runs[0].AvgJCT; math.Abs(got-sim.AvgJCT) > 1e-4*sim.AvgJCT {
		t.Errorf("whatif's max_min_fairness_perf avg JCT %v s, simulate's %v s", got, sim.AvgJCT)
	}
	// The history is the Slurm replay's own schedule (to the second).
	if math.Abs(report.Slurm.AvgJCT-report.Real.AvgJCT) > 2 {
		t.Errorf("Slurm replay avg JCT %v s, history %v s", report.Slurm.AvgJCT, report.Real.AvgJCT)
	}
}
