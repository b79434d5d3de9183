package rest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	api "github.com/SlinkyProject/slurm-client/api/v0042"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

var testNow = time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

func u32(n int32) *api.V0042Uint32NoValStruct {
	return &api.V0042Uint32NoValStruct{Set: ptr(true), Number: ptr(n)}
}

func u64(n int64) *api.V0042Uint64NoValStruct {
	return &api.V0042Uint64NoValStruct{Set: ptr(true), Number: ptr(n)}
}

// fixtureNodes and fixtureJobs are shaped like the replies of a Slurm 24.11
// with fake typed GPUs; the generated types make the JSON.
func fixtureNodes() api.V0042OpenapiNodesResp {
	node := func(name, gres, used string, state ...api.V0042NodeState) api.V0042Node {
		return api.V0042Node{
			Name: ptr(name), Gres: ptr(gres), GresUsed: ptr(used),
			Partitions: &api.V0042CsvString{"gpu"}, Features: &api.V0042CsvString{strings.Split(gres, ":")[1]},
			State: &state,
		}
	}
	return api.V0042OpenapiNodesResp{Nodes: api.V0042Nodes{
		node("v100-1", "gpu:v100:4(S:0)", "gpu:v100:2(IDX:0-1)", "MIXED"),
		node("k80-1", "gpu:k80:4", "gpu:k80:0(IDX:N/A)", "IDLE"),
		{Name: ptr("cpu-1"), Partitions: &api.V0042CsvString{"cpu"}, State: &[]api.V0042NodeState{"IDLE"}},
	}}
}

func fixtureJobs() api.V0042OpenapiJobInfoResp {
	running := api.V0042JobInfo{
		JobId: ptr(int32(7)), UserName: ptr("ana"), Name: ptr("train"), Partition: ptr("gpu"),
		JobState: &[]api.V0042JobInfoJobState{"RUNNING"}, StateReason: ptr("None"),
		TresPerNode: ptr("gres/gpu:2"), NodeCount: u32(1), Priority: u32(500), Hold: ptr(false),
		RestartCnt: ptr(int32(1)), SubmitTime: u64(testNow.Unix() - 600), StartTime: u64(testNow.Unix() - 60),
		Comment:    ptr(`gavel: model=resnet50-bs64 steps=1M`),
		GresDetail: &api.V0042JobInfoGresDetail{"gpu:v100:2(IDX:0-1)"},
		JobResources: &api.V0042JobRes{Nodes: &struct {
			Allocation *api.V0042JobResNodes             `json:"allocation,omitempty"`
			Count      *int32                            `json:"count,omitempty"`
			List       *string                           `json:"list,omitempty"`
			SelectType *[]api.V0042JobResNodesSelectType `json:"select_type,omitempty"`
			Whole      *bool                             `json:"whole,omitempty"`
		}{Allocation: &api.V0042JobResNodes{{Name: "v100-1"}}}},
	}
	pending := api.V0042JobInfo{
		JobId: ptr(int32(9)), UserName: ptr("bo"), Partition: ptr("gpu,cpu"),
		JobState: &[]api.V0042JobInfoJobState{"PENDING"}, StateReason: ptr("JobHeldUser"),
		TresPerJob: ptr("gres/gpu:k80:4"), Priority: u32(0), Hold: ptr(true), Features: ptr("k80"),
		Comment: ptr("no tag here"),
	}
	other := api.V0042JobInfo{
		JobId: ptr(int32(11)), Partition: ptr("cpu"), JobState: &[]api.V0042JobInfoJobState{"PENDING"},
	}
	return api.V0042OpenapiJobInfoResp{Jobs: api.V0042JobInfoMsg{running, pending, other}}
}

// fakeRestd is a slurmrestd stand-in serving v0.0.42 only.
type fakeRestd struct {
	t        *testing.T
	mu       sync.Mutex
	requests []string
	tokens   []string
	bodies   []string
	handler  func(w http.ResponseWriter, r *http.Request) bool // true when it answered
}

