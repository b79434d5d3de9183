package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/internal/api"
)

func statusFixture() api.Status {
	return api.Status{
		Round: api.Round{Number: 12, Policy: "max_min_fairness_perf", LengthSeconds: 20, DurationSeconds: 0.0423, ActionsSent: 3},
		Jobs: []api.JobStatus{
			{JobID: "101", User: "ana", Model: "ResNet-50", Managed: true, State: "RUNNING", GPUType: "v100", GPUs: 4,
				Reason: "lease extended on v100", Preempt: "checkpoint", Allocation: map[string]float64{"v100": 0.75, "k80": 0.25, "p100": 0},
				Received: map[string]float64{"v100": 300, "k80": 60.4}, StepsDone: ptr(int64(3000)), StepsRemaining: 97000, StepsTotal: 100000,
				RestartCostS: 44.6, RestartSource: "measured",
				Throughputs: map[string]api.Throughput{"v100": {StepsPerS: 412.5, Source: "measured"}, "k80": {StepsPerS: 97.25, Source: "estimated"}}},
			{JobID: "102", User: "bo", Managed: false, State: "PENDING", GPUs: 1, Reason: "no gavel: tag in --comment"},
		},
		Types: []api.TypeSummary{
			{Type: "k80", GPUs: 8, Busy: 0, Pending: 1, AllocatedGPUs: 1},
			{Type: "v100", GPUs: 4, Busy: 4, Running: 1, AllocatedGPUs: 3, CostPerHour: 3.06},
		},
		Preemption: api.Preemption{Enabled: true, Path: "scontrol (/usr/bin/scontrol)"},
	}
}

// While preemption is off, the table is preceded by a banner that says
// why and lists each signalled job whose requeue fails; while it is on,
// there is none.
func TestStatusBannerWhilePreemptionIsOff(t *testing.T) {
	since := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	off := statusFixture()
	off.Preemption = api.Preemption{Path: "scontrol (/usr/bin/scontrol)", Failing: true,
		Reason:  "a requeue failed (scontrol (/usr/bin/scontrol)): job 101: Access/permission denied",
		Waiting: []api.RequeueWaiting{{JobID: "101", Error: "requeue-hold job 101: Access/permission denied", Since: since}}}
	tests := map[string]struct {
		st   api.Status
		want []string // the lines before the table
	}{
		"on": {st: statusFixture()},
		"off, failing": {st: off, want: []string{
			"PREEMPTION OFF: a requeue failed (scontrol (/usr/bin/scontrol)): job 101: Access/permission denied",
			"  running jobs are treated as preempt=never until requeues are proven to work",
			"  job 101: signalled, requeue failing since 2026-11-27T09:00:00Z: requeue-hold job 101: Access/permission denied",
			"",
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			srv := serveStatus(t, tc.st, http.StatusOK)
			var out, errOut bytes.Buffer
			if rc := runStatus([]string{"--server", srv.URL}, &out, &errOut); rc != 0 {
				t.Fatalf("rc=%d stderr=%s", rc, errOut.String())
			}
			lines := strings.Split(out.String(), "\n")
			header := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "JOBID") })
			if header < 0 || !slices.Equal(lines[:header], tc.want) {
				t.Errorf("lines before the table:\n%q\nwant\n%q", lines[:max(header, 0)], tc.want)
			}
		})
	}
}

