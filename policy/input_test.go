package policy

import (
	"strings"
	"testing"
	"unicode"

	"github.com/go-json-experiment/json/jsontext"
)

const inValidProblem = `{
  "cluster": {"v100": 2, "k80": 4},
  "costs": {"v100": 3, "k80": 1},
  "jobs": [
    {"id": "1", "throughputs": {"v100": 4, "k80": 1}, "steps_remaining": 1e5, "entity": "a"},
    {"id": 7, "throughputs": {"v100": 2}, "scale_factor": 2, "weight": 5, "arrival": 9, "slo": 100}
  ],
  "entities": {"b": {"weight": 2, "policy": "fifo"}},
  "pairs": [{"jobs": ["1", "7"], "throughputs": {"v100": [2.0, 1.5]}}]
}`

func TestDecodeProblemAppliesDefaults(t *testing.T) {
	p, err := DecodeProblem(strings.NewReader(inValidProblem))
	if err != nil {
		t.Fatal(err)
	}
	if p.GPUs["v100"] != 2 || p.GPUs["k80"] != 4 || p.Costs["v100"] != 3 {
		t.Errorf("cluster/costs: got %v %v", p.GPUs, p.Costs)
	}
	j0, j1 := p.Jobs[0], p.Jobs[1]
	if j0.ScaleFactor != 1 || j0.Weight != 1 || j0.Arrival != 0 || j0.StepsRemaining != 1e5 {
		t.Errorf("job 1 defaults: got %+v", j0)
	}
	if j1.ID != "7" || j1.ScaleFactor != 2 || j1.Weight != 5 || j1.Arrival != 9 || j1.SLO != 100 {
		t.Errorf("job 7: got %+v", j1)
	}
	if e := p.Entities["a"]; e.Weight != 1 || e.Policy != "fairness" {
		t.Errorf("undeclared entity a: got %+v, want weight 1 policy fairness", e)
	}
	if e := p.Entities["b"]; e.Weight != 2 || e.Policy != "fifo" {
		t.Errorf("entity b: got %+v", e)
	}
	if len(p.Pairs) != 1 || p.Pairs[0].Jobs != [2]string{"1", "7"} || p.Pairs[0].Throughputs["v100"] != [2]float64{2, 1.5} {
		t.Errorf("pairs: got %+v", p.Pairs)
	}
}