func (f *fakeRestd) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	// The generated clients end some paths with '/'; slurmrestd accepts both.
	r.URL.Path = strings.TrimSuffix(r.URL.Path, "/")
	f.mu.Lock()
	f.requests = append(f.requests, r.Method+" "+r.URL.RequestURI())
	f.tokens = append(f.tokens, r.Header.Get("X-SLURM-USER-TOKEN"))
	f.bodies = append(f.bodies, string(body))
	f.mu.Unlock()
	if f.handler != nil && f.handler(w, r) {
		return
	}
	reply := func(v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	switch {
	case !strings.HasPrefix(r.URL.Path, "/slurm/v0.0.42/"):
		http.NotFound(w, r)
	case r.URL.Path == "/slurm/v0.0.42/ping":
		reply(api.V0042OpenapiPingArrayResp{})
	case r.URL.Path == "/slurm/v0.0.42/nodes":
		reply(fixtureNodes())
	case r.URL.Path == "/slurm/v0.0.42/jobs":
		reply(fixtureJobs())
	case strings.HasPrefix(r.URL.Path, "/slurm/v0.0.42/job/"):
		reply(api.V0042OpenapiJobPostResponse{})
	default:
		http.NotFound(w, r)
	}
}

func newTestClient(t *testing.T, f *fakeRestd, mutate ...func(*Config)) (*Client, string) {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	tokenPath := filepath.Join(t.TempDir(), "jwt")
	if err := os.WriteFile(tokenPath, []byte("first-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		URL: srv.URL, UserName: "root", TokenFile: tokenPath, Partitions: []string{"gpu"},
		Timeout: 2 * time.Second, Now: func() time.Time { return testNow },
	}
	for _, m := range mutate {
		m(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, tokenPath
}

func TestSnapshotConvertsReplies(t *testing.T) {
	f := &fakeRestd{t: t}
	c, _ := newTestClient(t, f)
	snap, err := c.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if snap.APIVersion != "v0.0.42" {
		t.Fatalf("negotiated %s", snap.APIVersion)
	}
	// The server offers v0.0.42 only: newer versions are probed and skipped.
	if f.requests[0] != "GET /slurm/v0.0.45/ping" || f.requests[3] != "GET /slurm/v0.0.42/ping" {
		t.Fatalf("negotiation requests %v", f.requests)
	}
	if len(snap.Nodes) != 2 {
		t.Fatalf("nodes of partition gpu: %+v", snap.Nodes)
	}
	v100, _ := snap.Node("v100-1")
	if v100.GPUType != "v100" || v100.GPUs != 4 || v100.GPUsUsed != 2 || v100.State[0] != "MIXED" {
		t.Fatalf("v100-1 = %+v", v100)
	}
	if len(snap.Jobs) != 2 {
		t.Fatalf("jobs of partition gpu: %+v", snap.Jobs)
	}
	run, _ := snap.Job(7)
	wantRun := bridge.Job{
		ID: 7, User: "ana", Name: "train", Partition: "gpu", State: bridge.JobRunning, StateFlags: []string{},
		Reason: "None", GPUs: 2, GPUsPerNode: 2, Nodes: 1, RunningGPUType: "v100", RunningNodes: []string{"v100-1"},
		Restarts: 1, Priority: 500, SubmitTime: testNow.Add(-10 * time.Minute), StartTime: testNow.Add(-time.Minute),
		Comment: "gavel: model=resnet50-bs64 steps=1M", Tag: bridge.Tag{Model: "resnet50-bs64", Steps: 1000000},
	}
	if run.ID != wantRun.ID || run.User != wantRun.User || run.State != wantRun.State || run.GPUs != wantRun.GPUs ||
		run.RunningGPUType != wantRun.RunningGPUType || strings.Join(run.RunningNodes, ",") != "v100-1" ||
		run.Restarts != 1 || run.Priority != 500 || !run.SubmitTime.Equal(wantRun.SubmitTime) ||
		!run.StartTime.Equal(wantRun.StartTime) || run.Tag != wantRun.Tag || !run.Managed() {
		t.Fatalf("running job\n got %+v\nwant %+v", run, wantRun)
	}
	pend, _ := snap.Job(9)
	if pend.GPUs != 4 || pend.RequestedGPUType != "k80" || !pend.Held || pend.Constraints != "k80" ||
		pend.Managed() || !errors.Is(pend.TagErr, bridge.ErrNoTag) || pend.RunningGPUType != "" {
		t.Fatalf("pending job %+v", pend)
	}
}

func TestVersionRestrictionAndNoCommonVersion(t *testing.T) {
	f := &fakeRestd{t: t}
	c, _ := newTestClient(t, f, func(cfg *Config) { cfg.Versions = []string{"v0.0.43"} })
	_, err := c.Snapshot(context.Background())
	if err == nil || !strings.Contains(err.Error(), "serves none of v0.0.43") {
		t.Fatalf("error %v", err)
	}
	// v0.0.41 was dropped with slurm-client v1.2.0.
	for _, v := range []string{"v0.0.39", "v0.0.41"} {
		if _, err := New(Config{URL: "http://x", UserName: "u", TokenFile: "f", Versions: []string{v}}); err == nil {
			t.Fatalf("the unsupported version %s was accepted", v)
		}
	}
}

func TestSnapshotRejectsBadReplies(t *testing.T) {
	jobsReply := func(status int, body string) func(w http.ResponseWriter, r *http.Request) bool {
		return func(w http.ResponseWriter, r *http.Request) bool {
			if r.URL.Path != "/slurm/v0.0.42/jobs" {
				return false
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = io.WriteString(w, body)
			return true
		}
	}
	tests := map[string]struct {
		handler func(w http.ResponseWriter, r *http.Request) bool
		wantErr string
	}{
		"errors on 200": {jobsReply(200, `{"jobs":[],"errors":[{"error":"Unable to query jobs","error_number":2017}]}`),
			"Unable to query jobs [slurm error 2017]"},
		"errors on 500": {jobsReply(500, `{"errors":[{"description":"slurmctld down","error":"Unable to contact slurm controller"}]}`),
			"replied 500"},
		"not json":       {jobsReply(200, `<html>`), "read jobs"},
		"truncated json": {jobsReply(200, `{"jobs":[{"job_id":`), "read jobs"},
		"duplicate jobs": {jobsReply(200, `{"jobs":[{"job_id":5,"partition":"gpu","job_state":["PENDING"]},{"job_id":5,"partition":"gpu","job_state":["PENDING"]}]}`),
			"listed twice"},
		"job id beyond uint32 in a record the types refuse": {jobsReply(200, `{"jobs":[{"job_id":99999999999,"partition":"gpu","job_state":["PENDING"]}]}`),
			"without a usable job id"},
		"job list not a list": {jobsReply(200, `{"jobs":{"job_id":5}}`), "read jobs"},
		"bad value outside the jobs": {jobsReply(200, `{"jobs":[{"job_id":5,"partition":"gpu","job_state":["PENDING"],"hold":"yes"}],"last_update":"now"}`),
			"read jobs"},
		"job id 0": {jobsReply(200, `{"jobs":[{"job_id":0,"partition":"gpu","job_state":["PENDING"]}]}`),
			"job with id 0"},
		"plain 502": {func(w http.ResponseWriter, r *http.Request) bool {
			if r.URL.Path != "/slurm/v0.0.42/jobs" {
				return false
			}
			http.Error(w, "bad gateway", http.StatusBadGateway)
			return true
		}, "replied 502"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, _ := newTestClient(t, &fakeRestd{t: t, handler: tc.handler})
			snap, err := c.Snapshot(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Snapshot() = %v, %v; want error containing %q", snap, err, tc.wantErr)
			}
		})
	}
}

// Slurm priorities are unsigned 32-bit; the generated types hold them in
// int32. A priority above 2^31-1 must not make the whole reply unreadable,
// while a number that overflows anything else still does.
func TestSnapshotSurvivesPrioritiesAbove2To31(t *testing.T) {
	const jobs = `{"jobs":[
		{"job_id":5,"partition":"gpu","job_state":["PENDING"],"priority":{"set":true,"infinite":false,"number":4000000000},"hold":false,"tres_per_node":"gres/gpu:1","comment":"gavel: model=a3c"},
		{"job_id":6,"partition":"gpu","job_state":["PENDING"],"priority":{"set":true,"infinite":false,"number":0},"hold":true,"tres_per_node":"gres/gpu:1"},
		{"job_id":7,"partition":"gpu","job_state":["PENDING"],"priority":{"set":true,"infinite":false,"number":4000000001},"hold":false}]}`
	serve := func(body string) func(w http.ResponseWriter, r *http.Request) bool {
		return func(w http.ResponseWriter, r *http.Request) bool {
			if r.URL.Path != "/slurm/v0.0.42/jobs" {
				return false
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, body)
			return true
		}
	}
	c, _ := newTestClient(t, &fakeRestd{t: t, handler: serve(jobs)})
	snap, err := c.Snapshot(context.Background())
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	for _, tc := range []struct {
		id   bridge.JobID
		held bool
	}{{5, false}, {6, true}, {7, false}} {
		j, ok := snap.Job(tc.id)
		if !ok {
			t.Fatalf("job %d missing", tc.id)
		}
		if j.Held != tc.held {
			t.Errorf("job %d held = %v, want %v", tc.id, j.Held, tc.held)
		}
	}
	if j, _ := snap.Job(5); j.Comment != "gavel: model=a3c" || j.GPUs != 1 || j.Priority != 4000000000 {
		t.Errorf("job 5 read as %+v, want its comment, 1 GPU and priority 4000000000", j)
	}
	if j, _ := snap.Job(6); j.Priority != 0 {
		t.Errorf("job 6 priority %d, want 0", j.Priority)
	}

	// Everything else is still read strictly, before or after such a
	// priority: a job with another bad value is unreadable (and kept as
	// such), its neighbour with a large priority is read in full.
	for name, body := range map[string]string{
		"bad value after a large priority": `{"jobs":[
			{"job_id":5,"partition":"gpu","job_state":["PENDING"],"priority":{"set":true,"number":4000000000}},
			{"job_id":6,"partition":"gpu","job_state":["PENDING"],"hold":"yes"}]}`,
		"overflow elsewhere after a large priority": `{"jobs":[
			{"job_id":5,"partition":"gpu","job_state":["PENDING"],"priority":{"set":true,"number":4000000000}},
			{"job_id":6,"partition":"gpu","job_state":["PENDING"],"restart_cnt":4000000000}]}`,
		"large priority and a bad value in one job": `{"jobs":[
			{"job_id":5,"partition":"gpu","job_state":["PENDING"],"priority":{"set":true,"number":4000000000}},
			{"job_id":6,"partition":"gpu","job_state":["PENDING"],"priority":{"set":true,"number":4000000000},"hold":"yes"}]}`,
	} {
		c, _ = newTestClient(t, &fakeRestd{t: t, handler: serve(body)})
		snap, err := c.Snapshot(context.Background())
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if j, _ := snap.Job(5); j.Unreadable != nil || j.Priority != 4000000000 {
			t.Errorf("%s: job 5 read as %+v (unreadable: %v), want priority 4000000000", name, j, j.Unreadable)
		}
		if j, ok := snap.Job(6); !ok || j.Unreadable == nil || j.State != bridge.JobPending || j.Partition != "gpu" {
			t.Errorf("%s: job 6 read as %+v, want it unreadable, pending in gpu", name, j)
		}
	}
}

func TestTokenRotationAndSecrecy(t *testing.T) {
	f := &fakeRestd{t: t}
	c, tokenPath := newTestClient(t, f)
	ctx := context.Background()
	if _, err := c.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	// A rotated token has a new size or time; make sure both differ.
	if err := os.WriteFile(tokenPath, []byte("SLURM_JWT=second-token-longer\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(tokenPath, later, later); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	last := f.tokens[len(f.tokens)-1]
	if f.tokens[0] != "first-token" || last != "second-token-longer" {
		t.Fatalf("tokens sent: first %q, last %q", f.tokens[0], last)
	}
	if err := os.WriteFile(tokenPath, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := c.Snapshot(ctx)
	if err == nil || !strings.Contains(err.Error(), "is empty") || strings.Contains(err.Error(), "second-token") {
		t.Fatalf("empty token file: %v", err)
	}
}

func TestApplySendsUpdates(t *testing.T) {
	tests := map[string]struct {
		action   bridge.Action
		wantReq  string
		wantBody string // JSON fragment
	}{
		"priority":    {bridge.Action{Kind: bridge.ActSetPriority, Job: 7, Priority: 900}, "POST /slurm/v0.0.42/job/7", `"priority":{"number":900,"set":true}`},
		"hold":        {bridge.Action{Kind: bridge.ActHold, Job: 7}, "POST /slurm/v0.0.42/job/7", `"hold":true`},
		"release":     {bridge.Action{Kind: bridge.ActRelease, Job: 7}, "POST /slurm/v0.0.42/job/7", `"hold":false`},
		"constraints": {bridge.Action{Kind: bridge.ActSetConstraints, Job: 9, Constraints: "k80"}, "POST /slurm/v0.0.42/job/9", `"constraints":"k80"`},
		"begin now":   {bridge.Action{Kind: bridge.ActBeginNow, Job: 9}, "POST /slurm/v0.0.42/job/9", `"begin_time":{"number":1748772000,"set":true}`},
		"signal":      {bridge.Action{Kind: bridge.ActSignal, Job: 7, Signal: "SIGUSR1"}, "DELETE /slurm/v0.0.42/job/7?flags=FULL_JOB&signal=10", ``},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := &fakeRestd{t: t}
			c, _ := newTestClient(t, f)
			if err := c.Apply(context.Background(), tc.action); err != nil {
				t.Fatal(err)
			}
			last := len(f.requests) - 1
			if f.requests[last] != tc.wantReq {
				t.Fatalf("request %q, want %q", f.requests[last], tc.wantReq)
			}
			if !strings.Contains(f.bodies[last], tc.wantBody) {
				t.Fatalf("body %s, want it to contain %s", f.bodies[last], tc.wantBody)
			}
		})
	}
}

func TestApplyReportsSlurmErrors(t *testing.T) {
	refuse := func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodPost {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"errors":[{"error":"Job is no longer pending execution","error_number":2017}]}`)
		return true
	}
	c, _ := newTestClient(t, &fakeRestd{t: t, handler: refuse})
	err := c.Apply(context.Background(), bridge.Action{Kind: bridge.ActSetConstraints, Job: 7, Constraints: "v100"})
	if err == nil || !strings.Contains(err.Error(), `set-constraints job 7 (constraints="v100")`) ||
		!strings.Contains(err.Error(), "no longer pending") {
		t.Fatalf("error %v", err)
	}
}

func TestApplyTimesOut(t *testing.T) {
	stall := func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodPost {
			return false
		}
		<-r.Context().Done()
		return true
	}
	c, _ := newTestClient(t, &fakeRestd{t: t, handler: stall}, func(cfg *Config) { cfg.Timeout = 200 * time.Millisecond })
	start := time.Now()
	err := c.Apply(context.Background(), bridge.Action{Kind: bridge.ActHold, Job: 3})
	if err == nil || time.Since(start) > 2*time.Second {
		t.Fatalf("Apply returned %v after %v", err, time.Since(start))
	}
}

func TestRequeueRunsScontrol(t *testing.T) {
	tests := map[string]struct {
		action   bridge.Action
		fail     bool
		wantArgs string
		wantErr  string
	}{
		"requeue":      {bridge.Action{Kind: bridge.ActRequeue, Job: 12}, false, "/opt/scontrol requeue 12", ""},
		"requeue hold": {bridge.Action{Kind: bridge.ActRequeueHold, Job: 12}, false, "/opt/scontrol requeuehold 12", ""},
		"failure": {bridge.Action{Kind: bridge.ActRequeue, Job: 12}, true, "/opt/scontrol requeue 12",
			"requeue job 12: /opt/scontrol requeue 12: exit status 1: Requested operation is presently disabled"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got string
			c, _ := newTestClient(t, &fakeRestd{t: t}, func(cfg *Config) {
				cfg.Scontrol = "/opt/scontrol"
				cfg.Run = func(_ context.Context, name string, args ...string) ([]byte, error) {
					got = strings.Join(append([]string{name}, args...), " ")
					if tc.fail {
						return []byte("Requested operation is presently disabled\n"), errors.New("exit status 1")
					}
					return nil, nil
				}
			})
			err := c.Apply(context.Background(), tc.action)
			if got != tc.wantArgs {
				t.Fatalf("ran %q, want %q", got, tc.wantArgs)
			}
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestApplyBatchUsesScontrolLists(t *testing.T) {
	holds := func(first, n int) []bridge.Action {
		out := make([]bridge.Action, n)
		for i := range out {
			out[i] = bridge.Action{Kind: bridge.ActHold, Job: bridge.JobID(first + i)}
		}
		return out
	}
	tests := map[string]struct {
		actions []bridge.Action
		// wantRuns are the scontrol calls, the ids abbreviated to
		// "first..last (count)" when there are more than three.
		wantRuns []string
		wantREST []string
	}{
		"holds and releases in one call each, shapes by REST": {
			actions: []bridge.Action{
				{Kind: bridge.ActHold, Job: 3}, {Kind: bridge.ActRelease, Job: 4}, {Kind: bridge.ActHold, Job: 5},
				{Kind: bridge.ActSetShape, Job: 6, Nodes: 1, GPUsPerNode: 2, Constraints: "v100"},
			},
			wantRuns: []string{"hold 3,5", "release 4"},
			wantREST: []string{"POST /slurm/v0.0.42/job/6"},
		},
		"updates in one call per value": {
			actions: []bridge.Action{
				{Kind: bridge.ActSetPriority, Job: 3, Priority: 10}, {Kind: bridge.ActSetPriority, Job: 4, Priority: 11},
				{Kind: bridge.ActSetPriority, Job: 5, Priority: 10}, {Kind: bridge.ActSetConstraints, Job: 6, Constraints: "v100"},
				{Kind: bridge.ActSetConstraints, Job: 7, Constraints: "v100"}, {Kind: bridge.ActBeginNow, Job: 8},
				{Kind: bridge.ActSetConstraints, Job: 9, Constraints: ""},
			},
			wantRuns: []string{"update JobId=3,5 Priority=10", "update JobId=4 Priority=11", "update JobId=6,7 Features=v100",
				"update JobId=8 StartTime=now", "update JobId=9 Features="},
		},
		"long lists are cut in chunks": {
			actions:  holds(1000, 1000),
			wantRuns: []string{"hold 1000..1249 (250)", "hold 1250..1499 (250)", "hold 1500..1749 (250)", "hold 1750..1999 (250)"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var runs []string
			var mu sync.Mutex
			f := &fakeRestd{t: t}
			c, _ := newTestClient(t, f, func(cfg *Config) {
				cfg.Run = func(_ context.Context, name string, args ...string) ([]byte, error) {
					mu.Lock()
					defer mu.Unlock()
					if args[0] == "update" {
						runs = append(runs, strings.Join(args, " "))
						return nil, nil
					}
					ids := strings.Split(args[1], ",")
					list := args[1]
					if len(ids) > 3 {
						list = ids[0] + ".." + ids[len(ids)-1] + " (" + strconv.Itoa(len(ids)) + ")"
					}
					runs = append(runs, args[0]+" "+list)
					return nil, nil
				}
			})
			errs := c.ApplyBatch(context.Background(), tc.actions)
			if len(errs) != len(tc.actions) {
				t.Fatalf("%d errors for %d actions", len(errs), len(tc.actions))
			}
			for i, err := range errs {
				if err != nil {
					t.Errorf("%s: %v", tc.actions[i], err)
				}
			}
			slices.Sort(runs) // chunks run concurrently
			if !slices.Equal(runs, tc.wantRuns) {
				t.Errorf("ran %q, want %q", runs, tc.wantRuns)
			}
			var updates []string
			for _, r := range f.requests {
				if !strings.HasSuffix(r, "/ping") {
					updates = append(updates, r)
				}
			}
			if !slices.Equal(updates, tc.wantREST) {
				t.Errorf("REST requests %q, want %q", updates, tc.wantREST)
			}
		})
	}
}

func TestApplyBatchReadsScontrolsErrorsPerJob(t *testing.T) {
	// slurmrestd refuses job 8 alone, as slurmctld would.
	refuse8 := func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/job/8") {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"errors":[{"error":"Job is no longer pending execution","error_number":2017}]}`)
		return true
	}
	tests := map[string]struct {
		kind bridge.ActionKind
		// out is what scontrol prints as it fails.
		out      string
		wantREST []string
		// wantErr8 is in job 8's error; wantErrAll in every job's.
		wantErr8, wantErrAll string
	}{
		"the failed job named: the others went through": {
			kind: bridge.ActHold, out: "Job is no longer pending execution for job 8\n",
			wantErr8: "scontrol hold: Job is no longer pending execution for job 8",
		},
		"no job named: each sent again by REST": {
			kind: bridge.ActHold, out: "slurm_update error: Unable to contact slurm controller\n",
			wantREST: []string{"POST /slurm/v0.0.42/job/7", "POST /slurm/v0.0.42/job/8", "POST /slurm/v0.0.42/job/9"},
			wantErr8: "no longer pending",
		},
		"a line naming no job besides one naming job 8: each sent again": {
			kind: bridge.ActSetConstraints, out: "Job is no longer pending execution for job 8\nsomething else\n",
			wantREST: []string{"POST /slurm/v0.0.42/job/7", "POST /slurm/v0.0.42/job/8", "POST /slurm/v0.0.42/job/9"},
			wantErr8: "no longer pending",
		},
		"requeue named per job": {
			kind: bridge.ActRequeueHold, out: "Job is pending execution for job 8\n",
			wantErr8: "scontrol requeuehold: Job is pending execution for job 8",
		},
		"requeue without a job named: failed, not sent twice": {
			kind: bridge.ActRequeueHold, out: "Unable to contact slurm controller (connect failure)\n",
			wantErrAll: "Unable to contact slurm controller",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := &fakeRestd{t: t, handler: refuse8}
			var runs int
			c, _ := newTestClient(t, f, func(cfg *Config) {
				cfg.Run = func(context.Context, string, ...string) ([]byte, error) {
					runs++
					return []byte(tc.out), errors.New("exit status 1")
				}
			})
			actions := []bridge.Action{{Kind: tc.kind, Job: 7}, {Kind: tc.kind, Job: 8}, {Kind: tc.kind, Job: 9}, {Kind: tc.kind}}
			errs := c.ApplyBatch(context.Background(), actions)
			for k, err := range errs[:3] {
				switch {
				case tc.wantErrAll != "":
					if err == nil || !strings.Contains(err.Error(), tc.wantErrAll) {
						t.Errorf("%s: %v, want %q", actions[k], err, tc.wantErrAll)
					}
				case k == 1:
					if err == nil || !strings.Contains(err.Error(), string(tc.kind)+" job 8") || !strings.Contains(err.Error(), tc.wantErr8) {
						t.Errorf("job 8: %v, want the refusal %q", err, tc.wantErr8)
					}
				case err != nil:
					t.Errorf("%s: %v, want it done", actions[k], err)
				}
			}
			if errs[3] == nil || !strings.Contains(errs[3].Error(), "no job id") {
				t.Errorf("action without a job: %v, want a validation error", errs[3])
			}
			if runs != 1 {
				t.Errorf("scontrol ran %d times, want once", runs)
			}
			var posts []string
			for _, r := range f.requests {
				if strings.HasPrefix(r, "POST ") {
					posts = append(posts, r)
				}
			}
			slices.Sort(posts) // sent concurrently
			if !slices.Equal(posts, tc.wantREST) {
				t.Errorf("REST requests %q, want %q", posts, tc.wantREST)
			}
		})
	}
}

func TestBatchChunks(t *testing.T) {
	cases := []struct {
		n    int
		want []int
	}{
		{0, []int{0}},
		{1, []int{1}},
		{150, []int{150}},
		{250, []int{125, 125}},
		{976, []int{244, 244, 244, 244}},
		{1003, []int{201, 201, 201, 200, 200}},
		{300, []int{100, 100, 100}},
	}
	for _, c := range cases {
		got := batchChunks(c.n)
		if !slices.Equal(got, c.want) {
			t.Errorf("batchChunks(%d) = %v, want %v", c.n, got, c.want)
		}
	}
}

// Reading the queue may take longer than an update: it has its own bound.
func TestSnapshotHasItsOwnDeadline(t *testing.T) {
	slowJobs := func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path == "/slurm/v0.0.42/jobs" {
			time.Sleep(300 * time.Millisecond)
		}
		return false
	}
	for _, tc := range []struct {
		read   time.Duration
		wantOK bool
	}{{2 * time.Second, true}, {100 * time.Millisecond, false}} {
		c, _ := newTestClient(t, &fakeRestd{t: t, handler: slowJobs}, func(cfg *Config) {
			cfg.Timeout, cfg.ReadTimeout = 100*time.Millisecond, tc.read
		})
		_, err := c.Snapshot(context.Background())
		if (err == nil) != tc.wantOK {
			t.Errorf("read timeout %v: snapshot error %v, want ok=%v", tc.read, err, tc.wantOK)
		}
	}
}