func serveStatus(t *testing.T, st api.Status, code int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/status" {
			http.NotFound(w, r)
			return
		}
		if code != http.StatusOK {
			http.Error(w, "round loop stalled", code)
			return
		}
		json.NewEncoder(w).Encode(st)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestStatusTable(t *testing.T) {
	srv := serveStatus(t, statusFixture(), http.StatusOK)
	var out, errOut bytes.Buffer
	if rc := runStatus([]string{"--server", srv.URL}, &out, &errOut); rc != 0 {
		t.Fatalf("rc=%d stderr=%s", rc, errOut.String())
	}
	lines := strings.Split(out.String(), "\n")
	wantRows := []struct {
		line   int
		fields []string
	}{
		{0, []string{"JOBID", "USER", "MODEL", "GPUS", "TYPE", "ALLOC", "RECEIVED", "STATE", "PREEMPT", "REASON"}},
		{1, []string{"101", "ana", "ResNet-50", "4", "v100", "k80:0.25,v100:0.75", "k80:1m0s,v100:5m0s", "RUNNING", "checkpoint", "lease", "extended", "on", "v100"}},
		{2, []string{"102", "bo", "(unmanaged)", "1", "-", "-", "-", "PENDING", "-", "no", "gavel:", "tag", "in", "--comment"}},
	}
	for _, w := range wantRows {
		if got := strings.Fields(lines[w.line]); strings.Join(got, "|") != strings.Join(w.fields, "|") {
			t.Errorf("line %d = %q, want fields %q", w.line, lines[w.line], w.fields)
		}
	}
	// Columns are aligned: every row starts its USER column at the same offset.
	col := strings.Index(lines[0], "USER")
	for _, l := range lines[1:3] {
		if strings.Index(l, strings.Fields(l)[1]) != col {
			t.Errorf("misaligned row %q", l)
		}
	}
	// The rates table: each managed job's progress and its rate on each
	// type with the rate's source.
	rates := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "JOBID") && strings.Contains(l, "STEPS/S") {
			rates = i
		}
	}
	if rates < 0 {
		t.Fatalf("no rates table:\n%s", out.String())
	}
	if got, want := strings.Join(strings.Fields(lines[rates]), "|"), "JOBID|STEPS|DONE/TOTAL|RESTART|K80|STEPS/S|V100|STEPS/S"; got != want {
		t.Errorf("rates header %q, want fields %q", got, want)
	}
	if got, want := strings.Join(strings.Fields(lines[rates+1]), "|"), "101|3000/100000|45s|measured|97.25|estimated|412.5|measured"; got != want {
		t.Errorf("rates row %q, want fields %q", got, want)
	}
	if strings.Contains(lines[rates+2], "102") {
		t.Errorf("an unmanaged job has a rates row: %q", lines[rates+2])
	}
	text := out.String()
	for _, want := range []string{
		"k80: 8 GPUs, 0 busy, 0 running, 1 pending, allocation keeps 1.00 busy",
		"v100: 4 GPUs, 4 busy, 1 running, 0 pending, allocation keeps 3.00 busy, $3.06/GPU-hour",
		"round 12, policy max_min_fairness_perf, every 20s, took 42ms, 3 actions sent, 0 failed",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
}

func TestStatusJSON(t *testing.T) {
	srv := serveStatus(t, statusFixture(), http.StatusOK)
	var out, errOut bytes.Buffer
	if rc := runStatus([]string{"--json", "--server", srv.URL}, &out, &errOut); rc != 0 {
		t.Fatalf("rc=%d stderr=%s", rc, errOut.String())
	}
	var st api.Status
	if err := json.Unmarshal(out.Bytes(), &st); err != nil {
		t.Fatalf("--json output is not JSON: %v", err)
	}
	if len(st.Jobs) != 2 || st.Jobs[0].Allocation["v100"] != 0.75 {
		t.Errorf("--json lost data: %+v", st)
	}
}

