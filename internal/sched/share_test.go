package sched

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
)

const (
	a3cTag      = "gavel: model=a3c steps=100k"
	resnet18Tag = `gavel: model="ResNet-18 (batch size 32)" steps=100k`
	resnet50Tag = `gavel: model="ResNet-50 (batch size 64)" steps=100k`
)

func packedSettings() Settings {
	set := settings()
	set.Policy = "max_min_fairness_packed"
	return set
}

// sharedNode is a node whose GPUs each offer shards.
func sharedNode(name, typ string, gpus, shardsPerGPU int) bridge.Node {
	n := node(name, typ, gpus, 0)
	n.Shards = gpus * shardsPerGPU
	return n
}

func TestPairsFormOnlyWhereTheyGainAndMayShare(t *testing.T) {
	tests := map[string]struct {
		set       func(*Settings)
		shards    int // per GPU
		tags      [2]string
		partition string // of the second job; "" for gpu
		wantPair  bool
		wantNote  string // the second job's sharing note
	}{
		"gaining pair":                {shards: 2, tags: [2]string{a3cTag, resnet18Tag}, wantPair: true},
		"pair that loses to turns":    {shards: 2, tags: [2]string{a3cTag, resnet50Tag}},
		"share=no":                    {shards: 2, tags: [2]string{a3cTag, resnet18Tag + " share=no"}, wantNote: "share=no"},
		"one shard per GPU":           {shards: 1, tags: [2]string{a3cTag, resnet18Tag}},
		"no shards at all":            {shards: 0, tags: [2]string{a3cTag, resnet18Tag}},
		"trial-and-error runs alone":  {shards: 2, tags: [2]string{a3cTag, resnet18Tag + " class=te"}, wantNote: "trial-and-error"},
		"unpacked policy never pairs": {shards: 2, tags: [2]string{a3cTag, resnet18Tag}, set: func(s *Settings) { s.Policy = "max_min_fairness_perf" }},
		"sharing off in the partition": {shards: 2, tags: [2]string{a3cTag, resnet18Tag},
			set: func(s *Settings) { s.ShareOffPartitions = []string{"gpu"} }, wantNote: "sharing is off in partition gpu"},
		"different partitions": {shards: 2, tags: [2]string{a3cTag, resnet18Tag}, partition: "gpu2"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			set := packedSettings()
			set.Partitions = []string{"gpu", "gpu2"}
			if tc.set != nil {
				tc.set(&set)
			}
			c := newCore(t, set)
			n := sharedNode("v1", "v100", 1, tc.shards)
			n.Partitions = []string{"gpu", "gpu2"}
			second := pending(2, tc.tags[1])
			if tc.partition != "" {
				second.Partition = tc.partition
			}
			res := step(c, snapshot(t, epoch, []bridge.Node{n}, pending(1, tc.tags[0]), second), epoch, c.Solve)
			pairs := c.mech.Pairs()
			if got := len(pairs) == 1; got != tc.wantPair {
				t.Fatalf("pairs %+v, want a pair: %v", pairs, tc.wantPair)
			}
			note := viewOf(t, res.View, 2).Sharing
			if tc.wantNote == "" && note != "" || !strings.Contains(note, tc.wantNote) {
				t.Errorf("sharing note %q, want %q", note, tc.wantNote)
			}
		})
	}
}

