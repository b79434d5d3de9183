package policy

import (
	"math"
	"testing"
)

func TestStaticBaselinesByHand(t *testing.T) {
	// 2 v100 + 2 k80, three jobs, c takes 2 GPUs and cannot run on k80.
	p := &Problem{GPUs: map[string]int{"v100": 2, "k80": 2}, Jobs: []Job{
		{ID: "a", Throughputs: map[string]float64{"v100": 4, "k80": 1}, ScaleFactor: 1, Weight: 1},
		{ID: "b", Throughputs: map[string]float64{"v100": 2, "k80": 1}, ScaleFactor: 1, Weight: 1},
		{ID: "c", Throughputs: map[string]float64{"v100": 6}, ScaleFactor: 2, Weight: 1},
	}}
	tests := []struct {
		policy string
		want   map[string][]float64 // by job: k80, v100
	}{
		// Isolated: (N_t/3)/sf = 2/3 per type for sf 1, scaled to a row sum
		// of 1: 1/2 each; c: 1/3 of each, k80 dropped.
		{"isolated", map[string][]float64{"a": {0.5, 0.5}, "b": {0.5, 0.5}, "c": {0, 1.0 / 3}}},
		// Proportional: 1/2 of each type, times 4 GPUs / 4 requested = 1;
		// c loses the k80 half.
		{"proportional", map[string][]float64{"a": {0.5, 0.5}, "b": {0.5, 0.5}, "c": {0, 0.5}}},
	}
	for _, tc := range tests {
		a := obAllocate(t, tc.policy, p)
		for _, r := range a.Rows {
			for k, x := range r.Fractions {
				if want := tc.want[r.Key()][k]; math.Abs(x-want) > 1e-12 {
					t.Errorf("%s: job %s on %s: %v, want %v", tc.policy, r.Key(), a.Types[k], x, want)
				}
			}
		}
		if err := VerifyAllocation(p, a, 1e-12); err != nil {
			t.Errorf("%s: %v", tc.policy, err)
		}
	}
}
