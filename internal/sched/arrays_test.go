package sched

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// arrayRecord is job array id's own record as Slurm shows it while it
// holds the tasks not started: one record, each task's request (one GPU).
func arrayRecord(id bridge.JobID, tasks string, limit int, comment string) bridge.Job {
	j := pending(id, comment)
	j.ArrayJobID, j.ArrayTasks, j.ArrayLimit = id, tasks, limit
	return j
}

// arrayTask is task t of array a on a record of its own, running on node.
func arrayTask(id, a bridge.JobID, t uint32, limit int, node, typ string) bridge.Job {
	j := running(id, tag, node, typ, 0)
	j.ArrayJobID, j.ArrayTaskID, j.ArrayLimit = a, t, limit
	j.StartTime = epoch.Add(-time.Hour)
	return j
}

func arraySettings() Settings {
	set := settings()
	set.MinRunTime = time.Hour // what runs stays: the tests set the scene
	return set
}

// The reviewer's case: one user's array of 8 one-GPU tasks beside another
// user's two jobs on a 4-GPU node. The array is 8 jobs to the policy, not
// one; the round lets Slurm start only the tasks it chose, by setting the
// array's limit before it releases the record (released whole, Slurm
// started every task that fit and the array took all 4 GPUs), and every
// GPU gets a job.
func TestArrayCountsAsItsWaitingTasks(t *testing.T) {
	c := newCore(t, arraySettings())
	nodes := []bridge.Node{node("p1", "p100", 4, 0)}
	res := step(c, snapshot(t, epoch, nodes, arrayRecord(130, "0-7", 0, tag), pending(5, tag), pending(6, tag)), epoch, c.Solve)
	if res.Skipped != "" {
		t.Fatal(res.Skipped)
	}
	if rows := res.State.Allocation.Map(); len(rows) != 10 || rows["130_7"] == nil {
		t.Errorf("policy rows %v, want the array's 8 waiting tasks and jobs 5 and 6", rows)
	}
	chosen := 0
	for task := range uint32(8) {
		if js := c.jobs[slotKey(130, task)]; js != nil && js.decision == "run" {
			chosen++
		}
	}
	if chosen == 0 || chosen == 8 {
		t.Fatalf("%d of the array's tasks chosen", chosen)
	}
	want := "set-array-limit:" + itoa(chosen) + ",set-constraints:p100,set-priority"
	if got := actionsOf(res.Actions, 130); got != want {
		t.Errorf("array record: %q, want %q (the limit before the release)", got, want)
	}
	others := 0
	for _, id := range []bridge.JobID{5, 6} {
		switch got := actionsOf(res.Actions, id); got {
		case "set-constraints:p100,set-priority":
			others++
		case "hold":
		default:
			t.Errorf("job %d: %q", id, got)
		}
	}
	if chosen+others != 4 {
		t.Errorf("%d tasks and %d jobs chosen for 4 GPUs", chosen, others)
	}
	v := viewOf(t, res.View, 130)
	if !v.Managed || v.Decision != "run" || !strings.Contains(v.Reason, "job array: 8 tasks waiting; "+itoa(chosen)+" start on p100") ||
		!strings.Contains(v.Reason, "at most "+itoa(chosen)+" of its tasks run at once") {
		t.Errorf("status of the array: %+v", v)
	}
	if res.Managed != 10 {
		t.Errorf("managed %d, want 10 (8 tasks, 2 jobs)", res.Managed)
	}
}

