package rest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// lightRestd serves v0.0.42 as slurmrestd 26.05 answers the light reads:
// jobs asked with update_time at or after lastUpdate come back as an
// empty list with last_update 0, nodes as 304; /jobs/state lists states
// (404 when states is nil).
type lightRestd struct {
	lastUpdate int64
	// jobs is the "jobs" list of a full answer.
	jobs   string
	states *string
}

func (l *lightRestd) handler(w http.ResponseWriter, r *http.Request) bool {
	since := r.URL.Query().Get("update_time")
	unchanged := since != "" && since >= fmt.Sprint(l.lastUpdate)
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/slurm/v0.0.42/jobs":
		if unchanged {
			_, _ = io.WriteString(w, `{"jobs":[],"last_update":{"set":true,"infinite":false,"number":0},"errors":[]}`)
		} else {
			fmt.Fprintf(w, `{"jobs":%s,"last_update":{"set":true,"infinite":false,"number":%d},"errors":[]}`, l.jobs, l.lastUpdate)
		}
	case "/slurm/v0.0.42/nodes":
		if unchanged {
			w.WriteHeader(http.StatusNotModified)
			return true
		}
		fmt.Fprintf(w, `{"nodes":[{"name":"v100-1","gres":"gpu:v100:4","gres_used":"gpu:v100:1","partitions":["gpu"],"state":["MIXED"]}],"last_update":{"set":true,"number":%d}}`, l.lastUpdate)
	case "/slurm/v0.0.42/jobs/state":
		if l.states == nil {
			http.NotFound(w, r)
			return true
		}
		fmt.Fprintf(w, `{"jobs":%s,"errors":[]}`, *l.states)
	default:
		return false
	}
	return true
}

const (
	lightJobs = `[{"job_id":7,"partition":"gpu","job_state":["RUNNING"],"tres_per_node":"gres/gpu:1","node_count":{"set":true,"number":1},"job_resources":{"nodes":{"allocation":[{"name":"v100-1"}]}}},` +
		`{"job_id":9,"partition":"gpu","job_state":["PENDING"],"tres_per_node":"gres/gpu:1"}]`
	lightStatesSame    = `[{"job_id":"7","state":["RUNNING"]},{"job_id":"9","state":["PENDING"]}]`
	lightStatesChanged = `[{"job_id":"7","state":["COMPLETED"]},{"job_id":"9","state":["PENDING"]}]`
)

// reads returns the requests for jobs and nodes after the first n
// (slurmdbd's limits are accounting_test.go's).
func reads(f *fakeRestd, n int) []string {
	var out []string
	for _, r := range f.seen()[n:] {
		if !strings.HasSuffix(r, "/ping") && !strings.Contains(r, "/slurmdb/") {
			out = append(out, r)
		}
	}
	slices.Sort(out) // nodes and jobs are read at once
	return out
}

func TestReadsAskWhatChangedSinceTheLastAnswer(t *testing.T) {
	old := testNow.Unix() - 60
	tests := map[string]struct {
		lastUpdate int64
		states     *string
		look       bool
		// wantSecond are the requests of the second snapshot.
		wantSecond []string
	}{
		"a round after an old change: update_time, kept answers": {
			lastUpdate: old,
			wantSecond: []string{fmt.Sprintf("GET /slurm/v0.0.42/jobs?update_time=%d", old), fmt.Sprintf("GET /slurm/v0.0.42/nodes?update_time=%d", old)},
		},
		"a change in the second of the read: read in full": {
			lastUpdate: testNow.Unix(),
			wantSecond: []string{"GET /slurm/v0.0.42/jobs", "GET /slurm/v0.0.42/nodes"},
		},
		"a look whose states match: no job list": {
			lastUpdate: old, states: ptr(lightStatesSame), look: true,
			wantSecond: []string{"GET /slurm/v0.0.42/jobs/state", fmt.Sprintf("GET /slurm/v0.0.42/nodes?update_time=%d", old)},
		},
		"a look whose states differ: the jobs read": {
			lastUpdate: old, states: ptr(lightStatesChanged), look: true,
			wantSecond: []string{"GET /slurm/v0.0.42/jobs/state", fmt.Sprintf("GET /slurm/v0.0.42/jobs?update_time=%d", old),
				fmt.Sprintf("GET /slurm/v0.0.42/nodes?update_time=%d", old)},
		},
		"a look without /jobs/state: the jobs read": {
			lastUpdate: old, look: true,
			wantSecond: []string{"GET /slurm/v0.0.42/jobs/state", fmt.Sprintf("GET /slurm/v0.0.42/jobs?update_time=%d", old),
				fmt.Sprintf("GET /slurm/v0.0.42/nodes?update_time=%d", old)},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l := &lightRestd{lastUpdate: tc.lastUpdate, jobs: lightJobs, states: tc.states}
			f := &fakeRestd{t: t, handler: l.handler}
			c, _ := newTestClient(t, f)
			first, err := c.Snapshot(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if got, want := reads(f, 0), []string{"GET /slurm/v0.0.42/jobs", "GET /slurm/v0.0.42/nodes"}; !slices.Equal(got, want) {
				t.Errorf("first snapshot read %q, want %q", got, want)
			}
			n := len(f.seen())
			ctx := context.Background()
			if tc.look {
				ctx = bridge.AsLook(ctx)
			}
			second, err := c.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := reads(f, n); !slices.Equal(got, sorted(tc.wantSecond)) {
				t.Errorf("second snapshot read %q, want %q", got, sorted(tc.wantSecond))
			}
			if len(second.Jobs) != len(first.Jobs) || len(second.Nodes) != len(first.Nodes) || len(second.Jobs) != 2 {
				t.Errorf("second snapshot has %d jobs and %d nodes, first %d and %d", len(second.Jobs), len(second.Nodes), len(first.Jobs), len(first.Nodes))
			}
		})
	}
}

