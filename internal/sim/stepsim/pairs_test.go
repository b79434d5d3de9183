package stepsim

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/sched"
	"github.com/gavel-slurm/gavel-slurm/internal/sim"
	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
)

// pairTable has "one" and "two" gain from sharing a v100: beside each
// other each runs at 70% of its rate alone there. The k80 runs them
// alone only.
func pairTable(t *testing.T) *throughputs.Table {
	t.Helper()
	table, err := throughputs.Parse([]byte(`{
		"v100": {"('one', 1)": {"null": 1, "('two', 1)": [0.7, 1.4]},
		         "('two', 1)": {"null": 2, "('one', 1)": [1.4, 0.7]}},
		"k80":  {"('one', 1)": {"null": 0.25}, "('two', 1)": {"null": 1.5}}}`))
	if err != nil {
		t.Fatal(err)
	}
	return table
}

// pairConfig is a packing policy on two v100 nodes of one GPU each, both
// offering two shards per GPU, and a k80 node that offers none: a pair
// runs on a v100 node's GPU, and a job chosen for the k80 needs its
// whole-GPU request back.
func pairConfig(t *testing.T) Config {
	cfg := config(t, map[string]int{"v100": 2, "k80": 1})
	cfg.Table, cfg.Policy = pairTable(t), "max_min_fairness_packed"
	cfg.Shards = map[string]int{"v100": 2}
	cfg.MaxTime = 20 * 24 * time.Hour
	return cfg
}

// pairTrace is n jobs of the two models in turn, of 2000 to 2600 steps,
// one arriving every `every` seconds.
func pairTrace(n int, every float64) sim.Jobs {
	var jobs sim.Jobs
	for i := range n {
		model := "one"
		if i%2 == 1 {
			model = "two"
		}
		jobs = append(jobs, wjob(model, float64(2000+200*(i%4)), every*float64(i)))
	}
	return jobs
}

// pairChecks follows a run round by round and checks what a pair's
// members must never come to: a shard request pinned to a node of
// another type than the job's constraint names (it can never start), a
// member released onto a node that cannot take it for several rounds
// while another sharing node of its type sits free, the daemon taking
// its own shard request for its user's (no job of these workloads asks
// for shards itself), and a job its user took out of the daemon's
// management left with the daemon's shard request.
type pairChecks struct {
	t *testing.T
	r *run
	// stuck counts, for each job pinned to a node by a shard request,
	// the rounds that left it released there while another node could
	// take it.
	stuck map[bridge.JobID]stuckOn
	// left are the jobs taken out of the daemon's management, with the
	// rounds since.
	left map[bridge.JobID]int
	// told keeps each failure to one report per job.
	told map[string]bool
	// shared counts the rounds that ended with two jobs on one GPU.
	shared int
}

// stuckOn is how many rounds a job pinned to node waited released there
// while the node could not take it and another could.
type stuckOn struct {
	node   string
	rounds int
}

// maxStuckRounds is how many rounds a pair's member may be left released
// on a node that cannot take it while another could: the next round
// that chooses the pair sends it to the free node (a script that exits
// at its signal can free that node right after the round).
const maxStuckRounds = 2

func newPairChecks(t *testing.T, r *run) *pairChecks {
	c := &pairChecks{t: t, r: r, stuck: map[bridge.JobID]stuckOn{}, left: map[bridge.JobID]int{}, told: map[string]bool{}}
	r.afterRound = c.afterRound
	r.afterLook = c.afterLook
	return c
}

func (c *pairChecks) errorf(key, format string, args ...any) {
	c.t.Helper()
	if c.told[key] {
		return
	}
	c.told[key] = true
	c.t.Errorf("at %v: "+format, append([]any{c.r.now.Sub(epoch)}, args...)...)
}

// afterLook checks, after a look between rounds, that no job is pinned
// where it can never start.
func (c *pairChecks) afterLook() {
	snap, err := c.r.slurm.Snapshot(context.Background())
	if err != nil {
		c.t.Fatal(err)
	}
	for _, j := range snap.Jobs {
		if j.State == bridge.JobPending && j.Shards > 0 && j.RequiredNodes != "" {
			c.checkPin(snap, j)
		}
	}
}

