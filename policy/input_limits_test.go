package policy

import (
	"strings"
	"testing"
)

// Numbers the linear programs cannot handle, repeated keys, and names
// that would forge or hide text are refused with the place they are at.
func TestDecodeProblemRejectsOutOfRangeAndUnsafeInput(t *testing.T) {
	job := func(fields string) string {
		return `{"cluster": {"v100": 4, "k80": 2}, "costs": {"v100": 2, "k80": 1}, "jobs": [{"id": "1", "throughputs": {"v100": 1}}, {"id": "7", ` + fields + `}]}`
	}
	withID := func(id string) string {
		return `{"cluster": {"v100": 4}, "jobs": [{"id": "1", "throughputs": {"v100": 1}}, {"id": "` + id + `", "throughputs": {"v100": 1}}]}`
	}
	tests := []struct {
		name, input, want string
	}{
		// Before: a solver status, and an all-zero "optimal" allocation.
		{"huge weight", job(`"throughputs": {"v100": 1}, "weight": 1.7e308`), `jobs[1] (id "7"): weight: 1.7e+308 is outside [0.001, 1000]`},
		{"huge throughput", job(`"throughputs": {"v100": 1.7e308}`), `jobs[1] (id "7"): throughputs: "v100": 1.7e+308 is outside [0.001, 100000] (or 0)`},
		{"tiny throughput", job(`"throughputs": {"v100": 1e-9}`), `jobs[1] (id "7"): throughputs: "v100": 1e-09 is outside`},
		{"throughputs far apart", job(`"throughputs": {"v100": 100, "k80": 0.001}`), `jobs[1] (id "7"): throughputs: 0.001 and 100 differ by more than a factor 10000`},
		{"tiny weight", job(`"throughputs": {"v100": 1}, "weight": 1e-6`), `jobs[1] (id "7"): weight: 1e-06 is outside`},
		{"huge steps", job(`"throughputs": {"v100": 1}, "steps_remaining": 1e20`), `jobs[1] (id "7"): steps_remaining: 1e+20 is outside [0, 1e+10]`},
		{"huge slo", job(`"throughputs": {"v100": 1}, "slo": 1e12`), `jobs[1] (id "7"): slo: 1e+12 is outside`},
		{"huge time since start", job(`"throughputs": {"v100": 1}, "time_since_start": 1e300`), `jobs[1] (id "7"): time_since_start: 1e+300 is outside`},
		{"huge isolated time", job(`"throughputs": {"v100": 1}, "isolated_time": 1e300`), `jobs[1] (id "7"): isolated_time: 1e+300 is outside`},
		{"huge arrival", job(`"throughputs": {"v100": 1}, "arrival": -1e300`), `jobs[1] (id "7"): arrival -1e+300 is not a finite number within`},
		{"huge cost", `{"cluster": {"v100": 1}, "costs": {"v100": 1e9}}`, `costs: "v100": 1e+09 is outside [0.001, 1000] (or 0)`},
		{"huge GPU count", `{"cluster": {"v100": 1e7}}`, `cluster: "v100": count 1e+07 is more than 100000`},
		{"huge scale factor", job(`"throughputs": {"v100": 1}, "scale_factor": 1e12`), `jobs[1] (id "7"): scale_factor 1e+12 is not a positive integer`},
		{"huge entity weight", `{"cluster": {"v100": 1}, "entities": {"a": {"weight": 1e9}}}`, `entities: "a": weight: 1e+09 is outside [0.001, 1000]`},
		{"huge pair throughput", `{"cluster": {"v100": 1}, "jobs": [{"id": "1", "throughputs": {"v100": 1}}, {"id": "2", "throughputs": {"v100": 1}}], "pairs": [{"jobs": ["1", "2"], "throughputs": {"v100": [1, 1e9]}}]}`,
			`pairs[0] (1+2): throughputs: "v100"[1]: 1e+09 is outside`},

		{"duplicate top-level key", `{"cluster": {"v100": 1}, "cluster": {"v100": 2}}`, `line 1, column 26: the problem: duplicate key "cluster"`},
		{"duplicate field in another case", `{"cluster": {"v100": 1}, "jobs": [], "Jobs": []}`, `line 1, column 38: the problem: unknown field "Jobs"`},
		{"duplicate job field", job(`"throughputs": {"v100": 1}, "weight": 2, "weight": 1`), `jobs[1]: duplicate key "weight"`},
		{"duplicate job field in another case", job(`"throughputs": {"v100": 1}, "SLO": 2, "slo": 1`), `jobs[1]: unknown field "SLO"`},
		{"duplicate throughput type", job(`"throughputs": {"v100": 1, "k80": 1, "v100": 2}`), `jobs[1].throughputs: duplicate key "v100"`},
		{"duplicate type spelled with an escape", `{"cluster": {"v100": 1, "v\u0031` + `00": 2}}`, `cluster: duplicate key "v100"`},
		{"duplicate cost", `{"cluster": {"v100": 1}, "costs": {"v100": 1, "v100": 1}}`, `costs: duplicate key "v100"`},
		{"duplicate entity", `{"cluster": {"v100": 1}, "entities": {"a": {}, "a": {"weight": 2}}}`, `entities: duplicate key "a"`},
		{"duplicate entity field", `{"cluster": {"v100": 1}, "entities": {"a": {"weight": 1, "Weight": 2}}}`, `entities["a"]: unknown field "Weight"`},
		{"duplicate pair field", `{"cluster": {"v100": 1}, "pairs": [{"jobs": ["1", "2"], "jobs": ["1", "3"]}]}`, `pairs[0]: duplicate key "jobs"`},
		{"duplicate pair type", `{"cluster": {"v100": 1}, "pairs": [{"throughputs": {"v100": [1, 1], "v100": [2, 2]}}]}`, `pairs[0].throughputs: duplicate key "v100"`},

		{"newline in a job id", withID(`8\nINFO forged`), `jobs[1]: id "8\nINFO forged": contains the control or format character U+000A`},
		{"escape sequence in a job id", withID(`\u001b[31m8`), `jobs[1]: id "\x1b[31m8": contains the control or format character U+001B`},
		{"right-to-left override in a job id", withID(`8\u202egpj.exe`), `contains the control or format character U+202E`},
		{"zero-width space in a job id", withID(`8\u200b`), `U+200B`},
		{"invalid UTF-8 in a job id", withID("8\xff"), `jobs[1].id: invalid UTF-8`},
		{"bidi isolate in a GPU type", `{"cluster": {"v100\u2067": 1}}`, `cluster: GPU type "v100\u2067": contains the control or format character U+2067`},
		{"line separator in an entity", `{"cluster": {"v100": 1}, "entities": {"a\u2028b": {}}}`, `entities: "a\u2028b": contains the control or format character U+2028`},
		{"DEL in a job's entity", job(`"throughputs": {"v100": 1}, "entity": "a\u007f"`), `jobs[1] (id "7"): entity "a\x7f": contains the control or format character U+007F`},
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
			if strings.ContainsAny(err.Error(), "\n\x1b\u202e") {
				t.Fatalf("error carries the characters it refuses: %q", err)
			}
		})
	}
}

// The edges of the accepted ranges are accepted; map keys that differ
// only in case are different names, not duplicates.
func TestDecodeProblemAcceptsTheEdgesOfTheRanges(t *testing.T) {
	const edges = `{"cluster": {"v100": 100000, "V100": 1}, "costs": {"v100": 0.001, "V100": 1000},
	  "jobs": [
	    {"id": "a", "throughputs": {"v100": 100000, "V100": 10}, "weight": 1000, "steps_remaining": 1e10,
	     "time_since_start": 1e9, "isolated_time": 1e9, "slo": 1e9, "arrival": -1e15, "scale_factor": 100000},
	    {"id": "b·ü 名", "throughputs": {"v100": 0.001, "V100": 0}, "weight": 0.001}],
	  "entities": {"x": {"weight": 1000}}}`
	p, err := DecodeProblem(strings.NewReader(edges))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.GPUs) != 2 || p.Jobs[1].ID != "b·ü 名" {
		t.Fatalf("decoded %+v", p)
	}
}
