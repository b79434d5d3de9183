package rest

import (
	"cmp"
	"context"
	"errors"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// seen returns a copy of the requests f has received.
func (f *fakeRestd) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests)
}

// pendingList is slurmrestd 26.05's answer to POST /jobs/requeue of job
// 14 while it is pending.
const pendingList = `{"status":[],"errors":[{"description":"Requeue JobId=14 failed","error_number":2024,"error":"Job is pending execution","source":"op_handler_jobs_requeue"}],"warnings":[]}`

// serveV0045 makes a fakeRestd also offer v0.0.45: its ping answers, one
// job's requeue answers with status and body, and a list's (POST
// /jobs/requeue) as for a pending job 14 (the other paths are not needed
// here and answer 404).
func serveV0045(requeueStatus int, requeueBody string) func(w http.ResponseWriter, r *http.Request) bool {
	return serveV0045With(requeueStatus, requeueBody, http.StatusUnprocessableEntity, pendingList)
}

// serveV0045With is serveV0045 with the list's answer too ("" for 404).
func serveV0045With(requeueStatus int, requeueBody string, listStatus int, listBody string) func(w http.ResponseWriter, r *http.Request) bool {
	return func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.HasPrefix(r.URL.Path, "/slurm/v0.0.45/") {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/slurm/v0.0.45/ping":
			_, _ = io.WriteString(w, `{"pings":[]}`)
		case r.Method == http.MethodPost && r.URL.Path == "/slurm/v0.0.45/jobs/requeue":
			if listBody == "" {
				http.NotFound(w, r)
				return true
			}
			w.WriteHeader(listStatus)
			_, _ = io.WriteString(w, listBody)
		case strings.HasSuffix(r.URL.Path, "/requeue"):
			if requeueBody == "" {
				// A server without the endpoint: plain 404.
				http.NotFound(w, r)
				return true
			}
			w.WriteHeader(requeueStatus)
			_, _ = io.WriteString(w, requeueBody)
		default:
			http.NotFound(w, r)
		}
		return true
	}
}

