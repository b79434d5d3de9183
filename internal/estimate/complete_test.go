package estimate

import (
	"math"
	"testing"
)

func TestSolve(t *testing.T) {
	tests := []struct {
		name string
		a    [][]float64
		b    []float64
		want []float64
		err  bool
	}{
		{"diagonal", [][]float64{{2, 0}, {0, 4}}, []float64{2, 8}, []float64{1, 2}, false},
		{"needs pivoting", [][]float64{{0, 1}, {1, 0}}, []float64{3, 5}, []float64{5, 3}, false},
		{"3x3", [][]float64{{2, 1, -1}, {-3, -1, 2}, {-2, 1, 2}}, []float64{8, -11, -3}, []float64{2, 3, -1}, false},
		{"singular", [][]float64{{1, 2}, {2, 4}}, []float64{1, 2}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := normalEq{n: len(tt.b)}
			for i := range tt.a {
				copy(q.a[i][:], tt.a[i])
			}
			copy(q.b[:], tt.b)
			got, err := q.solve()
			if (err != nil) != tt.err {
				t.Fatalf("error %v, want error %v", err, tt.err)
			}
			for i := range tt.want {
				if math.Abs(got[i]-tt.want[i]) > 1e-9 {
					t.Fatalf("got %v, want %v", got, tt.want)
				}
			}
		})
	}
}

// A matrix that follows the model exactly (levels, column offsets and one
// shape factor) is completed exactly from two known entries of a row.
func TestLowRankRecoversExactMatrix(t *testing.T) {
	levels := []float64{0, 1, -0.5, 2, 0.3, -1.2}
	shapes := []float64{-1, 0.5, 1, -0.3, 0.8, 0}
	offsets := []float64{0, 1.2, 1.9, 0.4}
	factors := []float64{0.2, 0.5, 0.9, -0.4}
	rows := make([][]float64, len(levels))
	for i := range rows {
		rows[i] = make([]float64, len(offsets))
		for t := range offsets {
			rows[i][t] = levels[i] + offsets[t] + shapes[i]*factors[t]
		}
	}
	m := fitLowRank(rows, len(offsets), 1, 1e-6, 1)
	// A new row: level 0.7, shape 0.6, known on columns 0 and 2 only.
	truth := func(t int) float64 { return 0.7 + offsets[t] + 0.6*factors[t] }
	row := []float64{truth(0), math.NaN(), truth(2), math.NaN()}
	u := make([]float64, 1)
	a, ok := m.solveRow(row, -1, nil, 1e-9, u)
	if !ok {
		t.Fatal("row not solved")
	}
	for _, c := range []int{1, 3} {
		if got := m.predict(a, u, c); math.Abs(got-truth(c)) > 1e-3 {
			t.Errorf("column %d: got %.4f, want %.4f", c, got, truth(c))
		}
	}
}

// With a single known entry the shape is the prior's.
func TestLowRankSingleEntryTakesPrior(t *testing.T) {
	rows := [][]float64{{0, 1, 2}, {0, 0.5, 1}, {1, 2, 3}, {1, 1.5, 2}}
	m := fitLowRank(rows, 3, 1, 1e-3, 1)
	row := []float64{0, math.NaN(), math.NaN()}
	// The prior is the shape of the first row: its prediction follows it.
	u := make([]float64, 1)
	a, _ := m.solveRow(row, -1, m.u[0], 1, u)
	if got, want := m.predict(a, u, 2), 2.0; math.Abs(got-want) > 0.05 {
		t.Errorf("with the first row's shape: got %.3f, want about %.3f", got, want)
	}
	a, _ = m.solveRow(row, -1, m.u[1], 1, u)
	if got, want := m.predict(a, u, 2), 1.0; math.Abs(got-want) > 0.05 {
		t.Errorf("with the second row's shape: got %.3f, want about %.3f", got, want)
	}
}

func TestLowRankIgnoresThinColumns(t *testing.T) {
	nan := math.NaN()
	rows := [][]float64{{0, 1, nan}, {1, 2, nan}, {2, 3, 5}}
	m := fitLowRank(rows, 3, 1, 0.1, 2)
	if m.usable(2) || !m.usable(0) {
		t.Errorf("usable: column 0 %v, column 2 %v; want true, false", m.usable(0), m.usable(2))
	}
	if _, ok := m.solveRow([]float64{nan, nan, 4}, -1, nil, 1, make([]float64, 1)); ok {
		t.Error("a row known only on a thin column was solved")
	}
}
