package fake

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func cluster(t *testing.T) (*Slurm, bridge.JobID) {
	t.Helper()
	s := New(func() time.Time { return t0 })
	s.AddNode(bridge.Node{Name: "n1", GPUType: "v100", GPUs: 4, Partitions: []string{"gpu"}})
	s.AddNode(bridge.Node{Name: "n2", GPUType: "k80", GPUs: 4, Partitions: []string{"gpu"}})
	id := s.Submit(bridge.Job{User: "ana", GPUs: 2, Comment: "gavel: model=a3c steps=10k"})
	return s, id
}

func TestSnapshotShowsSubmittedJob(t *testing.T) {
	s, id := cluster(t)
	snap, err := s.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	j, ok := snap.Job(id)
	if !ok || j.State != bridge.JobPending || !j.Managed() || j.Tag.Steps != 10000 || !j.SubmitTime.Equal(t0) {
		t.Fatalf("job = %+v", j)
	}
	if snap.GPUTypes()["k80"] != 4 {
		t.Fatalf("GPUTypes = %v", snap.GPUTypes())
	}
	// The snapshot is a copy: changing it leaves the cluster alone.
	snap.Jobs[0].State = bridge.JobRunning
	again, _ := s.Snapshot(context.Background())
	if again.Jobs[0].State != bridge.JobPending {
		t.Fatal("snapshot aliases the fake's state")
	}
}

func TestApplyFollowsSlurmRules(t *testing.T) {
	ctx := context.Background()
	tests := map[string]struct {
		running bool
		action  bridge.Action
		wantErr error
		check   func(bridge.Job) bool
	}{
		"priority on pending": {false, bridge.Action{Kind: bridge.ActSetPriority, Priority: 500}, nil,
			func(j bridge.Job) bool { return j.Priority == 500 }},
		"priority on running": {true, bridge.Action{Kind: bridge.ActSetPriority, Priority: 7}, nil,
			func(j bridge.Job) bool { return j.Priority == 7 && j.State == bridge.JobRunning }},
		"hold pending": {false, bridge.Action{Kind: bridge.ActHold}, nil,
			func(j bridge.Job) bool { return j.Held && j.Reason == "JobHeldUser" }},
		"hold running refused": {true, bridge.Action{Kind: bridge.ActHold}, ErrNotPending, nil},
		"constraints pending": {false, bridge.Action{Kind: bridge.ActSetConstraints, Constraints: "k80"}, nil,
			func(j bridge.Job) bool { return j.Constraints == "k80" }},
		"constraints running refused": {true, bridge.Action{Kind: bridge.ActSetConstraints, Constraints: "k80"}, ErrNotPending, nil},
		"signal running": {true, bridge.Action{Kind: bridge.ActSignal, Signal: "USR1"}, nil,
			func(j bridge.Job) bool { return j.State == bridge.JobRunning }},
		"signal pending refused": {false, bridge.Action{Kind: bridge.ActSignal, Signal: "USR1"}, ErrNotRunning, nil},
		"requeue running": {true, bridge.Action{Kind: bridge.ActRequeue}, nil,
			func(j bridge.Job) bool {
				return j.State == bridge.JobPending && j.Restarts == 1 && !j.Held && len(j.RunningNodes) == 0
			}},
		"requeue-hold running": {true, bridge.Action{Kind: bridge.ActRequeueHold}, nil,
			func(j bridge.Job) bool { return j.State == bridge.JobPending && j.Restarts == 1 && j.Held }},
		"requeue pending refused": {false, bridge.Action{Kind: bridge.ActRequeue}, ErrNotRunning, nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s, id := cluster(t)
			if tc.running {
				if err := s.Start(id, "n1"); err != nil {
					t.Fatal(err)
				}
			}
			tc.action.Job = id
			err := s.Apply(ctx, tc.action)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Apply(%v) = %v, want %v", tc.action, err, tc.wantErr)
			}
			snap, _ := s.Snapshot(ctx)
			j, _ := snap.Job(id)
			if tc.check != nil && !tc.check(j) {
				t.Fatalf("after %v: %+v", tc.action, j)
			}
			wantApplied := 0
			if tc.wantErr == nil {
				wantApplied = 1
			}
			if len(s.Applied()) != wantApplied {
				t.Fatalf("applied = %v", s.Applied())
			}
		})
	}
}

