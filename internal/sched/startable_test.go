package sched

import (
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// A job Slurm would not start however free the GPUs is kept out of the
// allocation: it is not chosen (no release, no priority), the job that can
// run is, no running job is preempted for it, and status says why. Once
// the blocker clears it competes again.
func TestJobsSlurmCannotStartGetNoShare(t *testing.T) {
	later := epoch.Add(2 * time.Hour)
	tests := map[string]struct {
		blocked bridge.Job
		cleared bridge.Job // the same job once its blocker cleared
		// daemonHeld: the hold on the job is the daemon's own.
		daemonHeld bool
		wantWords  string
	}{
		"dependency": {
			blocked:   with(pending(2, tag), func(j *bridge.Job) { j.Reason, j.Dependency = "Dependency", "afterok:9(unfulfilled)" }),
			cleared:   with(pending(2, tag), func(j *bridge.Job) { j.Reason = "Priority" }),
			wantWords: "dependency afterok:9(unfulfilled)",
		},
		"dependency under the daemon's hold": {
			blocked:    with(held(2, tag), func(j *bridge.Job) { j.Dependency = "afterok:9(unfulfilled)" }),
			cleared:    held(2, tag),
			daemonHeld: true,
			wantWords:  "dependency",
		},
		"QOS limit": {
			blocked:   with(pending(2, tag), func(j *bridge.Job) { j.Reason = "QOSMaxGRESPerUser" }),
			cleared:   with(pending(2, tag), func(j *bridge.Job) { j.Reason = "Resources" }),
			wantWords: "QOSMaxGRESPerUser",
		},
		"association limit": {
			blocked:   with(pending(2, tag), func(j *bridge.Job) { j.Reason = "AssocGrpGRES" }),
			cleared:   with(pending(2, tag), func(j *bridge.Job) { j.Reason = "Priority" }),
			wantWords: "AssocGrpGRES",
		},
		"its owner's begin time": {
			blocked:   with(pending(2, tag), func(j *bridge.Job) { j.Reason, j.EligibleTime = "BeginTime", later }),
			cleared:   with(pending(2, tag), func(j *bridge.Job) { j.Reason = "Priority" }),
			wantWords: "begin time",
		},
		"reservation": {
			blocked:   with(pending(2, tag), func(j *bridge.Job) { j.Reason = "Reservation" }),
			cleared:   with(pending(2, tag), func(j *bridge.Job) { j.Reason = "Priority" }),
			wantWords: "Reservation",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			set := settings()
			set.MinRunTime = 0
			c := newCore(t, set)
			nodes := []bridge.Node{node("a1", "v100", 1, 1)}
			first := running(1, tag+" preempt=checkpoint", "a1", "v100", 0)
			if tc.daemonHeld {
				// The daemon held it at an earlier round (its ledger says so).
				step(c, snapshot(t, epoch.Add(-time.Minute), nodes, first, held(2, tag)), epoch.Add(-time.Minute), c.Solve)
				c.jobs[keyOf(2)].heldByDaemon = true
			}
			for i := range 4 {
				now := epoch.Add(time.Duration(i) * time.Minute)
				res := step(c, snapshot(t, now, nodes, first, tc.blocked), now, c.Solve)
				if got := actionsOf(res.Actions, 1); got != "" {
					t.Fatalf("round %d: the running job gets %q for a job Slurm cannot start", i+1, got)
				}
				if got := actionsOf(res.Actions, 2); strings.Contains(got, "release") || strings.Contains(got, "set-priority") || strings.Contains(got, "begin-now") {
					t.Fatalf("round %d: the blocked job gets %q", i+1, got)
				}
			}
			if js := c.jobs[keyOf(2)]; js.scale != 0 || !strings.Contains(js.reason, "waits for Slurm") || !strings.Contains(js.reason, tc.wantWords) {
				t.Errorf("blocked job: in the mechanism %t, reason %q; want out, saying %q", js.scale != 0, js.reason, tc.wantWords)
			}
			// Cleared: the next rounds time-share the GPU with it again.
			// (The snapshots do not follow the daemon's actions: only the
			// first round after the blocker cleared is read for its share.)
			preempted, scheduled := false, false
			for i := range 6 {
				now := epoch.Add(time.Duration(10+i) * time.Minute)
				res := step(c, snapshot(t, now, nodes, first, tc.cleared), now, c.Solve)
				preempted = preempted || actionsOf(res.Actions, 1) == "signal:USR1"
				scheduled = scheduled || c.jobs[keyOf(2)].scale != 0
			}
			if !scheduled || !preempted {
				t.Errorf("once its blocker cleared: in the mechanism %t, running job preempted %t; want both", scheduled, preempted)
			}
		})
	}
}

