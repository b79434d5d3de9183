package stepsim

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/sim"
)

// arrayConfig is two v100 nodes and a k80 node of one GPU each.
func arrayConfig(t *testing.T) Config {
	cfg := config(t, map[string]int{"v100": 2, "k80": 1})
	cfg.MaxTime = 20 * 24 * time.Hour
	return cfg
}

// arrayTrace is a job array of six 2000-step tasks between two single
// jobs, all of them arriving in the first 100 s: the tasks compete with
// the single jobs for three GPUs, so the limit the daemon sets on the
// array (2 at the first round) stays below a user's limit of 4 while
// tasks wait. arrays submits the array with its user's limit own.
func arrayTrace(own int) (jobs sim.Jobs, arrays map[int]Array) {
	return sim.Jobs{wjob("two", 3000, 0), wjob("one", 2000, 0), wjob("two", 3000, 100)},
		map[int]Array{1: {Tasks: 6, Limit: own}}
}

// firstOf returns a CrashAfter that stops the daemon after the first
// action of kind that reaches Slurm (for set-share, the first that asks
// for shards), and only then.
func firstOf(kind bridge.ActionKind) func(bridge.Action) bool {
	done := false
	return func(a bridge.Action) bool {
		if done || a.Kind != kind || (kind == bridge.ActSetShare && a.Shards == 0) {
			return false
		}
		done = true
		return true
	}
}

// arrayChecks follows a run's job arrays round by round: no array runs
// more tasks at once than its user's own limit, and the array shows its
// user's own limit, not the daemon's, once a round has seen every task
// of it on a record of its own, and once the daemon no longer manages
// any record of it.
type arrayChecks struct {
	t *testing.T
	r *run
	// settled counts the rounds that found every task of an array on a
	// record of its own while the record with the array's id was still
	// active; last is the limit the array showed at the last round that
	// found it settled or out of the daemon's management.
	settled map[bridge.JobID]int
	last    map[bridge.JobID]int
	// lenient leaves a wrong limit to the end of the run, for runs whose
	// refusals may hold the put-back off for a while; strict runs check
	// it at every round.
	lenient bool
	// leaveAt is when the user takes the arrays out of the daemon's
	// management, removing the tag from their comment (0: never): at the
	// first round from then on that finds tasks waiting. unmanaged counts
	// the rounds since no record of a left array was tracked any more.
	leaveAt   time.Duration
	left      map[bridge.JobID]bool
	unmanaged map[bridge.JobID]int
	told      map[string]bool
}

func newArrayChecks(t *testing.T, r *run) *arrayChecks {
	c := &arrayChecks{t: t, r: r, settled: map[bridge.JobID]int{}, last: map[bridge.JobID]int{},
		left: map[bridge.JobID]bool{}, unmanaged: map[bridge.JobID]int{}, told: map[string]bool{}}
	r.afterRound = c.afterRound
	return c
}

func (c *arrayChecks) errorf(key, format string, args ...any) {
	c.t.Helper()
	if c.told[key] {
		return
	}
	c.told[key] = true
	c.t.Errorf("at %v: "+format, append([]any{c.r.now.Sub(epoch)}, args...)...)
}

// arrayState is what a snapshot shows of an array: the tasks running,
// whether any record of it is active, whether one still holds waiting
// tasks, whether the record that carries the array's id is active, and
// the limit the array shows.
type arrayState struct {
	running                int
	active, waiting, ownID bool
	limit                  int
	// tracked says the daemon keeps a record of one of its records.
	tracked bool
}

func (c *arrayChecks) state(snap *bridge.Snapshot, id bridge.JobID) arrayState {
	var s arrayState
	for _, j := range snap.Jobs {
		if j.ArrayJobID != id || !j.Active() {
			continue
		}
		if j.State == bridge.JobRunning {
			s.running++
		}
		s.active = true
		s.waiting = s.waiting || j.HoldsArrayTasks()
		s.ownID = s.ownID || j.ID == id
		s.tracked = s.tracked || c.r.core.Tracks(j.ID)
		s.limit = j.ArrayLimit // Slurm shows it on every record
	}
	return s
}

