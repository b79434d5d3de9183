package sched

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/siterules"
)

// accounting is a site with QOS gpu4 (4 GPUs per user) and two accounts.
func accounting() *bridge.Accounting {
	none := bridge.NoLimit
	q := func(name string, perUser int) bridge.QOSLimits {
		return bridge.QOSLimits{Name: name, MaxGPUsPerUser: perUser, MaxGPUsPerAccount: none, GrpGPUs: none,
			MaxJobsPerUser: none, MaxJobsPerAccount: none, GrpJobs: none, MaxGPUsPerJob: none}
	}
	a := func(account, user, parent string) bridge.Association {
		return bridge.Association{Account: account, User: user, ParentAccount: parent, Shares: 1,
			GrpGPUs: none, GrpJobs: none, MaxJobs: none, MaxGPUsPerJob: none}
	}
	return &bridge.Accounting{
		QOS:          []bridge.QOSLimits{q("normal", none), q("gpu4", 4)},
		Associations: []bridge.Association{a("root", "", ""), a("physics", "", "root"), a("biology", "", "root"), a("physics", "alice", "physics"), a("biology", "bob", "biology")},
	}
}

func userJob(id bridge.JobID, user, account, qos string) bridge.Job {
	j := pending(id, tag)
	j.User, j.Account, j.QOS = user, account, qos
	return j
}

// Alice's 8 jobs come first, bob's 6 after, on 8 GPUs; her QOS caps her at
// 4 GPUs. The round releases 4 of hers and 4 of bob's, and says of her
// others that the cap keeps them. Without the accounting in the snapshot
// it would release 8 of hers, 4 of which Slurm would keep for its limit.
func TestRoundKeepsQOSCaps(t *testing.T) {
	nodes := []bridge.Node{node("a1", "v100", 4, 0), node("a2", "v100", 4, 0)}
	var jobs []bridge.Job
	for i := range 8 {
		jobs = append(jobs, userJob(bridge.JobID(1+i), "alice", "physics", "gpu4"))
	}
	for i := range 6 {
		jobs = append(jobs, userJob(bridge.JobID(20+i), "bob", "biology", "normal"))
	}
	for _, withLimits := range []bool{false, true} {
		c := newCore(t, settings())
		snap := snapshot(t, epoch, nodes, jobs...)
		if withLimits {
			snap.Accounting = accounting()
		}
		res := step(c, snap, epoch, c.Solve)
		if res.Skipped != "" {
			t.Fatal(res.Skipped)
		}
		released := map[string]int{}
		for _, j := range jobs {
			if strings.Contains(actionsOf(res.Actions, j.ID), "set-priority") {
				released[j.User]++
			}
		}
		if !withLimits {
			if released["alice"] <= 4 {
				t.Fatalf("without limits alice got %d releases: the test shows nothing", released["alice"])
			}
			continue
		}
		if released["alice"] != 4 || released["bob"] != 4 {
			t.Errorf("released alice %d, bob %d; want 4 and 4", released["alice"], released["bob"])
		}
		capped := 0
		for _, v := range res.View.Jobs {
			if strings.Contains(v.Reason, "limit qos gpu4 user alice (4 of 4 GPUs)") {
				capped++
			}
		}
		if capped != 4 {
			t.Errorf("%d of alice's waiting jobs name the cap; want 4: %+v", capped, res.View.Jobs)
		}
	}
}

// Running GPU jobs the daemon does not schedule (here in another
// partition) count against the same cap: alice already runs 3 GPUs
// elsewhere, so one more of hers may start.
func TestRunningJobsElsewhereCountAgainstCaps(t *testing.T) {
	nodes := []bridge.Node{node("a1", "v100", 4, 0)}
	jobs := []bridge.Job{userJob(1, "alice", "physics", "gpu4"), userJob(2, "alice", "physics", "gpu4"), userJob(3, "alice", "physics", "gpu4")}
	c := newCore(t, settings())
	snap := snapshot(t, epoch, nodes, jobs...)
	snap.Accounting = accounting()
	snap.RunningOutside = []bridge.Running{{ID: 90, User: "alice", Account: "physics", QOS: "gpu4", Partition: "cpu", GPUs: 3}}
	res := step(c, snap, epoch, c.Solve)
	released := 0
	for _, j := range jobs {
		if strings.Contains(actionsOf(res.Actions, j.ID), "set-priority") {
			released++
		}
	}
	if released != 1 {
		t.Errorf("released %d of alice's jobs with 3 of her 4 GPUs busy elsewhere", released)
	}
}

// A job asking for more GPUs than its QOS lets one job have never starts:
// it waits for Slurm, out of the allocation, with the cap named.
func TestPerJobCapKeepsAJobOut(t *testing.T) {
	acc := accounting()
	acc.QOS[1].MaxGPUsPerJob = 2
	big := userJob(1, "alice", "physics", "gpu4")
	big.GPUs, big.GPUsPerNode, big.Nodes = 4, 4, 1
	c := newCore(t, settings())
	snap := snapshot(t, epoch, []bridge.Node{node("a1", "v100", 4, 0)}, big, userJob(2, "bob", "biology", "normal"))
	snap.Accounting = acc
	res := step(c, snap, epoch, c.Solve)
	if got := actionsOf(res.Actions, 1); strings.Contains(got, "set-priority") {
		t.Errorf("the capped job was released: %s", got)
	}
	for _, v := range res.View.Jobs {
		if v.Job.ID == 1 && !strings.Contains(v.Reason, "QOS gpu4 allows 2 GPUs per job") {
			t.Errorf("reason %q", v.Reason)
		}
	}
	if got := actionsOf(res.Actions, 2); !strings.Contains(got, "set-priority") {
		t.Errorf("bob's job: %q", got)
	}
}

