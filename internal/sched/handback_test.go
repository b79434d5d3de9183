package sched

import (
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/rounds"
)

// A job leaving the daemon's management, whichever way it leaves, gets
// all of itself back in the round that sees it go: the request its owner
// made, Slurm's own priority, no hold or lease of the daemon's.
func TestJobLeavingManagementGetsAllOfItselfBack(t *testing.T) {
	a1 := node("a1", "v100", 1, 1)
	a1.Features = []string{"v100", "bigmem"}
	nodes := []bridge.Node{a1}
	chosen := func() bridge.Job {
		// Released onto v100 at the run priority; a QOS limit keeps it
		// from starting.
		j := pending(1, tag)
		j.Constraints, j.Priority, j.Reason = "v100", RunPriority, "QOSMaxGRESPerUser"
		return j
	}
	leaseHeld := func() bridge.Job {
		j := pending(1, tag)
		j.Held, j.LeaseHeld, j.Reason, j.Priority = true, true, "Dependency", RunPriority
		return j
	}
	tests := map[string]struct {
		// before is the job while managed, heldByDaemon and shareSet the
		// daemon's record of it; leave is how it leaves (nil: moved
		// out of the managed partitions, shown in Elsewhere).
		before              bridge.Job
		heldByDaemon, share bool
		leave               func(bridge.Job) bridge.Job
		elsewhere           bool
		want                string
	}{
		"chosen, then its tag removed": {
			before: chosen(), leave: func(j bridge.Job) bridge.Job { return j.WithComment("mine now") },
			want: "set-constraints:,reset-priority",
		},
		"chosen, then moved to an unmanaged partition": {
			before: chosen(), elsewhere: true,
			want: "set-constraints:,reset-priority",
		},
		"chosen, own features kept": {
			before: func() bridge.Job { j := chosen(); j.Constraints = "bigmem&v100"; return j }(),
			leave:  func(j bridge.Job) bridge.Job { return j.WithComment("") },
			want:   "set-constraints:bigmem,reset-priority",
		},
		"waiting on the lease, tag broken": {
			before: leaseHeld(), heldByDaemon: true,
			leave: func(j bridge.Job) bridge.Job { return j.WithComment("gavel: model=") },
			want:  "reset-priority,release",
		},
		"a pair's member waiting, tag removed": {
			before: func() bridge.Job {
				j := leaseHeld()
				j.Shards, j.RequiredNodes, j.Constraints = 2, "a1", "v100"
				return j
			}(), heldByDaemon: true, share: true,
			leave: func(j bridge.Job) bridge.Job { return j.WithComment("") },
			want:  "set-share:0@:,reset-priority,release",
		},
		"its owner's own hold stays theirs": {
			before: func() bridge.Job {
				j := pending(1, tag)
				j.Held, j.Reason, j.Priority, j.Constraints = true, "JobHeldUser", 0, "v100"
				return j
			}(),
			leave: func(j bridge.Job) bridge.Job { return j.WithComment("") },
			want:  "set-constraints:",
		},
		"as its owner made it: nothing": {
			before: pending(1, tag), leave: func(j bridge.Job) bridge.Job { return j.WithComment("") },
			want: "",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := newCore(t, settings())
			now := epoch
			step(c, snapshot(t, now, nodes, tc.before), now, c.Solve)
			js := c.jobs[keyOf(1)]
			if js == nil {
				t.Fatal("job 1 not tracked")
			}
			js.heldByDaemon, js.shareSet = tc.heldByDaemon, tc.share
			now = now.Add(20 * time.Second)
			var after *bridge.Snapshot
			if tc.elsewhere {
				after = snapshot(t, now, nodes)
				moved := tc.before
				moved.Partition = "cpu"
				after.Elsewhere = []bridge.Job{moved}
			} else {
				after = snapshot(t, now, nodes, tc.leave(tc.before))
			}
			res := step(c, after, now, c.Solve)
			if got := actionsOf(res.Actions, 1); got != tc.want {
				t.Errorf("actions %q, want %q", got, tc.want)
			}
			if _, tracked := c.jobs[keyOf(1)]; tracked && tc.elsewhere {
				t.Error("a job moved out of the managed partitions is still tracked")
			}
		})
	}
}