// A node whose GRES names several GPU types is left out of scheduling with
// its reason; the rest of the cluster is read as usual.
func TestSnapshotKeepsANodeWithSeveralGPUTypesOut(t *testing.T) {
	nodes := `{"nodes":[
		{"name":"mix-1","partitions":["gpu"],"gres":"gpu:v100:1,gpu:k80:1","gres_used":"gpu:v100:0,gpu:k80:0","state":["IDLE"]},
		{"name":"v100-1","partitions":["gpu"],"gres":"gpu:v100:4","gres_used":"gpu:v100:0","state":["IDLE"]}]}`
	handler := func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != "/slurm/v0.0.42/nodes" {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, nodes)
		return true
	}
	c, _ := newTestClient(t, &fakeRestd{t: t, handler: handler})
	snap, err := c.Snapshot(context.Background())
	if err != nil {
		t.Fatalf("a node with two GPU types failed the snapshot: %v", err)
	}
	mix, ok := snap.Node("mix-1")
	if !ok || mix.Unreadable == nil || mix.Available() || mix.GPUs != 0 {
		t.Errorf("mix-1 = %+v (unreadable %v), want it kept out with its reason", mix, mix.Unreadable)
	}
	if v, _ := snap.Node("v100-1"); v.GPUs != 4 || !v.Available() {
		t.Errorf("v100-1 = %+v", v)
	}
}