// probeSnapshot holds one job of each kind the probe must skip, and the
// jobs it may ask about: 12 (held by its user) and 14 (held by an admin).
func probeSnapshot(t *testing.T, self string) *bridge.Snapshot {
	t.Helper()
	jobs := []bridge.Job{
		{ID: 3, User: "ana", State: bridge.JobRunning},
		{ID: 4, User: "ana", State: bridge.JobPending},                                                // not held: could start
		{ID: 5, User: self, State: bridge.JobPending, Held: true, Reason: "JobHeldAdmin"},             // own job proves nothing
		{ID: 6, User: "", State: bridge.JobPending, Held: true, Reason: "JobHeldAdmin"},               // owner unknown
		{ID: 7, User: "bo", State: bridge.JobPending, Held: true, StateFlags: []string{"COMPLETING"}}, // still completing
		{ID: 12, User: "bo", State: bridge.JobPending, Held: true, Reason: "JobHeldUser"},
		{ID: 14, User: "cy", State: bridge.JobPending, Held: true, Reason: "JobHeldAdmin"},
	}
	snap, err := bridge.NewSnapshot(testNow, "", nil, jobs)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func TestProbeJobChoice(t *testing.T) {
	snap := probeSnapshot(t, "gavel")
	j, ok := probeJob(snap, "gavel")
	if !ok || j.ID != 14 {
		t.Fatalf("probe job %d (found %v), want 14, held by an admin (12 is held by its user)", j.ID, ok)
	}
	only := func(jobs ...bridge.Job) *bridge.Snapshot {
		s, err := bridge.NewSnapshot(testNow, "", nil, jobs)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// root may requeue any job, so its own jobs prove its rights as well.
	if j, ok := probeJob(only(bridge.Job{ID: 5, User: "root", State: bridge.JobPending, Held: true, Reason: "JobHeldAdmin"}), "root"); !ok || j.ID != 5 {
		t.Fatalf("root's own held job is not used for root's check: %d, %v", j.ID, ok)
	}
	for name, s := range map[string]*bridge.Snapshot{
		"empty": only(),
		// Its owner could release it, and Slurm start it, between the
		// snapshot and the probe: only an administrator's hold is safe.
		"its user's hold": only(bridge.Job{ID: 12, User: "bo", State: bridge.JobPending, Held: true, Reason: "JobHeldUser"}),
		"own job":         only(bridge.Job{ID: 5, User: "gavel", State: bridge.JobPending, Held: true}),
		"not held":        only(bridge.Job{ID: 5, User: "bo", State: bridge.JobPending}),
		"running":         only(bridge.Job{ID: 5, User: "bo", State: bridge.JobRunning, Held: true}),
		"completing":      only(bridge.Job{ID: 5, User: "bo", State: bridge.JobPending, Held: true, StateFlags: []string{"COMPLETING"}}),
		"no username":     only(bridge.Job{ID: 5, State: bridge.JobPending, Held: true}),
		// A requeue of an array's own id, or of a heterogeneous job's,
		// reaches its other records, running ones included.
		"array's own record":  only(bridge.Job{ID: 5, User: "bo", State: bridge.JobPending, Held: true, ArrayJobID: 5, ArrayTasks: "0-7"}),
		"array task":          only(bridge.Job{ID: 6, User: "bo", State: bridge.JobPending, Held: true, ArrayJobID: 5, ArrayTaskID: 3}),
		"het job's leader":    only(bridge.Job{ID: 5, User: "bo", State: bridge.JobPending, Held: true, HetJobID: 5}),
		"het job's component": only(bridge.Job{ID: 6, User: "bo", State: bridge.JobPending, Held: true, HetJobID: 5, HetJobOffset: 1}),
	} {
		if j, ok := probeJob(s, "gavel"); ok {
			t.Errorf("%s: probe job %d chosen", name, j.ID)
		}
	}
}

func TestCheckRequeueThroughREST(t *testing.T) {
	tests := map[string]struct {
		status int
		body   string // "" serves no requeue endpoint
		stall  bool
		// wantErr is "" when the check must pass, else a part of the error.
		wantErr string
	}{
		// The first six are what slurmrestd 26.05.5 answered.
		"pending":            {422, `{"status":[],"errors":[{"description":"Requeue JobID=14 failed","error_number":2024,"error":"Job is pending execution","source":"op_handler_job_requeue"}],"warnings":[]}`, false, ""},
		"disabled":           {422, `{"status":[],"errors":[{"description":"Requeue JobID=14 failed","error_number":2037,"error":"Requested operation is presently disabled","source":"op_handler_job_requeue"}],"warnings":[]}`, false, ""},
		"unexpected success": {200, `{"status":[],"errors":[],"warnings":[]}`, false, "requeued job 14, which the snapshot showed pending and held"},
		"access denied": {422, `{"status":[],"errors":[{"description":"Requeue JobID=14 failed","error_number":2002,"error":"Access/permission denied","source":"op_handler_job_requeue"}],"warnings":[]}`, false,
			"the bridge's user gavel-slurm may not requeue other users' jobs"},
		"job gone": {404, `{"status":[],"errors":[{"description":"Requeue JobID=14 failed","error_number":2017,"error":"Invalid job id specified","source":"op_handler_job_requeue"}],"warnings":[]}`, false, "does not know job 14"},
		"bad token": {511, `{"status":[],"errors":[{"description":"Requeue JobID=14 failed","error_number":1007,"error":"Protocol authentication error","source":"op_handler_job_requeue"}],"warnings":[]}`, false,
			"rejected the credentials of user gavel-slurm (HTTP 511)"},
		"pending in errors[] on 500":  {500, `{"status":[],"errors":[{"error":"Job is pending execution","error_number":2024,"source":"slurm_requeue2()"}]}`, false, ""},
		"pending on 200":              {200, `{"status":[],"errors":[{"error":"Job is pending execution","error_number":2024}]}`, false, ""},
		"pending in status[]":         {200, `{"status":[{"job_id":14,"error_code":2024,"error":"Job is pending execution"}]}`, false, ""},
		"pending by text":             {500, `{"status":[],"errors":[{"description":"Job is pending execution for job 14"}]}`, false, ""},
		"disabled on 500":             {500, `{"status":[],"errors":[{"error":"Requested operation is presently disabled","error_number":2037}]}`, false, ""},
		"success with a status entry": {200, `{"status":[{"job_id":14,"error_code":0}]}`, false, "requeued job 14, which the snapshot showed pending and held"},
		"access denied on 500": {500, `{"status":[],"errors":[{"error":"Access/permission denied","error_number":2002}]}`, false,
			"the bridge's user gavel-slurm may not requeue other users' jobs"},
		"bad token 401":   {401, `{"status":[],"errors":[{"error":"Authentication failure","error_number":9008}]}`, false, "rejected the credentials of user gavel-slurm"},
		"plain 401":       {401, `Authentication failure`, false, "rejected the credentials of user gavel-slurm (HTTP 401)"},
		"no endpoint":     {0, "", false, "does not serve the requeue endpoint (404)"},
		"job gone on 500": {500, `{"status":[],"errors":[{"error":"Invalid job id specified","error_number":2017}]}`, false, "does not know job 14"},
		"no slurmctld":    {500, `{"status":[],"errors":[{"error":"Unable to contact slurm controller (connect failure)","error_number":1800}]}`, false, "cannot reach slurmctld"},
		"other refusal":   {500, `{"status":[],"errors":[{"error":"Job is no longer pending execution","error_number":2073}]}`, false, "refused in an unexpected way"},
		"odd error":       {500, `{"status":[],"errors":[{"error":"Something else","error_number":2099}]}`, false, "refused in an unexpected way"},
		"no answer":       {200, `{}`, true, "did not answer a requeue of job 14 within"},
		"not json at 502": {502, `bad gateway`, false, "refused in an unexpected way"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			handler := serveV0045(tc.status, tc.body)
			if tc.stall {
				handler = func(w http.ResponseWriter, r *http.Request) bool {
					if strings.HasSuffix(r.URL.Path, "/requeue") {
						<-r.Context().Done()
						return true
					}
					return serveV0045(200, "{}")(w, r)
				}
			}
			f := &fakeRestd{t: t, handler: handler}
			ran := false
			c, _ := newTestClient(t, f, func(cfg *Config) {
				cfg.UserName = "gavel-slurm"
				cfg.Timeout = 300 * time.Millisecond
				cfg.Run = func(context.Context, string, ...string) ([]byte, error) {
					ran = true
					return nil, nil
				}
			})
			err := c.CheckRequeue(context.Background(), probeSnapshot(t, "gavel-slurm"))
			if tc.wantErr == "" && err != nil {
				t.Fatalf("CheckRequeue: %v, want the path proven", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("CheckRequeue: %v, want an error containing %q", err, tc.wantErr)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "slurmrestd v0.0.45") {
				t.Errorf("error %q does not start with the path", err)
			}
			if errors.Is(err, bridge.ErrNoRequeueProbe) {
				t.Errorf("error %v claims there was no job to ask about", err)
			}
			if ran {
				t.Error("scontrol ran although v0.0.45 serves requeue")
			}
			if !slices.Contains(f.seen(), "GET /slurm/v0.0.45/job/14/requeue") {
				t.Errorf("requests %q, want a plain requeue of job 14", f.seen())
			}
		})
	}
}

// Without a held job of another user to ask about, the check asks about
// a job id no Slurm gives: "Invalid job id" proves that the path reaches
// slurmctld (ErrNoRequeueProbe: the rights stay unproven), any other
// answer disproves the path at once.
func TestCheckRequeueWithoutAJobToAsk(t *testing.T) {
	invalid := `{"status":[],"errors":[{"description":"Requeue JobID=2147483632 failed","error_number":2017,"error":"Invalid job id specified","source":"op_handler_job_requeue"}]}`
	tests := map[string]struct {
		server     string // API version offered
		status     int
		body       string // v0.0.45 requeue reply
		out        string // scontrol's answer
		self       string // the bridge's user; "" is gavel-slurm
		wantProven bool
		wantProbe  bool // ErrNoRequeueProbe; else an error containing wantErr
		wantErr    string
		wantAsked  string
	}{
		"rest reaches slurmctld": {server: "v0.0.45", status: 404, body: invalid, wantProbe: true,
			wantAsked: "GET /slurm/v0.0.45/job/2147483632/requeue"},
		"rest without the endpoint": {server: "v0.0.45", status: 0, wantErr: "does not serve the requeue endpoint (404)",
			wantAsked: "GET /slurm/v0.0.45/job/2147483632/requeue"},
		"scontrol reaches slurmctld": {server: "v0.0.42", out: "Invalid job id specified for job 2147483632\n", wantProbe: true,
			wantAsked: "scontrol requeue 2147483632"},
		"scontrol cannot contact": {server: "v0.0.42", out: "scontrol: error: Unable to contact slurm controller (connect failure)\n",
			wantErr: "cannot contact slurmctld", wantAsked: "scontrol requeue 2147483632"},
		// root may requeue any job: reaching slurmctld is the whole proof.
		"rest as root": {server: "v0.0.45", self: "root", status: 404, body: invalid, wantProven: true,
			wantAsked: "GET /slurm/v0.0.45/job/2147483632/requeue"},
		"scontrol as root": {server: "v0.0.42", self: "root", out: "Invalid job id specified for job 2147483632\n", wantProven: true,
			wantAsked: "scontrol requeue 2147483632"},
		"scontrol as root, unreachable": {server: "v0.0.42", self: "root", out: "scontrol: error: Unable to contact slurm controller\n",
			wantErr: "cannot contact slurmctld", wantAsked: "scontrol requeue 2147483632"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := &fakeRestd{t: t}
			if tc.server == "v0.0.45" {
				// A list naming the unused id: slurmctld does not know it.
				f.handler = serveV0045With(tc.status, tc.body, 422,
					`{"status":[],"errors":[{"description":"Requeue JobId=2147483632 failed","error_number":2017,"error":"Invalid job id specified"}]}`)
			}
			self := cmp.Or(tc.self, "gavel-slurm")
			var runs []string
			c, _ := newTestClient(t, f, func(cfg *Config) {
				cfg.UserName = self
				cfg.Run = func(_ context.Context, name string, args ...string) ([]byte, error) {
					runs = append(runs, strings.Join(append([]string{name}, args...), " "))
					return []byte(tc.out), errors.New("exit status 1")
				}
			})
			c.whoami = func() (string, error) { return self, nil }
			jobs := []bridge.Job{{ID: 6, User: "bo", State: bridge.JobRunning}}
			if self != "root" {
				jobs = append(jobs, bridge.Job{ID: 5, User: self, State: bridge.JobPending, Held: true}) // its own: proves nothing
			}
			snap, err := bridge.NewSnapshot(testNow, "", nil, jobs)
			if err != nil {
				t.Fatal(err)
			}
			err = c.CheckRequeue(context.Background(), snap)
			switch {
			case tc.wantProven && err != nil:
				t.Fatalf("CheckRequeue as root: %v, want the path proven", err)
			case tc.wantProven:
			case tc.wantProbe && (!errors.Is(err, bridge.ErrNoRequeueProbe) || !strings.Contains(err.Error(), "acting as user gavel-slurm")):
				t.Fatalf("CheckRequeue: %v, want ErrNoRequeueProbe naming the user", err)
			case !tc.wantProbe && !tc.wantProven && (err == nil || errors.Is(err, bridge.ErrNoRequeueProbe) || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("CheckRequeue: %v, want a failed check saying %q", err, tc.wantErr)
			}
			asked := append(f.seen(), runs...)
			if !slices.Contains(asked, tc.wantAsked) {
				t.Errorf("requests and commands %q, want %q", asked, tc.wantAsked)
			}
			for _, r := range asked {
				if strings.Contains(r, "/5/") || strings.HasSuffix(r, " 5") {
					t.Errorf("asked about the bridge user's own job: %q", r)
				}
			}
		})
	}
}

func TestCheckRequeueThroughScontrol(t *testing.T) {
	denied := errors.New("exit status 1")
	tests := map[string]struct {
		lookErr error
		out     string
		err     error
		stall   bool
		wantErr string // "" when the check must pass
	}{
		"pending":  {out: "Job is pending execution for job 14\n", err: denied},
		"disabled": {out: "Requested operation is presently disabled for job 14\n", err: denied},
		"not in PATH": {lookErr: &exec.Error{Name: "/opt/scontrol", Err: exec.ErrNotFound},
			wantErr: `scontrol (/opt/scontrol, not found): requeues need scontrol while slurmrestd is older than v0.0.45`},
		"vanished after look-up": {err: &exec.Error{Name: "/opt/scontrol", Err: exec.ErrNotFound},
			wantErr: "scontrol (/opt/scontrol) cannot be run"},
		"access denied": {out: "Access/permission denied for job 14\n", err: denied,
			wantErr: "scontrol (/opt/scontrol), run by user gavel, may not requeue other users' jobs (asked about job 14 of cy)"},
		"cannot contact": {out: "scontrol: error: Unable to contact slurm controller (connect failure)\n", err: denied,
			wantErr: "cannot contact slurmctld: check this host's slurm.conf (SlurmctldHost) and munge"},
		"munge": {out: "scontrol: error: Munge encode failed: Failed to access \"/run/munge/munge.socket.2\"\n", err: denied,
			wantErr: "cannot authenticate to slurmctld: check munge"},
		"job gone": {out: "Invalid job id specified for job 14\n", err: denied,
			wantErr: "does not know job 14, which slurmrestd lists as pending"},
		"unexpected success": {out: "", err: nil,
			wantErr: "scontrol (/opt/scontrol) requeued job 14, which the snapshot showed pending and held"},
		"other": {out: "Something odd\n", err: denied, wantErr: "failed in an unexpected way: exit status 1: Something odd"},
		"hangs": {stall: true, wantErr: "did not finish a requeue of job 14 within"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var runs []string
			c, _ := newTestClient(t, &fakeRestd{t: t}, func(cfg *Config) {
				cfg.Scontrol = "/opt/scontrol"
				cfg.Timeout = 300 * time.Millisecond
				cfg.LookPath = func(file string) (string, error) { return file, tc.lookErr }
				cfg.Run = func(ctx context.Context, name string, args ...string) ([]byte, error) {
					runs = append(runs, strings.Join(append([]string{name}, args...), " "))
					if tc.stall {
						<-ctx.Done()
						return nil, errors.New("signal: killed")
					}
					return []byte(tc.out), tc.err
				}
			})
			c.whoami = func() (string, error) { return "gavel", nil }
			err := c.CheckRequeue(context.Background(), probeSnapshot(t, "gavel"))
			if tc.wantErr == "" && err != nil {
				t.Fatalf("CheckRequeue: %v, want the path proven", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("CheckRequeue: %v, want an error containing %q", err, tc.wantErr)
			}
			if errors.Is(err, bridge.ErrNoRequeueProbe) {
				t.Errorf("error %v claims there was no job to ask about", err)
			}
			want := []string{"/opt/scontrol requeue 14"}
			if tc.lookErr != nil {
				want = nil
			}
			if !slices.Equal(runs, want) {
				t.Errorf("ran %q, want %q", runs, want)
			}
		})
	}
}

func TestRequeueGoesThroughRESTOnV0045(t *testing.T) {
	tests := map[string]struct {
		action   bridge.Action
		status   int
		body     string
		wantReq  string
		wantRuns []string
		wantErr  string
	}{
		"requeue": {bridge.Action{Kind: bridge.ActRequeue, Job: 7}, 200, `{"status":[{"job_id":7,"error_code":0}]}`,
			"GET /slurm/v0.0.45/job/7/requeue", nil, ""},
		"requeue hold": {bridge.Action{Kind: bridge.ActRequeueHold, Job: 7}, 200, `{"status":[]}`,
			"GET /slurm/v0.0.45/job/7/requeue?Hold=" + requeueHoldValue, nil, ""},
		"refused": {bridge.Action{Kind: bridge.ActRequeue, Job: 7}, 500,
			`{"status":[],"errors":[{"error":"Job is pending execution","error_number":2024}]}`,
			"GET /slurm/v0.0.45/job/7/requeue", nil,
			"requeue job 7: slurmrestd v0.0.45: slurmrestd replied 500 Internal Server Error: Job is pending execution [slurm error 2024]"},
		"task refused": {bridge.Action{Kind: bridge.ActRequeue, Job: 7}, 200,
			`{"status":[{"job_id":7,"error_code":2037,"error":"Requested operation is presently disabled"}]}`,
			"GET /slurm/v0.0.45/job/7/requeue", nil, "[slurm error 2037]"},
		"as 26.05 answers": {bridge.Action{Kind: bridge.ActRequeueHold, Job: 7}, 200, `{"status":[],"errors":[],"warnings":[]}`,
			"GET /slurm/v0.0.45/job/7/requeue?Hold=true", nil, ""},
		"no such job: no scontrol": {bridge.Action{Kind: bridge.ActRequeue, Job: 7}, 404,
			`{"status":[],"errors":[{"description":"Requeue JobID=7 failed","error_number":2017,"error":"Invalid job id specified","source":"op_handler_job_requeue"}],"warnings":[]}`,
			"GET /slurm/v0.0.45/job/7/requeue", nil, "Invalid job id specified"},
		"endpoint gone: scontrol": {bridge.Action{Kind: bridge.ActRequeueHold, Job: 7}, 0, "",
			"GET /slurm/v0.0.45/job/7/requeue?Hold=" + requeueHoldValue, []string{"/opt/scontrol requeuehold 7"}, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := &fakeRestd{t: t, handler: serveV0045(tc.status, tc.body)}
			var runs []string
			c, _ := newTestClient(t, f, func(cfg *Config) {
				cfg.Scontrol = "/opt/scontrol"
				cfg.Run = func(_ context.Context, name string, args ...string) ([]byte, error) {
					runs = append(runs, strings.Join(append([]string{name}, args...), " "))
					return nil, nil
				}
			})
			if got := c.RequeuePath(); got != "slurmrestd v0.0.45 if offered, else scontrol (/opt/scontrol)" {
				t.Errorf("RequeuePath before negotiating = %q", got)
			}
			err := c.Apply(context.Background(), tc.action)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Apply: %v, want error containing %q", err, tc.wantErr)
			}
			if !slices.Contains(f.seen(), tc.wantReq) {
				t.Errorf("requests %q, want %q among them", f.seen(), tc.wantReq)
			}
			if !slices.Equal(runs, tc.wantRuns) {
				t.Errorf("ran %q, want %q", runs, tc.wantRuns)
			}
		})
	}
}