// HandBackAll restores every job the records know or that waits on the
// lease, and each array's own limit, without changing the records; on a
// view where all of it landed there is nothing left.
func TestHandBackAllRestoresAndListsWhatIsLeft(t *testing.T) {
	c := newCore(t, settings())
	nodes := []bridge.Node{node("a1", "v100", 2, 2)}
	chosen := pending(1, tag)
	chosen.Constraints, chosen.Priority = "v100", RunPriority
	array := pending(5, tag)
	array.ArrayJobID, array.ArrayTasks, array.ArrayLimit = 5, "0-3", 2
	step(c, snapshot(t, epoch, nodes, chosen, array), epoch, c.Solve)
	c.arrayLimits[5] = 3 // its owner's own %3
	stray := pending(9, "no tag")
	stray.Held, stray.LeaseHeld, stray.Reason = true, true, "Dependency"
	now := epoch.Add(time.Minute)
	got := c.HandBackAll(snapshot(t, now, nodes, chosen, array, stray))
	want := map[bridge.JobID]string{1: "set-constraints:,reset-priority", 5: "set-array-limit:3", 9: "release"}
	for id, w := range want {
		if a := actionsOf(got, id); a != w {
			t.Errorf("job %d: %q, want %q", id, a, w)
		}
	}
	if c.jobs[keyOf(1)] == nil || c.arrayLimits[5] != 3 {
		t.Error("HandBackAll changed the records")
	}
	restored := pending(1, tag)
	array.ArrayLimit = 3
	if left := c.HandBackLeft(snapshot(t, now, nodes, restored, array, pending(9, "no tag"))); len(left) != 0 {
		t.Errorf("left after every restore landed: %q", left)
	}
	if left := c.HandBackLeft(snapshot(t, now, nodes, chosen, array)); len(left) != 1 {
		t.Errorf("left with job 1 as the daemon had it: %q, want one line", left)
	}
}

// A job the round keeps waiting loses what the daemon gave it when it
// last chose it, so that it is right for Slurm if the lease runs out.
func TestWaitingJobIsAsSubmitted(t *testing.T) {
	c := newCore(t, settings())
	step(c, snapshot(t, epoch, []bridge.Node{node("a1", "v100", 1, 0)}), epoch, c.Solve) // learns the GPU types
	tests := map[string]struct {
		job  func(bridge.Job) bridge.Job
		want string
	}{
		"chosen before, now waiting on the lease": {func(j bridge.Job) bridge.Job {
			j.Constraints, j.Priority, j.Held, j.LeaseHeld = "bigmem&v100", RunPriority, true, true
			return j
		}, "set-constraints:bigmem,reset-priority"},
		"requeued, not held yet": {func(j bridge.Job) bridge.Job {
			j.Constraints, j.Priority, j.Restarts = "v100", RunPriority, 1
			return j
		}, "set-constraints:,reset-priority"},
		"as submitted":      {func(j bridge.Job) bridge.Job { j.Constraints = "bigmem"; return j }, ""},
		"typed request":     {func(j bridge.Job) bridge.Job { j.RequestedGPUType, j.Constraints = "v100", "v100"; return j }, ""},
		"a Slurm hold":      {func(j bridge.Job) bridge.Job { j.Held, j.Priority, j.Reason = true, 0, "JobHeldUser"; return j }, ""},
		"a pair's member":   {func(j bridge.Job) bridge.Job { j.Shards, j.Constraints = 2, "v100"; return j }, ""},
		"a mix's own shape": {func(j bridge.Job) bridge.Job { j.Constraints = "v100|k80"; return j }, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			j := tc.job(pending(1, tag))
			if got := actionsOf(c.waitAsSubmitted(j, "waits"), 1); got != tc.want {
				t.Errorf("actions %q, want %q", got, tc.want)
			}
		})
	}
}