// After a 404 from /jobs/state, looks read the jobs as rounds do and stop
// asking for states.
func TestLooksStopAskingForStatesAfter404(t *testing.T) {
	l := &lightRestd{lastUpdate: testNow.Unix() - 60, jobs: lightJobs}
	f := &fakeRestd{t: t, handler: l.handler}
	c, _ := newTestClient(t, f)
	for range 3 {
		if _, err := c.Snapshot(bridge.AsLook(context.Background())); err != nil {
			t.Fatal(err)
		}
	}
	asked := 0
	for _, r := range f.seen() {
		if strings.HasSuffix(r, "/jobs/state") {
			asked++
		}
	}
	if asked != 1 {
		t.Errorf("/jobs/state asked %d times, want once", asked)
	}
}

// A queue that is really empty comes with its own last_update: it is not
// taken for "no change", so jobs that ended do vanish.
func TestAnEmptyQueueIsNotTakenForNoChange(t *testing.T) {
	l := &lightRestd{lastUpdate: testNow.Unix() - 60, jobs: lightJobs}
	f := &fakeRestd{t: t, handler: l.handler}
	c, _ := newTestClient(t, f)
	if _, err := c.Snapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.jobs, l.lastUpdate = `[]`, testNow.Unix()-30
	snap, err := c.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Jobs) != 0 {
		t.Errorf("%d jobs, want none", len(snap.Jobs))
	}
}

func TestSameStates(t *testing.T) {
	jobs := []rawJob{{ID: 7, States: []string{"RUNNING"}}, {ID: 9, States: []string{"PENDING", "REQUEUED"}}, {ID: 12, States: []string{"RUNNING"}}}
	tests := map[string]struct {
		states string
		want   bool
	}{
		"same":                    {`7:RUNNING 9:PENDING,REQUEUED 12_3:RUNNING`, true},
		"a state changed":         {`7:COMPLETING 9:PENDING,REQUEUED 12_3:RUNNING`, false},
		"a flag changed":          {`7:RUNNING 9:PENDING 12_3:RUNNING`, false},
		"a job more":              {`7:RUNNING 9:PENDING,REQUEUED 12_3:RUNNING 13:PENDING`, false},
		"a job less":              {`7:RUNNING 9:PENDING,REQUEUED`, false},
		"one record twice":        {`7:RUNNING 7:RUNNING 12_3:RUNNING`, false},
		"a het job's other names": {`7:RUNNING 9+0:PENDING,REQUEUED 12_3:RUNNING`, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var states []jobState
			for _, f := range strings.Fields(tc.states) {
				id, state, _ := strings.Cut(f, ":")
				states = append(states, jobState{ID: id, State: strings.Split(state, ",")})
			}
			if got := sameStates(states, jobs); got != tc.want {
				t.Errorf("sameStates = %v, want %v", got, tc.want)
			}
		})
	}
}

// The daemon's own actions do not show in job states: the look after an
// action reads the jobs.
func TestALookAfterAnActionReadsTheJobs(t *testing.T) {
	l := &lightRestd{lastUpdate: testNow.Unix() - 60, jobs: lightJobs, states: ptr(lightStatesSame)}
	f := &fakeRestd{t: t, handler: l.handler}
	c, _ := newTestClient(t, f, func(cfg *Config) {
		cfg.Run = func(context.Context, string, ...string) ([]byte, error) { return nil, nil }
	})
	if _, err := c.Snapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.ApplyBatch(context.Background(), []bridge.Action{{Kind: bridge.ActRelease, Job: 9}})
	n := len(f.seen())
	if _, err := c.Snapshot(bridge.AsLook(context.Background())); err != nil {
		t.Fatal(err)
	}
	want := []string{fmt.Sprintf("GET /slurm/v0.0.42/jobs?update_time=%d", l.lastUpdate), fmt.Sprintf("GET /slurm/v0.0.42/nodes?update_time=%d", l.lastUpdate)}
	if got := reads(f, n); !slices.Equal(got, want) {
		t.Errorf("look after an action read %q, want %q", got, want)
	}
}