// checkPin checks that pending job j, pinned by its shard request to a
// node, asks for that node's GPU type.
func (c *pairChecks) checkPin(snap *bridge.Snapshot, j bridge.Job) {
	isType := func(s string) bool { return snap.GPUTypes()[s] > 0 }
	n, _ := snap.Node(j.RequiredNodes)
	if want := sched.ConstraintType(j.Constraints, isType); want != n.GPUType {
		c.errorf(fmt.Sprintf("pin %d", j.ID), "job %d asks for %d shards of %s (%s) under constraint %q: it can never start",
			j.ID, j.Shards, n.Name, n.GPUType, j.Constraints)
	}
}

func (c *pairChecks) afterRound() {
	snap, err := c.r.slurm.Snapshot(context.Background())
	if err != nil {
		c.t.Fatal(err)
	}
	onGPU := map[string]int{}
	for _, j := range snap.Jobs {
		if j.State == bridge.JobRunning && j.Shards > 0 && len(j.SharedGPUs) == 1 {
			onGPU[fmt.Sprintf("%s/%d", j.RunningNodes[0], j.SharedGPUs[0])]++
		}
		if j.State != bridge.JobPending || j.Shards == 0 || j.RequiredNodes == "" {
			delete(c.stuck, j.ID)
			continue
		}
		c.checkPin(snap, j)
		n, _ := snap.Node(j.RequiredNodes)
		if s := c.stuck[j.ID]; s.node != n.Name {
			c.stuck[j.ID] = stuckOn{node: n.Name}
		}
		if j.Held || canTake(n, j.Shards) || !freeSharingNode(snap, n) {
			continue
		}
		s := c.stuck[j.ID]
		s.rounds++
		c.stuck[j.ID] = s
		if s.rounds > maxStuckRounds {
			c.errorf(fmt.Sprintf("stuck %d", j.ID), "job %d released onto %s in %d rounds, while that node could not take it and another %s node sharing GPUs was free",
				j.ID, n.Name, s.rounds, n.GPUType)
		}
	}
	for _, n := range onGPU {
		if n == 2 {
			c.shared++
			break
		}
	}
	for id, n := range c.left {
		c.left[id] = n + 1
		j, ok := snap.Job(id)
		// The round that finds the job out of its hands gives it back.
		if ok && j.State == bridge.JobPending && n >= 1 && (j.Shards > 0 || j.RequiredNodes != "") {
			c.errorf(fmt.Sprintf("left %d", id), "job %d left the daemon's management %d rounds ago and still asks for %d shards of %q",
				id, n, j.Shards, j.RequiredNodes)
		}
	}
	for _, js := range c.r.board.Status().Jobs {
		if strings.Contains(js.Sharing, "asks for GPU shards itself") {
			c.errorf("own "+js.JobID, "job %s: %q: the daemon took its own shard request for its user's", js.JobID, js.Sharing)
		}
	}
}

// leave takes job id out of the daemon's management, as its user does by
// removing the tag from its comment.
func (c *pairChecks) leave(id bridge.JobID) {
	if err := c.r.slurm.SetComment(id, "no longer scheduled by gavel"); err != nil {
		c.t.Fatal(err)
	}
	c.left[id] = 0
}

// canTake reports whether node n can start a job of shards shards now,
// as Slurm places it with one_sharing (bridge/fake): on the GPU whose
// shards are in use when one is, else on a free GPU.
func canTake(n bridge.Node, shards int) bool {
	for _, u := range n.ShardUse {
		if u.Used > 0 {
			return u.Used+int64(shards) <= u.Total
		}
	}
	return n.GPUs-n.GPUsUsed >= 1
}

