package estimate

import (
	"math"
	"testing"
)

func logs(rates ...float64) []float64 {
	out := make([]float64, len(rates))
	for i, r := range rates {
		if r > 0 {
			out[i] = math.Log(r)
		} else {
			out[i] = math.NaN()
		}
	}
	return out
}

func TestFingerprint(t *testing.T) {
	rows := []poolRow{
		{label: "flat", family: "a", scale: 1, logs: logs(10, 11, 12)},
		{label: "steep", family: "b", scale: 1, logs: logs(1, 4, 8)},
		{label: "steep x2", family: "b", scale: 2, logs: logs(2, 8, 20)},
		{label: "no v100", family: "b", scale: 1, logs: logs(1, 4, 0)},
	}
	tests := []struct {
		name   string
		known  []float64
		family string
		scale  int
		want   []string
		rate   float64
		ok     bool
	}{
		// Twice as fast as "steep" on the first two types: twice its
		// third. "no v100" cannot answer for the third type.
		{"closest shape", logs(2, 8, 0), "b", 1, []string{"steep"}, 16, true},
		{"closest shape at its scale", logs(2, 8, 0), "b", 2, []string{"steep x2"}, 20, true},
		// Within the penalty, the family wins over a slightly better shape.
		{"family preferred", logs(10, 16, 0), "b", 1, []string{"steep"}, 8 * math.Sqrt(10*16/(1*4)), true},
		{"shape beats family when far better", logs(10, 11, 0), "b", 1, []string{"flat"}, 12, true},
		{"one type shows no shape", logs(2, 0, 0), "b", 1, nil, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := fingerprintQuery{known: tt.known, target: 2, self: -1, family: tt.family, scale: tt.scale, neighbors: 1}
			top, y, ok := fingerprint(rows, q)
			if ok != tt.ok {
				t.Fatalf("ok %v, want %v", ok, tt.ok)
			}
			if !ok {
				return
			}
			if rows[top[0].row].label != tt.want[0] || math.Abs(math.Exp(y)-tt.rate) > 1e-9 {
				t.Errorf("matched %s predicting %.3f, want %s predicting %.3f", rows[top[0].row].label, math.Exp(y), tt.want[0], tt.rate)
			}
		})
	}
}

func TestFingerprintAveragesNeighboursAndSkipsSelf(t *testing.T) {
	rows := []poolRow{
		{label: "self", family: "a", scale: 1, logs: logs(1, 2, 100)},
		{label: "one", family: "a", scale: 1, logs: logs(1, 2, 4)},
		{label: "two", family: "a", scale: 1, logs: logs(1, 2, 16)},
		{label: "far", family: "a", scale: 1, logs: logs(1, 9, 1)},
	}
	q := fingerprintQuery{known: logs(1, 2, 0), target: 2, self: 0, family: "a", scale: 1, neighbors: 2}
	top, y, ok := fingerprint(rows, q)
	if !ok || len(top) != 2 {
		t.Fatalf("got %d matches, ok %v", len(top), ok)
	}
	if got := math.Exp(y); math.Abs(got-8) > 1e-9 {
		t.Errorf("prediction %.3f, want the geometric mean of 4 and 16, 8", got)
	}
}

func TestInsertTop(t *testing.T) {
	var top []match
	for i, e := range []float64{0.5, 0.1, 0.9, 0.3, 0.2} {
		top = insertTop(top, match{row: i, overlap: 2, err: e}, 3)
	}
	top = insertTop(top, match{row: 9, overlap: 3, err: 5}, 3)
	var got []int
	for _, m := range top {
		got = append(got, m.row)
	}
	want := []int{9, 1, 4}
	if len(got) != len(want) || got[0] != 9 || got[1] != 1 || got[2] != 4 {
		t.Errorf("top rows %v, want %v (more shared types first, then lower error)", got, want)
	}
}