// A job its owner takes off the daemon's lease while the lease lives
// starts ahead of the allocation: no minimum run time or restart hold
// keeps it. One Slurm started while the lease had lapsed (the daemon was
// away) is adopted like any running job.
func TestJobThatLeftTheLeaseEarnsNoPin(t *testing.T) {
	for name, tc := range map[string]struct {
		after      time.Duration
		wantJumped bool
	}{
		"left while the lease lived":         {20 * time.Second, true},
		"started after the lease had lapsed": {5 * time.Minute, false},
	} {
		t.Run(name, func(t *testing.T) {
			set := settings()
			set.Lease, set.MinRunTime = time.Minute, 10*time.Minute
			c := newCore(t, set)
			nodes := []bridge.Node{node("a1", "v100", 1, 1)} // busy: nothing starts
			waiting := pending(1, tag)
			waiting.Held, waiting.LeaseHeld, waiting.Reason = true, true, "Dependency"
			other := pending(2, tag)
			step(c, snapshot(t, epoch, nodes, waiting, other), epoch, c.Solve)
			if !c.jobs[keyOf(1)].heldByDaemon {
				t.Fatal("a job waiting on the lease is not the daemon's")
			}
			now := epoch.Add(tc.after)
			started := running(1, tag, "a1", "v100", 0)
			started.StartTime = now.Add(-5 * time.Second)
			step(c, snapshot(t, now, []bridge.Node{node("a1", "v100", 1, 1)}, started, other), now, c.Solve)
			js := c.jobs[keyOf(1)]
			if js.jumped != tc.wantJumped {
				t.Errorf("jumped = %v, want %v", js.jumped, tc.wantJumped)
			}
			wantPin := rounds.PinMinRunTime
			if tc.wantJumped {
				wantPin = rounds.NotPinned
			}
			if got := c.pinOf(js, started, now); got != wantPin {
				t.Errorf("pin %v, want %v", got, wantPin)
			}
		})
	}
}

// A crash between an array's first set-array-limit and the state's save
// does not make the daemon's limit its user's: the journaled action
// carries the user's own, which the restart takes back.
func TestArrayOwnLimitSurvivesACrashBeforeTheSave(t *testing.T) {
	c := newCore(t, settings())
	nodes := []bridge.Node{node("a1", "v100", 2, 1)}
	array := pending(5, tag)
	array.ArrayJobID, array.ArrayTasks, array.ArrayLimit = 5, "0-7", 4
	p := c.Step(Input{Snap: snapshot(t, epoch, nodes, array), Now: epoch, Solve: c.Solve})
	var sent *Action
	for i, a := range p.Actions {
		if a.Kind == bridge.ActSetArrayLimit {
			sent = &p.Actions[i]
		}
	}
	if sent == nil {
		t.Fatalf("no set-array-limit in %s", describeActions(p.Actions))
	}
	if !sent.ArrayOwnSet || sent.ArrayOwn != 4 {
		t.Fatalf("the journaled limit carries own %d (set %v), want 4", sent.ArrayOwn, sent.ArrayOwnSet)
	}
	// The crash: the action reached Slurm, the state was never saved.
	restarted := newCore(t, settings())
	restarted.Restore(map[string]Record{}, 1)
	replay := restarted.RestoreJournal([]JournalEntry{{Created: epoch, Pending: true, Seq: 7, Action: *sent}}, map[string]Record{})
	restarted.Commit(replay, []Outcome{Accepted})
	array.ArrayLimit = sent.Tasks // what Slurm shows now: the daemon's
	step(restarted, snapshot(t, epoch.Add(20*time.Second), nodes, array), epoch.Add(20*time.Second), restarted.Solve)
	if got := restarted.arrayLimits[5]; got != 4 {
		t.Errorf("the array's own limit after the restart is %d, want its user's 4 (the daemon set %d)", got, sent.Tasks)
	}
}
