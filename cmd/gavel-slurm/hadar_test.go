package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func batchTestRun(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := runSimulateBatch(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestSimulateBatchCompareJSON(t *testing.T) {
	code, out, errs := batchTestRun("--compare", "--jobs", "30", "--cluster", "v100=8,k80=8",
		"--scales", "0:0:1:1", "--seeds", "1,2", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var runs []batchRun
	if err := json.Unmarshal([]byte(out), &runs); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if len(runs) != 4 {
		t.Fatalf("%d runs, want 2 seeds × 2 modes", len(runs))
	}
	for i, r := range runs {
		wantMode := []string{"single-type", "mixed-types"}[i%2]
		wantSeed := int64(1 + i/2)
		if r.Mode != wantMode || r.Seed != wantSeed || r.Result == nil || r.Result.Jobs != 30 {
			t.Errorf("run %d: %+v, want seed %d %s with 30 jobs", i, r, wantSeed, wantMode)
		}
		if r.Result.Makespan < r.Result.FluidBound*(1-1e-9) {
			t.Errorf("run %d: makespan %v below the fluid bound %v", i, r.Result.Makespan, r.Result.FluidBound)
		}
	}
}

func TestSimulateBatchTable(t *testing.T) {
	code, out, errs := batchTestRun("--compare", "--jobs", "20", "--cluster", "v100=8,p100=8,k80=8", "--seed", "3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"max_min_fairness_perf, 20 jobs", "single-type", "mixed-types", "makespan single-type / mixed-types"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestSimulateBatchRejects(t *testing.T) {
	for _, args := range [][]string{
		{"--cluster", "v100"},
		{"--cluster", "v100=6"},
		{"--sizes", "1:1:1"},
		{"--scales", "1:x:1:1"},
		{"--seeds", "1,a"},
		{"--mixed-types", "--compare"},
		{"--jobs", "0"},
		{"extra"},
	} {
		code, _, errs := batchTestRun(append(args, "--jobs", "5")...)
		if args[0] == "--jobs" {
			code, _, errs = batchTestRun(args...)
		}
		if code == 0 || errs == "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, errs)
		}
	}
}
