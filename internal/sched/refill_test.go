package sched

import (
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

func refillSettings() Settings {
	set := settings()
	set.RefillPoll = 30 * time.Second
	set.MinRunTime = time.Hour // the round keeps what runs: the tests set the scene
	return set
}

// held is job id as Slurm shows it after the daemon's hold.
func held(id bridge.JobID, comment string) bridge.Job {
	j := pending(id, comment)
	j.Held, j.Reason = true, "JobHeldAdmin"
	return j
}

// done is job j finished: Slurm keeps its record a while.
func done(j bridge.Job) bridge.Job {
	j.State, j.RunningNodes, j.RunningGPUType = bridge.JobCompleted, nil, ""
	return j
}

// A job that ends in the middle of a round frees its GPU; the check
// between rounds starts the waiting job on it instead of leaving it idle
// until the next round, and says why in its status.
func TestRefillStartsTheWaitingJobOnAFreedGPU(t *testing.T) {
	c := newCore(t, refillSettings())
	first := step(c, snapshot(t, epoch, []bridge.Node{node("a1", "v100", 1, 0)}, pending(1, tag), pending(2, tag)), epoch, c.Solve)
	if got := actionsOf(first.Actions, 2); got != "hold" {
		t.Fatalf("round: job 2 %q, want it held", got)
	}
	if next := c.NextGraceEnd(epoch); next.IsZero() || next.After(epoch.Add(30*time.Second)) {
		t.Errorf("next look between rounds at %v, want within the refill poll while job 2 is held", next)
	}
	one := running(1, tag, "a1", "v100", 0)
	one.StartTime = epoch
	now := epoch.Add(30 * time.Second)
	if out := look(c, snapshot(t, now, []bridge.Node{node("a1", "v100", 1, 1)}, one, held(2, tag)), now); len(out) != 0 {
		t.Fatalf("while job 1 runs: %v", out)
	}
	now = now.Add(30 * time.Second)
	out := look(c, snapshot(t, now, []bridge.Node{node("a1", "v100", 1, 0)}, done(one), held(2, tag)), now)
	if got := actionsOf(out, 2); got != "set-constraints:v100,release,set-priority" {
		t.Errorf("after job 1 ended: job 2 %q", got)
	}
	if js := c.jobs[keyOf(2)]; js.decision != "run" || !strings.Contains(js.reason, "GPUs freed between rounds") || js.heldByDaemon {
		t.Errorf("job 2: decision %q, reason %q, held by daemon %v", js.decision, js.reason, js.heldByDaemon)
	}
	if next := c.NextGraceEnd(now); !next.IsZero() {
		t.Errorf("next look between rounds at %v: no job is held any more, so none is due", next)
	}
}

// What keeps a freed GPU from being refilled: the setting off, a job Slurm
// may start there by itself, and a job whose allocation gives it no share
// of the type.
func TestRefillLeavesGPUsToWhatMayTakeThem(t *testing.T) {
	unmanaged := func(reason string) bridge.Job {
		j := pending(9, "no tag")
		j.Reason = reason
		return j
	}
	// chosen is job 9 as a round left it: released at the run priority
	// onto constraint, not started yet.
	chosen := func(gpus int, constraint, reason string) bridge.Job {
		j := pending(9, tag)
		j.GPUs, j.Constraints, j.Priority, j.Reason = gpus, constraint, RunPriority, reason
		return j
	}
	typed := func(gpus int, t string) bridge.Job {
		j := unmanaged("Priority")
		j.GPUs, j.RequestedGPUType = gpus, t
		return j
	}
	mix := chosen(2, "[k80*1&v100*1]", "Resources")
	mix.Nodes, mix.GPUsPerNode = 2, 1
	// het is a heterogeneous job's components 9 and 10 waiting for
	// resources, with the GPUs each asks for; Slurm starts them together.
	het := func(gpus9 int, type9 string, gpus10 int, type10 string, reason10 string) []bridge.Job {
		a, b := unmanaged("Resources"), unmanaged(reason10)
		b.ID = 10
		a.GPUs, a.RequestedGPUType, a.HetJobID = gpus9, type9, 9
		b.GPUs, b.RequestedGPUType, b.HetJobID, b.HetJobOffset = gpus10, type10, 9, 1
		b.Held = strings.HasPrefix(reason10, "JobHeld")
		return []bridge.Job{a, b}
	}
	const started = "set-constraints:v100,release,set-priority"
	on := 30 * time.Second
	tests := map[string]struct {
		poll  time.Duration
		extra []bridge.Job
		want  string
	}{
		"refill on":                             {poll: on, want: started},
		"refill off":                            {poll: 0, want: ""},
		"an untyped job waits for resources":    {poll: on, extra: []bridge.Job{unmanaged("Resources")}, want: ""},
		"an untyped job waits for a dependency": {poll: on, extra: []bridge.Job{unmanaged("Dependency")}, want: started},
		"a typed job waits for the freed type":  {poll: on, extra: []bridge.Job{typed(1, "v100")}, want: ""},
		"a typed job waits for another type":    {poll: on, extra: []bridge.Job{typed(1, "k80")}, want: started},
		"a typed job that does not fit":         {poll: on, extra: []bridge.Job{typed(2, "v100")}, want: started},
		"a job the round chose has not started": {poll: on, extra: []bridge.Job{chosen(1, "v100", "BeginTime")}, want: ""},
		"a chosen job waits for more GPUs":      {poll: on, extra: []bridge.Job{chosen(2, "v100", "Resources")}, want: ""},
		"a chosen mix waits for its other part": {poll: on, extra: []bridge.Job{mix}, want: ""},
		// A heterogeneous job takes the room of all its components or
		// none: one that cannot start keeps no GPU idle.
		"a het job's components all fit":         {poll: on, extra: het(1, "", 0, "", "Resources"), want: ""},
		"a het job's other component cannot fit": {poll: on, extra: het(1, "", 1, "k80", "Resources"), want: started},
		"a het job's other component is held":    {poll: on, extra: het(1, "", 0, "", "JobHeldUser"), want: started},
		// A job array's record a round released starts tasks within its
		// limit, each where one fits.
		"a released array starts its tasks": {poll: on, extra: releasedArray(2, nil), want: ""},
		"a released array at its limit": {poll: on, want: started,
			extra: releasedArray(1, []bridge.Job{arrayTask(10, 9, 0, 1, "b1", "k80")})},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			set := refillSettings()
			set.RefillPoll = tc.poll
			c := newCore(t, set)
			nodes := []bridge.Node{node("a1", "v100", 1, 0), node("b1", "k80", 1, 1)}
			other := running(3, tag, "b1", "k80", 0)
			first := step(c, snapshot(t, epoch, nodes, pending(1, tag), pending(2, tag), other), epoch, c.Solve)
			if got := actionsOf(first.Actions, 2); got != "hold" {
				t.Fatalf("round: job 2 %q, want it held", got)
			}
			one := running(1, tag, "a1", "v100", 0)
			now := epoch.Add(time.Minute)
			jobs := append([]bridge.Job{done(one), held(2, tag), other}, tc.extra...)
			out := look(c, snapshot(t, now, nodes, jobs...), now)
			if got := actionsOf(out, 2); got != tc.want {
				t.Errorf("job 2: %q, want %q", got, tc.want)
			}
		})
	}
}

