package rest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// serveBulk answers DELETE /jobs and POST /jobs/requeue on version with
// status and body (404 when body is empty).
func serveBulk(version string, status int, body string) func(w http.ResponseWriter, r *http.Request) bool {
	return func(w http.ResponseWriter, r *http.Request) bool {
		prefix := "/slurm/" + version + "/"
		if version != "v0.0.42" && !strings.HasPrefix(r.URL.Path, prefix) {
			http.NotFound(w, r)
			return true
		}
		path := strings.TrimPrefix(r.URL.Path, prefix)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case path == "ping" && version != "v0.0.42":
			_, _ = io.WriteString(w, `{"pings":[]}`)
		case r.Method == http.MethodDelete && path == "jobs", r.Method == http.MethodPost && path == "jobs/requeue":
			if body == "" {
				http.NotFound(w, r)
				return true
			}
			w.WriteHeader(status)
			_, _ = io.WriteString(w, body)
		case version != "v0.0.42" && strings.HasPrefix(path, "job/"):
			_, _ = io.WriteString(w, `{"errors":[],"warnings":[]}`)
		default:
			return version != "v0.0.42" && func() bool { http.NotFound(w, r); return true }()
		}
		return true
	}
}

func TestSignalsGoInOneRequest(t *testing.T) {
	refused8 := `{"status":[{"error":{"string":"Job can not be altered now, try again later","code":2020,"message":"Job can not be altered now, try again later"},"step_id":"8","job_id":{"set":true,"number":8}},{"step_id":"7","job_id":{"set":true,"number":7}}],"errors":[]}`
	tests := map[string]struct {
		status int
		body   string
		// wantSingles are the one-job requests sent besides.
		wantSingles []string
		// wantErr is each job's error ("" for done), by job.
		wantErr map[bridge.JobID]string
	}{
		"one request, the refused job alone failed": {
			status: 200, body: refused8,
			wantErr: map[bridge.JobID]string{7: "", 8: "slurm error 2020", 9: ""},
		},
		"endpoint missing: one request per job": {
			wantSingles: []string{"DELETE /slurm/v0.0.42/job/7?flags=FULL_JOB&signal=10",
				"DELETE /slurm/v0.0.42/job/8?flags=FULL_JOB&signal=10", "DELETE /slurm/v0.0.42/job/9?flags=FULL_JOB&signal=10"},
			wantErr: map[bridge.JobID]string{7: "", 8: "", 9: ""},
		},
		"request failed as a whole: every job failed, none signalled again": {
			status: 500, body: `{"errors":[{"error":"Unable to contact slurm controller","error_number":1001}]}`,
			wantErr: map[bridge.JobID]string{7: "contact", 8: "contact", 9: "contact"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := &fakeRestd{t: t, handler: serveBulk("v0.0.42", tc.status, tc.body)}
			c, _ := newTestClient(t, f)
			actions := []bridge.Action{
				{Kind: bridge.ActSignal, Job: 7, Signal: "USR1"}, {Kind: bridge.ActSignal, Job: 8, Signal: "USR1"},
				{Kind: bridge.ActSignal, Job: 9, Signal: "SIGUSR1"},
			}
			errs := c.ApplyBatch(context.Background(), actions)
			bodies := f.listBodies()
			for k, err := range errs {
				want := tc.wantErr[actions[k].Job]
				if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
					t.Errorf("%s: %v, want %q", actions[k], err, want)
				}
			}
			if len(bodies) != 1 {
				t.Fatalf("%d list requests, want 1", len(bodies))
			}
			var sent struct {
				Jobs   []string `json:"jobs"`
				Signal string   `json:"signal"`
				Flags  []string `json:"flags"`
			}
			if err := json.Unmarshal([]byte(bodies[0]), &sent); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(sent.Jobs, []string{"7", "8", "9"}) || sent.Signal != "10" || !slices.Equal(sent.Flags, []string{"FULL_JOB"}) {
				t.Errorf("sent %+v, want jobs 7,8,9, signal 10, flag FULL_JOB", sent)
			}
			var singles []string
			for _, r := range f.seen() {
				if strings.Contains(r, "/job/") {
					singles = append(singles, r)
				}
			}
			slices.Sort(singles)
			if !slices.Equal(singles, tc.wantSingles) {
				t.Errorf("one-job requests %q, want %q", singles, tc.wantSingles)
			}
		})
	}
}

