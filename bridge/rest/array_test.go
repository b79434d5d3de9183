package rest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// The records of job arrays and heterogeneous jobs as slurmrestd 24.11
// shows them: an array's own record holds its tasks not started
// (array_task_id unset, array_task_string with the limit after "%");
// every task Slurm started has a record of its own, the last one on the
// array's id; a job outside arrays and heterogeneous jobs has both ids 0.
func TestConvertJobReadsArraysAndHetJobs(t *testing.T) {
	base := func(change func(*rawJob)) rawJob {
		r := rawJob{ID: 130, User: "ana", Partition: "gpu", States: []string{"PENDING"}, NodeCount: 1, TresPerNode: "gres/gpu:1"}
		change(&r)
		return r
	}
	tests := []struct {
		name    string
		raw     rawJob
		want    bridge.Job // the array and het fields only
		wantErr string     // in Unreadable
	}{
		{name: "plain job", raw: base(func(r *rawJob) {}), want: bridge.Job{}},
		{name: "array's own record with a limit",
			raw: base(func(r *rawJob) {
				r.ArrayJobID, r.ArrayTasks, r.ArrayLimit = 130, "2-7%2", 2
			}),
			want: bridge.Job{ArrayJobID: 130, ArrayTasks: "2-7", ArrayLimit: 2}},
		{name: "array's own record after tasks were split out",
			raw:  base(func(r *rawJob) { r.ArrayJobID, r.ArrayTasks = 130, "3-4,6-7" }),
			want: bridge.Job{ArrayJobID: 130, ArrayTasks: "3-4,6-7"}},
		{name: "task with a record of its own",
			raw: base(func(r *rawJob) {
				r.ID, r.States, r.ArrayJobID, r.ArrayTaskID, r.ArrayTaskSet, r.ArrayLimit = 131, []string{"RUNNING"}, 130, 0, true, 2
			}),
			want: bridge.Job{ArrayJobID: 130, ArrayTaskID: 0, ArrayLimit: 2}},
		{name: "last task on the array's own id",
			raw:  base(func(r *rawJob) { r.ArrayJobID, r.ArrayTaskID, r.ArrayTaskSet = 130, 7, true }),
			want: bridge.Job{ArrayJobID: 130, ArrayTaskID: 7}},
		{name: "task id NO_VAL is read as unset",
			raw: base(func(r *rawJob) {
				r.ArrayJobID, r.ArrayTaskID, r.ArrayTaskSet, r.ArrayTasks = 130, 4294967294, true, "0-3"
			}),
			want: bridge.Job{ArrayJobID: 130, ArrayTasks: "0-3"}},
		{name: "het job component",
			raw:  base(func(r *rawJob) { r.ID, r.HetJobID, r.HetJobOffset = 140, 139, 1 }),
			want: bridge.Job{HetJobID: 139, HetJobOffset: 1}},
		{name: "array's own record without its tasks",
			raw:     base(func(r *rawJob) { r.ArrayJobID = 130 }),
			want:    bridge.Job{ArrayJobID: 130, ArrayTasks: "?"},
			wantErr: "job array record without its task id or its tasks"},
		{name: "task id beyond any array",
			raw:     base(func(r *rawJob) { r.ArrayJobID, r.ArrayTaskID, r.ArrayTaskSet = 130, 5_000_000, true }),
			want:    bridge.Job{ArrayJobID: 130, ArrayTasks: "?"},
			wantErr: "above any Slurm gives"},
		{name: "tasks that do not parse",
			raw:     base(func(r *rawJob) { r.ArrayJobID, r.ArrayTasks = 130, "7-3" }),
			want:    bridge.Job{ArrayJobID: 130, ArrayTasks: "7-3"},
			wantErr: "ends before it starts"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j, err := convertJob(tc.raw, nil)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.wantErr == "" && j.Unreadable != nil:
				t.Errorf("unreadable: %v", j.Unreadable)
			case tc.wantErr != "" && (j.Unreadable == nil || !strings.Contains(j.Unreadable.Error(), tc.wantErr)):
				t.Errorf("unreadable = %v, want it to mention %q", j.Unreadable, tc.wantErr)
			}
			got := bridge.Job{ArrayJobID: j.ArrayJobID, ArrayTaskID: j.ArrayTaskID, ArrayTasks: j.ArrayTasks,
				ArrayLimit: j.ArrayLimit, HetJobID: j.HetJobID, HetJobOffset: j.HetJobOffset}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if j.GPUs != 1 {
				t.Errorf("GPUs %d: an array's request is each task's", j.GPUs)
			}
		})
	}
}

