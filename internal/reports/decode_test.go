package reports

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

var now = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

const good = `{"node":"gpu01","time":"2025-03-01T11:59:30Z","interval_s":30,"jobs":[
 {"job_id":"123","gpu_type":"v100","gpus":4,"steps":1200,"steps_per_s":2.5,"sm_util":0.9,"mem_used_bytes":1000},
 {"job_id":"124","gpu_type":"k80","gpus":1,"sm_util":0,"mem_used_bytes":0}]}`

func TestDecodeGood(t *testing.T) {
	rep, err := Decode(strings.NewReader(good), DefaultMaxBytes, now, DefaultMaxAge)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Node != "gpu01" || rep.IntervalS != 30 || len(rep.Jobs) != 2 {
		t.Fatalf("got %+v", rep)
	}
	j := rep.Jobs[0]
	if j.JobID != "123" || j.GPUType != "v100" || j.GPUs != 4 || *j.Steps != 1200 || *j.StepsPerS != 2.5 || j.SMUtil != 0.9 || j.MemUsedBytes != 1000 {
		t.Errorf("job 0 = %+v", j)
	}
	if rep.Jobs[1].Steps != nil || rep.Jobs[1].StepsPerS != nil {
		t.Errorf("job 1 has progress it never reported: %+v", rep.Jobs[1])
	}
}

// TestDecodeRoundTrip checks that what a collector marshals decodes to the
// same report: omitted rates stay omitted.
func TestDecodeRoundTrip(t *testing.T) {
	steps, rate := int64(5), 0.25
	in := Report{Node: "n1", Time: now.Add(-time.Second), IntervalS: 30, Jobs: []Job{
		{JobID: "1", GPUType: "a100", GPUs: 8, Steps: &steps, StepsPerS: &rate, SMUtil: 1, MemUsedBytes: 1 << 40},
		{JobID: "2", GPUType: "a100", GPUs: 1},
	}}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte(`"steps_per_s":null`)) {
		t.Errorf("unknown rate marshalled as null: %s", data)
	}
	out, err := Decode(bytes.NewReader(data), DefaultMaxBytes, now, DefaultMaxAge)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if *out.Jobs[0].StepsPerS != rate || out.Jobs[1].StepsPerS != nil || !out.Time.Equal(in.Time) {
		t.Errorf("round trip changed the report: %+v", out)
	}
}

// edit replaces the first occurrence of old in the good report.
func edit(old, new string) string {
	if !strings.Contains(good, old) {
		panic("edit: " + old + " is not in the good report")
	}
	return strings.Replace(good, old, new, 1)
}