func TestRequeuesGoInOneRequestOnV0045(t *testing.T) {
	refused8 := `{"status":[],"errors":[{"description":"Requeue JobId=8 failed","error_number":2024,"error":"Job is pending execution","source":"op_handler_jobs_requeue"}]}`
	tests := map[string]struct {
		status   int
		body     string
		wantRuns []string
		wantErr  map[bridge.JobID]string
		// unknown is set when no job's outcome can be told from the
		// answer: the daemon reconciles them with Slurm's view rather
		// than take them for refused.
		unknown bool
	}{
		"one request, the refused job alone failed": {
			status: 200, body: refused8,
			wantErr: map[bridge.JobID]string{7: "", 8: "slurm error 2024", 9: ""},
		},
		"an error naming no job leaves every job's outcome unknown": {
			status: 500, body: `{"status":[],"errors":[{"description":"Unable to contact slurm controller","error_number":1001}]}`,
			wantErr: map[bridge.JobID]string{7: "contact", 8: "contact", 9: "contact"}, unknown: true,
		},
		"refused in status[] under its job id": {
			status: 200, body: `{"status":[[{"job_id":8,"error_code":2024,"error":"Job is pending execution"}]],"errors":[]}`,
			wantErr: map[bridge.JobID]string{7: "", 8: "slurm error 2024", 9: ""},
		},
		"endpoint missing: scontrol lists": {
			wantRuns: []string{"requeuehold 7,8,9"},
			wantErr:  map[bridge.JobID]string{7: "", 8: "", 9: ""},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var runs []string
			f := &fakeRestd{t: t, handler: serveBulk("v0.0.45", tc.status, tc.body)}
			c, _ := newTestClient(t, f, func(cfg *Config) {
				cfg.Run = func(_ context.Context, _ string, args ...string) ([]byte, error) {
					runs = append(runs, strings.Join(args, " "))
					return nil, nil
				}
			})
			actions := []bridge.Action{{Kind: bridge.ActRequeueHold, Job: 7}, {Kind: bridge.ActRequeueHold, Job: 8}, {Kind: bridge.ActRequeueHold, Job: 9}}
			errs := c.ApplyBatch(context.Background(), actions)
			bodies := f.listBodies()
			for k, err := range errs {
				want := tc.wantErr[actions[k].Job]
				if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
					t.Errorf("%s: %v, want %q", actions[k], err, want)
				}
				if err != nil && bridge.OutcomeUnknown(err) != tc.unknown {
					t.Errorf("%s: outcome unknown %v, want %v: %v", actions[k], bridge.OutcomeUnknown(err), tc.unknown, err)
				}
			}
			if want := `{"flags":["Hold"],"jobs":["7","8","9"]}`; len(bodies) != 1 || bodies[0] != want {
				t.Errorf("list requests %q, want one: %s", bodies, want)
			}
			if !slices.Equal(runs, tc.wantRuns) {
				t.Errorf("scontrol %q, want %q", runs, tc.wantRuns)
			}
			for _, r := range f.seen() {
				if strings.Contains(r, "/job/") {
					t.Errorf("one-job request %s", r)
				}
			}
		})
	}
}

// Each kind goes out as one group, holds first and releases last, so that
// a job that must wait is stopped before another is made startable.
func TestApplyBatchSendsHoldsFirstAndReleasesLast(t *testing.T) {
	var runs []string
	f := &fakeRestd{t: t}
	c, _ := newTestClient(t, f, func(cfg *Config) {
		cfg.Run = func(_ context.Context, _ string, args ...string) ([]byte, error) {
			runs = append(runs, strings.Join(args, " "))
			return nil, nil
		}
	})
	actions := []bridge.Action{
		{Kind: bridge.ActBeginNow, Job: 1}, {Kind: bridge.ActRelease, Job: 2}, {Kind: bridge.ActSetConstraints, Job: 3, Constraints: "k80"},
		{Kind: bridge.ActHold, Job: 4}, {Kind: bridge.ActRequeue, Job: 5},
	}
	for k, err := range c.ApplyBatch(context.Background(), actions) {
		if err != nil {
			t.Errorf("%s: %v", actions[k], err)
		}
	}
	want := []string{"hold 4", "requeue 5", "update JobId=3 Features=k80", "release 2", "update JobId=1 StartTime=now"}
	if !slices.Equal(runs, want) {
		t.Errorf("ran %q, want %q", runs, want)
	}
}

// listBodies are the bodies of the list requests (DELETE /jobs, POST
// /jobs/requeue) the server saw.
func (f *fakeRestd) listBodies() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for i, r := range f.requests {
		if strings.HasSuffix(r, "/jobs") && strings.HasPrefix(r, "DELETE ") || strings.HasSuffix(r, "/jobs/requeue") {
			out = append(out, f.bodies[i])
		}
	}
	return out
}

// A job released in an earlier step may start before its begin-now: that
// is what begin-now was for, not a failure.
func TestBeginNowOfAStartedJobIsDone(t *testing.T) {
	f := &fakeRestd{t: t}
	c, _ := newTestClient(t, f, func(cfg *Config) {
		cfg.Run = func(context.Context, string, ...string) ([]byte, error) {
			return []byte("Job is no longer pending execution for job 8\nInvalid job id specified for job 9\n"), errors.New("exit status 1")
		}
	})
	actions := []bridge.Action{{Kind: bridge.ActBeginNow, Job: 7}, {Kind: bridge.ActBeginNow, Job: 8}, {Kind: bridge.ActBeginNow, Job: 9}}
	errs := c.ApplyBatch(context.Background(), actions)
	if errs[0] != nil || errs[1] != nil {
		t.Errorf("jobs 7 and 8: %v, %v; want both done", errs[0], errs[1])
	}
	if errs[2] == nil || !strings.Contains(errs[2].Error(), "Invalid job id") {
		t.Errorf("job 9: %v, want its refusal", errs[2])
	}
}