func TestStatusErrors(t *testing.T) {
	failing := serveStatus(t, api.Status{}, http.StatusServiceUnavailable)
	tests := map[string]struct {
		args    []string
		rc      int
		wantErr string
	}{
		"daemon down":    {[]string{"--server", "127.0.0.1:1"}, 1, "reach the daemon at 127.0.0.1:1"},
		"daemon errors":  {[]string{"--server", failing.URL}, 1, "round loop stalled"},
		"bad flag":       {[]string{"--verbose"}, 2, "flag provided but not defined"},
		"stray argument": {[]string{"now"}, 2, `unexpected argument "now"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if rc := runStatus(tc.args, &out, &errOut); rc != tc.rc {
				t.Errorf("rc = %d, want %d", rc, tc.rc)
			}
			if !strings.Contains(errOut.String(), tc.wantErr) {
				t.Errorf("stderr %q lacks %q", errOut.String(), tc.wantErr)
			}
		})
	}
}

func TestPrintable(t *testing.T) {
	tests := map[string]struct{ in, want string }{
		"plain":             {"ResNet-50 (batch size 64)", "ResNet-50 (batch size 64)"},
		"non-ASCII letters": {"équipe Zoë 模型", "équipe Zoë 模型"},
		"newline":           {"a\nb", `"a\nb"`},
		"carriage return":   {"a\rb", `"a\rb"`},
		"tab":               {"a\tb", `"a\tb"`},
		"escape sequence":   {"\x1b[2Jx", `"\x1b[2Jx"`},
		"C1 control":        {"a\u0085b", `"a\u0085b"`},
		"right-to-left":     {"lab\u202eBA", `"lab\u202eBA"`},
		"line separator":    {"a\u2028b", `"a\u2028b"`},
		"invalid UTF-8":     {"a\xffb", `"a\xffb"`},
		"quotes stay as is": {`say "hi"`, `say "hi"`},
		"empty":             {"", ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := printable(tc.in); got != tc.want {
				t.Errorf("printable(%q) = %s, want %s", tc.in, got, tc.want)
			}
		})
	}
}

// A daemon answer whose fields carry newlines, escapes and bidi controls
// must still print one row per job, with no raw control character.
func TestStatusTableEscapesFields(t *testing.T) {
	st := api.Status{
		Round: api.Round{Number: 1, Policy: "fifo\nround 99", LengthSeconds: 20, Skipped: "slurm\x1b[2J down"},
		Jobs: []api.JobStatus{
			{JobID: "7\n8", User: "ana\nroot", Model: "m\x1b[31m", Managed: true, State: "RUNNING\r", GPUType: "v1\u202e00",
				GPUs: 1, Reason: "forged\n9  mallory  x", Allocation: map[string]float64{"k8\n0": 1}, Received: map[string]float64{"v\t1": 60}},
		},
		Types:      []api.TypeSummary{{Type: "k80\nv100: 999 GPUs", GPUs: 1}},
		Preemption: api.Preemption{Reason: "denied\n\x1b[2J", Waiting: []api.RequeueWaiting{{JobID: "7\n8", Error: "no\rway"}}},
	}
	srv := serveStatus(t, st, http.StatusOK)
	var out, errOut bytes.Buffer
	if rc := runStatus([]string{"--server", srv.URL}, &out, &errOut); rc != 0 {
		t.Fatalf("rc=%d stderr=%s", rc, errOut.String())
	}
	text := out.String()
	for _, r := range text {
		if r != '\n' && !strconv.IsPrint(r) {
			t.Fatalf("output carries the raw character %U:\n%s", r, text)
		}
	}
	// The preemption banner (its line, the note, one waiting job, a
	// blank line), header, one job row, blank line, one type line, the
	// round line.
	if lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n"); len(lines) != 9 {
		t.Fatalf("%d lines, want 9:\n%s", len(lines), text)
	}
	for _, want := range []string{`"7\n8"`, `"ana\nroot"`, `"m\x1b[31m"`, `"RUNNING\r"`, `"v1\u202e00"`,
		`"forged\n9  mallory  x"`, `"k8\n0":1.00`, `"v\t1":1m0s`, `"k80\nv100: 999 GPUs": 1 GPUs`,
		`policy "fifo\nround 99"`, `sent nothing: "slurm\x1b[2J down"`, `PREEMPTION OFF: "denied\n\x1b[2J"`,
		`job "7\n8": signalled`, `"no\rway"`} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %s:\n%s", want, text)
		}
	}
}

func TestStatusFilters(t *testing.T) {
	srv := serveStatus(t, statusFixture(), http.StatusOK)
	tests := map[string]struct {
		args []string
		want []string // job ids shown
	}{
		"no filter":           {nil, []string{"101", "102"}},
		"user":                {[]string{"--user", "bo"}, []string{"102"}},
		"users":               {[]string{"--user", "ana, bo"}, []string{"101", "102"}},
		"state, any case":     {[]string{"--state", "running"}, []string{"101"}},
		"type it runs on":     {[]string{"--type", "v100"}, []string{"101"}},
		"type it has time on": {[]string{"--type", "k80"}, []string{"101"}},
		"type nobody uses":    {[]string{"--type", "p100"}, nil},
		"filters combine":     {[]string{"--user", "ana", "--state", "PENDING"}, nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if rc := runStatus(append([]string{"--server", srv.URL, "--json"}, tc.args...), &out, &errOut); rc != 0 {
				t.Fatalf("rc=%d %s", rc, errOut.String())
			}
			var st api.Status
			if err := json.Unmarshal(out.Bytes(), &st); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, j := range st.Jobs {
				got = append(got, j.JobID)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("jobs %v, want %v", got, tc.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// While the policy's allocation is replaced by the stand-in's, status says
// so under the round line, and says nothing of it otherwise.
func TestStatusSaysWhenTheStandInAllocationIsInUse(t *testing.T) {
	for _, why := range []string{"", "finish_time_fairness_perf: max ρ still in [1, 2] after 256 LPs"} {
		st := statusFixture()
		st.Round.AllocationFallback = why
		var out, errOut bytes.Buffer
		if rc := runStatus([]string{"--server", serveStatus(t, st, http.StatusOK).URL}, &out, &errOut); rc != 0 {
			t.Fatalf("rc=%d stderr=%s", rc, errOut.String())
		}
		said := strings.Contains(out.String(), "equal shares stand in for the policy")
		if said != (why != "") || !strings.Contains(out.String(), why) {
			t.Errorf("fallback %q, output:\n%s", why, out.String())
		}
	}
}

func TestFormatAllocationShowsPairs(t *testing.T) {
	cases := []struct {
		alone, pair map[string]float64
		want        string
	}{
		{map[string]float64{"v100": 0.44}, nil, "v100:0.44"},
		{nil, map[string]float64{"v100": 0.56}, "pair v100:0.56"},
		{map[string]float64{"v100": 0.44}, map[string]float64{"v100": 0.56}, "v100:0.44 pair v100:0.56"},
		{nil, nil, "-"},
	}
	for _, c := range cases {
		if got := formatAllocation(api.JobStatus{Allocation: c.alone, PairAllocation: c.pair}); got != c.want {
			t.Errorf("alone %v, pair %v: %q, want %q", c.alone, c.pair, got, c.want)
		}
	}
}

// Status prints each entity's weight and share, allocated and received,
// and what the round had of slurmdbd.
func TestStatusShowsEntitiesAndAccounting(t *testing.T) {
	st := statusFixture()
	st.Accounting = "limits from slurmdbd: 2 QOS, 9 associations, 0 running GPU jobs elsewhere"
	st.Entities = []api.EntityStatus{
		{Name: "biology", Weight: 0.333, Jobs: 8, EffectiveGPUs: 2, EffectiveGPUSeconds: 100},
		{Name: "physics", Weight: 1, Jobs: 8, EffectiveGPUs: 6, EffectiveGPUSeconds: 300},
	}
	var out, errOut bytes.Buffer
	if rc := runStatus([]string{"--server", serveStatus(t, st, http.StatusOK).URL}, &out, &errOut); rc != 0 {
		t.Fatalf("rc=%d stderr=%s", rc, errOut.String())
	}
	for _, want := range []string{
		"accounting: limits from slurmdbd: 2 QOS",
		"biology          weight 0.333, 8 jobs, 2.00 GPUs (25%), received 25%",
		"physics          weight 1, 8 jobs, 6.00 GPUs (75%), received 75%",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
}