// releasedArray is job array 9's record as a round left it: released at
// the run priority onto v100 with limit, three tasks waiting, then tasks
// (running ones of the array).
func releasedArray(limit int, tasks []bridge.Job) []bridge.Job {
	j := arrayRecord(9, "1-3", limit, tag)
	j.Constraints, j.Priority, j.Reason = "v100", RunPriority, "JobArrayTaskLimit"
	return append([]bridge.Job{j}, tasks...)
}

// A job array's tasks are not refilled: the array's limit, set at the
// round, may keep a task from starting, and its GPU would stay idle. The
// freed GPU goes to the next job that can take it.
func TestRefillLeavesArrayTasksToTheRounds(t *testing.T) {
	c := newCore(t, refillSettings())
	nodes := []bridge.Node{node("a1", "v100", 1, 0)}
	task := pending(2, tag)
	task.ArrayJobID, task.ArrayTaskID = 20, 4 // requeued earlier: a record of its own
	first := step(c, snapshot(t, epoch, nodes, pending(1, tag), task, pending(3, tag)), epoch, c.Solve)
	if got := actionsOf(first.Actions, 2) + "|" + actionsOf(first.Actions, 3); got != "hold|hold" {
		t.Fatalf("round: jobs 2 and 3 %q, want both held", got)
	}
	task.Held, task.Reason = true, "JobHeldAdmin"
	now := epoch.Add(time.Minute)
	out := look(c, snapshot(t, now, nodes, done(running(1, tag, "a1", "v100", 0)), task, held(3, tag)), now)
	if got := actionsOf(out, 2) + "|" + actionsOf(out, 3); got != "|set-constraints:v100,release,set-priority" {
		t.Errorf("after job 1 ended: jobs 2 and 3 %q, want the array's task left to the next round and job 3 started", got)
	}
}