// Slurm's own delay on a requeued job is lifted, as before; a begin time
// far ahead, or on a job never requeued, is its owner's and kept.
func TestRequeueDelayIsLiftedButTheOwnersBeginTimeIsKept(t *testing.T) {
	soon, far := epoch.Add(2*time.Minute), epoch.Add(3*time.Hour)
	tests := map[string]struct {
		job  bridge.Job
		want string
	}{
		"requeue delay":           {job: with(pending(2, tag), func(j *bridge.Job) { j.Reason, j.EligibleTime, j.Restarts = "BeginTime", soon, 1 }), want: "begin-now"},
		"owner's begin, requeued": {job: with(pending(2, tag), func(j *bridge.Job) { j.Reason, j.EligibleTime, j.Restarts = "BeginTime", far, 1 })},
		"owner's begin, soon":     {job: with(pending(2, tag), func(j *bridge.Job) { j.Reason, j.EligibleTime = "BeginTime", soon })},
		"begin time passed":       {job: with(pending(2, tag), func(j *bridge.Job) { j.Reason, j.EligibleTime = "BeginTime", epoch.Add(-time.Minute) }), want: "begin-now"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := newCore(t, settings())
			res := step(c, snapshot(t, epoch, []bridge.Node{node("a1", "v100", 1, 0)}, tc.job), epoch, c.Solve)
			got := actionsOf(res.Actions, 2)
			if tc.want == "" && got != "" {
				t.Errorf("actions %q; want none: the job waits for its owner's begin time", got)
			}
			if tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("actions %q; want %s", got, tc.want)
			}
		})
	}
}

// What a job's owner changes after submission is read again: the GPU
// count of a pending job, and the requeue flag of a running one (turned
// off, the job is never preempted, whatever its tag asks).
func TestChangesAfterSubmissionAreReadAgain(t *testing.T) {
	t.Run("GPU count", func(t *testing.T) {
		c := newCore(t, settings())
		nodes := []bridge.Node{node("a1", "v100", 4, 0)}
		step(c, snapshot(t, epoch, nodes, pending(2, tag)), epoch, c.Solve)
		if c.jobs[keyOf(2)].scale != 1 {
			t.Fatalf("scale %d, want 1", c.jobs[keyOf(2)].scale)
		}
		bigger := with(pending(2, tag), func(j *bridge.Job) { j.GPUs, j.GPUsPerNode = 4, 4 })
		now := epoch.Add(time.Minute)
		step(c, snapshot(t, now, nodes, bigger), now, c.Solve)
		if got := c.jobs[keyOf(2)].scale; got != 4 {
			t.Errorf("after scontrol update TresPerNode=gres/gpu:4: the step counts %d GPUs, want 4", got)
		}
	})
	t.Run("requeue flag", func(t *testing.T) {
		set := settings()
		set.MinRunTime = 0
		c := newCore(t, set)
		nodes := []bridge.Node{node("a1", "v100", 1, 1)}
		first := running(1, tag+" preempt=checkpoint", "a1", "v100", 0)
		step(c, snapshot(t, epoch, nodes, first), epoch, c.Solve)
		first.NoRequeue = true // scontrol update jobid=1 requeue=0, by its owner
		for i := range 6 {
			now := epoch.Add(time.Duration(i+1) * time.Minute)
			res := step(c, snapshot(t, now, nodes, first, pending(2, tag)), now, c.Solve)
			if got := actionsOf(res.Actions, 1); got != "" {
				t.Fatalf("round %d: job 1, no longer requeueable, gets %q", i+2, got)
			}
		}
		if js := c.jobs[keyOf(1)]; c.modeOf(js) != bridge.PreemptNever || !strings.Contains(strings.Join(js.notes, ";"), "may not requeue") {
			t.Errorf("job 1: mode %s, notes %q; want never, with a note", c.modeOf(js), js.notes)
		}
	})
}