func TestDecodeRejects(t *testing.T) {
	cases := []struct {
		name, body, kind, msg string
	}{
		{"empty body", ``, KindMalformed, "end of input"},
		{"not an object", `[1,2]`, KindMalformed, "not a JSON object"},
		{"truncated", good[:40], KindMalformed, "not JSON"},
		{"syntax error", edit(`"gpus":4`, `"gpus":4,,`), KindMalformed, "not JSON"},
		{"trailing data", good + `{}`, KindMalformed, "data after"},
		{"unknown top key", edit(`"node":"gpu01"`, `"node":"gpu01","extra":1`), KindUnknownField, `"extra"`},
		{"unknown job key", edit(`"gpus":4`, `"gpus":4,"gpu":1`), KindUnknownField, `"gpu"`},
		{"key in another case", edit(`"node"`, `"NODE"`), KindUnknownField, `"NODE"`},
		{"job key at the top", edit(`"node":"gpu01"`, `"node":"gpu01","job_id":"1"`), KindUnknownField, `"job_id"`},
		{"duplicate top key", edit(`"node":"gpu01"`, `"node":"gpu01","node":"gpu02"`), KindDuplicateField, `"node"`},
		{"duplicate job key", edit(`"gpus":4`, `"gpus":4,"gpus":1`), KindDuplicateField, `"gpus"`},
		{"missing jobs", `{"node":"n","time":"2025-03-01T11:59:30Z","interval_s":30}`, KindInvalid, `"jobs" is missing`},
		{"missing gpus", edit(`"gpus":1,`, ``), KindInvalid, `"gpus" is missing`},
		{"stale", edit(`11:59:30`, `11:50:00`), KindStale, "old"},
		{"future", edit(`11:59:30`, `12:05:00`), KindFuture, "ahead"},
		{"no time zone", edit(`11:59:30Z`, `11:59:30`), KindInvalid, "time"},
		{"zero interval", edit(`"interval_s":30`, `"interval_s":0`), KindInvalid, "interval_s"},
		{"negative interval", edit(`"interval_s":30`, `"interval_s":-30`), KindInvalid, "interval_s"},
		{"negative rate", edit(`2.5`, `-2.5`), KindInvalid, "steps_per_s"},
		{"huge rate", edit(`2.5`, `1e12`), KindInvalid, "steps_per_s"},
		{"rate out of float range", edit(`2.5`, `1e999`), KindInvalid, "steps_per_s"},
		{"NaN as a string", edit(`2.5`, `"NaN"`), KindInvalid, "steps_per_s"},
		{"negative steps", edit(`"steps":1200`, `"steps":-1`), KindInvalid, "steps"},
		{"fractional gpus", edit(`"gpus":4`, `"gpus":4.5`), KindInvalid, "gpus"},
		{"zero gpus", edit(`"gpus":4`, `"gpus":0`), KindInvalid, "gpus"},
		{"absurd gpus", edit(`"gpus":4`, `"gpus":100000`), KindInvalid, "gpus"},
		{"util above 1", edit(`0.9`, `90`), KindInvalid, "sm_util"},
		{"negative memory", edit(`"mem_used_bytes":1000`, `"mem_used_bytes":-1`), KindInvalid, "mem_used_bytes"},
		{"absurd memory", edit(`"mem_used_bytes":1000`, `"mem_used_bytes":9000000000000000000`), KindInvalid, "mem_used_bytes"},
		{"empty job id", edit(`"123"`, `""`), KindInvalid, "job_id is empty"},
		{"job id not a number", edit(`"123"`, `"12;rm"`), KindInvalid, "job_id"},
		{"empty type", edit(`"v100"`, `""`), KindInvalid, "gpu_type is empty"},
		{"type with a newline", edit(`"v100"`, `"v100\n"`), KindInvalid, "gpu_type"},
		{"type with an escape", edit(`"v100"`, `"v\u001b[31m100"`), KindInvalid, "gpu_type"},
		{"node with a bidi override", edit(`"gpu01"`, `"gpu\u202e01"`), KindInvalid, "node"},
		{"empty node", edit(`"gpu01"`, `""`), KindInvalid, "node is empty"},
		{"job listed twice", edit(`"124","gpu_type":"k80"`, `"123","gpu_type":"v100"`), KindInvalid, "listed twice"},
		{"deep nesting", edit(`"steps":1200`, `"steps":[[[[[[[[1]]]]]]]]`), KindMalformed, "nested"},
		{"object for a number", edit(`"steps":1200`, `"steps":{"a":1}`), KindInvalid, "steps"},
		{"first progress not a time", withFirstProgress(`"yesterday"`), KindInvalid, `first_progress "yesterday" is not an RFC 3339 time`},
		{"first progress without a zone", withFirstProgress(`"2025-03-01T11:59:00"`), KindInvalid, "first_progress"},
		{"first progress as a number", withFirstProgress(`1740830340`), KindInvalid, "first_progress is not an RFC 3339 time"},
		{"first progress as an object", withFirstProgress(`{"t":1}`), KindInvalid, "first_progress is not an RFC 3339 time"},
		{"first progress after the report", withFirstProgress(`"2025-03-01T11:59:30.5Z"`), KindInvalid, "after the report's time"},
		{"first progress years before", withFirstProgress(`"2023-03-01T11:59:00Z"`), KindInvalid, "before the report's time"},
		{"report time as a number", edit(`"time":"2025-03-01T11:59:30Z"`, `"time":1740830370`), KindInvalid, "time is not an RFC 3339 time"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode(strings.NewReader(c.body), DefaultMaxBytes, now, DefaultMaxAge)
			if err == nil {
				t.Fatalf("accepted:\n%s", c.body)
			}
			var re *Error
			if !errors.As(err, &re) {
				t.Fatalf("error %v is not an *Error", err)
			}
			if re.Kind != c.kind {
				t.Errorf("kind %q, want %q (%v)", re.Kind, c.kind, err)
			}
			if !strings.Contains(err.Error(), c.msg) {
				t.Errorf("error %q does not mention %q", err, c.msg)
			}
		})
	}
}

// withFirstProgress is the good report with the first job's first
// progress set to value, as JSON.
func withFirstProgress(value string) string {
	return edit(`"mem_used_bytes":1000`, `"mem_used_bytes":1000,"first_progress":`+value)
}