// arrayJobsReply is a jobs reply with the fields as slurmrestd 24.11 sends
// them (every version from v0.0.42 to v0.0.45 names and types them alike):
// array 130's own record (tasks 2-7, limit 2), its task 0 on a record of
// its own, array 200's last task on the array's id, the two components of
// heterogeneous job 139, and a plain job, whose ids Slurm sets to 0.
const arrayJobsReply = `{"jobs":[
 {"job_id":130,"partition":"gpu","job_state":["PENDING"],"tres_per_node":"gres/gpu:1",
  "array_job_id":{"set":true,"number":130},"array_task_id":{"set":false,"number":0},"array_task_string":"2-7%2",
  "array_max_tasks":{"set":true,"number":2},"het_job_id":{"set":true,"number":0},"het_job_offset":{"set":true,"number":0}},
 {"job_id":131,"partition":"gpu","job_state":["RUNNING"],"tres_per_node":"gres/gpu:1",
  "array_job_id":{"set":true,"number":130},"array_task_id":{"set":true,"number":0},"array_task_string":"",
  "array_max_tasks":{"set":true,"number":2},"het_job_id":{"set":true,"number":0},"het_job_offset":{"set":true,"number":0}},
 {"job_id":200,"partition":"gpu","job_state":["RUNNING"],"tres_per_node":"gres/gpu:1",
  "array_job_id":{"set":true,"number":200},"array_task_id":{"set":true,"number":7},"array_task_string":"",
  "array_max_tasks":{"set":true,"number":0}},
 {"job_id":139,"partition":"gpu","job_state":["PENDING"],"tres_per_node":"gres/gpu:1",
  "array_job_id":{"set":true,"number":0},"het_job_id":{"set":true,"number":139},"het_job_offset":{"set":true,"number":0},"het_job_id_set":"139-140"},
 {"job_id":140,"partition":"gpu","job_state":["PENDING"],"tres_per_node":"gres/gpu:2",
  "array_job_id":{"set":true,"number":0},"het_job_id":{"set":true,"number":139},"het_job_offset":{"set":true,"number":1},"het_job_id_set":"139-140"},
 {"job_id":5,"partition":"gpu","job_state":["PENDING"],"tres_per_node":"gres/gpu:1",
  "array_job_id":{"set":true,"number":0},"array_task_id":{"set":false,"number":0},"array_task_string":"",
  "array_max_tasks":{"set":true,"number":0},"het_job_id":{"set":true,"number":0},"het_job_offset":{"set":true,"number":0}}]}`

// serveVersion makes a fakeRestd answer as a slurmrestd offering version
// only: ping, nodes, arrayJobsReply, and empty successes for updates,
// signals and requeues.
func serveVersion(version string) func(w http.ResponseWriter, r *http.Request) bool {
	prefix := "/slurm/" + version + "/"
	return func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.HasPrefix(r.URL.Path, prefix) {
			http.NotFound(w, r)
			return true
		}
		w.Header().Set("Content-Type", "application/json")
		switch path := strings.TrimPrefix(r.URL.Path, prefix); {
		case path == "ping":
			_, _ = io.WriteString(w, `{"pings":[]}`)
		case path == "nodes":
			_, _ = io.WriteString(w, `{"nodes":[{"name":"p100-1","gres":"gpu:p100:4","gres_used":"gpu:p100:2","partitions":["gpu"],"state":["MIXED"]}]}`)
		case path == "jobs":
			_, _ = io.WriteString(w, arrayJobsReply)
		case strings.HasPrefix(path, "job/") && strings.HasSuffix(path, "/requeue"):
			_, _ = io.WriteString(w, `{"status":[],"errors":[],"warnings":[]}`)
		case strings.HasPrefix(path, "job/"):
			_, _ = io.WriteString(w, `{"errors":[],"warnings":[]}`)
		default:
			http.NotFound(w, r)
		}
		return true
	}
}

