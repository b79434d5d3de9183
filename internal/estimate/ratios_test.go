package estimate

import (
	"math"
	"testing"
)

func TestRatios(t *testing.T) {
	// Column 2 is a new type: twice column 1 on one job, eight times on
	// another (geometric mean 4), and three times column 0 on a third.
	rows := []poolRow{
		{logs: logs(0, 1, 2)},
		{logs: logs(0, 1, 8)},
		{logs: logs(1, 0, 3)},
		{logs: logs(5, 5, 0)},
	}
	r := newRatios(rows, 3)
	tests := []struct {
		name  string
		known []float64
		self  []float64
		want  float64
		via   int
		ok    bool
	}{
		{"from column 1", logs(0, 10, 0), nil, 40, 1, true},
		{"from column 0", logs(10, 0, 0), nil, 30, 0, true},
		// Weighted by support: two jobs back column 1, one column 0.
		{"from both", logs(10, 10, 0), nil, math.Exp((2*math.Log(40) + math.Log(30)) / 3), 1, true},
		{"own row left out", logs(0, 10, 0), logs(0, 1, 8), 20, 1, true},
		{"nothing known", logs(0, 0, 0), nil, 0, -1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, ok := r.predict(tt.known, 2, 2, tt.self)
			if ok != tt.ok {
				t.Fatalf("ok %v, want %v", ok, tt.ok)
			}
			if ok && (math.Abs(math.Exp(p.log)-tt.want) > 1e-9 || p.via != tt.via) {
				t.Errorf("got %.4f via %d, want %.4f via %d", math.Exp(p.log), p.via, tt.want, tt.via)
			}
		})
	}
}