// A report's first progress is taken as sent, at the precision sent, up
// to the report's own time; null is no first progress.
func TestDecodeFirstProgress(t *testing.T) {
	cases := map[string]struct {
		value string
		want  time.Time // zero: none
	}{
		"to the nanosecond":         {`"2025-03-01T11:58:59.123456789Z"`, time.Date(2025, 3, 1, 11, 58, 59, 123456789, time.UTC)},
		"in another zone":           {`"2025-03-01T13:58:59+02:00"`, time.Date(2025, 3, 1, 11, 58, 59, 0, time.UTC)},
		"at the report's time":      {`"2025-03-01T11:59:30Z"`, time.Date(2025, 3, 1, 11, 59, 30, 0, time.UTC)},
		"months before, a long run": {`"2024-09-01T00:00:00Z"`, time.Date(2024, 9, 1, 0, 0, 0, 0, time.UTC)},
		"null":                      {`null`, time.Time{}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			rep, err := Decode(strings.NewReader(withFirstProgress(c.value)), DefaultMaxBytes, now, DefaultMaxAge)
			if err != nil {
				t.Fatal(err)
			}
			got := rep.Jobs[0].FirstProgress
			switch {
			case c.want.IsZero() && got != nil:
				t.Errorf("first progress %v, want none", *got)
			case !c.want.IsZero() && (got == nil || !got.Equal(c.want)):
				t.Errorf("first progress %v, want %v", got, c.want)
			}
			if rep.Jobs[1].FirstProgress != nil {
				t.Errorf("first progress on a job that sent none: %v", *rep.Jobs[1].FirstProgress)
			}
		})
	}
}

func TestDecodeSizeLimit(t *testing.T) {
	if _, err := Decode(strings.NewReader(good), int64(len(good)), now, DefaultMaxAge); err != nil {
		t.Errorf("a body of exactly the limit was refused: %v", err)
	}
	_, err := Decode(strings.NewReader(good), int64(len(good))-1, now, DefaultMaxAge)
	if KindOf(err) != KindTooLarge {
		t.Errorf("a body one byte over the limit: %v, want %s", err, KindTooLarge)
	}
}

func TestDecodeNoAgeCheck(t *testing.T) {
	old := edit(`2025-03-01T11:59:30Z`, `2001-01-01T00:00:00Z`)
	if _, err := Decode(strings.NewReader(old), DefaultMaxBytes, now, 0); err != nil {
		t.Errorf("maxAge 0 still checked the age: %v", err)
	}
}

// TestValidateNonFinite covers values JSON cannot carry but a report built
// in Go can: the collector validates what it sends with the same code.
func TestValidateNonFinite(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	cases := []struct {
		name string
		mod  func(r *Report)
	}{
		{"NaN rate", func(r *Report) { r.Jobs[0].StepsPerS = &nan }},
		{"Inf rate", func(r *Report) { r.Jobs[0].StepsPerS = &inf }},
		{"NaN util", func(r *Report) { r.Jobs[0].SMUtil = nan }},
		{"Inf interval", func(r *Report) { r.IntervalS = inf }},
		{"too many jobs", func(r *Report) { r.Jobs = make([]Job, MaxJobs+1) }},
	}
	for _, c := range cases {
		r := Report{Node: "n", Time: now, IntervalS: 30, Jobs: []Job{{JobID: "1", GPUType: "v100", GPUs: 1}}}
		if err := r.Validate(now, time.Minute); err != nil {
			t.Fatalf("%s: base report refused: %v", c.name, err)
		}
		c.mod(&r)
		if err := r.Validate(now, time.Minute); KindOf(err) != KindInvalid {
			t.Errorf("%s: %v, want %s", c.name, err, KindInvalid)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte(`{"node":"n","time":"2025-03-01T12:00:00Z","interval_s":1,"jobs":[]}`))
	f.Add([]byte(`{"node":"n","node":"m"}`))
	f.Add([]byte(`[[[[{}]]]]`))
	f.Add([]byte(`{"jobs":[{"steps_per_s":1e999}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		rep, err := Decode(bytes.NewReader(data), 4096, now, DefaultMaxAge)
		if err != nil {
			var re *Error
			if !errors.As(err, &re) || re.Kind == "" {
				t.Fatalf("error without a kind: %v", err)
			}
			return
		}
		// Whatever is accepted must hold up to validation again and
		// survive a round trip unchanged.
		if err := rep.Validate(now, DefaultMaxAge); err != nil {
			t.Fatalf("accepted a report that does not validate: %v", err)
		}
		out, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		again, err := Decode(bytes.NewReader(out), 1<<20, now, DefaultMaxAge)
		if err != nil {
			t.Fatalf("re-encoded report refused: %v\n%s", err, out)
		}
		if len(again.Jobs) != len(rep.Jobs) || again.Node != rep.Node || !again.Time.Equal(rep.Time) {
			t.Fatalf("round trip changed the report")
		}
	})
}