// Entities from the fair-share tree: physics (Fairshare=3) and biology
// (1), each with more one-GPU jobs than fit, under the hierarchical
// policy. The allocation gives the accounts 3:1 of the 8 GPUs (6 and 2
// GPUs' worth; the rounds then realize it over time); with equal shares
// it is 4 and 4. A change made with sacctmgr counts at the next round.
func TestEntitiesWeighedByFairShare(t *testing.T) {
	nodes := []bridge.Node{node("a1", "v100", 4, 0), node("a2", "v100", 4, 0)}
	var jobs []bridge.Job
	for i := range 8 {
		jobs = append(jobs, userJob(bridge.JobID(1+i), "alice", "physics", "normal"))
		jobs = append(jobs, userJob(bridge.JobID(20+i), "bob", "biology", "normal"))
	}
	set := settings()
	set.Policy = "max_min_fairness_water_filling_perf"
	set.Rules.EntitiesFrom = siterules.EntitiesFromFairShare
	gpus := func(res Result) map[string]float64 {
		out := map[string]float64{}
		for _, v := range res.View.Jobs {
			for _, share := range v.Allocation {
				out[v.Job.Account] += share * float64(v.Job.GPUs)
			}
		}
		return out
	}
	c := newCore(t, set)
	for i, shares := range [][2]int{{3, 1}, {3, 3}} {
		acc := accounting()
		acc.Associations[1].Shares, acc.Associations[2].Shares = shares[0], shares[1]
		at := epoch.Add(time.Duration(i) * set.Round)
		snap := snapshot(t, at, nodes, jobs...)
		snap.Accounting = acc
		res := step(c, snap, at, c.Solve)
		if res.Skipped != "" {
			t.Fatal(res.Skipped)
		}
		got := gpus(res)
		want := 8 * float64(shares[0]) / float64(shares[0]+shares[1])
		if math.Abs(got["physics"]-want) > 0.01 || math.Abs(got["biology"]-(8-want)) > 0.01 {
			t.Errorf("shares %d:%d: allocation %v GPUs; want physics %.1f, biology %.1f", shares[0], shares[1], got, want, 8-want)
		}
		// Status shows the same per entity, with the weights.
		ev := map[string]EntityView{}
		for _, e := range res.View.Entities {
			ev[e.Name] = e
		}
		if p, b := ev["physics"], ev["biology"]; math.Abs(p.EffectiveAllocated-want) > 0.01 || math.Abs(b.EffectiveAllocated-(8-want)) > 0.01 ||
			math.Abs(p.Weight/b.Weight-float64(shares[0])/float64(shares[1])) > 1e-9 || p.Jobs != 8 {
			t.Errorf("entity view %+v", res.View.Entities)
		}
		if !strings.HasPrefix(res.View.Accounting, "limits from slurmdbd: 2 QOS") {
			t.Errorf("accounting note %q", res.View.Accounting)
		}
	}
}

// The refill between rounds keeps the caps too: alice (4 GPUs in QOS
// gpu4) runs 3 jobs and a fourth ends; of her waiting jobs only one may
// start on the two GPUs free (her running 3 count), and bob's waiting job
// takes the other.
func TestRefillKeepsQOSCaps(t *testing.T) {
	c := newCore(t, refillSettings())
	nodes := []bridge.Node{node("a1", "v100", 4, 0), node("a2", "v100", 4, 0)}
	var jobs []bridge.Job
	for i := range 6 {
		jobs = append(jobs, userJob(bridge.JobID(1+i), "alice", "physics", "gpu4"))
	}
	jobs = append(jobs, userJob(20, "bob", "biology", "normal"), userJob(21, "bob", "biology", "normal"),
		userJob(22, "bob", "biology", "normal"), userJob(23, "bob", "biology", "normal"), userJob(24, "bob", "biology", "normal"))
	snap := snapshot(t, epoch, nodes, jobs...)
	snap.Accounting = accounting()
	first := step(c, snap, epoch, c.Solve)
	if first.Skipped != "" {
		t.Fatal(first.Skipped)
	}
	// Slurm shows what the round asked for: the released jobs run, the
	// others held; then one of alice's running jobs and one of bob's end.
	var now []bridge.Job
	ran := map[string]int{}
	ended := map[string]bool{}
	for _, j := range jobs {
		if !strings.Contains(actionsOf(first.Actions, j.ID), "set-priority") {
			now = append(now, held(j.ID, tag))
			now[len(now)-1].User, now[len(now)-1].Account, now[len(now)-1].QOS = j.User, j.Account, j.QOS
			continue
		}
		r := running(j.ID, tag, "a1", "v100", 0)
		r.User, r.Account, r.QOS, r.StartTime = j.User, j.Account, j.QOS, epoch
		if !ended[j.User] {
			ended[j.User] = true
			r = done(r)
		} else {
			ran[j.User]++
		}
		now = append(now, r)
	}
	if ran["alice"] != 3 {
		t.Fatalf("after the round alice runs %d; the scene wants 3 (4 released, one ended)", ran["alice"])
	}
	at := epoch.Add(30 * time.Second)
	between := snapshot(t, at, []bridge.Node{node("a1", "v100", 4, 4), node("a2", "v100", 4, 2)}, now...)
	between.Accounting = accounting()
	out := look(c, between, at)
	started := map[string]int{}
	for _, j := range now {
		if strings.Contains(actionsOf(out, j.ID), "release") {
			started[j.User]++
		}
	}
	if started["alice"] != 1 || started["bob"] != 1 {
		t.Errorf("refill started alice %d, bob %d; want 1 and 1 (alice at 3 of her 4 GPUs): %v", started["alice"], started["bob"], out)
	}
}