func TestRequeuePath(t *testing.T) {
	look := func(err error) func(*Config) {
		return func(cfg *Config) {
			cfg.Scontrol = "scontrol"
			cfg.LookPath = func(string) (string, error) { return "/usr/bin/scontrol", err }
		}
	}
	tests := map[string]struct {
		handler func(w http.ResponseWriter, r *http.Request) bool
		mutate  []func(*Config)
		before  string
		after   string
	}{
		"v0.0.45 offered": {serveV0045(200, `{}`), []func(*Config){look(nil)},
			"slurmrestd v0.0.45 if offered, else scontrol (/usr/bin/scontrol)", "slurmrestd v0.0.45"},
		"v0.0.42 only": {nil, []func(*Config){look(nil)},
			"slurmrestd v0.0.45 if offered, else scontrol (/usr/bin/scontrol)", "scontrol (/usr/bin/scontrol)"},
		"scontrol missing": {nil, []func(*Config){look(exec.ErrNotFound)},
			"slurmrestd v0.0.45 if offered, else scontrol (scontrol, not found)", "scontrol (scontrol, not found)"},
		"configured v0.0.45": {serveV0045(200, `{}`), []func(*Config){look(nil), func(cfg *Config) { cfg.Versions = []string{"v0.0.45"} }},
			"slurmrestd v0.0.45", "slurmrestd v0.0.45"},
		"configured v0.0.42": {nil, []func(*Config){look(nil), func(cfg *Config) { cfg.Versions = []string{"v0.0.42"} }},
			"scontrol (/usr/bin/scontrol)", "scontrol (/usr/bin/scontrol)"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := &fakeRestd{t: t, handler: tc.handler}
			c, _ := newTestClient(t, f, tc.mutate...)
			if got := c.RequeuePath(); got != tc.before {
				t.Errorf("before negotiating: %q, want %q", got, tc.before)
			}
			if len(f.seen()) != 0 {
				t.Errorf("RequeuePath contacted slurmrestd: %q", f.seen())
			}
			if _, err := c.APIVersion(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := c.RequeuePath(); got != tc.after {
				t.Errorf("after negotiating: %q, want %q", got, tc.after)
			}
		})
	}
}

