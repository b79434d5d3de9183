package rest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	api "github.com/SlinkyProject/slurm-client/api/v0042"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

func TestSplitLeaseDeps(t *testing.T) {
	isLease := func(id bridge.JobID) bool { return id == 40 || id == 41 }
	tests := map[string]struct {
		dep  string
		want jobDeps
	}{
		"none":          {"", jobDeps{}},
		"lease alone":   {"afterany:40(unfulfilled)", jobDeps{lease: true}},
		"older lease":   {"afterany:41(unfulfilled)", jobDeps{lease: true}},
		"owner's alone": {"afterok:12(unfulfilled)", jobDeps{shown: "afterok:12(unfulfilled)", own: "afterok:12"}},
		"owner's and mine": {"afterok:12(unfulfilled),afterany:40(unfulfilled)",
			jobDeps{shown: "afterok:12(unfulfilled)", own: "afterok:12", lease: true}},
		"fulfilled left out of own": {"afterok:12(fulfilled),afterany:40(unfulfilled)",
			jobDeps{shown: "afterok:12(fulfilled)", own: "", lease: true}},
		"afterany of another job": {"afterany:400(unfulfilled)", jobDeps{shown: "afterany:400(unfulfilled)", own: "afterany:400"}},
		"any-of": {"afterok:12(unfulfilled)?afterok:13(unfulfilled)",
			jobDeps{shown: "afterok:12(unfulfilled)?afterok:13(unfulfilled)", own: "afterok:12?afterok:13", or: true}},
		"array task": {"afterok:12_3(unfulfilled)", jobDeps{shown: "afterok:12_3(unfulfilled)", own: "afterok:12_3"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := splitLeaseDeps(tc.dep, isLease); got != tc.want {
				t.Errorf("splitLeaseDeps(%q) = %+v, want %+v", tc.dep, got, tc.want)
			}
		})
	}
}