func TestRequeueFreesGPUs(t *testing.T) {
	ctx := context.Background()
	s, id := cluster(t)
	if err := s.Start(id, "n1"); err != nil {
		t.Fatal(err)
	}
	snap, _ := s.Snapshot(ctx)
	if n, _ := snap.Node("n1"); n.GPUsUsed != 2 {
		t.Fatalf("n1 uses %d GPUs while the job runs", n.GPUsUsed)
	}
	if j, _ := snap.Job(id); j.RunningGPUType != "v100" {
		t.Fatalf("running type %q", j.RunningGPUType)
	}
	if err := s.Apply(ctx, bridge.Action{Kind: bridge.ActRequeue, Job: id}); err != nil {
		t.Fatal(err)
	}
	snap, _ = s.Snapshot(ctx)
	if n, _ := snap.Node("n1"); n.GPUsUsed != 0 {
		t.Fatalf("n1 still uses %d GPUs after the requeue", n.GPUsUsed)
	}
}

func TestFailureInjection(t *testing.T) {
	ctx := context.Background()
	s, id := cluster(t)
	boom := errors.New("slurmctld unreachable")
	s.FailSnapshot(boom)
	if _, err := s.Snapshot(ctx); !errors.Is(err, boom) {
		t.Fatalf("Snapshot error %v, want %v", err, boom)
	}
	s.FailSnapshot(nil)
	if _, err := s.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	s.FailActions(FailKind(bridge.ActHold, boom))
	if err := s.Apply(ctx, bridge.Action{Kind: bridge.ActHold, Job: id}); !errors.Is(err, boom) {
		t.Fatalf("hold error %v", err)
	}
	prio := bridge.Action{Kind: bridge.ActSetPriority, Job: id, Priority: 3}
	if err := s.Apply(ctx, prio); err != nil {
		t.Fatal(err)
	}
	if got := s.Applied(); !reflect.DeepEqual(got, []bridge.Action{prio}) {
		t.Fatalf("applied = %v", got)
	}
	if err := s.Apply(ctx, bridge.Action{Kind: bridge.ActRelease, Job: 999}); !errors.Is(err, ErrNoJob) {
		t.Fatalf("unknown job error %v", err)
	}
}

func TestPriorityOfHeldJobRefused(t *testing.T) {
	ctx := context.Background()
	s, id := cluster(t)
	if err := s.Apply(ctx, bridge.Action{Kind: bridge.ActHold, Job: id}); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, bridge.Action{Kind: bridge.ActSetPriority, Job: id, Priority: 5}); !errors.Is(err, ErrHeld) {
		t.Fatalf("priority of a held job: %v", err)
	}
	if err := s.Apply(ctx, bridge.Action{Kind: bridge.ActRelease, Job: id}); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, bridge.Action{Kind: bridge.ActSetPriority, Job: id, Priority: 5}); err != nil {
		t.Fatalf("priority after release: %v", err)
	}
}

