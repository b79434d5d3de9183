package clpmodel

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// dense builds a Problem from a dense row-major matrix.
func dense(a [][]float64, colLo, colHi, obj, rowLo, rowHi []float64, maximize bool) *Problem {
	p := &Problem{Rows: len(a), Columns: len(obj), Start: []int{0}, ColLo: colLo, ColHi: colHi,
		Objective: obj, RowLo: rowLo, RowHi: rowHi, Maximize: maximize}
	for c := 0; c < p.Columns; c++ {
		for r := range a {
			if a[r][c] != 0 {
				p.Index = append(p.Index, r)
				p.Value = append(p.Value, a[r][c])
			}
		}
		p.Start = append(p.Start, len(p.Index))
	}
	return p
}

func TestSolvesASmallLPByHand(t *testing.T) {
	// maximize x + y  s.t.  x + 2y <= 4,  3x + y <= 6,  x, y >= 0:
	// the optimum is x = 1.6, y = 1.2 (both rows tight).
	inf := math.Inf(1)
	p := dense([][]float64{{1, 2}, {3, 1}}, []float64{0, 0}, []float64{inf, inf},
		[]float64{1, 1}, []float64{-inf, -inf}, []float64{4, 6}, true)
	m, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Solve(); err != nil {
		t.Fatal(err)
	}
	x := m.ColumnValues(nil)
	if math.Abs(x[0]-1.6) > 1e-9 || math.Abs(x[1]-1.2) > 1e-9 || math.Abs(m.Objective()-2.8) > 1e-9 {
		t.Fatalf("x = %v, objective %g; want [1.6 1.2], 2.8", x, m.Objective())
	}
	// Duals: 0.4 and 0.2 in magnitude (1 = 0.4·1 + 0.2·3 = 0.4·2 + 0.2·1).
	d := m.RowDuals(nil)
	if math.Abs(math.Abs(d[0])-0.4) > 1e-9 || math.Abs(math.Abs(d[1])-0.2) > 1e-9 {
		t.Fatalf("row duals %v, want magnitudes 0.4 and 0.2", d)
	}
	// Raise the second row's coefficient of x to 5: the optimum moves to
	// x = 8/9, y = 14/9.
	m.SetCoefficient(1, 0, 5)
	if err := m.Solve(); err != nil {
		t.Fatal(err)
	}
	x = m.ColumnValues(nil)
	if math.Abs(x[0]-8.0/9) > 1e-9 || math.Abs(x[1]-14.0/9) > 1e-9 {
		t.Fatalf("after the change x = %v, want [8/9 14/9]", x)
	}
	// Make it infeasible through a row bound.
	m.SetRowBounds(0, 5, 4)
	if err := m.Solve(); !errors.Is(err, ErrInfeasible) {
		t.Fatalf("inverted row bounds: %v, want ErrInfeasible", err)
	}
}

