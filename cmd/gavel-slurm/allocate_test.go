package main

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/policy"
)

const allocTestProblem = `{
  "cluster": {"v100": 1, "k80": 1},
  "jobs": [
    {"id": "a", "throughputs": {"v100": 4, "k80": 1}, "steps_remaining": 1000},
    {"id": "b", "throughputs": {"v100": 2, "k80": 1}, "steps_remaining": 500}
  ]
}`

func allocTestFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "problem.json")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func allocTestRun(args []string, stdin string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := runAllocate(args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestAllocateJSONOutput(t *testing.T) {
	path := allocTestFile(t, allocTestProblem)
	code, out, errOut := allocTestRun([]string{"--policy", "max_sum_throughput_perf", "--input", path, "--json"}, "")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got struct {
		Policy     string
		Objective  float64
		Allocation map[string]map[string]float64
		Stats      struct{ LPs int }
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	// a on the v100 (4 steps/s) and b on the k80 (1 step/s).
	if got.Policy != "max_sum_throughput_perf" || got.Objective != 5 || got.Allocation["a"]["v100"] != 1 || got.Allocation["b"]["k80"] != 1 || got.Stats.LPs != 1 {
		t.Fatalf("got %+v", got)
	}
}

func TestAllocateTableFromStdin(t *testing.T) {
	code, out, errOut := allocTestRun([]string{"--policy", "min_total_duration_perf", "--input", "-"}, allocTestProblem)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// The makespan is 2500/7 s with a at 0.6 v100 + 0.4 k80 (2.8 steps/s).
	for _, want := range []string{"objective 357.143 (makespan, s)", "k80", "v100", "steps/s", "a  0.400  0.600    2.800"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestAllocateSampleAndList(t *testing.T) {
	code, out, errOut := allocTestRun([]string{"--list-policies"}, "")
	if code != 0 || !strings.Contains(out, "finish_time_fairness_perf\n") || !strings.Contains(out, "gandiva\n") {
		t.Fatalf("exit %d, output %q, stderr %q", code, out, errOut)
	}
	for _, name := range []string{"finish_time_fairness_packed", "max_sum_throughput_normalized_by_cost_perf_SLOs", "fifo_packed"} {
		code, out, errOut = allocTestRun([]string{"--sample", "--policy", name}, "")
		if code != 0 || strings.Count(out, "\n") < 14 {
			t.Errorf("%s on the sample: exit %d, stderr %q, output:\n%s", name, code, errOut, out)
		}
	}
}

func TestAllocateRejectsBadInput(t *testing.T) {
	good := allocTestFile(t, allocTestProblem)
	tests := []struct {
		name  string
		args  []string
		stdin string
		code  int
		want  string
	}{
		{"unknown policy", []string{"--policy", "nope", "--input", good}, "", 2, `unknown policy "nope"`},
		{"no input", []string{"--policy", "isolated"}, "", 2, "no problem given"},
		{"missing file", []string{"--input", filepath.Join(t.TempDir(), "none.json")}, "", 2, "no such file"},
		{"malformed JSON", []string{"--policy", "isolated", "--input", "-"}, "{\"cluster\": {\"v100\": 1,}}", 2, "standard input: line 1, column 23: cluster: invalid character ','"},
		{"unknown type", []string{"--policy", "isolated", "--input", allocTestFile(t, `{"cluster": {"v100": 1}, "jobs": [{"id": "7", "throughputs": {"a100": 1}}]}`)}, "", 2, `jobs[0] (id "7"): throughputs: unknown GPU type "a100"`},
		{"bad flag", []string{"--polcy", "isolated"}, "", 2, "flag provided but not defined"},
		{"both sources", []string{"--sample", "--input", good}, "", 2, "exclusive"},
		{"negative throughput", []string{"--input", "-"}, `{"cluster": {"v100": 1}, "jobs": [{"id": "a", "throughputs": {"v100": -2}}]}`, 2, `jobs[0] (id "a"): throughputs: "v100": negative value -2`},
		{"negative steps", []string{"--input", "-"}, `{"cluster": {"v100": 1}, "jobs": [{"id": "a", "throughputs": {"v100": 2}, "steps_remaining": -1}]}`, 2, `jobs[0] (id "a"): steps_remaining: negative value -1`},
		{"negative GPU count", []string{"--input", "-"}, `{"cluster": {"v100": -1}, "jobs": []}`, 2, `cluster: "v100": count -1`},
		{"NaN literal", []string{"--input", "-"}, `{"cluster": {"v100": 1}, "jobs": [{"id": "a", "throughputs": {"v100": NaN}}]}`, 2, `line 1, column 71: jobs[0].throughputs["v100"]: invalid character 'N'`},
		{"NaN as a string", []string{"--input", "-"}, `{"cluster": {"v100": 1}, "jobs": [{"id": "a", "throughputs": {"v100": "NaN"}}]}`, 2, "cannot use a JSON string here"},
		{"scale factor too large", []string{"--input", "-"}, `{"cluster": {"v100": 2, "k80": 4}, "jobs": [{"id": "a", "throughputs": {"v100": 2}, "scale_factor": 8}]}`, 2, `jobs[0] (id "a"): scale_factor 8 exceeds every GPU type's count (largest 4)`},
		{"duplicate ids", []string{"--input", "-"}, `{"cluster": {"v100": 1}, "jobs": [{"id": "a", "throughputs": {"v100": 2}}, {"id": "a", "throughputs": {"v100": 1}}]}`, 2, `jobs[1] (id "a"): duplicate id (first used by jobs[0])`},
		{"truncated JSON", []string{"--input", "-"}, `{"cluster": {"v100": 1}, "jobs": [`, 2, "unexpected end of input"},
		{"weight beyond what the LP handles", []string{"--policy", "max_min_fairness_water_filling_perf", "--input", "-"},
			`{"cluster": {"v100": 1}, "jobs": [{"id": "a", "throughputs": {"v100": 2}, "weight": 1.7e308}]}`, 2, `jobs[0] (id "a"): weight: 1.7e+308 is outside [0.001, 1000]`},
		{"throughput beyond what the LP handles", []string{"--policy", "max_sum_throughput_perf", "--input", "-"},
			`{"cluster": {"v100": 1}, "jobs": [{"id": "a", "throughputs": {"v100": 1.7e308}}]}`, 2, `jobs[0] (id "a"): throughputs: "v100": 1.7e+308 is outside`},
		{"duplicate key", []string{"--input", "-"}, `{"cluster": {"v100": 1}, "jobs": [{"id": "a", "throughputs": {"v100": 2, "v100": 3}}]}`, 2, `jobs[0].throughputs: duplicate key "v100"`},
		{"terminal escape in a job id", []string{"--input", "-"}, `{"cluster": {"v100": 1}, "jobs": [{"id": "a\u001b]0;owned\u0007", "throughputs": {"v100": 2}}]}`, 2, `contains the control or format character U+001B`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := allocTestRun(tc.args, tc.stdin)
			if code != tc.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tc.code, errOut)
			}
			if !strings.Contains(errOut, tc.want) {
				t.Errorf("stderr %q lacks %q", errOut, tc.want)
			}
			if strings.Count(errOut, "\n") != 1 {
				t.Errorf("stderr is not one line: %q", errOut)
			}
		})
	}
}

func TestAllocateJSONShapeAndPairKeys(t *testing.T) {
	// Two jobs that run better together on the one GPU: the pair row is
	// keyed "a+b", and the output has exactly the documented fields.
	problem := `{"cluster": {"v100": 1}, "jobs": [
	  {"id": "a", "throughputs": {"v100": 10}}, {"id": "b", "throughputs": {"v100": 4}}],
	  "pairs": [{"jobs": ["a", "b"], "throughputs": {"v100": [8, 3.2]}}]}`
	code, out, errOut := allocTestRun([]string{"--policy", "max_min_fairness_packed", "--input", "-", "--json"}, problem)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &fields); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	for _, key := range []string{"policy", "objective", "allocation", "solve_seconds"} {
		if _, ok := fields[key]; !ok {
			t.Errorf("output lacks %q:\n%s", key, out)
		}
	}
	var got struct {
		Objective    float64                       `json:"objective"`
		Allocation   map[string]map[string]float64 `json:"allocation"`
		SolveSeconds float64                       `json:"solve_seconds"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	// Together each job runs at 80% of its solo rate, the whole time; the
	// equal share would give each the whole GPU, so the objective is 0.8.
	if x := got.Allocation["a+b"]["v100"]; math.Abs(x-1) > 1e-6 {
		t.Errorf("pair a+b gets %v of the v100, want 1 (allocation %v)", x, got.Allocation)
	}
	if math.Abs(got.Objective-0.8) > 1e-6 {
		t.Errorf("objective %v, want 0.8", got.Objective)
	}
	if got.SolveSeconds <= 0 {
		t.Errorf("solve_seconds %v", got.SolveSeconds)
	}
}

func TestAllocateEmptyProblem(t *testing.T) {
	for _, name := range []string{"max_min_fairness_perf", "finish_time_fairness_perf", "fifo"} {
		code, out, errOut := allocTestRun([]string{"--policy", name, "--input", "-", "--json"}, `{"cluster": {"v100": 4}, "jobs": []}`)
		if code != 0 {
			t.Errorf("%s: exit %d: %s", name, code, errOut)
			continue
		}
		var got struct {
			Objective  *float64                      `json:"objective"`
			Allocation map[string]map[string]float64 `json:"allocation"`
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil || got.Objective == nil || *got.Objective != 0 || len(got.Allocation) != 0 {
			t.Errorf("%s: got %s (decode error %v)", name, out, err)
		}
	}
}

func TestObjectiveUnit(t *testing.T) {
	cases := []struct{ policy, want string }{
		{"max_min_fairness_perf", "min normalized throughput"},
		{"gandiva", "min normalized throughput"},
		{"finish_time_fairness_packed", "max finish-time fairness ρ"},
		{"min_total_duration", "makespan, s"},
		{"max_sum_throughput_normalized_by_cost_perf_SLOs", "steps per cost unit"},
		{"max_sum_throughput_perf", "total steps/s"},
		{"fifo", "total steps/s"},
		{"shortest_job_first_perf", "first completion, s"},
		{"no_such_policy", "objective"},
	}
	for _, c := range cases {
		if got := objectiveUnit(c.policy); got != c.want {
			t.Errorf("objectiveUnit(%q) = %q, want %q", c.policy, got, c.want)
		}
	}
}

// An SLO that cannot be met no longer fails the command: the allocation is
// printed, with a note saying which SLO was dropped and why.
func TestAllocateReportsDroppedSLOs(t *testing.T) {
	problem := `{"cluster": {"v100": 1, "k80": 1}, "costs": {"v100": 3, "k80": 1}, "jobs": [
	  {"id": "a", "throughputs": {"v100": 4, "k80": 1}, "steps_remaining": 1000, "slo": 1000},
	  {"id": "b", "throughputs": {"v100": 1}, "steps_remaining": 36000, "slo": 7200}]}`
	const note = "SLO dropped: needs 10.0 h on v100 alone, 2.0 h left"
	args := []string{"--policy", "max_sum_throughput_normalized_by_cost_perf_SLOs", "--input", "-"}
	code, out, errOut := allocTestRun(args, problem)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "\nnotes:\n  job b: "+note+"\n") || strings.Contains(out, "job a:") {
		t.Errorf("table output lacks the note for b alone:\n%s", out)
	}
	code, out, errOut = allocTestRun(append(args, "--json"), problem)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got struct {
		Allocation map[string]map[string]float64 `json:"allocation"`
		Notes      map[string]string             `json:"notes"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	if len(got.Notes) != 1 || got.Notes["b"] != note || got.Allocation["a"]["v100"]*4+got.Allocation["a"]["k80"] < 1-1e-6 {
		t.Errorf("got %+v, want a's SLO met and the note for b", got)
	}
	// Without notes the JSON has no notes field.
	_, out, _ = allocTestRun([]string{"--policy", "max_sum_throughput_perf", "--input", "-", "--json"}, allocTestProblem)
	if strings.Contains(out, "notes") {
		t.Errorf("notes field without notes:\n%s", out)
	}
}

// The --json output is read by scripts: it stays what encoding/json's
// indenting Encoder wrote over Allocation.Map, byte for byte, whatever the
// ids (escapes, keys that sort oddly, a job id equal to a pair's key),
// the numbers (tiny, huge, -0) or the notes.
func TestAllocationJSONMatchesEncodingJSON(t *testing.T) {
	reference := func(a *policy.Allocation, elapsed time.Duration) []byte {
		out := struct {
			Policy       string                        `json:"policy"`
			Objective    *float64                      `json:"objective"`
			Allocation   map[string]map[string]float64 `json:"allocation"`
			SolveSeconds float64                       `json:"solve_seconds"`
			Stats        policy.Stats                  `json:"stats"`
			Notes        map[string]string             `json:"notes,omitempty"`
		}{a.Policy, nil, a.Map(), elapsed.Seconds(), a.Stats, a.Notes}
		if !math.IsInf(a.Objective, 0) && !math.IsNaN(a.Objective) {
			out.Objective = &a.Objective
		}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	rng := rand.New(rand.NewSource(1))
	ids := []string{"a", "b", "a+b", "<&>", "x\u2028y", "\U0001F600", "\ue000", "é", `"q"`, `back\slash`, "1", "10", "2"}
	number := func() float64 {
		return []float64{0, math.Copysign(0, -1), rng.Float64() * 1e-9, rng.Float64() * 1e25, 1e21, 1e-6, float64(rng.Intn(100)), rng.Float64()}[rng.Intn(8)]
	}
	for iter := range 1000 {
		a := &policy.Allocation{Policy: "p<&>", Types: []string{"k80", "v100", "\u2029"}, Objective: number()}
		if iter%7 == 0 {
			a.Objective = math.Inf(1)
		}
		for range rng.Intn(10) {
			r := policy.Row{Jobs: []string{ids[rng.Intn(len(ids))]}}
			if rng.Intn(3) == 0 {
				r.Jobs = append(r.Jobs, ids[rng.Intn(len(ids))])
			}
			for range a.Types {
				r.Fractions = append(r.Fractions, number())
			}
			a.Rows = append(a.Rows, r)
		}
		a.Stats = policy.Stats{LPs: rng.Intn(3), Classes: rng.Intn(2), Columns: rng.Intn(2), Pooled: rng.Intn(2) == 0}
		switch rng.Intn(3) {
		case 0:
			a.Notes = map[string]string{ids[rng.Intn(len(ids))]: "n<>&\u2028", ids[rng.Intn(len(ids))]: "m"}
		case 1:
			a.Notes = map[string]string{}
		}
		elapsed := time.Duration(rng.Int63n(1e10))
		var got bytes.Buffer
		if err := writeAllocationJSON(&got, a, elapsed); err != nil {
			t.Fatal(err)
		}
		if want := reference(a, elapsed); !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("allocation %+v:\ngot\n%s\nwant\n%s", a, got.Bytes(), want)
		}
	}
}