// Updates of one job that Slurm takes in one request go as one: one
// scontrol update per set of values, or one slurmrestd job update per job
// without scontrol; a refusal fails every update of its request.
func TestUpdatesOfOneJobShareOneRequest(t *testing.T) {
	actions := []bridge.Action{
		{Kind: bridge.ActSetConstraints, Job: 1, Constraints: "k80"}, {Kind: bridge.ActSetPriority, Job: 1, Priority: 5}, {Kind: bridge.ActBeginNow, Job: 1},
		{Kind: bridge.ActSetConstraints, Job: 2, Constraints: "k80"}, {Kind: bridge.ActSetPriority, Job: 2, Priority: 5}, {Kind: bridge.ActBeginNow, Job: 2},
		{Kind: bridge.ActSetPriority, Job: 3, Priority: 5}, {Kind: bridge.ActBeginNow, Job: 3},
		{Kind: bridge.ActSetPriority, Job: 4, Priority: 5},
	}
	t.Run("scontrol", func(t *testing.T) {
		var runs []string
		f := &fakeRestd{t: t}
		c, _ := newTestClient(t, f, func(cfg *Config) {
			cfg.Run = func(_ context.Context, _ string, args ...string) ([]byte, error) {
				runs = append(runs, strings.Join(args, " "))
				if strings.Contains(args[1], "2") {
					return []byte("Invalid feature specification for job 2\n"), errors.New("exit status 1")
				}
				return nil, nil
			}
		})
		errs := c.ApplyBatch(context.Background(), actions)
		want := []string{"update JobId=1,2 Features=k80 Priority=5 StartTime=now", "update JobId=3 Priority=5 StartTime=now", "update JobId=4 Priority=5"}
		if !slices.Equal(runs, want) {
			t.Errorf("ran %q, want %q", runs, want)
		}
		for k, err := range errs {
			if failed := actions[k].Job == 2; failed != (err != nil) || failed && !strings.Contains(err.Error(), "Invalid feature") {
				t.Errorf("%s: %v", actions[k], err)
			}
		}
		if len(f.seen()) != 0 {
			t.Errorf("slurmrestd asked %q", f.seen())
		}
	})
	t.Run("slurmrestd", func(t *testing.T) {
		f := &fakeRestd{t: t}
		c, _ := newTestClient(t, f, func(cfg *Config) {
			cfg.LookPath = func(string) (string, error) { return "", exec.ErrNotFound }
		})
		for k, err := range c.ApplyBatch(context.Background(), actions) {
			if err != nil {
				t.Errorf("%s: %v", actions[k], err)
			}
		}
		updates := map[string]string{}
		f.mu.Lock()
		for i, r := range f.requests {
			if strings.HasPrefix(r, "POST ") {
				updates[r] = f.bodies[i]
			}
		}
		f.mu.Unlock()
		if len(updates) != 4 {
			t.Errorf("%d updates, want one per job: %q", len(updates), updates)
		}
		body := updates["POST /slurm/v0.0.42/job/1"]
		for _, field := range []string{`"constraints":"k80"`, `"priority":{"number":5,"set":true}`, `"begin_time":`} {
			if !strings.Contains(body, field) {
				t.Errorf("job 1's update %s lacks %s", body, field)
			}
		}
	})
}

// Every kind of action has its step in a batch, and a pending job made a
// pair's member is released only after its shard request went out.
func TestBulkOrderHasEveryKind(t *testing.T) {
	for _, k := range bridge.Kinds {
		if !slices.Contains(bulkOrder, k) {
			t.Errorf("%s has no step in ApplyBatch", k)
		}
	}
	if slices.Index(bulkOrder, bridge.ActSetShare) > slices.Index(bulkOrder, bridge.ActRelease) {
		t.Error("set-share is sent after release: the job could start on a whole GPU")
	}
}

func TestApplyBatchSendsShareBeforeRelease(t *testing.T) {
	var runs []string
	f := &fakeRestd{t: t}
	c, _ := newTestClient(t, f, func(cfg *Config) {
		cfg.Run = func(_ context.Context, _ string, args ...string) ([]byte, error) {
			runs = append(runs, strings.Join(args, " "))
			return nil, nil
		}
	})
	actions := []bridge.Action{
		{Kind: bridge.ActSetShare, Job: 7, Shards: 1, Node: "v100-1", Constraints: "v100"}, {Kind: bridge.ActRelease, Job: 7},
	}
	for k, err := range c.ApplyBatch(context.Background(), actions) {
		if err != nil {
			t.Errorf("%s: %v", actions[k], err)
		}
	}
	requests := f.seen()
	if len(requests) == 0 || !strings.Contains(requests[len(requests)-1], "/job/7") {
		t.Fatalf("no slurmrestd update of job 7 for its share: %q", requests)
	}
	if !slices.Equal(runs, []string{"release 7"}) {
		t.Fatalf("scontrol ran %q, want the release after the share", runs)
	}
}