func TestLoadRejectsMalformedProblems(t *testing.T) {
	good := func() *Problem {
		return dense([][]float64{{1}}, []float64{0}, []float64{1}, []float64{1}, []float64{0}, []float64{1}, false)
	}
	cases := map[string]func(p *Problem){
		"short starts":     func(p *Problem) { p.Start = p.Start[:1] },
		"row out of range": func(p *Problem) { p.Index[0] = 3 },
		"short bounds":     func(p *Problem) { p.ColHi = nil },
		"short row bounds": func(p *Problem) { p.RowLo = nil },
		"decreasing start": func(p *Problem) { p.Start[1] = -1 },
		"NaN row bound":    func(p *Problem) { p.RowHi[0] = math.NaN() },
		"NaN column bound": func(p *Problem) { p.ColLo[0] = math.NaN() },
		"infinite entry":   func(p *Problem) { p.Value[0] = math.Inf(1) },
		"NaN objective":    func(p *Problem) { p.Objective[0] = math.NaN() },
		"two entries in a row": func(p *Problem) {
			p.Start[1], p.Index, p.Value = 2, []int{0, 0}, []float64{1, 2}
		},
	}
	for name, mutate := range cases {
		p := good()
		mutate(p)
		if _, err := Load(p); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
	if _, err := Load(nil); err == nil {
		t.Error("nil problem: loaded")
	}
}

// randomLP is a feasible, bounded packing LP: maximize c·x subject to
// A x <= b with positive A, b, c and 0 <= x <= 1.
func randomLP(rng *rand.Rand, rows, cols int) ([][]float64, *Problem) {
	a := make([][]float64, rows)
	for r := range a {
		a[r] = make([]float64, cols)
		for c := range a[r] {
			if rng.Float64() < 0.3 {
				a[r][c] = 1 + 9*rng.Float64()
			}
		}
	}
	colLo, colHi, obj := make([]float64, cols), make([]float64, cols), make([]float64, cols)
	for c := range obj {
		colHi[c], obj[c] = 1, rng.Float64()
	}
	rowLo, rowHi := make([]float64, rows), make([]float64, rows)
	for r := range rowLo {
		rowLo[r], rowHi[r] = math.Inf(-1), 5+10*rng.Float64()
	}
	return a, dense(a, colLo, colHi, obj, rowLo, rowHi, true)
}

// A re-solve after coefficient changes, from the kept basis, reaches the
// optimum of a fresh model of the changed LP, in fewer iterations; a
// basis copied into a fresh model of the same LP needs none.
func TestWarmStartsReachTheFreshOptimum(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	warmIters, coldIters := 0, 0
	for trial := 0; trial < 20; trial++ {
		a, p := randomLP(rng, 40, 60)
		m, err := Load(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Solve(); err != nil {
			t.Fatal(err)
		}
		basis := m.Status()
		copyModel, _ := Load(p)
		if err := copyModel.SetStatus(basis); err != nil {
			t.Fatal(err)
		}
		if err := copyModel.Solve(); err != nil {
			t.Fatal(err)
		}
		if copyModel.Iterations() != 0 || math.Abs(copyModel.Objective()-m.Objective()) > 1e-9 {
			t.Fatalf("trial %d: copied optimal basis took %d iterations to %g, want 0 to %g",
				trial, copyModel.Iterations(), copyModel.Objective(), m.Objective())
		}
		copyModel.Close()
		// Change a few coefficients a little, as a search's next probe does.
		for k := 0; k < 5; k++ {
			r, c := rng.IntN(len(a)), rng.IntN(len(a[0]))
			a[r][c] = 1 + 9*rng.Float64()
			m.SetCoefficient(r, c, a[r][c])
		}
		if err := m.Solve(); err != nil {
			t.Fatal(err)
		}
		warmIters += m.Iterations()
		fresh, _ := Load(dense(a, p.ColLo, p.ColHi, p.Objective, p.RowLo, p.RowHi, true))
		if err := fresh.Solve(); err != nil {
			t.Fatal(err)
		}
		coldIters += fresh.Iterations()
		if d := math.Abs(fresh.Objective() - m.Objective()); d > 1e-7*math.Max(1, fresh.Objective()) {
			t.Fatalf("trial %d: warm objective %g, fresh %g", trial, m.Objective(), fresh.Objective())
		}
		fresh.Close()
		m.Close()
	}
	if warmIters >= coldIters {
		t.Errorf("warm starts took %d iterations, fresh solves %d", warmIters, coldIters)
	}
	t.Logf("iterations after small changes: warm %d, fresh %d", warmIters, coldIters)
}

// A basis goes in only with the right length and known values (CLP
// crashes on others), and comes out with CLP's flag bits removed.
func TestStatusInAndOut(t *testing.T) {
	_, p := randomLP(rand.New(rand.NewPCG(3, 4)), 30, 40)
	m, _ := Load(p)
	defer m.Close()
	if err := m.SetStatus(make([]byte, 2)); err == nil {
		t.Fatal("a status of the wrong length was taken")
	}
	bad := make([]byte, m.Columns()+m.Rows())
	bad[3] = 6
	if err := m.SetStatus(bad); err == nil {
		t.Fatal("a status value of 6 was taken")
	}
	if err := m.Solve(); err != nil {
		t.Fatal(err)
	}
	basic := 0
	for i, v := range m.Status() {
		if v > Fixed {
			t.Fatalf("status entry %d is %d", i, v)
		}
		if v == Basic {
			basic++
		}
	}
	if basic != m.Rows() {
		t.Fatalf("%d basic entries for %d rows", basic, m.Rows())
	}
}
