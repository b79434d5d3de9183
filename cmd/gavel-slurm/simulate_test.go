package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestSimulateFlagErrors(t *testing.T) {
	cases := map[string]struct {
		args    []string
		wantErr string
	}{
		"no rate":             {[]string{"--window", "0:10"}, "needs --rate > 0"},
		"unbounded":           {[]string{"--rate", "1"}, "needs --window"},
		"bad cluster":         {[]string{"--cluster", "v100=0", "--rate", "1", "--jobs", "3"}, `"v100=0" is not TYPE=N`},
		"duplicate type":      {[]string{"--cluster", "v100=1,v100=2", "--rate", "1", "--jobs", "3"}, "given twice"},
		"bad window":          {[]string{"--rate", "1", "--window", "9"}, "want FIRST:END"},
		"bad generate":        {[]string{"--generate", "bursty", "--jobs", "3"}, "want continuous or static"},
		"static without jobs": {[]string{"--generate", "static"}, "needs --jobs N"},
		"unknown policy":      {[]string{"--policy", "nope", "--rate", "1", "--jobs", "3"}, `unknown policy "nope"`},
		"overhead too long":   {[]string{"--rate", "1", "--jobs", "3", "--preemption-overhead", "1h"}, "shorter than --round"},
		"sweep without out":   {[]string{"--sweep-rates", "1:2:1", "--window", "0:5"}, "needs --out"},
		"bad sweep range":     {[]string{"--sweep-rates", "2:1:1", "--window", "0:5", "--out", "x"}, "want FROM:TO:STEP"},
		"bad seeds":           {[]string{"--sweep-rates", "1:2:1", "--window", "0:5", "--out", "x", "--seeds", "a"}, `"a" is not an integer`},
		"bad costs":           {[]string{"--rate", "1", "--jobs", "3", "--costs", "v100=-1"}, "--costs"},
		"stray argument":      {[]string{"--rate", "1", "--jobs", "3", "extra"}, `unexpected argument "extra"`},
		"noise alone":         {[]string{"--rate", "1", "--jobs", "3", "--estimate-noise", "0.1"}, "needs --estimate"},
		"negative noise":      {[]string{"--rate", "1", "--jobs", "3", "--estimate", "--estimate-noise", "-0.1"}, "--estimate-noise -0.1"},
		"reference alone":     {[]string{"--rate", "1", "--jobs", "3", "--estimate-reference", "none"}, "needs --estimate"},
		"bad reference":       {[]string{"--rate", "1", "--jobs", "3", "--estimate", "--estimate-reference", "some"}, "must be table or none"},
		"estimate with step":  {[]string{"--rate", "1", "--jobs", "3", "--estimate", "--daemon-step"}, "cannot be combined with --daemon-step"},
		"bad restart cost":    {[]string{"--rate", "1", "--jobs", "3", "--restart-cost", "uniform:5m"}, "--restart-cost"},
		"restart too long":    {[]string{"--rate", "1", "--jobs", "3", "--restart-cost", "uniform:1m:5m", "--preemption-overhead", "2m"}, "shorter than --round"},
		"hold without rule":   {[]string{"--rate", "1", "--jobs", "3", "--mechanism", "improved", "--restart-hold", "20"}, "need --mechanism restart"},
		"negative hold":       {[]string{"--rate", "1", "--jobs", "3", "--mechanism", "restart", "--restart-hold", "-1"}, "--restart-hold -1"},
		"hold knob with step": {[]string{"--rate", "1", "--jobs", "3", "--mechanism", "restart", "--restart-hold", "20", "--daemon-step"}, "daemon's step runs with the defaults"},
		"floor without rule":  {[]string{"--rate", "1", "--jobs", "3", "--mechanism", "improved", "--restart-hold-min", "1h"}, "need --mechanism restart"},
		"negative floor":      {[]string{"--rate", "1", "--jobs", "3", "--mechanism", "restart", "--restart-hold-min", "-1m"}, "--restart-hold-min -1m0s"},
		"room without rule":   {[]string{"--rate", "1", "--jobs", "3", "--mechanism", "improved", "--keep-running-room", "0.5"}, "needs --mechanism restart"},
		"room above one":      {[]string{"--rate", "1", "--jobs", "3", "--mechanism", "restart", "--keep-running-room", "2"}, "must be within [0, 1]"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var stderr bytes.Buffer
			_, err := parseSimFlags(c.args, &stderr)
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("error = %v, want one containing %q", err, c.wantErr)
			}
		})
	}
}

