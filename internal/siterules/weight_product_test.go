package siterules

import (
	"strings"
	"testing"
)

// Rules.Validate bounds each site weight by the policies' range, and a
// job charged to a listed account and a listed QOS, whose weight is their
// product, is brought back into that range with a note.
func TestSiteWeightProductStaysInThePoliciesRange(t *testing.T) {
	tests := []struct {
		account, qos, want float64
		note               bool
	}{
		{1e3, 1e3, maxWeight, true},
		{1e-3, 1e-3, minWeight, true},
		{10, 20, 200, false},
	}
	for _, tc := range tests {
		r := Default()
		r.AccountWeights = map[string]float64{"lab": tc.account}
		r.QOSWeights = map[string]float64{"high": tc.qos}
		if err := r.Validate(); err != nil {
			t.Fatalf("rules refused: %v", err)
		}
		e := r.Apply(JobFacts{Partition: "gpu", User: "ana", Account: "lab", QOS: "high"})
		noted := strings.Contains(strings.Join(e.Notes, "; "), "clamped")
		if e.Weight != tc.want || noted != tc.note {
			t.Errorf("account %g × qos %g: weight %g (notes %q), want %g (note: %v)", tc.account, tc.qos, e.Weight, e.Notes, tc.want, tc.note)
		}
	}
	r := Default()
	r.AccountWeights = map[string]float64{"lab": 1e6}
	if err := r.Validate(); err == nil || !strings.Contains(err.Error(), "weights.account.lab") {
		t.Errorf("a site weight of 1e6 is accepted (%v); the policies take at most %g", err, maxWeight)
	}
}