// freeSharingNode reports whether another node of pinned's type offers
// shards, none of them in use, and a free GPU.
func freeSharingNode(snap *bridge.Snapshot, pinned bridge.Node) bool {
	for _, n := range snap.Nodes {
		if n.Name == pinned.Name || n.GPUType != pinned.GPUType || n.Shards == 0 || !n.Available() || n.GPUs-n.GPUsUsed < 1 {
			continue
		}
		used := false
		for _, u := range n.ShardUse {
			used = used || u.Used > 0
		}
		if !used {
			return true
		}
	}
	return false
}

// finish runs src to its end and checks that every job finished and
// that pairs shared GPUs on the way.
func (c *pairChecks) finish(src sim.Source) *sim.Result {
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
	if c.shared == 0 {
		c.t.Error("no pair ever shared a GPU: the run does not test pairs")
	}
	return res
}

// takeNodeOfFirstShare makes a job that cannot be preempted take the
// node of the first set-share that reaches Slurm while that node has a
// free GPU: its user pinned it there (--nodelist), and Slurm starts it at
// once, before the pair's members are released. then, when given, is
// called with the set-share. It returns the node, once taken.
func takeNodeOfFirstShare(r *run, steps float64, then func(bridge.Action)) *string {
	var taken string
	r.afterApply = func(a bridge.Action) {
		if taken != "" || a.Kind != bridge.ActSetShare || a.Shards == 0 {
			return
		}
		if n, ok := r.slurm.Node(a.Node); !ok || n.GPUs-n.GPUsUsed < 1 {
			return
		}
		taken = a.Node
		w := wjob("one", steps, r.now.Sub(epoch).Seconds())
		j := r.submitJob(len(r.order), w, func(sj *bridge.Job) {
			sj.Comment += " preempt=never"
			sj.RequiredNodes = taken
		})
		startNow(r, j, taken)
		if then != nil {
			then(a)
		}
	}
	return &taken
}

// startNow starts job j on node at once, as Slurm does for a job pinned
// to a node with room.
func startNow(r *run, j *job, node string) {
	snap, err := r.slurm.Snapshot(context.Background())
	if err == nil && r.slurm.Start(j.id, node) == nil {
		r.started(j, snap.Nodes, node)
	}
}

// runPairs runs jobs through cfg with pair checks and returns the run for
// its counts; prepare, when given, sets the run's hooks up before it
// starts.
func runPairs(t *testing.T, cfg Config, jobs sim.Jobs, prepare func(*run, *pairChecks)) *run {
	t.Helper()
	r, err := newRun(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.close)
	c := newPairChecks(t, r)
	if prepare != nil {
		prepare(r, c)
	}
	c.finish(jobs.Source())
	return r
}

// The daemon stops right after its first set-share reached Slurm, before
// it saved the round, and restarts from its store. The pair's member it
// was for waits with the shard request; the restart takes the request
// for the daemon's own, whether the job had a record or was new in the
// round the crash cut short: it is put back to a whole GPU when the job
// runs alone, pairs share GPUs, and every job finishes.
func TestPairsThroughACrashAfterTheFirstSetShare(t *testing.T) {
	tests := map[string]struct {
		jobs sim.Jobs
		// take has a job that cannot be preempted take the set-share's
		// node at once: the new job it was for waits there until the
		// restart (else Slurm would start it alone on its shards, see
		// TestSetShareOfAJobThatStartedBeforeTheRestart).
		take bool
	}{
		"of a job that waited held":                                      {jobs: pairTrace(8, 0)},
		"of a new job, its node taken by a job that cannot be preempted": {jobs: pairTrace(6, 0), take: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := pairConfig(t)
			cfg.StateDir, cfg.CrashAfter = t.TempDir(), firstOf(bridge.ActSetShare)
			var taken *string
			r := runPairs(t, cfg, tc.jobs, func(r *run, _ *pairChecks) {
				if tc.take {
					taken = takeNodeOfFirstShare(r, 8000, nil)
				}
			})
			if r.crashes != 1 || (taken != nil && *taken == "") {
				t.Fatalf("%d crashes, a node taken %v: the test needs the crash after the first set-share", r.crashes, taken != nil && *taken != "")
			}
		})
	}
}