func TestSimParseRange(t *testing.T) {
	cases := []struct {
		in   string
		want []float64
	}{
		{"0.4:2.0:0.4", []float64{0.4, 0.8, 1.2, 1.6, 2}},
		{"1:1:5", []float64{1}},
		{"1:2.5:1", []float64{1, 2}},
	}
	for _, c := range cases {
		got, err := simParseRange(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("simParseRange(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"1:2", "0:1:1", "1:2:0", "a:b:c", "1:NaN:1"} {
		if _, err := simParseRange(bad); err == nil {
			t.Errorf("simParseRange(%q) accepted", bad)
		}
	}
}

func TestSimulateStaticJSONAndJobsCSV(t *testing.T) {
	dir := t.TempDir()
	csvPath := filepath.Join(dir, "jobs.csv")
	tracePath := filepath.Join(dir, "trace.tsv")
	var stdout, stderr bytes.Buffer
	code := runSimulate([]string{"--generate", "static", "--jobs", "6", "--cluster", "v100=2,k80=2",
		"--policy", "max_min_fairness_perf", "--json", "--jobs-csv", csvPath, "--write-trace", tracePath}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var res map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, stdout.String())
	}
	for _, key := range []string{"avg_jct_s", "p50_jct_s", "p95_jct_s", "makespan_s", "utilization", "jobs_measured", "wall_s"} {
		if _, ok := res[key]; !ok {
			t.Errorf("JSON lacks %q", key)
		}
	}
	if res["jobs_measured"].(float64) != 6 {
		t.Errorf("jobs_measured = %v, want 6", res["jobs_measured"])
	}
	file, err := os.Open(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	rows, err := csv.NewReader(file).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 7 || !slices.Equal(rows[0][len(rows[0])-2:], []string{"time_k80_s", "time_v100_s"}) {
		t.Fatalf("jobs CSV: %d rows, header %v", len(rows), rows[0])
	}
	// Replaying the written trace gives the same schedule.
	var replay bytes.Buffer
	if code := runSimulate([]string{"--trace", tracePath, "--cluster", "v100=2,k80=2", "--policy", "max_min_fairness_perf", "--json"}, &replay, &stderr); code != 0 {
		t.Fatalf("replay exit %d: %s", code, stderr.String())
	}
	var again map[string]any
	if err := json.Unmarshal(replay.Bytes(), &again); err != nil {
		t.Fatal(err)
	}
	// Trace steps are rounded up to whole steps, so times agree closely.
	if a, b := res["makespan_s"].(float64), again["makespan_s"].(float64); b < a || b > a+360 {
		t.Errorf("replayed makespan %v, generated %v", b, a)
	}
}

func TestSimulateSweepWritesCSVAndSVG(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := runSimulate([]string{"--sweep-rates", "0.5:1.0:0.5", "--max-active", "200",
		"--policies", "max_min_fairness_perf,max_min_fairness", "--seeds", "0,1", "--window", "0:8", "--out", dir}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	// 8 runs of the policies and 4 of the isolated policy, one per rate
	// and seed, for finish-time fairness.
	if !strings.Contains(stderr.String(), "12/12 runs") {
		t.Errorf("no final progress line in %q", stderr.String())
	}
	readCSV := func(name string) [][]string {
		file, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		defer file.Close()
		rows, err := csv.NewReader(file).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	rows := readCSV("sweep.csv")
	if len(rows) != 9 {
		t.Fatalf("sweep CSV has %d rows, want header + 8", len(rows))
	}
	ftf := slices.Index(rows[0], "ftf_isolated")
	for _, row := range rows[1:] {
		if v, err := strconv.ParseFloat(row[ftf], 64); err != nil || v <= 0 {
			t.Errorf("%s at %s jobs/h, seed %s: ftf_isolated %q, want a positive number", row[0], row[1], row[2], row[ftf])
		}
	}
	isolated := readCSV("isolated.csv")
	if len(isolated) != 5 || isolated[1][0] != "isolated" || isolated[1][ftf] != "1" {
		t.Errorf("isolated CSV %v, want header + 4 runs of the isolated policy, each at FTF 1 against itself", isolated)
	}
	svg, err := os.ReadFile(filepath.Join(dir, "avg_jct.svg"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"max_min_fairness_perf", "max_min_fairness", "input rate (jobs/hour)",
		`data-series="2" data-points="4"`, // both policies, both rates
		">36 k80, 36 p100, 36 v100; single-GPU; jobs 0-7; mean over seeds 0,1</text>"} {
		if !bytes.Contains(svg, []byte(want)) {
			t.Errorf("SVG lacks %q", want)
		}
	}
}

func TestSimulateEstimate(t *testing.T) {
	args := []string{"--generate", "static", "--jobs", "6", "--cluster", "v100=2,k80=2", "--seed", "3"}
	run := func(extra ...string) string {
		var stdout, stderr bytes.Buffer
		code := runSimulate(append(slices.Clone(args), extra...), &stdout, &stderr)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", extra, code, stderr.String())
		}
		return stdout.String()
	}
	oracle := run()
	learned := run("--estimate", "--estimate-noise", "0.05")
	if strings.Contains(oracle, "learned by measurement") {
		t.Errorf("oracle run says its throughputs were learned:\n%s", oracle)
	}
	if !strings.Contains(learned, "throughputs: learned by measurement (unknown models, reference table, noise 0.05)") {
		t.Errorf("estimated run does not say so:\n%s", learned)
	}
	asJSON := run("--estimate", "--json")
	var res map[string]any
	if err := json.Unmarshal([]byte(asJSON), &res); err != nil {
		t.Fatal(err)
	}
	if res["estimated"] != true || res["jobs_measured"].(float64) != 6 {
		t.Errorf("JSON: estimated %v, jobs_measured %v; want true and 6", res["estimated"], res["jobs_measured"])
	}
	oracleJSON := run("--json")
	if strings.Contains(oracleJSON, `"estimated"`) {
		t.Errorf("oracle JSON names estimation:\n%s", oracleJSON)
	}
}