func TestSnapshotReadsArraysAndHetJobsInEveryVersion(t *testing.T) {
	want := map[bridge.JobID]bridge.Job{
		130: {ArrayJobID: 130, ArrayTasks: "2-7", ArrayLimit: 2},
		131: {ArrayJobID: 130, ArrayTaskID: 0, ArrayLimit: 2},
		200: {ArrayJobID: 200, ArrayTaskID: 7},
		139: {HetJobID: 139},
		140: {HetJobID: 139, HetJobOffset: 1},
		5:   {},
	}
	for _, version := range SupportedVersions() {
		t.Run(version, func(t *testing.T) {
			c, _ := newTestClient(t, &fakeRestd{t: t, handler: serveVersion(version)})
			snap, err := c.Snapshot(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if snap.APIVersion != version {
				t.Fatalf("read through %s", snap.APIVersion)
			}
			for id, w := range want {
				j, ok := snap.Job(id)
				if !ok || j.Unreadable != nil {
					t.Fatalf("job %d: found %v, unreadable %v", id, ok, j.Unreadable)
				}
				got := bridge.Job{ArrayJobID: j.ArrayJobID, ArrayTaskID: j.ArrayTaskID, ArrayTasks: j.ArrayTasks,
					ArrayLimit: j.ArrayLimit, HetJobID: j.HetJobID, HetJobOffset: j.HetJobOffset}
				if !reflect.DeepEqual(got, w) {
					t.Errorf("job %d: %+v, want %+v", id, got, w)
				}
			}
		})
	}
}

// Scontrol reads an array's id as every task of the array (scontrol hold
// 130 holds them all, running ones included, and release gives them all
// priority 1), and slurmrestd's signal and requeue read it so too; a
// heterogeneous job's leader's id names all of its components. So: the
// records of arrays and heterogeneous jobs are never batched into
// scontrol calls (slurmrestd's updates change the one record they
// name), a task is signalled and requeued as ARRAY_TASK, and the array's
// own record, whose every name means the whole array, is never signalled
// or requeued.
func TestArrayAndHetRecordsAreNamedAlone(t *testing.T) {
	tests := map[string]struct {
		version  string
		actions  []bridge.Action
		wantRuns []string // scontrol calls
		wantREST []string // slurmrestd requests after the snapshot
		wantErr  string   // of the last action
	}{
		"holds: only the plain job in the scontrol list": {
			version: "v0.0.42",
			actions: []bridge.Action{
				{Kind: bridge.ActHold, Job: 130}, {Kind: bridge.ActHold, Job: 5}, {Kind: bridge.ActRelease, Job: 139},
				{Kind: bridge.ActHold, Job: 140},
			},
			wantRuns: []string{"hold 5"},
			wantREST: []string{"POST /slurm/v0.0.42/job/130", "POST /slurm/v0.0.42/job/139", "POST /slurm/v0.0.42/job/140"},
		},
		"requeue of a task through scontrol": {
			version:  "v0.0.42",
			actions:  []bridge.Action{{Kind: bridge.ActRequeueHold, Job: 200}, {Kind: bridge.ActRequeue, Job: 131}},
			wantRuns: []string{"requeuehold 200_7", "requeue 130_0"},
		},
		"requeue of a task through slurmrestd": {
			version:  "v0.0.45",
			actions:  []bridge.Action{{Kind: bridge.ActRequeueHold, Job: 200}},
			wantREST: []string{"GET /slurm/v0.0.45/job/200_7/requeue?Hold=true"},
		},
		"signal of a task": {
			version:  "v0.0.44",
			actions:  []bridge.Action{{Kind: bridge.ActSignal, Job: 200, Signal: "USR1"}, {Kind: bridge.ActSignal, Job: 131, Signal: "USR1"}},
			wantREST: []string{"DELETE /slurm/v0.0.44/job/200_7?flags=FULL_JOB&signal=10", "DELETE /slurm/v0.0.44/job/130_0?flags=FULL_JOB&signal=10"},
		},
		"no signal for the array's own record": {
			version: "v0.0.42",
			actions: []bridge.Action{{Kind: bridge.ActSignal, Job: 130, Signal: "USR1"}},
			wantErr: "names every task of the array",
		},
		"no requeue of the array's own record": {
			version: "v0.0.42",
			actions: []bridge.Action{{Kind: bridge.ActRequeueHold, Job: 130}},
			wantErr: "names every task of the array",
		},
		"no requeue of the array's own record through slurmrestd": {
			version: "v0.0.45",
			actions: []bridge.Action{{Kind: bridge.ActRequeue, Job: 130}},
			wantErr: "names every task of the array",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var runs []string
			f := &fakeRestd{t: t, handler: serveVersion(tc.version)}
			c, _ := newTestClient(t, f, func(cfg *Config) {
				cfg.Run = func(_ context.Context, _ string, args ...string) ([]byte, error) {
					runs = append(runs, strings.Join(args, " "))
					return nil, nil
				}
			})
			if _, err := c.Snapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
			before := len(f.seen())
			errs := c.ApplyBatch(context.Background(), tc.actions)
			for i, err := range errs[:len(errs)-1] {
				if err != nil {
					t.Errorf("%s: %v", tc.actions[i], err)
				}
			}
			last := errs[len(errs)-1]
			if tc.wantErr == "" && last != nil || tc.wantErr != "" && (last == nil || !strings.Contains(last.Error(), tc.wantErr)) {
				t.Errorf("last action: %v, want error %q", last, tc.wantErr)
			}
			// A batch's actions are independent: they go out in any order.
			if !slices.Equal(sorted(runs), sorted(tc.wantRuns)) {
				t.Errorf("scontrol %q, want %q", runs, tc.wantRuns)
			}
			if got := f.seen()[before:]; !slices.Equal(sorted(got), sorted(tc.wantREST)) {
				t.Errorf("slurmrestd %q, want %q", got, tc.wantREST)
			}
		})
	}
}

// An array's limit goes out as the update's "array" field holding the
// number alone, which slurmrestd 24.11 reads as the ArrayTaskThrottle
// ("0": none).
func TestApplySendsArrayLimit(t *testing.T) {
	for _, tasks := range []int{3, 0} {
		f := &fakeRestd{t: t}
		c, _ := newTestClient(t, f)
		if err := c.Apply(context.Background(), bridge.Action{Kind: bridge.ActSetArrayLimit, Job: 130, Tasks: tasks}); err != nil {
			t.Fatal(err)
		}
		last := len(f.requests) - 1
		var body map[string]any
		if err := json.Unmarshal([]byte(f.bodies[last]), &body); err != nil {
			t.Fatal(err)
		}
		if want := map[string]any{"array": strconv.Itoa(tasks)}; f.requests[last] != "POST /slurm/v0.0.42/job/130" || !reflect.DeepEqual(body, want) {
			t.Errorf("%s %v, want POST /slurm/v0.0.42/job/130 %v", f.requests[last], body, want)
		}
	}
	if err := (bridge.Action{Kind: bridge.ActSetArrayLimit, Job: 130, Tasks: -1}).Validate(); err == nil {
		t.Error("a negative limit passes")
	}
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