// A job array's record the round held (its tasks had no room) starts as
// many waiting tasks as freed GPUs fit, as held jobs do: its limit is
// raised by that many before its release, so Slurm starts no more.
func TestRefillStartsAnArraysWaitingTasks(t *testing.T) {
	c := newCore(t, refillSettings())
	nodes := []bridge.Node{node("a1", "v100", 2, 2)}
	one, two := running(1, tag, "a1", "v100", 0), running(2, tag, "a1", "v100", 0)
	first := step(c, snapshot(t, epoch, nodes, one, two, arrayRecord(130, "0-3", 0, tag)), epoch, c.Solve)
	if got := actionsOf(first.Actions, 130); got != "hold" {
		t.Fatalf("round: array %q, want it held", got)
	}
	rec := arrayRecord(130, "0-3", 0, tag)
	rec.Held, rec.Reason = true, "JobHeldAdmin"
	now := epoch.Add(time.Minute)
	out := look(c, snapshot(t, now, []bridge.Node{node("a1", "v100", 2, 1)}, done(one), two, rec), now)
	if got := actionsOf(out, 130); got != "set-array-limit:1,set-constraints:v100,release,set-priority" {
		t.Errorf("after job 1 ended: array %q, want one task let start", got)
	}
	if js := c.jobs[keyOf(130)]; js.decision != "run" || !strings.Contains(js.reason, "job array: 1 of its waiting tasks start on v100") {
		t.Errorf("array: decision %q, reason %q", js.decision, js.reason)
	}
}

// Freed GPUs go to the waiting job with the highest priority on their
// type among those that fit: a heavier job first; a two-GPU job does not
// fit one free GPU, so a one-GPU job behind it starts.
func TestRefillOrderAndFit(t *testing.T) {
	t.Run("priority", func(t *testing.T) {
		c := newCore(t, refillSettings())
		heavy := tag + " weight=4"
		one := running(1, tag, "a1", "v100", 0)
		step(c, snapshot(t, epoch, []bridge.Node{node("a1", "v100", 1, 1)}, one, pending(2, tag), pending(3, heavy)), epoch, c.Solve)
		now := epoch.Add(time.Minute)
		out := look(c, snapshot(t, now, []bridge.Node{node("a1", "v100", 1, 0)}, done(one), held(2, tag), held(3, heavy)), now)
		if got := actionsOf(out, 2) + "|" + actionsOf(out, 3); got != "|set-constraints:v100,release,set-priority" {
			t.Errorf("jobs 2 and 3: %q, want the heavier job 3 started", got)
		}
	})
	t.Run("fit", func(t *testing.T) {
		c := newCore(t, refillSettings())
		nodes := []bridge.Node{node("a1", "v100", 2, 2)}
		one, five := running(1, tag, "a1", "v100", 0), running(5, tag, "a1", "v100", 0)
		// The two-GPU job outweighs the one-GPU job, so it is tried
		// first and must be passed over for not fitting.
		heavy := tag + " weight=4"
		pair := pending(2, heavy)
		pair.GPUs = 2
		step(c, snapshot(t, epoch, nodes, one, five, pair, pending(3, tag)), epoch, c.Solve)
		if p2, p3 := priorityOn(t, c, "2", "v100"), priorityOn(t, c, "3", "v100"); p2 <= p3 {
			t.Fatalf("priorities on v100: two-GPU job %v, one-GPU job %v: the test needs the first higher", p2, p3)
		}
		heldPair := held(2, heavy)
		heldPair.GPUs = 2
		now := epoch.Add(time.Minute)
		out := look(c, snapshot(t, now, []bridge.Node{node("a1", "v100", 2, 1)}, done(one), five, heldPair, held(3, tag)), now)
		if got := actionsOf(out, 2); got != "" {
			t.Errorf("the two-GPU job on one free GPU: %q", got)
		}
		if got := actionsOf(out, 3); got != "set-constraints:v100,release,set-priority" {
			t.Errorf("the one-GPU job: %q", got)
		}
	})
}

