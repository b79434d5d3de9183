package rest

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// A job record the scheduler cannot read must leave that job unmanaged,
// with the reason, and never fail the snapshot or yield a negative count.
func TestConvertJobMarksUnreadableRecords(t *testing.T) {
	nodes := map[string]bridge.Node{"v100-1": {Name: "v100-1", GPUType: "v100"}, "k80-1": {Name: "k80-1", GPUType: "k80"}}
	base := func(change func(*rawJob)) rawJob {
		r := rawJob{ID: 5, User: "ana", Account: "lab", QOS: "normal", Partition: "gpu", States: []string{"PENDING"}, NodeCount: 1}
		change(&r)
		return r
	}
	tests := []struct {
		name        string
		raw         rawJob
		wantErr     string // in Unreadable; empty for a readable job
		wantState   bridge.JobState
		wantGPUs    int
		wantPerNode int
		wantType    string
	}{
		{name: "readable", raw: base(func(r *rawJob) { r.TresPerNode = "gres/gpu:v100:2"; r.NodeCount = 2 }),
			wantState: bridge.JobPending, wantGPUs: 4, wantPerNode: 2, wantType: "v100"},
		{name: "several GPU types per job (sbatch -N2 --gpus=v100:1,k80:1)",
			raw: base(func(r *rawJob) {
				r.TresPerJob, r.NodeCount, r.States = "gres/gpu:v100:1,gres/gpu:k80:1", 2, []string{"RUNNING"}
				r.AllocNodes, r.GresDetail = []string{"v100-1", "k80-1"}, []string{"gpu:v100:1(IDX:0)", "gpu:k80:1(IDX:0)"}
			}),
			wantErr: "tres_per_job: gres \"gres/gpu:v100:1,gres/gpu:k80:1\": several GPU types", wantState: bridge.JobRunning, wantGPUs: 2},
		{name: "several GPU types per node", raw: base(func(r *rawJob) { r.TresPerNode = "gres/gpu:v100:1,gres/gpu:k80:1" }),
			wantErr: "tres_per_node:", wantState: bridge.JobPending, wantGPUs: 2, wantPerNode: 2},
		{name: "count times nodes beyond any cluster", raw: base(func(r *rawJob) { r.TresPerNode = "gres/gpu:1000000"; r.NodeCount = 1 << 30 }),
			wantErr: "1000000 GPUs per node on 1073741824 nodes", wantState: bridge.JobPending, wantPerNode: 1000000},
		{name: "count that overflowed to negative GPUs", raw: base(func(r *rawJob) { r.TresPerNode = "gres/gpu:4611686018427387903"; r.NodeCount = 4 }),
			wantErr: "more than the 1048576", wantState: bridge.JobPending},
		{name: "entries whose sum overflows", raw: base(func(r *rawJob) { r.TresPerJob = "gres/gpu:4611686018427387903,gres/gpu:4611686018427387903" }),
			wantErr: "more than the 1048576", wantState: bridge.JobPending},
		{name: "suffixed count", raw: base(func(r *rawJob) { r.TresPerJob = "gres/gpu:2G" }),
			wantErr: "more than the 1048576", wantState: bridge.JobPending},
		{name: "malformed gres", raw: base(func(r *rawJob) { r.TresPerNode = "gres/gpu:2((" }),
			wantErr: "unbalanced '('", wantState: bridge.JobPending},
		{name: "no state", raw: base(func(r *rawJob) { r.States = nil }), wantErr: "no state", wantState: stateUnknown},
		{name: "time beyond year 9999", raw: base(func(r *rawJob) { r.SubmitTime = 1 << 50 }),
			wantErr: "submit_time:", wantState: bridge.JobPending},
		{name: "malformed gres_detail of a running job",
			raw: base(func(r *rawJob) {
				r.States, r.AllocNodes, r.GresDetail = []string{"RUNNING"}, []string{"v100-1"}, []string{"gpu:v100:1(("}
			}),
			wantErr: "gres_detail:", wantState: bridge.JobRunning},
		{name: "record the generated types refused", raw: base(func(r *rawJob) { r.Unreadable = io.ErrUnexpectedEOF }),
			wantErr: "unexpected EOF", wantState: bridge.JobPending},
		{name: "two problems on one line", raw: base(func(r *rawJob) { r.States = nil; r.TresPerNode = "gres/gpu:((" }),
			wantErr: "no state; tres_per_node", wantState: stateUnknown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j, err := convertJob(tc.raw, nodes)
			if err != nil {
				t.Fatalf("convertJob: %v; want the job kept", err)
			}
			switch {
			case tc.wantErr == "" && j.Unreadable != nil:
				t.Errorf("unreadable: %v", j.Unreadable)
			case tc.wantErr != "" && (j.Unreadable == nil || !strings.Contains(j.Unreadable.Error(), tc.wantErr)):
				t.Errorf("unreadable = %v, want it to mention %q", j.Unreadable, tc.wantErr)
			case j.Unreadable != nil && strings.Contains(j.Unreadable.Error(), "\n"):
				t.Errorf("reason is not one line: %q", j.Unreadable)
			}
			if j.ID != 5 || j.User != "ana" || j.Account != "lab" || j.QOS != "normal" || j.Partition != "gpu" || j.State != tc.wantState {
				t.Errorf("identity not kept: %+v", j)
			}
			if j.GPUs != tc.wantGPUs || j.GPUsPerNode != tc.wantPerNode || j.RequestedGPUType != tc.wantType {
				t.Errorf("GPUs %d, per node %d, type %q; want %d, %d, %q", j.GPUs, j.GPUsPerNode, j.RequestedGPUType, tc.wantGPUs, tc.wantPerNode, tc.wantType)
			}
		})
	}
}