// A pair chosen for a round asks for half a GPU's shards each on one node
// that shares GPUs; once both run on that GPU the rounds keep them there
// as one pair; when one ends, the other goes back to a whole GPU.
func TestPairLifecycle(t *testing.T) {
	c := newCore(t, packedSettings())
	nodes := []bridge.Node{node("v0", "v100", 1, 1), sharedNode("v1", "v100", 1, 4)}
	blocker := running(9, "just a comment", "v0", "v100", 0) // unmanaged: v0 is busy
	a, b := pending(1, a3cTag), pending(2, resnet18Tag)
	res := step(c, snapshot(t, epoch, nodes, blocker, a, b), epoch, c.Solve)
	for _, id := range []bridge.JobID{1, 2} {
		if got := actionsOf(res.Actions, id); got != "set-share:2@v1:v100,set-priority" {
			t.Fatalf("job %d: actions %q", id, got)
		}
	}

	// Both run on GPU 0 of v1: one pair holding one GPU, nothing to send.
	now := epoch.Add(20 * time.Second)
	nodes[1].GPUsUsed = 1
	nodes[1].ShardUse = []bridge.GPUShards{{Used: 4, Total: 4}}
	ra, rb := running(1, a3cTag, "v1", "v100", 0), running(2, resnet18Tag, "v1", "v100", 0)
	for _, j := range []*bridge.Job{&ra, &rb} {
		j.Shards, j.SharedGPUs, j.RequiredNodes, j.Constraints = 2, []int{0}, "v1", "v100"
		j.StartTime = epoch.Add(5 * time.Second)
	}
	res = step(c, snapshot(t, now, nodes, blocker, ra, rb), now, c.Solve)
	if len(res.Actions) != 0 {
		t.Fatalf("a running pair got actions: %v", describeActions(res.Actions))
	}
	v := viewOf(t, res.View, 1)
	if v.SharesWith != "2" || !strings.Contains(v.Reason, "shares its GPU with 2") || v.PairAllocation["v100"] <= 0 {
		t.Fatalf("view of a pair member: shares with %q, reason %q, pair allocation %v", v.SharesWith, v.Reason, v.PairAllocation)
	}
	if got := c.mech.Pairs(); len(got) != 1 {
		t.Fatalf("pairs %+v", got)
	}

	// Job 1 ended; job 2 was requeued and waits with the daemon's shard
	// request: alone now, it asks for a whole GPU on any node again.
	now = now.Add(20 * time.Second)
	nodes[1].GPUsUsed, nodes[1].ShardUse = 0, []bridge.GPUShards{{Total: 4}}
	pb := pending(2, resnet18Tag)
	pb.Shards, pb.RequiredNodes, pb.Constraints, pb.Restarts = 2, "v1", "v100", 1
	done := ra
	done.State = bridge.JobCompleted
	res = step(c, snapshot(t, now, nodes, blocker, done, pb), now, c.Solve)
	if got := actionsOf(res.Actions, 2); !strings.HasPrefix(got, "set-share:0@:v100,") {
		t.Fatalf("job 2 alone: actions %q", got)
	}
	if c.jobs[keyOf(2)].shareSet {
		t.Fatal("the daemon's shard request is still taken to stand")
	}
}

// A user's own shard request is neither paired nor rewritten.
func TestUsersOwnShardRequestIsLeftAlone(t *testing.T) {
	c := newCore(t, packedSettings())
	nodes := []bridge.Node{sharedNode("v1", "v100", 2, 2)}
	own := pending(1, a3cTag)
	own.Shards = 1
	res := step(c, snapshot(t, epoch, nodes, own, pending(2, resnet18Tag)), epoch, c.Solve)
	if len(c.mech.Pairs()) != 0 {
		t.Fatalf("a user's shard job was paired: %+v", c.mech.Pairs())
	}
	if got := actionsOf(res.Actions, 1); strings.Contains(got, "set-share") {
		t.Fatalf("a user's shard request was rewritten: %q", got)
	}
	if note := viewOf(t, res.View, 1).Sharing; !strings.Contains(note, "asks for GPU shards itself") {
		t.Fatalf("sharing note %q", note)
	}
}

// Two pairs never get the same node: with one_sharing a node shares one
// GPU at a time, so the second pair waits, held, saying why.
func TestOnePairPerNode(t *testing.T) {
	c := newCore(t, packedSettings())
	nodes := []bridge.Node{sharedNode("v1", "v100", 2, 2)}
	jobs := []bridge.Job{pending(1, a3cTag), pending(2, resnet18Tag), pending(3, a3cTag), pending(4, resnet18Tag)}
	res := step(c, snapshot(t, epoch, nodes, jobs...), epoch, c.Solve)
	shared, held := 0, 0
	for id := bridge.JobID(1); id <= 4; id++ {
		got := actionsOf(res.Actions, id)
		switch {
		case strings.HasPrefix(got, "set-share:1@v1"):
			shared++
		case got == "hold":
			held++
			if r := c.jobs[keyOf(id)].reason; !strings.Contains(r, "every node sharing GPUs already holds one") {
				t.Errorf("job %d held: %q", id, r)
			}
		}
	}
	if shared != 2 || held != 2 {
		t.Fatalf("%d jobs sent to share v1's GPU and %d held, want one pair of each: %s", shared, held, describeActions(res.Actions))
	}
}

// flatRates is the table's estimator with every job measured at 50
// steps/s alone, whatever its model (as the fake jobs of the integration
// tests report).
type flatRates struct{ TableEstimator }

