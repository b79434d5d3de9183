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

// The carried basis is mapped to the right columns and rows: the same
// problem allocated twice needs no pivot the second time (a basis shifted
// by one row, or given to the wrong jobs, needs hundreds), and above 512
// jobs, where the search decomposes and carries prices and placements
// instead, warm rounds still reach the fresh max ρ.
func TestFinishTimeFairnessCarriedBasisFitsItsJobs(t *testing.T) {
	rounds := distinctRounds(t, 150, 13, true)
	pol, _ := New("finish_time_fairness_perf", Options{})
	if _, err := pol.Allocate(rounds[0]); err != nil {
		t.Fatal(err)
	}
	again, err := pol.Allocate(rounds[0])
	if err != nil {
		t.Fatal(err)
	}
	if again.Stats.Pivots != 0 {
		t.Errorf("the same problem again took %d pivots in %d LPs, want 0", again.Stats.Pivots, again.Stats.LPs)
	}

	large := distinctRounds(t, 700, 14, true)[:4]
	warm, _ := New("finish_time_fairness_perf", Options{})
	for r, p := range large {
		got, err := warm.Allocate(p)
		if err != nil {
			t.Fatal(err)
		}
		fresh, _ := New("finish_time_fairness_perf", Options{})
		want, err := fresh.Allocate(p)
		if err != nil {
			t.Fatal(err)
		}
		if d := math.Abs(got.Objective - want.Objective); d > 2e-6*want.Objective {
			t.Errorf("700 jobs, round %d: warm max ρ %.9g, fresh %.9g", r, got.Objective, want.Objective)
		}
	}
}
