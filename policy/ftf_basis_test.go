package policy

import (
	"math"
	"testing"
)

// A policy value carried across rounds starts each search from the last
// round's basis; that may change which optimal allocation it returns, never
// the optimal max ρ, and it must need fewer simplex pivots than fresh
// searches of the same rounds.
func TestFinishTimeFairnessWarmRoundsMatchFreshSearches(t *testing.T) {
	for _, n := range []int{120, 300} {
		rounds := distinctRounds(t, n, 12, true)
		warm, err := New("finish_time_fairness_perf", Options{})
		if err != nil {
			t.Fatal(err)
		}
		warmPivots, freshPivots := 0, 0
		for r, p := range rounds {
			got, err := warm.Allocate(p)
			if err != nil {
				t.Fatalf("%d jobs, round %d, warm: %v", n, r, err)
			}
			fresh, _ := New("finish_time_fairness_perf", Options{})
			want, err := fresh.Allocate(p)
			if err != nil {
				t.Fatalf("%d jobs, round %d, fresh: %v", n, r, err)
			}
			if d := math.Abs(got.Objective - want.Objective); d > 2e-6*want.Objective {
				t.Errorf("%d jobs, round %d: warm max ρ %.9g, fresh %.9g", n, r, got.Objective, want.Objective)
			}
			mmCheckFeasible(t, p, got)
			if r > 0 {
				warmPivots += got.Stats.Pivots
				freshPivots += want.Stats.Pivots
			}
		}
		if warmPivots >= freshPivots {
			t.Errorf("%d jobs: warm searches took %d pivots, fresh ones %d", n, warmPivots, freshPivots)
		}
		t.Logf("%d jobs: pivots after the first round: warm %d, fresh %d", n, warmPivots, freshPivots)
	}
}