// What a round sends for an array's record, with its tasks that started
// and its user's own limit.
func TestArrayRecordActions(t *testing.T) {
	tests := map[string]struct {
		nodes []bridge.Node
		jobs  []bridge.Job
		want  map[bridge.JobID]string
		// reason is part of the array record's status.
		reason string
	}{
		"no GPU free: held, no limit": {
			nodes:  []bridge.Node{node("p1", "p100", 1, 1)},
			jobs:   []bridge.Job{arrayRecord(130, "0-7", 0, tag), running(5, tag, "p1", "p100", 0)},
			want:   map[bridge.JobID]string{130: "hold", 5: ""},
			reason: "job array: 8 tasks waiting; none chosen: waiting: ",
		},
		"tasks running count in the limit": {
			nodes: []bridge.Node{node("p1", "p100", 4, 3)},
			jobs: []bridge.Job{arrayRecord(130, "3-7", 0, tag),
				arrayTask(131, 130, 0, 0, "p1", "p100"), arrayTask(132, 130, 1, 0, "p1", "p100"), arrayTask(133, 130, 2, 0, "p1", "p100")},
			want:   map[bridge.JobID]string{130: "set-array-limit:4,set-constraints:p100,set-priority", 131: "", 132: "", 133: ""},
			reason: "job array: 5 tasks waiting; 1 start on p100",
		},
		"the user's own limit bounds it": {
			nodes:  []bridge.Node{node("p1", "p100", 4, 0)},
			jobs:   []bridge.Job{arrayRecord(130, "0-7", 2, tag)},
			want:   map[bridge.JobID]string{130: "set-constraints:p100,set-priority"},
			reason: "job array: 8 tasks waiting (2 compete: its own limit %2); 2 start on p100",
		},
		"the user's own limit reached": {
			nodes: []bridge.Node{node("p1", "p100", 4, 2)},
			jobs: []bridge.Job{arrayRecord(130, "2-7", 2, tag),
				arrayTask(131, 130, 0, 2, "p1", "p100"), arrayTask(132, 130, 1, 2, "p1", "p100")},
			want:   map[bridge.JobID]string{130: "hold"},
			reason: "job array: 6 tasks waiting (0 compete: its own limit %2); none chosen",
		},
		"a running task the daemon does not manage counts in the limit": {
			nodes: []bridge.Node{node("p1", "p100", 4, 1)},
			jobs: []bridge.Job{arrayRecord(130, "1-7", 0, tag), func() bridge.Job {
				j := arrayTask(131, 130, 0, 0, "p1", "p100")
				return j.WithComment("tag edited away")
			}()},
			want:   map[bridge.JobID]string{130: "set-array-limit:4,set-constraints:p100,set-priority", 131: ""},
			reason: "job array: 7 tasks waiting; 3 start on p100",
		},
		"an array the daemon does not manage": {
			nodes: []bridge.Node{node("p1", "p100", 4, 1)},
			jobs: []bridge.Job{arrayRecord(130, "1-7", 2, "no tag"), func() bridge.Job {
				j := arrayTask(131, 130, 0, 2, "p1", "p100")
				return j.WithComment("no tag")
			}()},
			want: map[bridge.JobID]string{130: "", 131: ""},
		},
		"held by its user": {
			nodes: []bridge.Node{node("p1", "p100", 4, 0)},
			jobs: []bridge.Job{func() bridge.Job {
				j := arrayRecord(130, "0-7", 0, tag)
				j.Held, j.Reason = true, "JobHeldUser"
				return j
			}()},
			want:   map[bridge.JobID]string{130: ""},
			reason: "held by user",
		},
		"every task on a record of its own: the limit no longer needed": {
			nodes: []bridge.Node{node("p1", "p100", 4, 2)},
			jobs: []bridge.Job{func() bridge.Job {
				j := arrayTask(131, 130, 0, 2, "p1", "p100")
				return j
			}(), arrayTask(130, 130, 1, 2, "p1", "p100")},
			want: map[bridge.JobID]string{130: "set-array-limit:0", 131: ""},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := newCore(t, arraySettings())
			if name == "every task on a record of its own: the limit no longer needed" {
				// The daemon set the limit 2 on an array that had none.
				c.arrayLimits = map[bridge.JobID]int{130: 0}
			}
			res := step(c, snapshot(t, epoch, tc.nodes, tc.jobs...), epoch, c.Solve)
			if res.Skipped != "" {
				t.Fatal(res.Skipped)
			}
			for id, want := range tc.want {
				if got := actionsOf(res.Actions, id); got != want {
					t.Errorf("job %d: %q, want %q", id, got, want)
				}
			}
			if tc.reason != "" {
				if v := viewOf(t, res.View, 130); !strings.Contains(v.Reason, tc.reason) {
					t.Errorf("status %q, want it to contain %q", v.Reason, tc.reason)
				}
			}
		})
	}
}