// Without scontrol, holds and releases go through REST one by one from the
// start; once scontrol is found it is used, and looked up only once.
func TestApplyBatchWithoutScontrol(t *testing.T) {
	var mu sync.Mutex
	var runs []string
	lookups := 0
	var lookErr error = exec.ErrNotFound
	f := &fakeRestd{t: t}
	c, _ := newTestClient(t, f, func(cfg *Config) {
		cfg.LookPath = func(file string) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			lookups++
			return "/usr/bin/" + file, lookErr
		}
		cfg.Run = func(_ context.Context, name string, args ...string) ([]byte, error) {
			mu.Lock()
			defer mu.Unlock()
			runs = append(runs, name+" "+strings.Join(args, " "))
			return nil, nil
		}
	})
	actions := []bridge.Action{{Kind: bridge.ActHold, Job: 7}, {Kind: bridge.ActRelease, Job: 8}, {Kind: bridge.ActHold, Job: 9}}
	for i, err := range c.ApplyBatch(context.Background(), actions) {
		if err != nil {
			t.Errorf("%s: %v", actions[i], err)
		}
	}
	if len(runs) != 0 {
		t.Errorf("ran %q although scontrol is not found", runs)
	}
	var posts []string
	for _, r := range f.seen() {
		if strings.HasPrefix(r, "POST ") {
			posts = append(posts, r)
		}
	}
	slices.Sort(posts)
	if want := []string{"POST /slurm/v0.0.42/job/7", "POST /slurm/v0.0.42/job/8", "POST /slurm/v0.0.42/job/9"}; !slices.Equal(posts, want) {
		t.Errorf("REST requests %q, want %q", posts, want)
	}

	// scontrol appears: it is used, and found once for two batches.
	mu.Lock()
	lookErr, lookups = nil, 0
	mu.Unlock()
	for range 2 {
		for i, err := range c.ApplyBatch(context.Background(), actions) {
			if err != nil {
				t.Errorf("%s: %v", actions[i], err)
			}
		}
	}
	slices.Sort(runs)
	if want := []string{"scontrol hold 7,9", "scontrol hold 7,9", "scontrol release 8", "scontrol release 8"}; !slices.Equal(runs, want) {
		t.Errorf("ran %q, want %q", runs, want)
	}
	if lookups != 1 {
		t.Errorf("scontrol looked up %d times, want once", lookups)
	}
}