// Trial-and-error room is for a job's first start: a TE job a round
// stopped waits for the rounds like any other, instead of preempting
// someone else right away.
func TestTrialAndErrorRoomOnlyBeforeTheFirstStart(t *testing.T) {
	set := settings()
	set.TrialAndError = TESettings{Enabled: true, Weight: 4, Poll: 5 * time.Second}
	te := "gavel: model=resnet18-bs64 steps=1k class=te"
	for _, restarts := range []int{0, 1} {
		c := newCore(t, set)
		nodes := []bridge.Node{node("a1", "v100", 1, 1)}
		victim := running(1, tag+" preempt=requeue", "a1", "v100", 0)
		step(c, snapshot(t, epoch, nodes, victim), epoch, c.Solve)
		job := with(pending(9, te), func(j *bridge.Job) { j.Restarts = restarts })
		now := epoch.Add(10 * time.Second)
		out := look(c, snapshot(t, now, nodes, victim, job), now)
		got := actionsOf(out, 1)
		if restarts == 0 && got == "" {
			t.Errorf("a TE job before its first start gets no room (victim's actions %q)", got)
		}
		if restarts > 0 && got != "" {
			t.Errorf("a TE job that already ran (restarts %d) preempts job 1: %q", restarts, got)
		}
	}
}

// with returns j changed by f.
func with(j bridge.Job, f func(*bridge.Job)) bridge.Job {
	f(&j)
	return j
}

// The refill between rounds counts on a released job at the daemon's run
// priority only while Slurm could start it: not one that waits for a
// limit, a dependency or its owner's begin time.
func TestRefillDoesNotCountOnJobsSlurmCannotStart(t *testing.T) {
	chosen := func(f func(*bridge.Job)) bridge.Job {
		j := pending(2, tag)
		j.Priority = RunPriority
		f(&j)
		return j
	}
	tests := map[string]struct {
		job  bridge.Job
		want bool
	}{
		"waits for GPUs":         {chosen(func(j *bridge.Job) { j.Reason = "Resources" }), true},
		"Slurm's requeue delay":  {chosen(func(j *bridge.Job) { j.Reason, j.EligibleTime, j.Restarts = "BeginTime", epoch.Add(time.Minute), 1 }), true},
		"QOS limit":              {chosen(func(j *bridge.Job) { j.Reason = "QOSMaxGRESPerUser" }), false},
		"dependency":             {chosen(func(j *bridge.Job) { j.Reason, j.Dependency = "Dependency", "afterany:7(unfulfilled)" }), false},
		"its owner's begin time": {chosen(func(j *bridge.Job) { j.Reason, j.EligibleTime = "BeginTime", epoch.Add(time.Hour) }), false},
		"licenses":               {chosen(func(j *bridge.Job) { j.Reason = "Licenses" }), false},
	}
	for name, tc := range tests {
		if got := slurmWillStart(tc.job, epoch); got != tc.want {
			t.Errorf("%s: slurmWillStart = %t, want %t", name, got, tc.want)
		}
	}
}

// [trial_and_error] max_per_user caps how many of one user's TE jobs hold
// room made for them at once; other users' TE jobs still get theirs.
func TestTrialAndErrorRoomIsCappedPerUser(t *testing.T) {
	set := settings()
	set.TrialAndError = TESettings{Enabled: true, Weight: 4, Poll: 5 * time.Second, MaxPerUser: 1}
	te := "gavel: model=resnet18-bs64 steps=1k class=te"
	c := newCore(t, set)
	nodes := []bridge.Node{node("a1", "v100", 4, 4)}
	var victims []bridge.Job
	for id := bridge.JobID(1); id <= 4; id++ {
		victims = append(victims, running(id, tag+" preempt=requeue", "a1", "v100", 0))
	}
	step(c, snapshot(t, epoch, nodes, victims...), epoch, c.Solve)
	owned := func(id bridge.JobID, user string) bridge.Job {
		return with(pending(id, te), func(j *bridge.Job) { j.User = user })
	}
	preempted := func(out []Action) int {
		n := 0
		for _, a := range out {
			if a.Kind == bridge.ActRequeueHold {
				n++
			}
		}
		return n
	}
	now := epoch.Add(10 * time.Second)
	jobs := append(append([]bridge.Job{}, victims...), owned(9, "ana"))
	if n := preempted(look(c, snapshot(t, now, nodes, jobs...), now)); n != 1 {
		t.Fatalf("ana's first TE job: %d jobs preempted, want 1", n)
	}
	now = now.Add(5 * time.Second)
	jobs = append(jobs, owned(10, "ana"))
	if n := preempted(look(c, snapshot(t, now, nodes, jobs...), now)); n != 0 {
		t.Errorf("ana's second TE job, over max_per_user=1: %d jobs preempted, want none", n)
	}
	now = now.Add(5 * time.Second)
	jobs = append(jobs, owned(11, "bo"))
	if n := preempted(look(c, snapshot(t, now, nodes, jobs...), now)); n != 1 {
		t.Errorf("bo's TE job: %d jobs preempted, want 1", n)
	}
}