// A task Slurm starts gets a record of its own and takes its slot's
// arrival (the array's), not the time the daemon first saw the record;
// its slot leaves the rounds, and nothing of slots is saved.
func TestArrayTaskKeepsTheArraysArrival(t *testing.T) {
	c := newCore(t, arraySettings())
	nodes := []bridge.Node{node("p1", "p100", 4, 0)}
	res := step(c, snapshot(t, epoch, nodes, arrayRecord(130, "0-1", 0, tag)), epoch, c.Solve)
	if got := actionsOf(res.Actions, 130); got != "set-array-limit:2,set-constraints:p100,set-priority" {
		t.Fatalf("first round: %q", got)
	}
	for _, r := range res.Records {
		if r.JobID != "130" {
			t.Errorf("record %s saved: only the array's record is kept", r.JobID)
		}
	}
	later := epoch.Add(time.Minute)
	task := arrayTask(131, 130, 0, 2, "p1", "p100")
	task.StartTime = later
	rec := arrayRecord(130, "1", 2, tag)
	rec.Constraints, rec.Priority = "p100", RunPriority
	res = step(c, snapshot(t, later, []bridge.Node{node("p1", "p100", 4, 1)}, rec, task), later, c.Solve)
	if js := c.jobs[keyOf(131)]; js == nil || !js.firstSeen.Equal(epoch) {
		t.Fatalf("task 0's record: %+v, want it to arrive at %v", js, epoch)
	}
	if c.jobs[slotKey(130, 0)] != nil || c.jobs[slotKey(130, 1)] == nil {
		t.Errorf("slots after task 0 started: 130_0 %v, 130_1 %v", c.jobs[slotKey(130, 0)] != nil, c.jobs[slotKey(130, 1)] != nil)
	}
	for _, id := range res.Forget {
		if strings.Contains(id, "_") {
			t.Errorf("slot %s forgotten in the store, where it never was", id)
		}
	}
	if got := actionsOf(res.Actions, 130); got != "" {
		t.Errorf("second round: %q, want nothing (limit 2 covers task 0 and the last one)", got)
	}
}

// An array the daemon stops managing (its tag edited away) gets its hold
// released and its user's own limit back; the limit survives a restart
// of the daemon in its saved state.
func TestArrayNoLongerManagedGetsItsOwnLimitBack(t *testing.T) {
	c := newCore(t, arraySettings())
	nodes := []bridge.Node{node("p1", "p100", 1, 1)}
	other := running(5, tag, "p1", "p100", 0)
	res := step(c, snapshot(t, epoch, nodes, arrayRecord(130, "0-7", 3, tag), other), epoch, c.Solve)
	if got := actionsOf(res.Actions, 130); got != "hold" {
		t.Fatalf("first round: %q", got)
	}
	if res.State.ArrayLimits["130"] != 3 {
		t.Fatalf("saved limits %v", res.State.ArrayLimits)
	}
	restarted := newCore(t, arraySettings())
	restarted.Restore(map[string]Record{"130": {JobID: "130", FirstSeen: epoch, HeldByDaemon: true}}, 1)
	restarted.RestoreState(res.State)
	// Meanwhile the daemon's limit stood at 1, and the user removed the tag.
	untagged := arrayRecord(130, "0-7", 1, "no tag now")
	untagged.Held, untagged.Reason = true, "JobHeldAdmin"
	now := epoch.Add(time.Minute)
	res = step(restarted, snapshot(t, now, nodes, untagged, other), now, restarted.Solve)
	if got := actionsOf(res.Actions, 130); got != "release,set-array-limit:3" {
		t.Errorf("array no longer managed: %q, want its hold released and its limit 3 back", got)
	}
	if len(res.State.ArrayLimits) != 0 {
		t.Errorf("saved limits %v after the array left", res.State.ArrayLimits)
	}
}

func viewOf(t *testing.T, v View, id bridge.JobID) JobView {
	t.Helper()
	for _, jv := range v.Jobs {
		if jv.Job.ID == id {
			return jv
		}
	}
	t.Fatalf("job %d not in the view", id)
	return JobView{}
}

func itoa(n int) string { return strconv.Itoa(n) }