func priorityOn(t *testing.T, c *Core, id, gpuType string) float64 {
	t.Helper()
	st, err := c.mech.State(id, gpuType)
	if err != nil {
		t.Fatal(err)
	}
	return st.Priority
}

// A held job with shares of two types that both freed GPUs starts once,
// on the type where its priority is highest.
func TestRefillStartsAJobOnce(t *testing.T) {
	c := newCore(t, refillSettings())
	nodes := []bridge.Node{node("a1", "v100", 1, 1), node("b1", "k80", 1, 1)}
	one, three := running(1, tag, "a1", "v100", 0), running(3, tag, "b1", "k80", 0)
	step(c, snapshot(t, epoch, nodes, one, three, pending(2, tag)), epoch, c.Solve)
	pv, pk := priorityOn(t, c, "2", "v100"), priorityOn(t, c, "2", "k80")
	if pv <= 0 || pk <= 0 {
		t.Fatalf("job 2's priorities v100 %v, k80 %v: the test needs shares of both", pv, pk)
	}
	want := map[string]bool{}
	for typ, p := range map[string]float64{"v100": pv, "k80": pk} {
		if p == max(pv, pk) {
			want["set-constraints:"+typ+",release,set-priority"] = true
		}
	}
	now := epoch.Add(time.Minute)
	free := []bridge.Node{node("a1", "v100", 1, 0), node("b1", "k80", 1, 0)}
	out := look(c, snapshot(t, now, free, done(one), done(three), held(2, tag)), now)
	if got := actionsOf(out, 2); !want[got] {
		t.Errorf("job 2: %q, want one start on its best type (priorities v100 %v, k80 %v)", got, pv, pk)
	}
}

// A running job the round moves to another type keeps its claim on that
// type: the idle GPU there is not refilled while the job waits out its
// grace period, nor when it requeued itself and the same look makes it
// eligible on its new type.
func TestRefillLeavesAMovingJobItsTarget(t *testing.T) {
	moved := running(1, tag, "b1", "k80", 0)
	moved.StartTime = epoch
	requeued := pending(1, tag)
	requeued.Constraints, requeued.Restarts, requeued.Reason = "k80", 1, "BeginTime"
	for name, tc := range map[string]struct {
		job     bridge.Job // job 1 as Slurm shows it at the look
		k80Used int
		want1   string // part of job 1's actions
	}{
		"in its grace period": {job: moved, k80Used: 1},
		"requeued itself":     {job: requeued, want1: "set-constraints:v100"},
	} {
		t.Run(name, func(t *testing.T) {
			c, now, r2 := movedInGrace(t)
			jobs := []bridge.Job{tc.job}
			for _, id := range []bridge.JobID{2, 3} {
				j := held(id, tag)
				if acts := actionsOf(r2.Actions, id); acts != "hold" {
					j = pending(id, tag)
					j.Constraints, j.Priority, j.Reason = "k80", RunPriority, "Resources"
				}
				jobs = append(jobs, j)
			}
			at := now.Add(30 * time.Second)
			seen := []bridge.Node{node("a1", "v100", 1, 0), node("b1", "k80", 1, tc.k80Used)}
			out := look(c, snapshot(t, at, seen, jobs...), at)
			if got := actionsOf(out, 1); !strings.Contains(got, tc.want1) {
				t.Fatalf("job 1: %q, want %q in it", got, tc.want1)
			}
			for _, id := range []bridge.JobID{2, 3} {
				if got := actionsOf(out, id); strings.Contains(got, "v100") {
					t.Errorf("job %d: %q on the v100 job 1 is to restart on", id, got)
				}
			}
		})
	}
}