func (c *arrayChecks) afterRound() {
	snap, err := c.r.slurm.Snapshot(context.Background())
	if err != nil {
		c.t.Fatal(err)
	}
	for id, ar := range c.r.arrays {
		s := c.state(snap, id)
		if ar.own > 0 && s.running > ar.own {
			c.errorf(fmt.Sprintf("over %d", id), "array %d runs %d tasks at once, beyond its user's limit %d", id, s.running, ar.own)
		}
		if c.left[id] {
			c.checkLeft(id, ar, s)
			continue
		}
		if c.leaveAt > 0 && c.r.now.Sub(epoch) >= c.leaveAt && s.waiting {
			if err := c.r.slurm.SetComment(id, "no longer scheduled by gavel"); err != nil {
				c.t.Fatal(err)
			}
			c.left[id] = true
			continue
		}
		if !s.ownID || s.waiting {
			continue
		}
		c.settled[id]++
		c.last[id] = s.limit
		// The first such round may be the one after which the last task
		// started; the next one has seen every task started.
		if !c.lenient && c.settled[id] >= 2 && s.limit != ar.own {
			c.errorf(fmt.Sprintf("limit %d", id), "every task of array %d has a record of its own, and it shows the limit %d, not its user's %d",
				id, s.limit, ar.own)
		}
	}
}

// checkLeft checks array id after its user took it out of the daemon's
// management. Its tasks that run keep the tag they started with until
// they are pending again, so the daemon lets the array go only once it
// manages none of its records; the round after that at the latest shows
// the user's own limit.
func (c *arrayChecks) checkLeft(id bridge.JobID, ar *arrayRun, s arrayState) {
	if s.tracked || !s.active {
		return
	}
	c.unmanaged[id]++
	c.last[id] = s.limit
	if !c.lenient && c.unmanaged[id] >= 2 && s.limit != ar.own {
		c.errorf(fmt.Sprintf("left %d", id), "array %d is out of the daemon's management and shows the limit %d, not its user's %d",
			id, s.limit, ar.own)
	}
}

// finish runs src to its end and checks that every task finished and that
// every array ended with its user's own limit.
func (c *arrayChecks) finish(src sim.Source) *sim.Result {
	c.t.Helper()
	if err := c.r.loop(src); err != nil {
		c.t.Fatalf("run did not end: %v", err)
	}
	res := c.r.result()
	for _, rec := range res.Jobs {
		if rec.Finish < 0 {
			c.t.Errorf("job %d never finished", rec.ID)
		}
	}
	for id, ar := range c.r.arrays {
		switch {
		case len(ar.waiting) > 0:
			c.t.Errorf("array %d: %d tasks never started", id, len(ar.waiting))
		case c.leaveAt > 0 && c.unmanaged[id] < 2:
			c.t.Errorf("array %d: no two rounds found it out of the daemon's management: the run does not test its limit", id)
		case c.leaveAt == 0 && c.settled[id] < 2:
			c.t.Errorf("array %d: no round saw every task started while its record ran: the run does not test its limit", id)
		case c.last[id] != ar.own:
			c.t.Errorf("array %d ends with the limit %d, not its user's %d", id, c.last[id], ar.own)
		}
	}
	return res
}

// runArray runs arrayTrace(own) under cfg's failures with checks, and
// returns the run for its counts.
func runArray(t *testing.T, cfg Config, own int, leaveAt time.Duration, lenient bool) *run {
	t.Helper()
	jobs, arrays := arrayTrace(own)
	cfg.Arrays = arrays
	r, err := newRun(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.close)
	c := newArrayChecks(t, r)
	c.leaveAt, c.lenient = leaveAt, lenient
	c.finish(jobs.Source())
	return r
}

