package rounds

import (
	"math"
	"testing"
)

// A pair row may name its members in either order, and a registered pair
// the policy left out gets nothing. (That a left-out pair is not taken for
// a newcomer and held matters when every combination is at priority 0;
// the simulator's static-workload regression tests cover that case.)
func TestSetAllocationPairRows(t *testing.T) {
	cases := []struct {
		name  string
		keys  []string
		rows  map[string][]float64
		share map[string]float64 // each combination's share of the rounds
	}{
		{"reversed key", []string{"a", "b", "c", "b+a"},
			map[string][]float64{"a": {0}, "b": {0}, "c": {0}, "b+a": {1}},
			map[string]float64{"a+b": 1, "c": 0}},
		{"pair left out", []string{"a", "b", "c"},
			map[string][]float64{"a": {0}, "b": {0}, "c": {1}},
			map[string]float64{"a+b": 0, "c": 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// As in the simulator: a combination without a row would be
			// taken for one that arrived after the reset.
			opts := DefaultOptions()
			opts.HoldUnallocated = true
			m := mustNew(t, cluster(servers("v100", 1, 1)), opts)
			for _, id := range []string{"a", "b", "c"} {
				mustAdd(t, m, Job{ID: id, ScaleFactor: 1, Throughputs: everywhere("v100")})
			}
			if err := m.AddPair(Pair{Jobs: [2]string{"a", "b"}, Throughputs: map[string][2]float64{"v100": {0.8, 0.8}}}, 0); err != nil {
				t.Fatal(err)
			}
			r := newRunner(t, m)
			if err := m.SetAllocation(allocation([]string{"v100"}, tc.keys, tc.rows), r.now); err != nil {
				t.Fatal(err)
			}
			const rounds = 200
			ran := map[string]int{}
			r.onPlan = func(p *Plan) {
				if len(p.Assignments) == 0 {
					ran["idle"]++
				}
				for _, a := range p.Assignments {
					ran[a.Key]++
				}
			}
			r.steps(rounds)
			for key, want := range tc.share {
				if got := float64(ran[key]) / rounds; math.Abs(got-want) > 0.02 {
					t.Errorf("%s ran in %.3f of the rounds, want %.2f", key, got, want)
				}
			}
		})
	}
}

// PairOf finds a pair whichever order its members are named in, and Pairs
// lists the pairs alive: a removed job takes its pairs with it.
func TestPairLookupFollowsRemovals(t *testing.T) {
	m := mustNew(t, cluster(servers("v100", 1, 1)), DefaultOptions())
	for _, id := range []string{"a", "b", "c"} {
		mustAdd(t, m, Job{ID: id, ScaleFactor: 1, Throughputs: everywhere("v100")})
	}
	for _, p := range [][2]string{{"a", "b"}, {"c", "b"}} {
		if err := m.AddPair(Pair{Jobs: p, Throughputs: map[string][2]float64{"v100": {0.7, 0.6}}}, 0); err != nil {
			t.Fatal(err)
		}
	}
	if key, ok := m.PairOf("b", "a"); !ok || key != "a+b" {
		t.Fatalf("PairOf(b, a) = %q, %v", key, ok)
	}
	if _, ok := m.PairOf("a", "c"); ok {
		t.Fatal("a and c form no pair")
	}
	if got := m.Pairs(); len(got) != 2 || got[1].Key() != "c+b" || got[1].Throughputs["v100"] != [2]float64{0.7, 0.6} {
		t.Fatalf("Pairs = %+v", got)
	}
	if err := m.SetPairThroughputs("a+b", map[string][2]float64{"v100": {0.2, 0.3}}); err != nil {
		t.Fatal(err)
	}
	if got := m.Pairs(); got[0].Throughputs["v100"] != [2]float64{0.2, 0.3} {
		t.Fatalf("pair rates not replaced: %+v", got[0])
	}
	if err := m.SetPairThroughputs("b+a", nil); err == nil {
		t.Fatal("rates set on a pair named in the wrong order")
	}
	if err := m.RemovePair("c+b"); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.PairOf("b", "c"); ok || len(m.Pairs()) != 1 || m.Len() != 3 {
		t.Fatalf("after RemovePair: pairs %+v, %d combinations", m.Pairs(), m.Len())
	}
	if err := m.RemoveJob("b", 1); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.PairOf("a", "b"); ok || len(m.Pairs()) != 0 {
		t.Fatalf("pairs of a removed job remain: %+v", m.Pairs())
	}
}