// A look whose actions could not be journaled changes no job: the job
// stays the daemon's held job and its status line is the round's.
func TestUnsentRefillChangesNothing(t *testing.T) {
	c := newCore(t, refillSettings())
	first := step(c, snapshot(t, epoch, []bridge.Node{node("a1", "v100", 1, 0)}, pending(1, tag), pending(2, tag)), epoch, c.Solve)
	if got := actionsOf(first.Actions, 2); got != "hold" {
		t.Fatalf("round: job 2 %q, want it held", got)
	}
	before := *c.jobs[keyOf(2)]
	now := epoch.Add(time.Minute)
	p := c.Look(snapshot(t, now, []bridge.Node{node("a1", "v100", 1, 0)}, done(running(1, tag, "a1", "v100", 0)), held(2, tag)), now)
	if actionsOf(p.Actions, 2) == "" {
		t.Fatal("no refill to take back")
	}
	c.Commit(p, nil) // the journal write failed: nothing was sent
	after := c.jobs[keyOf(2)]
	if !after.heldByDaemon || after.decision != before.decision || after.reason != before.reason {
		t.Errorf("after a look that sent nothing: held by daemon %v, decision %q, reason %q; want %v, %q, %q",
			after.heldByDaemon, after.decision, after.reason, before.heldByDaemon, before.decision, before.reason)
	}
}

// A view refreshed between rounds shows a job that arrived since the
// round as waiting for the next one, and none is made from a snapshot
// that lost most managed jobs at once.
func TestRefreshBetweenRounds(t *testing.T) {
	c := newCore(t, refillSettings())
	nodes := []bridge.Node{node("a1", "v100", 1, 0)}
	step(c, snapshot(t, epoch, nodes, pending(1, tag), pending(2, tag), pending(3, tag)), epoch, c.Solve)
	now := epoch.Add(time.Minute)
	v, ok := c.Refresh(snapshot(t, now, nodes, pending(1, tag), held(2, tag), held(3, tag), pending(4, tag)), epoch)
	if !ok {
		t.Fatal("no view refreshed")
	}
	var late *JobView
	for i := range v.Jobs {
		if v.Jobs[i].Job.ID == 4 {
			late = &v.Jobs[i]
		}
	}
	if late == nil || !late.Managed || !strings.Contains(late.Reason, "arrived since the last round") {
		t.Errorf("the job that arrived since the round: %+v", late)
	}
	if v.Started != epoch || v.Round != 1 {
		t.Errorf("refreshed view of round %d started %v: want the round's own", v.Round, v.Started)
	}
	if _, ok := c.Refresh(snapshot(t, now, nodes, pending(4, tag)), epoch); ok {
		t.Error("a view refreshed from a snapshot that lost every managed job")
	}
}

// movedInGrace sets up job 1 running on the k80, preempted to move to the
// v100 (grace period of a minute started at the returned time), with jobs
// 2 and 3 arrived; it returns the core, that time and the second round.
func movedInGrace(t *testing.T) (*Core, time.Time, Result) {
	t.Helper()
	moved := running(1, tag, "b1", "k80", 0)
	moved.StartTime = epoch
	set := refillSettings()
	set.MinRunTime, set.DefaultGrace = 0, time.Minute
	c := newCore(t, set)
	nodes := []bridge.Node{node("a1", "v100", 1, 0), node("b1", "k80", 1, 1)}
	step(c, snapshot(t, epoch, nodes, moved), epoch, c.Solve)
	now := epoch.Add(20 * time.Second)
	res := step(c, snapshot(t, now, nodes, moved, pending(2, tag), pending(3, tag)), now, c.Solve)
	if pre := c.jobs[keyOf(1)].pre; pre.phase != inGrace || pre.target != "v100" {
		t.Fatalf("job 1 after the second round: %+v; the test needs it moved to the v100", pre)
	}
	return c, now, res
}
