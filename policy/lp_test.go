package policy

import (
	"errors"
	"math"
	"testing"
)

func TestLPSolvesTextbookProblem(t *testing.T) {
	// maximize a + b s.t. 0 <= 2a + b <= 10, 3 <= 2b - a <= 8: optimum 7.6 at (2.4, 5.2).
	lp := NewLP(2)
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
	lp := NewLP(1)
	lp.SetBounds(0, 0, 1)
	lp.AddRow([]int{0}, []float64{1}, 2, Inf)
	if _, err := lp.Solve(); !errors.Is(err, ErrInfeasible) {
		t.Fatalf("got %v, want ErrInfeasible", err)
	}
}
