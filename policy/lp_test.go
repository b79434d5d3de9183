package policy

import (
	"errors"
	"math"
	"testing"
)

func TestLPSolvesTextbookProblem(t *testing.T) {
	// maximize a + b s.t. 0 <= 2a + b <= 10, 3 <= 2b - a <= 8: optimum 7.6 at (2.4, 5.2).
	lp := newLinearProgram(2)
	lp.Maximize()
	lp.SetObjective(0, 1)
	lp.SetObjective(1, 1)
	lp.AddRow([]int{0, 1}, []float64{2, 1}, 0, 10)
	lp.AddRow([]int{0, 1}, []float64{-1, 2}, 3, 8)
	res, err := lp.Solve()
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(res.Objective-7.6) > 1e-9 || math.Abs(res.X[0]-2.4) > 1e-9 || math.Abs(res.X[1]-5.2) > 1e-9 {
		t.Fatalf("got objective %v at %v, want 7.6 at (2.4, 5.2)", res.Objective, res.X)
	}
}

func TestLPReportsInfeasible(t *testing.T) {
	lp := newLinearProgram(1)
	lp.SetBounds(0, 0, 1)
	lp.AddRow([]int{0}, []float64{1}, 2, Inf)
	if _, err := lp.Solve(); !errors.Is(err, ErrInfeasible) {
		t.Fatalf("got %v, want ErrInfeasible", err)
	}
}

func TestLPWithoutColumnsChecksItsRows(t *testing.T) {
	tests := []struct {
		name       string
		lo, hi     float64
		infeasible bool
	}{
		{"zero within bounds", -Inf, 3, false},
		{"zero at a bound", 0, 0, false},
		{"upper bound below zero", -Inf, -1, true},
		{"lower bound above zero", 1e-9, Inf, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lp := newLinearProgram(0)
			lp.AddRow(nil, nil, -Inf, 5)
			lp.AddRow(nil, nil, tc.lo, tc.hi)
			_, err := lp.Solve()
			if got := errors.Is(err, ErrInfeasible); got != tc.infeasible {
				t.Fatalf("infeasible = %v (err %v), want %v", got, err, tc.infeasible)
			}
		})
	}
}

func TestLPReportsReducedCosts(t *testing.T) {
	// maximize x + 2y with x, y in [0, 1] and x + y <= 1.5: y sits at its
	// upper bound with reduced cost 1 (2 minus the row's dual 1), x is basic.
	lp := newLinearProgram(2)
	lp.Maximize()
	lp.SetBounds(0, 0, 1)
	lp.SetBounds(1, 0, 1)
	lp.SetObjective(0, 1)
	lp.SetObjective(1, 2)
	lp.AddRow([]int{0, 1}, []float64{1, 1}, -Inf, 1.5)
	res, err := lp.Solve()
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(res.X[1]-1) > 1e-9 || math.Abs(math.Abs(res.ColumnDuals[1])-1) > 1e-9 || math.Abs(res.ColumnDuals[0]) > 1e-9 {
		t.Fatalf("y = %v, reduced costs %v; want y = 1 with reduced cost ±1 and 0 for x", res.X[1], res.ColumnDuals)
	}
}