// The daemon stops right after its first set-array-limit reached Slurm,
// before it saved the round, and restarts from its store: the journal
// keeps the array's own limit with the action, so the restart does not
// take the limit the daemon set (2) for its user's. Once every task has a
// record of its own, or once the array leaves the daemon's management,
// the array shows its user's limit again (4, or none), and every task
// finishes.
func TestArrayThroughACrashAfterItsFirstLimit(t *testing.T) {
	tests := map[string]struct {
		own   int
		leave time.Duration
	}{
		"its own limit 4":                     {own: 4},
		"no limit of its own":                 {own: 0},
		"its own limit 4, then it leaves":     {own: 4, leave: 1000 * time.Second},
		"no limit of its own, then it leaves": {own: 0, leave: 700 * time.Second},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := arrayConfig(t)
			cfg.StateDir, cfg.CrashAfter = t.TempDir(), firstOf(bridge.ActSetArrayLimit)
			if r := runArray(t, cfg, tc.own, tc.leave, false); r.crashes != 1 {
				t.Fatalf("%d crashes, want the one after the first set-array-limit", r.crashes)
			}
		})
	}
}

// Slurm refuses the daemon's set-array-limit for a while: the array's
// record is not released without its limit (the release follows the
// refused limit in the same request), the rounds after the refusals set
// it again, and the array ends with its user's own limit. A crash after
// the first limit, before the refusals, changes none of it.
func TestArrayThroughRefusedLimits(t *testing.T) {
	tests := map[string]struct {
		own    int
		crash  bool
		refuse func(at time.Duration, a bridge.Action, own int) bool
	}{
		"every limit for 45 minutes": {own: 4, refuse: func(at time.Duration, a bridge.Action, _ int) bool {
			return at >= 15*time.Minute && at < time.Hour
		}},
		"the first limits": {own: 0, refuse: func(at time.Duration, a bridge.Action, _ int) bool {
			return at < 30*time.Minute
		}},
		"the user's own put back, three times": {own: 4, refuse: putBackRefused(3)},
		"every limit for 45 minutes after a crash": {own: 4, crash: true, refuse: func(at time.Duration, a bridge.Action, _ int) bool {
			return at >= 15*time.Minute && at < time.Hour
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := arrayConfig(t)
			refused := 0
			cfg.RefuseAction = func(at time.Duration, a bridge.Action) bool {
				if a.Kind != bridge.ActSetArrayLimit || !tc.refuse(at, a, tc.own) {
					return false
				}
				refused++
				return true
			}
			if tc.crash {
				cfg.StateDir, cfg.CrashAfter = t.TempDir(), firstOf(bridge.ActSetArrayLimit)
			}
			r := runArray(t, cfg, tc.own, 0, true)
			if refused == 0 || (tc.crash && r.crashes != 1) {
				t.Fatalf("%d set-array-limit refused, %d crashes: the test needs its failures", refused, r.crashes)
			}
		})
	}
}

// putBackRefused refuses the first n set-array-limit that put the array's
// own limit back.
func putBackRefused(n int) func(time.Duration, bridge.Action, int) bool {
	return func(_ time.Duration, a bridge.Action, own int) bool {
		if a.Tasks != own || n == 0 {
			return false
		}
		n--
		return true
	}
}

// An array whose user took it out of the daemon's management gets its
// user's own limit back even when Slurm refuses the first attempt: the
// put-back is sent again, as every refused action is.
func TestArrayLeavingGetsItsLimitBackAfterARefusal(t *testing.T) {
	cfg := arrayConfig(t)
	refuse := putBackRefused(1)
	cfg.RefuseAction = func(at time.Duration, a bridge.Action) bool {
		return a.Kind == bridge.ActSetArrayLimit && refuse(at, a, 4)
	}
	runArray(t, cfg, 4, 1000*time.Second, true)
}
