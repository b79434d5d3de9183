package sched

import (
	"testing"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/siterules"
)

// A configuration that passes validation ([weights] account.lab = 1e3,
// qos.high = 1e3) gives one job the product of both; the policy still
// gets weights it can solve with and allocates the cluster.
func TestSiteWeightProductZeroesTheAllocation(t *testing.T) {
	set := settings() // max_min_fairness_perf, the default policy
	set.Rules = siterules.Default()
	set.Rules.AccountWeights = map[string]float64{"lab": 1e3}
	set.Rules.QOSWeights = map[string]float64{"high": 1e3}
	if err := set.Rules.Validate(); err != nil {
		t.Fatal(err)
	}
	c := newCore(t, set)
	nodes := []bridge.Node{node("a1", "v100", 1, 0), node("b1", "k80", 1, 0)}
	heavy := pending(3, tag)
	heavy.Account, heavy.QOS = "lab", "high"
	res := step(c, snapshot(t, epoch, nodes, pending(1, tag), pending(2, tag), heavy, pending(4, tag)), epoch, c.Solve)
	total := 0.0
	for _, jv := range res.View.Jobs {
		for _, v := range jv.Allocation {
			total += v
		}
	}
	if total < 0.5 {
		t.Errorf("4 jobs, 2 GPUs: allocation sums to %g of the cluster (weight of job 3: %g), fallback %q, skipped %q",
			total, c.jobs[keyOf(3)].weight, res.Fallback, res.Skipped)
	}
}