// A requeue still goes out through scontrol when slurmrestd cannot be
// asked which API version it serves.
func TestRequeueFallsBackToScontrolWhenSlurmrestdFails(t *testing.T) {
	down := func(w http.ResponseWriter, r *http.Request) bool {
		http.Error(w, "bad gateway", http.StatusBadGateway)
		return true
	}
	var runs []string
	fail := false
	c, _ := newTestClient(t, &fakeRestd{t: t, handler: down}, func(cfg *Config) {
		cfg.Scontrol = "/opt/scontrol"
		cfg.Run = func(_ context.Context, name string, args ...string) ([]byte, error) {
			runs = append(runs, strings.Join(append([]string{name}, args...), " "))
			if fail {
				return []byte("Unable to contact slurm controller (connect failure)\n"), errors.New("exit status 1")
			}
			return nil, nil
		}
	})
	if err := c.Apply(context.Background(), bridge.Action{Kind: bridge.ActRequeueHold, Job: 7}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if want := []string{"/opt/scontrol requeuehold 7"}; !slices.Equal(runs, want) {
		t.Errorf("ran %q, want %q", runs, want)
	}
	fail = true
	err := c.Apply(context.Background(), bridge.Action{Kind: bridge.ActRequeue, Job: 7})
	if err == nil || !strings.Contains(err.Error(), "Unable to contact slurm controller") || !strings.Contains(err.Error(), "replied 502") {
		t.Fatalf("Apply: %v, want both failures", err)
	}
}

// A requeue through scontrol that cannot start says what to do.
func TestRequeueWithoutScontrolSaysWhy(t *testing.T) {
	c, _ := newTestClient(t, &fakeRestd{t: t}, func(cfg *Config) {
		cfg.Scontrol = "scontrol"
		cfg.Run = func(_ context.Context, name string, _ ...string) ([]byte, error) {
			return nil, &exec.Error{Name: name, Err: exec.ErrNotFound}
		}
	})
	err := c.Apply(context.Background(), bridge.Action{Kind: bridge.ActRequeue, Job: 7})
	if err == nil || !strings.Contains(err.Error(), "requeues need scontrol while slurmrestd is older than v0.0.45") {
		t.Fatalf("Apply: %v", err)
	}
}

// The check proves the path lists of requeues take as well (POST
// /jobs/requeue): a proxy or ACL that refuses it fails the check, and a
// server without it sends lists through scontrol, which is then checked.
func TestCheckRequeueProvesTheListPath(t *testing.T) {
	const pending = `{"status":[],"errors":[{"description":"Requeue JobID=14 failed","error_number":2024,"error":"Job is pending execution"}]}`
	tests := map[string]struct {
		listStatus int
		listBody   string
		scontrol   string // what scontrol answers, when the lists go there
		wantErr    string
	}{
		"both proven":                      {422, pendingList, "", ""},
		"lists refused by a proxy":         {403, `Forbidden`, "", "lists: POST /jobs/requeue"},
		"lists refused to the user":        {422, `{"status":[],"errors":[{"description":"Requeue JobId=14 failed","error_number":2002,"error":"Access/permission denied"}]}`, "", "may not requeue other users' jobs"},
		"lists requeued the probe":         {200, `{"status":[],"errors":[]}`, "", "requeued job 14"},
		"no list endpoint, scontrol works": {0, "", "scontrol: error: Job is pending execution for job 14", ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := &fakeRestd{t: t, handler: serveV0045With(422, pending, tc.listStatus, tc.listBody)}
			ran := false
			c, _ := newTestClient(t, f, func(cfg *Config) {
				cfg.UserName = "gavel-slurm"
				cfg.Run = func(context.Context, string, ...string) ([]byte, error) {
					ran = true
					return []byte(tc.scontrol), errors.New("exit status 1")
				}
			})
			c.whoami = func() (string, error) { return "gavel-slurm", nil }
			err := c.CheckRequeue(context.Background(), probeSnapshot(t, "gavel-slurm"))
			if tc.wantErr == "" && err != nil {
				t.Fatalf("CheckRequeue: %v, want the paths proven", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("CheckRequeue: %v, want an error containing %q", err, tc.wantErr)
			}
			if !slices.Contains(f.seen(), "POST /slurm/v0.0.45/jobs/requeue") {
				t.Errorf("requests %q, want a list requeue of the probe", f.seen())
			}
			if ran != (tc.listBody == "") {
				t.Errorf("scontrol ran: %v, want it only without the list endpoint", ran)
			}
		})
	}
}