func TestDecodeProblemRejectsBadInput(t *testing.T) {
	job := func(fields string) string {
		return `{"cluster": {"v100": 4, "k80": 2}, "jobs": [{"id": "1", "throughputs": {"v100": 1}}, {"id": "7", ` + fields + `}]}`
	}
	tests := []struct {
		name, input, want string
	}{
		{"syntax error has position", "{\n  \"cluster\": {\"v100\": 4,}\n}", "line 2, column 24: cluster: invalid character ','"},
		{"truncated", `{"cluster": {"v100": 4}`, "unexpected end of input"},
		{"empty input", ``, "empty input"},
		{"trailing data", `{"cluster": {"v100": 4}} {}`, "line 1, column 26: unexpected data after"},
		{"trailing garbage", "{\"cluster\": {\"v100\": 4}}\n x", "line 2, column 2: unexpected data after"},
		{"blank input", " \n\t", "empty input"},
		{"not an object", `[]`, "the problem: cannot use a JSON array here (want an object)"},
		{"field in another case", `{"Cluster": {"v100": 4}}`, `the problem: unknown field "Cluster"`},
		{"unknown top-level field", `{"cluster": {"v100": 4}, "jbos": []}`, `unknown field "jbos"`},
		{"unknown job field", job(`"throughputs": {"v100": 1}, "scalefactor": 2`), `unknown field "scalefactor"`},
		{"wrong type", `{"cluster": {"v100": "four"}}`, `line 1, column 22: cluster["v100"]: cannot use a JSON string here (want a number)`},
		{"missing cluster", `{"jobs": []}`, "cluster: missing"},
		{"empty cluster", `{"cluster": {}}`, "cluster: no GPU types"},
		{"fractional count", `{"cluster": {"v100": 1.5}}`, `cluster: "v100": count 1.5`},
		{"negative count", `{"cluster": {"v100": -1}}`, `cluster: "v100": count -1`},
		{"unknown type", job(`"throughputs": {"a100": 1}`), `jobs[1] (id "7"): throughputs: unknown GPU type "a100"`},
		{"negative throughput", job(`"throughputs": {"v100": -1}`), `jobs[1] (id "7"): throughputs: "v100": negative value -1`},
		{"no runnable type", job(`"throughputs": {"v100": 0}`), `jobs[1] (id "7"): throughputs: no positive throughput`},
		{"missing throughputs", job(`"weight": 1`), `jobs[1] (id "7"): throughputs: missing`},
		{"scale factor too large", job(`"throughputs": {"v100": 1}, "scale_factor": 8`), `jobs[1] (id "7"): scale_factor 8 exceeds every GPU type's count (largest 4)`},
		{"scale factor zero", job(`"throughputs": {"v100": 1}, "scale_factor": 0`), `scale_factor 0 is not a positive integer`},
		{"fractional scale factor", job(`"throughputs": {"v100": 1}, "scale_factor": 1.5`), `scale_factor 1.5 is not a positive integer`},
		{"zero weight", job(`"throughputs": {"v100": 1}, "weight": 0`), `jobs[1] (id "7"): weight: 0 is outside [0.001, 1000]`},
		{"negative steps", job(`"throughputs": {"v100": 1}, "steps_remaining": -5`), `jobs[1] (id "7"): steps_remaining: negative value -5`},
		{"huge number", job(`"throughputs": {"v100": 1e999}`), `cannot use a JSON number 1e999`},
		{"duplicate id", `{"cluster": {"v100": 1}, "jobs": [{"id": "1", "throughputs": {"v100": 1}}, {"id": 1, "throughputs": {"v100": 1}}]}`,
			`jobs[1] (id "1"): duplicate id (first used by jobs[0])`},
		{"missing id", `{"cluster": {"v100": 1}, "jobs": [{"throughputs": {"v100": 1}}]}`, `jobs[0]: id: missing`},
		{"boolean id", `{"cluster": {"v100": 1}, "jobs": [{"id": true, "throughputs": {"v100": 1}}]}`, `jobs[0]: id: true is neither`},
		{"unknown cost type", `{"cluster": {"v100": 1}, "costs": {"k80": 1}}`, `costs: unknown GPU type "k80"`},
		{"bad entity policy", `{"cluster": {"v100": 1}, "entities": {"a": {"policy": "lottery"}}}`, `entities: "a": policy "lottery"`},
		{"pair with unknown job", `{"cluster": {"v100": 1}, "jobs": [{"id": "1", "throughputs": {"v100": 1}}], "pairs": [{"jobs": ["1", "9"]}]}`, `pairs[0] (1+9): jobs[1]: unknown job id "9"`},
		{"pair of one job", `{"cluster": {"v100": 1}, "jobs": [{"id": "1", "throughputs": {"v100": 1}}], "pairs": [{"jobs": ["1"]}]}`, `pairs[0]: jobs: want 2 job ids, got 1`},
		{"pair with itself", `{"cluster": {"v100": 1}, "jobs": [{"id": "1", "throughputs": {"v100": 1}}], "pairs": [{"jobs": ["1", "1"]}]}`, `cannot be paired with itself`},
		{"pair value count", `{"cluster": {"v100": 1}, "jobs": [{"id": "1", "throughputs": {"v100": 1}}, {"id": "2", "throughputs": {"v100": 1}}], "pairs": [{"jobs": ["1", "2"], "throughputs": {"v100": [1]}}]}`, `pairs[0] (1+2): throughputs: "v100": want 2 values, got 1`},
		{"duplicate pair", `{"cluster": {"v100": 1}, "jobs": [{"id": "1", "throughputs": {"v100": 1}}, {"id": "2", "throughputs": {"v100": 1}}], "pairs": [{"jobs": ["1", "2"]}, {"jobs": ["2", "1"]}]}`, `pairs[1] (2+1): duplicate of pairs[0]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := DecodeProblem(strings.NewReader(tc.input))
			if err == nil {
				t.Fatalf("accepted: %+v", p)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error is not one line: %q", err)
			}
		})
	}
}

func TestValidateRejectsNonFiniteNumbers(t *testing.T) {
	nan := func() float64 { var z float64; return z / z }()
	p := &Problem{GPUs: map[string]int{"v100": 1}, Jobs: []Job{{ID: "1", Throughputs: map[string]float64{"v100": 1}, ScaleFactor: 1, Weight: 1, StepsRemaining: nan}}}
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), `jobs[0] (id "1"): steps_remaining: NaN is not a finite number`) {
		t.Fatalf("got %v", err)
	}
}

func FuzzDecodeProblem(f *testing.F) {
	f.Add(inValidProblem)
	f.Add(`{"cluster": {"v100": 1}, "jobs": []}`)
	f.Add(`{"cluster": {"v100": 1}, "jobs": [{"id": 1, "throughputs": {"v100": 1}, "scale_factor": 1}], "pairs": [{"jobs": [1, 1]}]}`)
	f.Add(`[]`)
	f.Add(`{"cluster": {"v100": 1}, "cluster": {"v100": 2}}`)
	f.Add(`{"cluster": {"v100": 2, "k80": 1}, "costs": {"v100": 3, "k80": 1}, "jobs": [{"id": "a\u202e", "throughputs": {"v100": 1e5, "k80": 10}, "weight": 1000, "slo": 10, "steps_remaining": 1e10}]}`)
	f.Add(`{"cluster": {"v100": 1}, "jobs": [{"id": 1, "throughputs": {"v100": 1.7e308}, "Weight": 1e-3, "weight": 2}], "entities": {"e": {"weight": 1e3}}}`)
	f.Fuzz(func(t *testing.T, input string) {
		p, err := DecodeProblem(strings.NewReader(input))
		if err != nil {
			if p != nil {
				t.Fatalf("problem %+v returned with error %v", p, err)
			}
			// Errors are printed to terminals and logs: one line, and
			// nothing from the input that could forge or hide text.
			if strings.ContainsFunc(err.Error(), func(r rune) bool {
				return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp)
			}) {
				t.Fatalf("error carries control or format characters: %q", err)
			}
			return
		}
		// A decoded problem must be valid and usable by a policy without
		// a panic.
		if err := p.Validate(); err != nil {
			t.Fatalf("decoded problem is invalid: %v", err)
		}
		for _, j := range p.Jobs {
			if checkName(j.ID) != nil {
				t.Fatalf("job id %q accepted", j.ID)
			}
		}
		if len(p.Jobs) <= 8 && len(p.GPUs) <= 8 {
			pol, _ := New("isolated", Options{})
			if _, err := pol.Allocate(p); err != nil {
				t.Fatalf("isolated on a valid problem: %v", err)
			}
			// The LP policies may refuse a problem, but must not crash
			// the solver (CLP aborts the process on coefficients it
			// cannot handle) or return an inconsistent allocation.
			names := []string{"max_min_fairness_perf", "max_sum_throughput_normalized_by_cost_perf_SLOs"}
			for _, name := range names {
				pol, _ := New(name, Options{})
				if a, err := pol.Allocate(p); err == nil {
					if _, err := JobThroughputs(p, a); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
				}
			}
		}
	})
}

func TestDecodeID(t *testing.T) {
	tests := []struct {
		raw, want, err string
	}{
		{`"a7"`, "a7", ""},
		{`"a\"b"`, `a"b`, ""},
		{`"\u0041x"`, "Ax", ""},
		{`"job 1"`, "job 1", ""},
		{`42`, "42", ""},
		{`-3`, "-3", ""},
		{`""`, "", "empty"},
		{`null`, "", "missing"},
		{``, "", "missing"},
		{`1.5`, "", "neither a string nor an integer"},
		{`true`, "", "neither a string nor an integer"},
		{"{\"a\":\n1}", "", "a JSON object is neither"},
		{"[1,\n2]", "", "a JSON array is neither"},
	}
	for _, tc := range tests {
		got, err := decodeID(jsontext.Value(tc.raw))
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%s: got %q, %v; want %q", tc.raw, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: got %q, %v; want an error mentioning %q", tc.raw, got, err, tc.err)
		}
	}
}