// A pending job's shape is set as asked and the job then starts across
// types, with no single running type; a running job's shape cannot change.
func TestSetShapeSpansTypes(t *testing.T) {
	s, id := cluster(t)
	ctx := context.Background()
	shape := bridge.Action{Kind: bridge.ActSetShape, Job: id, Nodes: 2, GPUsPerNode: 1, Constraints: "[v100*1&k80*1]"}
	if err := s.Apply(ctx, shape); err != nil {
		t.Fatal(err)
	}
	snap, _ := s.Snapshot(ctx)
	j, _ := snap.Job(id)
	if j.Nodes != 2 || j.GPUsPerNode != 1 || j.GPUs != 2 || j.Constraints != "[v100*1&k80*1]" {
		t.Fatalf("after set-shape: nodes %d, per node %d, gpus %d, constraints %q", j.Nodes, j.GPUsPerNode, j.GPUs, j.Constraints)
	}
	if err := s.Start(id, "n1", "n2"); err != nil {
		t.Fatal(err)
	}
	snap, _ = s.Snapshot(ctx)
	if j, _ = snap.Job(id); j.RunningGPUType != "" || len(j.RunningNodes) != 2 {
		t.Fatalf("running on a mix: type %q, nodes %v", j.RunningGPUType, j.RunningNodes)
	}
	for _, n := range snap.Nodes {
		if n.GPUsUsed != 1 {
			t.Errorf("node %s: %d GPUs in use, want 1", n.Name, n.GPUsUsed)
		}
	}
	back := bridge.Action{Kind: bridge.ActSetShape, Job: id, Nodes: 1, GPUsPerNode: 2, Constraints: "v100"}
	if err := s.Apply(ctx, back); !errors.Is(err, ErrNotPending) {
		t.Fatalf("set-shape on a running job: %v, want ErrNotPending", err)
	}
}

// A simulation stops the log of applied actions: they still take effect,
// and nothing is kept for Applied or Signals.
func TestStopLoggingKeepsNothingButActs(t *testing.T) {
	s := New(func() time.Time { return time.Unix(0, 0) })
	s.AddNode(bridge.Node{Name: "a1", GPUType: "v100", GPUs: 1, Partitions: []string{"gpu"}})
	id := s.Submit(bridge.Job{User: "u", Partition: "gpu", GPUs: 1})
	if err := s.Apply(context.Background(), bridge.Action{Kind: bridge.ActHold, Job: id}); err != nil {
		t.Fatal(err)
	}
	s.StopLogging()
	if err := s.Apply(context.Background(), bridge.Action{Kind: bridge.ActRelease, Job: id}); err != nil {
		t.Fatal(err)
	}
	if got := s.Applied(); len(got) != 0 {
		t.Errorf("applied log after StopLogging: %v", got)
	}
	snap, _ := s.Snapshot(context.Background())
	if j, _ := snap.Job(id); j.Held {
		t.Error("the release sent after StopLogging did not take effect")
	}
}