func TestConvertJobRejectsRecordsWithoutAnID(t *testing.T) {
	for _, id := range []int64{0, -1, 1 << 32} {
		if _, err := convertJob(rawJob{ID: id, States: []string{"PENDING"}}, nil); err == nil {
			t.Errorf("job id %d accepted", id)
		}
	}
}

func TestConvertNodeBoundsCounts(t *testing.T) {
	for _, tc := range []struct{ gres, used, wantErr string }{
		{"gpu:v100:4", "gpu:v100:2", ""},
		{"gpu:v100:4611686018427387903,gpu:v100:4611686018427387903", "", "more than the 1048576"},
		{"gpu:v100:4", "gpu:v100:4611686018427387903", "more than the 1048576"},
		{"gpu:v100:2,gpu:k80:2", "", "several GPU types"},
	} {
		n, err := convertNode(rawNode{Name: "n1", Gres: tc.gres, GresUsed: tc.used})
		switch {
		case tc.wantErr == "" && (err != nil || n.GPUs != 4 || n.GPUsUsed != 2 || n.GPUType != "v100"):
			t.Errorf("%s: %+v, %v", tc.gres, n, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s / %s: error %v, want it to mention %q", tc.gres, tc.used, err, tc.wantErr)
		}
	}
}

// End to end: records that the generated types refuse, or that convert
// cannot read, sit beside readable jobs in one reply; the snapshot keeps
// all of them.
func TestSnapshotKeepsUnreadableJobs(t *testing.T) {
	const reply = `{"jobs":[
		{"job_id":5,"user_name":"ana","account":"lab","qos":"high","partition":"gpu","job_state":["PENDING"],"tres_per_node":"gres/gpu:1","comment":"gavel: model=a3c"},
		{"job_id":6,"user_name":"bo","account":"lab","qos":"normal","partition":"gpu","job_state":["RUNNING"],"node_count":{"set":true,"number":2},
		 "tres_per_job":"gres/gpu:v100:1,gres/gpu:k80:1","comment":"gavel: model=a3c"},
		{"job_id":7,"user_name":"cy","partition":"gpu","job_state":["PENDING"],"hold":"yes"},
		{"job_id":3000000000,"user_name":"di","partition":"gpu","job_state":"PENDING"},
		{"job_id":8,"partition":"gpu","job_state":["PENDING"],"tres_per_node":"gres/gpu:4611686018427387903","node_count":{"set":true,"number":4}}]}`
	serve := func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != "/slurm/v0.0.42/jobs" {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, reply)
		return true
	}
	c, _ := newTestClient(t, &fakeRestd{t: t, handler: serve})
	snap, err := c.Snapshot(context.Background())
	if err != nil {
		t.Fatalf("one unreadable job failed the snapshot: %v", err)
	}
	if j, _ := snap.Job(5); j.Unreadable != nil || !j.Managed() || j.Account != "lab" || j.QOS != "high" || j.GPUs != 1 {
		t.Errorf("job 5 = %+v (unreadable %v), want it read in full with its account and QOS", j, j.Unreadable)
	}
	want := map[bridge.JobID]struct {
		user, err string
		state     bridge.JobState
		gpus      int
	}{
		6:          {"bo", "several GPU types", bridge.JobRunning, 2},
		7:          {"cy", "record does not decode", bridge.JobPending, 0},
		3000000000: {"di", "record does not decode", bridge.JobPending, 0},
		8:          {"", "more than the 1048576", bridge.JobPending, 0},
	}
	for id, w := range want {
		j, ok := snap.Job(id)
		switch {
		case !ok:
			t.Errorf("job %d left out of the snapshot", id)
		case j.Unreadable == nil || !strings.Contains(j.Unreadable.Error(), w.err):
			t.Errorf("job %d: unreadable = %v, want it to mention %q", id, j.Unreadable, w.err)
		case j.User != w.user || j.State != w.state || j.Partition != "gpu" || j.GPUs != w.gpus:
			t.Errorf("job %d = %+v, want user %q, state %s, partition gpu, %d GPUs", id, j, w.user, w.state, w.gpus)
		}
	}
}

// A job's dependency and earliest start are read as Slurm gives them, on
// held jobs too (whose reason names only the hold): the step keeps a job
// out of the allocation while either stops Slurm from starting it.
func TestConvertJobReadsDependencyAndEligibleTime(t *testing.T) {
	begin := time.Date(2026, 11, 27, 11, 0, 0, 0, time.UTC)
	tests := map[string]struct {
		raw        rawJob
		wantDep    string
		wantBegin  time.Time
		unreadable bool
	}{
		"dependency on a held job": {raw: rawJob{ID: 128, States: []string{"PENDING"}, Reason: "JobHeldAdmin",
			Dependency: "afterok:127(unfulfilled)"}, wantDep: "afterok:127(unfulfilled)"},
		"begin time": {raw: rawJob{ID: 127, States: []string{"PENDING"}, Reason: "BeginTime", EligibleTime: begin.Unix()},
			wantBegin: begin},
		"unset":      {raw: rawJob{ID: 5, States: []string{"PENDING"}}},
		"not a time": {raw: rawJob{ID: 6, States: []string{"PENDING"}, EligibleTime: 1 << 62}, unreadable: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			j, err := convertJob(tc.raw, nil)
			if err != nil {
				t.Fatal(err)
			}
			if j.Dependency != tc.wantDep || !j.EligibleTime.Equal(tc.wantBegin) {
				t.Errorf("dependency %q, eligible %v; want %q, %v", j.Dependency, j.EligibleTime, tc.wantDep, tc.wantBegin)
			}
			if (j.Unreadable != nil) != tc.unreadable {
				t.Errorf("unreadable: %v, want %t", j.Unreadable, tc.unreadable)
			}
		})
	}
}