// Slurm refuses the daemon's set-shares for the first hour (all of them,
// only those that put a whole GPU back, or those of one member of each
// pair): a refused set-share leaves whose shard request the job carries
// as it was, so a member chosen to run alone is given its whole GPU back
// once Slurm takes it, never left pinned to a node under another type's
// constraint; pairs share GPUs after the refusals, and every job
// finishes.
func TestPairsThroughRefusedSetShares(t *testing.T) {
	tests := map[string]struct {
		jobs   int
		refuse func(bridge.Action) bool
		// wantWhole asks for refused set-shares that put a whole GPU
		// back: the ones whose ownership a refusal must not change.
		wantWhole bool
	}{
		"every set-share":             {jobs: 6, refuse: func(bridge.Action) bool { return true }},
		"back to a whole GPU":         {jobs: 6, refuse: func(a bridge.Action) bool { return a.Shards == 0 }, wantWhole: true},
		"one member of every pair":    {jobs: 6, refuse: func(a bridge.Action) bool { return a.Job%2 == 0 }},
		"back to a whole GPU, 8 jobs": {jobs: 8, refuse: func(a bridge.Action) bool { return a.Shards == 0 }, wantWhole: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := pairConfig(t)
			whole, share := 0, 0
			cfg.RefuseAction = func(at time.Duration, a bridge.Action) bool {
				if a.Kind != bridge.ActSetShare || at >= time.Hour || !tc.refuse(a) {
					return false
				}
				if a.Shards == 0 {
					whole++
				} else {
					share++
				}
				return true
			}
			runPairs(t, cfg, pairTrace(tc.jobs, 0), nil)
			if whole+share == 0 || (tc.wantWhole && whole == 0) {
				t.Fatalf("%d set-shares to a whole GPU and %d to shards refused: the test needs them", whole, share)
			}
		})
	}
}

// A job that cannot be preempted takes the node a pair was just sent to,
// before the pair starts, and keeps it for over two hours. The pair waits
// there only while no other node can take it: once another sharing node
// is free, the next round that chooses the pair sends it there, and
// every job finishes.
func TestPairMovesOffTheNodeANeverPreemptedJobTook(t *testing.T) {
	for _, poll := range []time.Duration{0, 30 * time.Second} {
		t.Run(fmt.Sprintf("refill poll %v", poll), func(t *testing.T) {
			cfg := pairConfig(t)
			cfg.RefillPoll = poll
			var taken *string
			runPairs(t, cfg, pairTrace(6, 0), func(r *run, _ *pairChecks) {
				taken = takeNodeOfFirstShare(r, 8000, nil)
			})
			if *taken == "" {
				t.Fatal("no set-share found its node free: the test needs the node taken")
			}
		})
	}
}

// A pair's member whose user takes it out of the daemon's management
// while it waits with the daemon's shard request gets its whole-GPU
// request on any node back at the next round, also when the daemon
// stopped right after the set-share and learns of it from its journal
// alone (the job was new in the round the crash cut short); Slurm then
// runs it as its user asked, and every job finishes.
func TestPairMemberLeavingGetsItsWholeGPUBack(t *testing.T) {
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprintf("crash %v", crash), func(t *testing.T) {
			cfg := pairConfig(t)
			if crash {
				cfg.StateDir, cfg.CrashAfter = t.TempDir(), firstOf(bridge.ActSetShare)
			}
			var leaving bridge.JobID
			runPairs(t, cfg, pairTrace(6, 0), func(r *run, c *pairChecks) {
				takeNodeOfFirstShare(r, 8000, func(a bridge.Action) {
					leaving = a.Job
					c.leave(a.Job)
				})
			})
			if leaving == 0 {
				t.Fatal("no job left: the test needs a pair's member waiting with its shard request")
			}
		})
	}
}