// A GPU type that appears after an array arrived is offered to its
// waiting tasks as to any job (their rates are refreshed from the array's
// record).
func TestArrayTasksGetRatesOnNewTypes(t *testing.T) {
	c := newCore(t, arraySettings())
	rec := arrayRecord(130, "0-3", 0, tag)
	step(c, snapshot(t, epoch, []bridge.Node{node("p1", "p100", 1, 1)}, rec, running(5, tag, "p1", "p100", 0)), epoch, c.Solve)
	if r := c.jobs[slotKey(130, 0)].throughputs["v100"]; r != 0 {
		t.Fatalf("v100 rate %v before any v100 node", r)
	}
	now := epoch.Add(time.Minute)
	rec.Held, rec.Reason = true, "JobHeldAdmin"
	step(c, snapshot(t, now, []bridge.Node{node("p1", "p100", 1, 1), node("v1", "v100", 1, 0)}, rec, running(5, tag, "p1", "p100", 0)), now, c.Solve)
	if r := c.jobs[slotKey(130, 0)].throughputs["v100"]; r <= 0 {
		t.Errorf("v100 rate %v once a v100 node came", r)
	}
}

// Tasks chosen on two GPU types: the array's record takes one constraint,
// so it starts the tasks of one type (the first chosen on a tie) and the
// others wait for a later round, said in its status.
func TestArrayTakesOneTypeAtATime(t *testing.T) {
	c := newCore(t, arraySettings())
	nodes := []bridge.Node{node("v1", "v100", 1, 0), node("k1", "k80", 1, 0)}
	res := step(c, snapshot(t, epoch, nodes, arrayRecord(130, "0-3", 0, tag)), epoch, c.Solve)
	got := actionsOf(res.Actions, 130)
	if got != "set-array-limit:1,set-constraints:v100,set-priority" && got != "set-array-limit:1,set-constraints:k80,set-priority" {
		t.Errorf("array record: %q, want one task let start on one type", got)
	}
	if v := viewOf(t, res.View, 130); !strings.Contains(v.Reason, "; 1 chosen for other types wait for a later round") {
		t.Errorf("status %q", v.Reason)
	}
}

// The limit counts the array's running tasks the round keeps, not those
// it stops: a preempted task frees its place for a waiting one, which
// starts once the preempted one is requeued.
func TestArrayLimitLeavesOutStoppedTasks(t *testing.T) {
	c := newCore(t, arraySettings())
	nodes := []bridge.Node{node("p1", "p100", 2, 2)}
	tasks := []bridge.Job{arrayTask(131, 130, 0, 0, "p1", "p100"), arrayTask(132, 130, 1, 0, "p1", "p100")}
	jobs := append([]bridge.Job{arrayRecord(130, "2-7", 0, tag)}, tasks...)
	if got := actionsOf(step(c, snapshot(t, epoch, nodes, jobs...), epoch, c.Solve).Actions, 130); got != "hold" {
		t.Fatalf("first round: array record %q, want it held while its tasks run", got)
	}
	// An hour on, the running tasks are far ahead of the waiting ones,
	// and past their minimum run time.
	c.set.MinRunTime = 0
	now := epoch.Add(time.Hour)
	rec := arrayRecord(130, "2-7", 0, tag)
	rec.Held, rec.Reason = true, "JobHeldAdmin"
	res := step(c, snapshot(t, now, nodes, append([]bridge.Job{rec}, tasks...)...), now, c.Solve)
	stopped := 0
	for _, id := range []bridge.JobID{131, 132} {
		if actionsOf(res.Actions, id) == "signal:USR1" {
			stopped++
		}
	}
	chosen := 0
	for task := uint32(2); task < 8; task++ {
		if js := c.jobs[slotKey(130, task)]; js != nil && js.decision == "run" {
			chosen++
		}
	}
	if stopped == 0 || chosen == 0 {
		t.Fatalf("%d tasks stopped, %d waiting ones chosen: the test needs both", stopped, chosen)
	}
	want := "set-array-limit:" + itoa(2-stopped+chosen) + ",set-constraints:p100,release,set-priority"
	if got := actionsOf(res.Actions, 130); got != want {
		t.Errorf("array record with %d tasks stopped and %d chosen: %q, want %q", stopped, chosen, got, want)
	}
}