func (f flatRates) Rates(job JobQuery, types []string, now time.Time) (string, map[string]Rate) {
	name, per := f.TableEstimator.Rates(job, types, now)
	for t := range per {
		per[t] = Rate{StepsPerSecond: 50, Source: "measured"}
	}
	return name, per
}

// The table's pair figures are slowdowns: a job whose rate alone is
// measured on another scale than the table's keeps the table's gain from
// sharing, at its own scale.
func TestTablePairsScaleToMeasuredRates(t *testing.T) {
	table, err := throughputs.Reference()
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCore(packedSettings(), flatRates{TableEstimator{Table: table}})
	if err != nil {
		t.Fatal(err)
	}
	step(c, snapshot(t, epoch, []bridge.Node{sharedNode("v1", "v100", 1, 2)}, pending(1, a3cTag), pending(2, resnet18Tag)), epoch, c.Solve)
	pairs := c.mech.Pairs()
	if len(pairs) != 1 {
		t.Fatalf("pairs %+v", pairs)
	}
	frac := TableEstimator{Table: table}.PairRates(JobQuery{Model: "a3c", Scale: 1}, JobQuery{Model: "ResNet-18 (batch size 32)", Scale: 1}, []string{"v100"}, epoch)["v100"]
	got := pairs[0].Throughputs["v100"]
	if got[0] != 50*frac[0].StepsPerSecond || got[1] != 50*frac[1].StepsPerSecond || frac[0].StepsPerSecond+frac[1].StepsPerSecond <= 1 {
		t.Fatalf("pair rates %v, table fractions %+v", got, frac)
	}
}

// learning is an estimator whose pair figures change, as measurements
// while two jobs share a GPU replace the table's.
type learning struct {
	TableEstimator
	version uint64
	frac    *[2]float64 // nil: the table's
}

func (l *learning) Version() uint64 { return l.version }

func (l *learning) PairRates(a, b JobQuery, types []string, now time.Time) map[string][2]Rate {
	if l.frac == nil {
		return l.TableEstimator.PairRates(a, b, types, now)
	}
	out := map[string][2]Rate{}
	for _, t := range types {
		out[t] = [2]Rate{{StepsPerSecond: l.frac[0], Source: "measured"}, {StepsPerSecond: l.frac[1], Source: "measured"}}
	}
	return out
}

// Pairs follow what is learned: new figures replace a pair's rates, and a
// pair measured to lose to taking turns is dropped, its members staying.
func TestPairsFollowMeasurements(t *testing.T) {
	table, err := throughputs.Reference()
	if err != nil {
		t.Fatal(err)
	}
	est := &learning{TableEstimator: TableEstimator{Table: table}}
	c, err := NewCore(packedSettings(), est)
	if err != nil {
		t.Fatal(err)
	}
	nodes := []bridge.Node{sharedNode("v1", "v100", 1, 2)}
	jobs := []bridge.Job{pending(1, a3cTag), pending(2, resnet18Tag)}
	step(c, snapshot(t, epoch, nodes, jobs...), epoch, c.Solve)
	if len(c.mech.Pairs()) != 1 {
		t.Fatalf("pairs %+v", c.mech.Pairs())
	}
	alone := [2]float64{c.jobs[keyOf(1)].throughputs["v100"], c.jobs[keyOf(2)].throughputs["v100"]}

	est.version, est.frac = 1, &[2]float64{0.7, 0.6}
	now := epoch.Add(20 * time.Second)
	step(c, snapshot(t, now, nodes, jobs...), now, c.Solve)
	if got := c.mech.Pairs(); len(got) != 1 || got[0].Throughputs["v100"] != [2]float64{0.7 * alone[0], 0.6 * alone[1]} {
		t.Fatalf("pair rates after new figures: %+v, alone %v", got, alone)
	}

	est.version, est.frac = 2, &[2]float64{0.5, 0.4}
	now = now.Add(20 * time.Second)
	step(c, snapshot(t, now, nodes, jobs...), now, c.Solve)
	if got := c.mech.Pairs(); len(got) != 0 || len(c.jobs[keyOf(1)].partners) != 0 || c.mech.Len() != 2 {
		t.Fatalf("a pair measured to lose stays: %+v (partners %v, %d jobs)", got, c.jobs[keyOf(1)].partners, c.mech.Len())
	}
}

// unseenModels knows nothing of two models until they are measured; then
// it has their rates and an estimate of their pair.
type unseenModels struct {
	TableEstimator
	measured bool
}

func (u *unseenModels) Version() uint64 {
	if u.measured {
		return 1
	}
	return 0
}

