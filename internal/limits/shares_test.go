package limits

import (
	"math"
	"testing"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

func TestAccountWeightsFollowSlurmsNormalizedShares(t *testing.T) {
	acc := site()
	acc.Associations[1].Shares = 3 // physics
	acc.Associations = append(acc.Associations,
		assoc("biology", "nobody", "biology"),
		assoc("root", "root", "root"),
		// A sub-account of biology with its own user: it takes half of
		// biology's share, biology's two users share the other half.
		bridge.Association{Account: "genomics", ParentAccount: "biology", Shares: 2, GrpGPUs: none, GrpJobs: none, MaxJobs: none, MaxGPUsPerJob: none},
		assoc("genomics", "carol", "genomics"),
		// Bound to a partition: not in the cluster's tree.
		bridge.Association{Account: "physics", User: "alice", Partition: "debug", Shares: 100},
	)
	// root's children: physics 3, biology 1, user root 1 → 3/5, 1/5, 1/5.
	// biology's: bob 1, nobody 1, genomics 2 → users 1/2 of 1/5.
	got := AccountWeights(acc, 1e-3)
	raw := map[string]float64{"physics": 3.0 / 5, "biology": 1.0 / 10, "genomics": 1.0 / 10, "root": 1.0 / 5}
	for name, r := range raw {
		want := r / raw["physics"]
		if math.Abs(got[name]-want) > 1e-12 {
			t.Errorf("%s: weight %v, want %v (all: %v)", name, got[name], want, got)
		}
	}
	if len(got) != len(raw) {
		t.Errorf("weights for %v, want exactly %v", got, raw)
	}
}

func TestAccountWeightsFloorAndNoTree(t *testing.T) {
	if AccountWeights(nil, 1e-3) != nil {
		t.Error("weights without accounting")
	}
	acc := site()
	acc.Associations[1].Shares = 1_000_000 // physics dwarfs biology
	got := AccountWeights(acc, 1e-3)
	if got["biology"] != 1e-3 || got["physics"] != 1 {
		t.Errorf("weights %v: the smallest must be floored at 1e-3, the largest 1", got)
	}
}