// TestSharedJobsLandOnOneGPU checks the fake's shard placement, which the
// daemon's pairing relies on: with one_sharing, every shard job of a node
// runs on the GPU whose shards are in use, and a GPU's shards are freed
// when its jobs end.
func TestSharedJobsLandOnOneGPU(t *testing.T) {
	ctx := context.Background()
	s := New(func() time.Time { return t0 })
	s.AddNode(bridge.Node{Name: "n1", GPUType: "v100", GPUs: 4, Shards: 8, Partitions: []string{"gpu"}})
	whole := s.Submit(bridge.Job{GPUs: 1, Comment: "gavel: model=a3c"})
	a := s.Submit(bridge.Job{GPUs: 1, Comment: "gavel: model=a3c"})
	b := s.Submit(bridge.Job{GPUs: 1, Comment: "gavel: model=a3c"})
	c := s.Submit(bridge.Job{GPUs: 1, Comment: "gavel: model=a3c"})
	if err := s.Start(whole, "n1"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []bridge.JobID{a, b, c} {
		if err := s.Apply(ctx, bridge.Action{Kind: bridge.ActSetShare, Job: id, Shards: 1, Node: "n1", Constraints: "v100"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Start(a, "n1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(b, "n1"); err != nil {
		t.Fatal(err)
	}
	// Two shards per GPU: the shared GPU is full, and one_sharing keeps
	// the third job off the node's free GPUs.
	if err := s.Start(c, "n1"); err == nil {
		t.Fatal("a third shard job started beside a full shared GPU")
	}
	snap, _ := s.Snapshot(ctx)
	ja, _ := snap.Job(a)
	jb, _ := snap.Job(b)
	if !bridge.SharesGPUWith(ja, jb) {
		t.Fatalf("pair not on one GPU: %v and %v", ja.SharedGPUs, jb.SharedGPUs)
	}
	if n := snap.Nodes[0]; n.GPUsUsed != 2 {
		t.Fatalf("GPUs used = %d, want 2 (one whole, one shared)", n.GPUsUsed)
	}
	if err := s.Finish(a, bridge.JobCompleted); err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(b, bridge.JobCompleted); err != nil {
		t.Fatal(err)
	}
	snap, _ = s.Snapshot(ctx)
	if n := snap.Nodes[0]; n.GPUsUsed != 1 || n.ShardUse[ja.SharedGPUs[0]].Used != 0 {
		t.Fatalf("after the pair ended: %+v", n)
	}
	// Back to a whole GPU: the node list goes with the shards.
	if err := s.Apply(ctx, bridge.Action{Kind: bridge.ActSetShare, Job: c, Constraints: "v100"}); err != nil {
		t.Fatal(err)
	}
	snap, _ = s.Snapshot(ctx)
	if jc, _ := snap.Job(c); jc.Shards != 0 || jc.RequiredNodes != "" {
		t.Fatalf("unshared job = %+v", jc)
	}
	two := s.Submit(bridge.Job{GPUs: 2, Comment: "gavel: model=a3c"})
	if err := s.Apply(ctx, bridge.Action{Kind: bridge.ActSetShare, Job: two, Shards: 1, Node: "n1"}); !errors.Is(err, ErrNotSingleGPU) {
		t.Fatalf("share of a 2-GPU job: %v", err)
	}
}

// A job array's record starts its tasks one at a time, each under a job
// id of its own, within the array's limit; the last waiting task takes
// over the record and its id, and a task requeued on a record of its own
// waits for the limit too.
func TestArrayTasksStartWithinTheLimit(t *testing.T) {
	ctx := context.Background()
	s := New(func() time.Time { return t0 })
	s.AddNode(bridge.Node{Name: "n1", GPUType: "v100", GPUs: 4, Partitions: []string{"gpu"}})
	array := s.Submit(bridge.Job{GPUs: 1, Comment: "gavel: model=a3c", ArrayTasks: "0-2", ArrayLimit: 2})
	other := s.Submit(bridge.Job{GPUs: 1, Comment: "gavel: model=a3c"})
	if err := s.Start(array, "n1"); err == nil {
		t.Fatal("the array's record started as one job")
	}
	first, err := s.StartArrayTask(array, "n1")
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.StartArrayTask(array, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if first == array || second == array || first == other || second == other || first == second {
		t.Fatalf("tasks run as %d and %d beside the array %d and job %d: want ids of their own", first, second, array, other)
	}
	if _, err := s.StartArrayTask(array, "n1"); !errors.Is(err, ErrArrayLimit) {
		t.Fatalf("third task at the limit of 2: %v", err)
	}
	rec, _ := s.Job(array)
	if rec.ArrayTasks != "2" || rec.ArrayJobID != array || !rec.HoldsArrayTasks() {
		t.Fatalf("record after two starts = %+v", rec)
	}
	task, _ := s.Job(second)
	if task.ArrayJobID != array || task.ArrayTaskID != 1 || !task.IsArrayTask() || task.State != bridge.JobRunning {
		t.Fatalf("second task = %+v", task)
	}
	// The limit, raised on the array's id, shows on every record.
	if err := s.Apply(ctx, bridge.Action{Kind: bridge.ActSetArrayLimit, Job: array, Tasks: 3}); err != nil {
		t.Fatal(err)
	}
	if task, _ := s.Job(first); task.ArrayLimit != 3 {
		t.Fatalf("first task's limit = %d, want the array's 3", task.ArrayLimit)
	}
	last, err := s.StartArrayTask(array, "n1")
	if err != nil || last != array {
		t.Fatalf("last task runs as %d (%v), want the array's own id %d", last, err, array)
	}
	if rec, _ := s.Job(array); rec.ArrayTaskID != 2 || !rec.IsArrayTask() {
		t.Fatalf("record after the last start = %+v", rec)
	}
	// A task requeued on its own record waits while the array is at its
	// limit again.
	if err := s.Apply(ctx, bridge.Action{Kind: bridge.ActRequeue, Job: first}); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, bridge.Action{Kind: bridge.ActSetArrayLimit, Job: array, Tasks: 2}); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(first, "n1"); !errors.Is(err, ErrArrayLimit) {
		t.Fatalf("requeued task beyond the limit: %v", err)
	}
	if err := s.Finish(second, bridge.JobCompleted); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(first, "n1"); err != nil {
		t.Fatalf("requeued task within the limit: %v", err)
	}
}

func TestTaskExpression(t *testing.T) {
	tests := map[string][]uint32{"4": {4}, "2-5": {2, 3, 4, 5}, "0,2-4,7": {0, 2, 3, 4, 7}, "1,3": {1, 3}}
	for want, tasks := range tests {
		if got := taskExpression(tasks); got != want {
			t.Errorf("taskExpression(%v) = %q, want %q", tasks, got, want)
		}
		if ids, _, err := bridge.ArrayTaskIDs(want, len(tasks)); err != nil || !reflect.DeepEqual(ids, tasks) {
			t.Errorf("%q reads back as %v (%v)", want, ids, err)
		}
	}
}

// A comment set on a job array's id reaches every record of the array;
// one set on a task's own id reaches that task alone.
func TestSetCommentOnAnArray(t *testing.T) {
	s := New(func() time.Time { return t0 })
	s.AddNode(bridge.Node{Name: "n1", GPUType: "v100", GPUs: 4, Partitions: []string{"gpu"}})
	array := s.Submit(bridge.Job{GPUs: 1, Comment: "gavel: model=a3c", ArrayTasks: "0-2"})
	first, err := s.StartArrayTask(array, "n1")
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.StartArrayTask(array, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetComment(second, "mine"); err != nil {
		t.Fatal(err)
	}
	if j, _ := s.Job(second); j.Managed() {
		t.Fatal("the task keeps its tag")
	}
	if j, _ := s.Job(first); !j.Managed() {
		t.Fatal("a comment set on one task reached another")
	}
	if err := s.SetComment(array, "no tag"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []bridge.JobID{array, first} {
		if j, _ := s.Job(id); j.Managed() || j.Comment != "no tag" {
			t.Fatalf("job %d after the array's comment changed: %+v", id, j)
		}
	}
	if err := s.SetComment(99, "x"); !errors.Is(err, ErrNoJob) {
		t.Fatalf("comment of an unknown job: %v", err)
	}
}

// A whole-GPU job with a node list runs on that node only.
func TestNodeListPinsAWholeGPUJob(t *testing.T) {
	s := New(func() time.Time { return t0 })
	s.AddNode(bridge.Node{Name: "n1", GPUType: "v100", GPUs: 1, Partitions: []string{"gpu"}})
	s.AddNode(bridge.Node{Name: "n2", GPUType: "v100", GPUs: 1, Partitions: []string{"gpu"}})
	id := s.Submit(bridge.Job{GPUs: 1, Comment: "gavel: model=a3c", RequiredNodes: "n2"})
	if err := s.Start(id, "n1"); err == nil {
		t.Fatal("started off its node list")
	}
	if n, _ := s.Node("n1"); n.GPUsUsed != 0 {
		t.Fatalf("a refused start left %d GPUs in use", n.GPUsUsed)
	}
	if err := s.Start(id, "n2"); err != nil {
		t.Fatal(err)
	}
	n, ok := s.Node("n2")
	if !ok || n.GPUsUsed != 1 {
		t.Fatalf("n2 = %+v", n)
	}
	n.State[0] = "DOWN" // a copy: the cluster is unchanged
	if again, _ := s.Node("n2"); again.State[0] != "IDLE" {
		t.Fatal("Node aliases the fake's state")
	}
}