func (u *unseenModels) Rates(job JobQuery, types []string, now time.Time) (string, map[string]Rate) {
	name, per := u.TableEstimator.Rates(job, types, now)
	if u.measured {
		for t := range per {
			per[t] = Rate{StepsPerSecond: 40, Source: "measured"}
		}
	}
	return name, per
}

func (u *unseenModels) PairRates(a, b JobQuery, types []string, _ time.Time) map[string][2]Rate {
	if !u.measured {
		return nil
	}
	out := map[string][2]Rate{}
	for _, t := range types {
		out[t] = [2]Rate{{StepsPerSecond: 0.7, Source: "estimated"}, {StepsPerSecond: 0.6, Source: "estimated"}}
	}
	return out
}

// Jobs whose pair nothing said anything of at arrival are offered again
// once they are first measured.
func TestJobsArePairedOnceMeasured(t *testing.T) {
	table, err := throughputs.Reference()
	if err != nil {
		t.Fatal(err)
	}
	est := &unseenModels{TableEstimator: TableEstimator{Table: table}}
	c, err := NewCore(packedSettings(), est)
	if err != nil {
		t.Fatal(err)
	}
	nodes := []bridge.Node{sharedNode("v1", "v100", 1, 2)}
	jobs := []bridge.Job{pending(1, "gavel: model=my-a steps=1k"), pending(2, "gavel: model=my-b steps=1k")}
	step(c, snapshot(t, epoch, nodes, jobs...), epoch, c.Solve)
	if len(c.mech.Pairs()) != 0 {
		t.Fatalf("pairs before anything was known: %+v", c.mech.Pairs())
	}
	est.measured = true
	now := epoch.Add(20 * time.Second)
	step(c, snapshot(t, now, nodes, jobs...), now, c.Solve)
	if got := c.mech.Pairs(); len(got) != 1 || got[0].Throughputs["v100"] != [2]float64{0.7 * 40, 0.6 * 40} {
		t.Fatalf("pairs once measured: %+v", got)
	}
}

// A set-share Slurm refused leaves the job's request its own: the daemon
// must not later take the user's request for one it wrote, nor its own
// for the user's.
func TestRefusedSetShareChangesNoOwnership(t *testing.T) {
	c := newCore(t, packedSettings())
	nodes := []bridge.Node{node("v0", "v100", 1, 1), sharedNode("v1", "v100", 1, 4)}
	blocker := running(9, "just a comment", "v0", "v100", 0)
	p := c.Step(Input{Snap: snapshot(t, epoch, nodes, blocker, pending(1, a3cTag), pending(2, resnet18Tag)), Now: epoch, Solve: c.Solve})
	outcomes := make([]Outcome, len(p.Actions))
	refused := false
	for i, a := range p.Actions {
		outcomes[i] = Accepted
		if a.Job == 1 && a.Kind == bridge.ActSetShare {
			outcomes[i], refused = Refused, true
		}
	}
	if !refused {
		t.Fatalf("no set-share for job 1 in %s", describeActions(p.Actions))
	}
	c.Commit(p, outcomes)
	if c.jobs[keyOf(1)].shareSet {
		t.Error("job 1's refused set-share is recorded as the daemon's shard request")
	}
	if !c.jobs[keyOf(2)].shareSet {
		t.Error("job 2's accepted set-share is not recorded")
	}
}

// A set-share journaled for a job with no record yet, lost in a crash
// before the save: the restart still knows the shard request is the
// daemon's, not its user's.
func TestJournaledSetShareOfANewJobIsTheDaemons(t *testing.T) {
	c := newCore(t, packedSettings())
	c.Restore(map[string]Record{}, 1)
	share := Action{Action: bridge.Action{Kind: bridge.ActSetShare, Job: 1, Shards: 2, Node: "v1", Constraints: "v100"}}
	p := c.RestoreJournal([]JournalEntry{{Created: epoch, Pending: true, Seq: 3, Action: share}}, map[string]Record{})
	c.Commit(p, []Outcome{Accepted})
	if js := c.jobs[keyOf(1)]; js == nil || !js.shareSet {
		t.Fatalf("job 1 after the replay: %+v, want its shard request the daemon's", js)
	}
}

