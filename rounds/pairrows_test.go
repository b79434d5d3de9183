package rounds

import "testing"

// A pair row may name its members in either order, and a registered pair
// the policy left out gets nothing rather than a newcomer's priority.
func TestSetAllocationPairRows(t *testing.T) {
	cases := []struct {
		name     string
		keys     []string
		rows     map[string][]float64
		wantPair float64 // the pair's share of the v100 over many rounds
	}{
		{"reversed key", []string{"a", "b", "b+a"}, map[string][]float64{"a": {0}, "b": {0}, "b+a": {1}}, 1},
		{"pair left out", []string{"a", "b"}, map[string][]float64{"a": {0.5}, "b": {0.5}}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := mustNew(t, cluster(servers("v100", 1, 1)), DefaultOptions())
			for _, id := range []string{"a", "b"} {
				mustAdd(t, m, Job{ID: id, ScaleFactor: 1, Throughputs: everywhere("v100")})
			}
			if err := m.AddPair(Pair{Jobs: [2]string{"a", "b"}, Throughputs: map[string][2]float64{"v100": {0.8, 0.8}}}, 0); err != nil {
				t.Fatal(err)
			}
			if err := m.SetAllocation(allocation([]string{"v100"}, tc.keys, tc.rows), 0); err != nil {
				t.Fatal(err)
			}
			const rounds = 200
			pairRounds := 0
			r := newRunner(t, m)
			r.onPlan = func(p *Plan) {
				for _, a := range p.Assignments {
					if a.Key == "a+b" {
						pairRounds++
					}
				}
			}
			r.steps(rounds)
			if got := float64(pairRounds) / rounds; got < tc.wantPair-0.02 || got > tc.wantPair+0.02 {
				t.Errorf("pair ran in %.3f of the rounds, want %.2f", got, tc.wantPair)
			}
		})
	}
}