func TestJWTExpiry(t *testing.T) {
	enc := func(payload string) string {
		return "eyJhbGciOiJIUzI1NiJ9." + base64.RawURLEncoding.EncodeToString([]byte(payload)) + ".c2ln"
	}
	tests := map[string]struct {
		token   string
		want    time.Time
		wantErr string
	}{
		"exp":          {enc(`{"exp":1790000000,"iat":1780000000,"sun":"slurm"}`), time.Unix(1790000000, 0), ""},
		"no exp":       {enc(`{"sun":"slurm"}`), time.Time{}, ""},
		"two parts":    {"a.b", time.Time{}, "3"},
		"not base64":   {"a.!!!.c", time.Time{}, "base64url"},
		"not JSON":     {enc(`exp=1`), time.Time{}, "JSON"},
		"exp a string": {enc(`{"exp":"soon"}`), time.Time{}, "JSON"},
		"exp absurd":   {enc(`{"exp":1e300}`), time.Time{}, "not a time"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := jwtExpiry(tc.token)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !got.Equal(tc.want) {
				t.Fatalf("jwtExpiry = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// leaseRestd serves a queue with a lease job (40) of root's, and records
// submissions and updates.
type leaseRestd struct {
	mu sync.Mutex
	// jobs is the queue /jobs answers.
	jobs []api.V0042JobInfo
	// submitID is the id a submission gets; 0 refuses it.
	submitID int32
	// updates are the job updates by job id, in order.
	updates []string
}

func pendingJob(id int32, user, partition, dep string) api.V0042JobInfo {
	return api.V0042JobInfo{
		JobId: ptr(id), UserName: ptr(user), Partition: ptr(partition), JobState: &[]api.V0042JobInfoJobState{"PENDING"},
		StateReason: ptr("Dependency"), TresPerNode: ptr("gres/gpu:1"), NodeCount: u32(1), Priority: u32(100), Hold: ptr(false),
		Dependency: ptr(dep), Comment: ptr("gavel: model=resnet50-bs64 steps=1M"),
	}
}

func leaseJob(id int32) api.V0042JobInfo {
	j := pendingJob(id, "root", "gpu", "")
	j.Name, j.Hold, j.Priority, j.StateReason, j.Comment = ptr(LeaseJobName), ptr(true), u32(0), ptr("JobHeldUser"), ptr(leaseComment)
	return j
}

func (l *leaseRestd) handle(w http.ResponseWriter, r *http.Request) bool {
	reply := func(v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case r.URL.Path == "/slurm/v0.0.42/jobs":
		reply(api.V0042OpenapiJobInfoResp{Jobs: api.V0042JobInfoMsg(l.jobs)})
	case r.URL.Path == "/slurm/v0.0.42/job/submit":
		if l.submitID == 0 {
			w.WriteHeader(http.StatusInternalServerError)
			reply(api.V0042OpenapiJobSubmitResponse{Errors: &api.V0042OpenapiErrors{{ErrorNumber: ptr(int32(2002)), Error: ptr("Invalid partition name specified")}}})
			return true
		}
		reply(api.V0042OpenapiJobSubmitResponse{JobId: ptr(l.submitID)})
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/slurm/v0.0.42/job/"):
		return false // recorded by fakeRestd
	default:
		return false
	}
	return true
}

func newLeaseClient(t *testing.T, l *leaseRestd, mutate ...func(*Config)) (*Client, *fakeRestd) {
	t.Helper()
	f := &fakeRestd{t: t, handler: l.handle}
	c, _ := newTestClient(t, f, mutate...)
	c.EnableLease("gpu")
	return c, f
}

// posts returns the job updates f received since from, as "path body".
func posts(f *fakeRestd, from int) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for i := from; i < len(f.requests); i++ {
		if strings.HasPrefix(f.requests[i], "POST /slurm/v0.0.42/job/") {
			out = append(out, strings.TrimPrefix(f.requests[i], "POST /slurm/v0.0.42/job/")+" "+strings.TrimSpace(f.bodies[i]))
		}
	}
	return out
}

func TestLeaseHoldsAndReleasesByDependency(t *testing.T) {
	l := &leaseRestd{jobs: []api.V0042JobInfo{
		leaseJob(40),
		pendingJob(9, "ana", "gpu", "afterany:40(unfulfilled)"),
		pendingJob(12, "ana", "gpu", "afterok:5(unfulfilled),afterany:40(unfulfilled)"),
		pendingJob(13, "bo", "cpu", "afterany:40(unfulfilled)"), // moved out of the managed partition
		pendingJob(14, "bo", "gpu", ""),
		pendingJob(15, "bo", "gpu", "afterok:5(unfulfilled)?afterok:6(unfulfilled)"),
	}}
	c, f := newLeaseClient(t, l)
	ctx := context.Background()
	snap, err := c.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := snap.Job(40); ok {
		t.Error("the lease job is in the snapshot")
	}
	for _, tc := range []struct {
		id        bridge.JobID
		leaseHeld bool
		dep       string
	}{{9, true, ""}, {12, true, "afterok:5(unfulfilled)"}, {14, false, ""}} {
		j, ok := snap.Job(tc.id)
		if !ok {
			t.Fatalf("job %d missing", tc.id)
		}
		if j.LeaseHeld != tc.leaseHeld || j.Held != tc.leaseHeld || j.Dependency != tc.dep {
			t.Errorf("job %d: lease held %v, held %v, dependency %q; want %v, %v, %q", tc.id, j.LeaseHeld, j.Held, j.Dependency, tc.leaseHeld, tc.leaseHeld, tc.dep)
		}
	}

	// One request renews the lease whatever waits on it; the stray is freed.
	until := testNow.Add(18 * time.Minute)
	lease, err := c.RenewLease(ctx, until)
	if err != nil {
		t.Fatal(err)
	}
	if lease.Job != 40 || !lease.Expires.Equal(until) {
		t.Errorf("lease %+v, want job 40 until %v", lease, until)
	}
	want := []string{
		fmt.Sprintf(`40 {"deadline":%d}`, until.Add(leaseTimeLimit).Unix()),
		`13 {"dependency":""}`,
	}
	if got := posts(f, 0); !slices.Equal(got, want) {
		t.Errorf("renewal sent %q, want %q", got, want)
	}

	n := len(f.requests)
	for _, a := range []bridge.Action{{Kind: bridge.ActHold, Job: 14}, {Kind: bridge.ActRelease, Job: 12}, {Kind: bridge.ActRelease, Job: 9}} {
		if err := c.Apply(ctx, a); err != nil {
			t.Errorf("%s: %v", a, err)
		}
	}
	want = []string{`14 {"dependency":"afterany:40"}`, `12 {"dependency":"afterok:5"}`, `9 {"dependency":""}`}
	if got := posts(f, n); !slices.Equal(got, want) {
		t.Errorf("sent %q, want %q", got, want)
	}
	// Slurm cannot mix ',' and '?': such a job is not held rather than
	// held for good.
	if err := c.Apply(ctx, bridge.Action{Kind: bridge.ActHold, Job: 15}); err == nil || !strings.Contains(err.Error(), "any-of") {
		t.Errorf("hold of a job with an any-of dependency: %v", err)
	}
}

func TestLeaseIsSubmittedWhenNoneIsFound(t *testing.T) {
	l := &leaseRestd{jobs: []api.V0042JobInfo{pendingJob(14, "bo", "gpu", "")}, submitID: 77}
	c, f := newLeaseClient(t, l)
	ctx := context.Background()
	if _, err := c.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(ctx, bridge.Action{Kind: bridge.ActHold, Job: 14}); !errors.Is(err, ErrNoLease) {
		t.Errorf("hold before any lease: %v, want ErrNoLease", err)
	}
	until := testNow.Add(time.Hour)
	lease, err := c.RenewLease(ctx, until)
	if err != nil || lease.Job != 77 {
		t.Fatalf("RenewLease = %+v, %v; want job 77", lease, err)
	}
	var submitted string
	for i, r := range f.requests {
		if strings.HasSuffix(r, "/job/submit") {
			submitted = f.bodies[i]
		}
	}
	var req api.V0042JobSubmitReq
	if err := json.Unmarshal([]byte(submitted), &req); err != nil || req.Job == nil {
		t.Fatalf("submission %q: %v", submitted, err)
	}
	job := req.Job
	if deref(job.Name) != LeaseJobName || !deref(job.Hold) || deref(job.Partition) != "gpu" || deref(job.Deadline) != until.Add(time.Minute).Unix() ||
		job.Requeue == nil || *job.Requeue || deref(job.TimeLimit.Number) != 1 {
		t.Errorf("lease job submitted as %s", submitted)
	}
	n := len(f.requests)
	if err := c.Apply(ctx, bridge.Action{Kind: bridge.ActHold, Job: 14}); err != nil {
		t.Fatal(err)
	}
	if got := posts(f, n); !slices.Equal(got, []string{`14 {"dependency":"afterany:77"}`}) {
		t.Errorf("hold sent %q", got)
	}

	// A refused submission leaves no lease: holds fail, nothing waits.
	l.mu.Lock()
	l.submitID = 0
	l.mu.Unlock()
	if _, err := c.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RenewLease(ctx, until); err == nil || !strings.Contains(err.Error(), "Invalid partition") {
		t.Errorf("renewal with a refused submission: %v", err)
	}
	if err := c.Apply(ctx, bridge.Action{Kind: bridge.ActHold, Job: 14}); !errors.Is(err, ErrNoLease) {
		t.Errorf("hold without a lease: %v, want ErrNoLease", err)
	}
}

func TestLeaseBatchAndRequeue(t *testing.T) {
	l := &leaseRestd{jobs: []api.V0042JobInfo{
		leaseJob(40),
		pendingJob(9, "ana", "gpu", "afterany:40(unfulfilled)"),
		pendingJob(10, "ana", "gpu", "afterany:40(unfulfilled)"),
		pendingJob(12, "ana", "gpu", "afterok:5(unfulfilled)"),
		pendingJob(14, "bo", "gpu", ""),
		pendingJob(16, "bo", "gpu", ""),
	}}
	var mu sync.Mutex
	var runs []string
	c, _ := newLeaseClient(t, l, func(cfg *Config) {
		cfg.Run = func(_ context.Context, name string, args ...string) ([]byte, error) {
			mu.Lock()
			defer mu.Unlock()
			runs = append(runs, strings.Join(args, " "))
			return nil, nil
		}
	})
	ctx := context.Background()
	if _, err := c.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RenewLease(ctx, testNow.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	errs := c.ApplyBatch(ctx, []bridge.Action{
		{Kind: bridge.ActHold, Job: 14}, {Kind: bridge.ActHold, Job: 16}, {Kind: bridge.ActHold, Job: 12},
		{Kind: bridge.ActRelease, Job: 9}, {Kind: bridge.ActRelease, Job: 10},
		{Kind: bridge.ActRequeueHold, Job: 7},
	})
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	slices.Sort(runs)
	want := []string{
		"requeue 7", // not requeuehold: the lease keeps it waiting
		"update JobId=14,16 Dependency=afterany:40",
		"update JobId=7 Dependency=afterany:40",
		"update JobId=12 Dependency=afterok:5,afterany:40",
		"update JobId=9,10 Dependency=",
	}
	slices.Sort(want)
	if !slices.Equal(runs, want) {
		t.Errorf("ran %q, want %q", runs, want)
	}
}

// The lease costs one request per round, however many jobs wait on it:
// 5,000 here, the scale the site tests run at.
func TestLeaseRenewalIsOneRequestAtScale(t *testing.T) {
	jobs := []api.V0042JobInfo{leaseJob(40)}
	for id := int32(1000); id < 6000; id++ {
		jobs = append(jobs, pendingJob(id, "ana", "gpu", "afterany:40(unfulfilled)"))
	}
	l := &leaseRestd{jobs: jobs}
	c, f := newLeaseClient(t, l)
	ctx := context.Background()
	snap, err := c.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	held := 0
	for _, j := range snap.Jobs {
		if j.LeaseHeld {
			held++
		}
	}
	if held != 5000 {
		t.Fatalf("%d jobs wait on the lease, want 5000", held)
	}
	n := len(f.requests)
	if _, err := c.RenewLease(ctx, testNow.Add(18*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got := f.requests[n:]; len(got) != 1 {
		t.Errorf("the renewal sent %d requests, want 1: %q", len(got), got)
	}
	t.Logf("quiet round at %d waiting jobs: %d request for the lease", held, len(f.requests)-n)
}

// A renewal that gets no answer keeps the lease it has (it runs on to its
// deadline); one told the lease job has ended submits a new one.
func TestLeaseRenewalFailures(t *testing.T) {
	for name, tc := range map[string]struct {
		status     int
		body       string
		wantSubmit bool
	}{
		"slurmctld unreachable": {500, `{"errors":[{"error":"Unable to contact slurm controller (connect failure)","error_number":1800}]}`, false},
		"lease job gone":        {500, `{"errors":[{"error":"Invalid job id specified","error_number":2017}]}`, true},
		"lease job ended":       {500, `{"errors":[{"error":"Job/step already completing or completed","error_number":2021}]}`, true},
	} {
		t.Run(name, func(t *testing.T) {
			l := &leaseRestd{jobs: []api.V0042JobInfo{leaseJob(40)}, submitID: 77}
			f := &fakeRestd{t: t, handler: func(w http.ResponseWriter, r *http.Request) bool {
				if r.Method == http.MethodPost && r.URL.Path == "/slurm/v0.0.42/job/40" {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(tc.status)
					_, _ = w.Write([]byte(tc.body))
					return true
				}
				return l.handle(w, r)
			}}
			c, _ := newTestClient(t, f)
			c.EnableLease("gpu")
			ctx := context.Background()
			if _, err := c.Snapshot(ctx); err != nil {
				t.Fatal(err)
			}
			lease, err := c.RenewLease(ctx, testNow.Add(time.Hour))
			submitted := slices.ContainsFunc(f.seen(), func(r string) bool { return strings.HasSuffix(r, "/job/submit") })
			if submitted != tc.wantSubmit {
				t.Errorf("submitted a new lease job: %v, want %v (%v)", submitted, tc.wantSubmit, f.seen())
			}
			if tc.wantSubmit && (err != nil || lease.Job != 77) {
				t.Errorf("RenewLease = %+v, %v; want the new lease job 77", lease, err)
			}
			if !tc.wantSubmit && (err == nil || lease.Job != 40) {
				t.Errorf("RenewLease = %+v, %v; want an error and lease job 40 kept", lease, err)
			}
		})
	}
}