// A pair sent to a node that filled before it started (a preempt=never
// job took its GPU) is sent to another sharing node that is free, not
// kept pinned to the first for good.
func TestPairMovesOffANodeThatFilled(t *testing.T) {
	c := newCore(t, packedSettings())
	nodes := []bridge.Node{node("v0", "v100", 1, 1), sharedNode("v1", "v100", 1, 4)}
	blocker := running(9, "just a comment", "v0", "v100", 0)
	a, b := pending(1, a3cTag), pending(2, resnet18Tag)
	res := step(c, snapshot(t, epoch, nodes, blocker, a, b), epoch, c.Solve)
	first := ""
	for _, act := range res.Actions {
		if act.Kind == bridge.ActSetShare {
			first = act.Node
		}
	}
	if first == "" {
		t.Fatalf("the pair was not sent anywhere: %s", describeActions(res.Actions))
	}
	other := "v2"
	// Before it starts, someone else's job takes the whole GPU of that
	// node (the pair's members wait there, held), and another sharing
	// node comes up free.
	nodes = append(nodes, sharedNode(other, "v100", 1, 4))
	for i := range nodes {
		if nodes[i].Name == first {
			nodes[i].GPUsUsed = 1
		}
	}
	taker := running(10, "not mine", first, "v100", 0)
	sent := func(j bridge.Job) bridge.Job {
		j.Shards, j.RequiredNodes, j.Constraints = 2, first, "v100"
		return j
	}
	now := epoch
	var got []string
	for range 3 {
		now = now.Add(20 * time.Second)
		res = step(c, snapshot(t, now, nodes, blocker, taker, sent(a), sent(b)), now, c.Solve)
		got = nil
		for _, act := range res.Actions {
			if act.Kind == bridge.ActSetShare {
				got = append(got, fmt.Sprintf("%d@%s", act.Job, act.Node))
			}
		}
		if len(got) > 0 {
			break
		}
	}
	want := []string{"1@" + other, "2@" + other}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("after %s filled: set-share %q, want the pair sent to %s: %q", first, got, other, want)
	}
}

// Between rounds a freed GPU goes to a job that can take it, not to a
// pair's member held because no node could take its pair: that member
// would claim the GPU and send nothing, and the GPU would idle.
func TestRefillLeavesPairsToTheRounds(t *testing.T) {
	set := packedSettings()
	set.RefillPoll, set.MinRunTime = 30*time.Second, time.Hour
	c := newCore(t, set)
	// v0's GPU runs a managed job the round keeps; v1 shares its GPU
	// with a user's own shard job.
	v1 := sharedNode("v1", "v100", 1, 4)
	v1.GPUsUsed, v1.ShardUse = 1, []bridge.GPUShards{{Used: 1, Total: 4}}
	nodes := []bridge.Node{node("v0", "v100", 1, 1), v1}
	blocker := running(9, a3cTag+" share=no", "v0", "v100", 0)
	own := running(8, "my shards", "v1", "v100", 0)
	own.Shards, own.SharedGPUs = 1, []int{0}
	// The single job's weight puts it behind the pair's members.
	a, b, single := pending(1, a3cTag), pending(2, resnet18Tag), pending(3, a3cTag+" share=no weight=0.1")
	res := step(c, snapshot(t, epoch, nodes, blocker, own, a, b, single), epoch, c.Solve)
	for _, id := range []bridge.JobID{1, 2, 3} {
		if got := actionsOf(res.Actions, id); got != "hold" {
			t.Fatalf("round: job %d %q, want held: %s", id, got, c.jobs[keyOf(id)].reason)
		}
	}
	// As a round leaves a pair it chose and no node could take.
	why := "no v100 node can take a pair now"
	c.share.places = map[string]pairPlace{"1": {partner: "2", gpuType: "v100", why: why}, "2": {partner: "1", gpuType: "v100", why: why}}
	// The blocker ends: v0's GPU is free between rounds.
	now := epoch.Add(30 * time.Second)
	nodes[0].GPUsUsed = 0
	heldJob := func(j bridge.Job) bridge.Job { j.Held, j.Reason = true, "JobHeldAdmin"; return j }
	out := look(c, snapshot(t, now, nodes, done(blocker), own, heldJob(a), heldJob(b), heldJob(single)), now)
	for _, id := range []bridge.JobID{1, 2} {
		if got := actionsOf(out, id); got != "" {
			t.Errorf("refill sent pair member %d %q", id, got)
		}
	}
	if got := actionsOf(out, 3); !strings.Contains(got, "release") {
		t.Errorf("refill: job 3 %q, want it started on the freed GPU (%s; job 3: %s)", got, describeActions(out), c.jobs[keyOf(3)].reason)
	}
}