// The daemon stops right after its first set-share reached Slurm, for a
// job new in that round: Slurm starts the job alone on its shards before
// the restart's first round. Reconciliation does not recognise a
// set-share's effect (daemon.effectVisible has no case for it), so it
// sends the set-share again, Slurm refuses it for a running job, and the
// refusal makes the daemon take its own shard request for the job's
// user's: the job is never offered pairs again, and once requeued and
// moved to the k80 it is left pinned to its v100 node under a k80
// constraint, which no node satisfies, until a round chooses v100 again.
func TestSetShareOfAJobThatStartedBeforeTheRestart(t *testing.T) {
	cfg := pairConfig(t)
	cfg.StateDir, cfg.CrashAfter = t.TempDir(), firstOf(bridge.ActSetShare)
	runPairs(t, cfg, pairTrace(6, 0), nil)
}

// A round chooses more pairs than the nodes can take (a limit
// docs/space-sharing.md states): two pairs for the two v100s, only one of
// which shares its GPU, so the second pair waits held. When the k80's
// job ends between rounds, the look that refills freed GPUs leaves that
// pair to the rounds and starts the single job on the idle v100 at once,
// rather than claim the GPU for the pair's members and send nothing,
// which would leave it idle until the next round.
func TestRefillLeavesAPairNoNodeCanTakeToTheRounds(t *testing.T) {
	cfg := pairConfig(t)
	cfg.RefillPoll, cfg.MinResetInterval = 30*time.Second, 360*time.Second
	// The single job's weight puts it behind the pairs' members; the
	// short one runs on the k80 and ends before the next round.
	cfg.TagKeys = map[int]string{4: "share=no weight=0.1", 5: "share=no"}
	jobs := sim.Jobs{wjob("one", 3000, 0), wjob("two", 3000, 0), wjob("one", 3000, 0), wjob("two", 3000, 0),
		wjob("one", 2000, 0), wjob("two", 400, 0)}
	r := runPairs(t, cfg, jobs, func(r *run, _ *pairChecks) {
		// v100-000 shares none of its GPUs.
		r.slurm.AddNode(bridge.Node{Name: "v100-000", GPUType: "v100", GPUs: 1, Partitions: []string{"gpu"}, Features: []string{"v100"}})
	})
	single, short := r.order[4], r.order[5]
	if short.runType != "" || short.finish.IsZero() || short.perType["k80"] == 0 || !single.everRan {
		t.Fatalf("the short job ran %v on the k80 and finished at %v; the test needs it to free the k80 between rounds",
			short.perType["k80"], short.finish.Sub(epoch))
	}
	if late := single.start.Sub(short.finish); late > 2*cfg.RefillPoll {
		t.Errorf("the single job started %v after the k80 freed at %v: the looks between rounds left the idle v100 to the waiting pair",
			late, short.finish.Sub(epoch))
	}
}

// Two jobs progressing on one GPU's shards run at the table's rates
// beside each other and count half a GPU each; once one stops, the
// other runs at its rate alone on the whole GPU.
func TestSharedGPURates(t *testing.T) {
	r, err := newRun(pairConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	one, two := r.newJob(0, wjob("one", 100, 0)), r.newJob(1, wjob("two", 100, 0))
	slot := gpuSlot{"v100-000", 0}
	for _, j := range []*job{one, two} {
		j.runType, j.shared = "v100", &slot
		r.sharing[slot] = append(r.sharing[slot], j)
	}
	if a, b := r.rate(one), r.rate(two); !near(a, 0.7, 1e-9) || !near(b, 1.4, 1e-9) {
		t.Errorf("rates beside each other %v and %v, want the table's 0.7 and 1.4", a, b)
	}
	if g := r.gpusHeld(one); g != 0.5 {
		t.Errorf("a job sharing a GPU holds %v GPUs, want 0.5", g)
	}
	r.stopsProgress(two)
	if a := r.rate(one); !near(a, 1, 1e-9) || r.gpusHeld(one) != 1 {
		t.Errorf("alone on the GPU: rate %v holding %v GPUs, want 1 and 1", a, r.gpusHeld(one))
	}
}
