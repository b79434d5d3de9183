package policy

import (
	"errors"
	"fmt"
	"math"

	"github.com/lanl/clp"
)

// Inf is an unbounded side of a row or column bound.
var Inf = math.Inf(1)

// ErrInfeasible is returned when an LP (and so the policy's problem) has no
// feasible point.
var ErrInfeasible = errors.New("infeasible")

// LP is a linear program built column by column and row by row and solved
// with COIN-OR CLP's dual simplex. Every policy builds its LPs through it so
// solver settings and status handling live in one place.
//
// Columns default to bounds [0, +inf) and objective coefficient 0.
type LP struct {
	maximize bool
	obj      []float64
	colLo    []float64
	colHi    []float64
	// rows in compressed form: row r uses entries rowStart[r]:rowStart[r+1]
	rowStart []int
	rowCols  []int
	rowVals  []float64
	rowLo    []float64
	rowHi    []float64
}

// LPResult is the solution of an LP.
type LPResult struct {
	X         []float64 // column values
	Objective float64
	RowDuals  []float64 // dual value of each row (CLP's sign convention)
	// ColumnDuals are the reduced costs of the columns (CLP's sign
	// convention): nonzero only for columns at a bound.
	ColumnDuals []float64
	RowValues   []float64 // activity of each row
}

// NewLP returns an LP with n columns.
func NewLP(n int) *LP {
	lp := &LP{
		obj:      make([]float64, n),
		colLo:    make([]float64, n),
		colHi:    make([]float64, n),
		rowStart: []int{0},
	}
	for i := range lp.colHi {
		lp.colHi[i] = Inf
	}
	return lp
}

// AddColumn appends a column with the given bounds and objective coefficient
// and returns its index.
func (lp *LP) AddColumn(lo, hi, objective float64) int {
	lp.obj = append(lp.obj, objective)
	lp.colLo = append(lp.colLo, lo)
	lp.colHi = append(lp.colHi, hi)
	return len(lp.obj) - 1
}

// NumColumns is the number of columns.
func (lp *LP) NumColumns() int { return len(lp.obj) }

// NumRows is the number of rows.
func (lp *LP) NumRows() int { return len(lp.rowLo) }

// Maximize makes the objective a maximization (the default is minimization).
func (lp *LP) Maximize() { lp.maximize = true }

// SetObjective sets column col's objective coefficient.
func (lp *LP) SetObjective(col int, coef float64) { lp.obj[col] = coef }

// SetBounds sets column col's bounds; use -Inf/Inf for free sides.
func (lp *LP) SetBounds(col int, lo, hi float64) { lp.colLo[col], lp.colHi[col] = lo, hi }

// AddRow adds the constraint lo <= Σ coefs[k]·x[cols[k]] <= hi and returns
// the row index. Zero coefficients are dropped.
func (lp *LP) AddRow(cols []int, coefs []float64, lo, hi float64) int {
	if len(cols) != len(coefs) {
		panic(fmt.Sprintf("policy: AddRow with %d columns and %d coefficients", len(cols), len(coefs)))
	}
	for k, c := range cols {
		if coefs[k] == 0 {
			continue
		}
		lp.rowCols = append(lp.rowCols, c)
		lp.rowVals = append(lp.rowVals, coefs[k])
	}
	lp.rowStart = append(lp.rowStart, len(lp.rowCols))
	lp.rowLo = append(lp.rowLo, lo)
	lp.rowHi = append(lp.rowHi, hi)
	return len(lp.rowLo) - 1
}

// Solve solves the LP. It returns ErrInfeasible (wrapped) when no point
// satisfies the constraints, and an error for unbounded or failed solves.
func (lp *LP) Solve() (*LPResult, error) {
	nr, nc := len(lp.rowLo), len(lp.obj)
	if nc == 0 {
		// Every row's activity is 0: feasible exactly when 0 is within
		// every row's bounds.
		for r := range lp.rowLo {
			if lp.rowLo[r] > 0 || lp.rowHi[r] < 0 {
				return nil, fmt.Errorf("lp with %d rows and no columns: row %d needs [%g, %g]: %w", nr, r, lp.rowLo[r], lp.rowHi[r], ErrInfeasible)
			}
		}
		return &LPResult{RowDuals: make([]float64, nr), RowValues: make([]float64, nr)}, nil
	}
	// CLP's packed matrix is column-major: transpose the row lists.
	colCount := make([]int, nc)
	for _, c := range lp.rowCols {
		if c < 0 || c >= nc {
			return nil, fmt.Errorf("lp: row references column %d of %d", c, nc)
		}
		colCount[c]++
	}
	colStart := make([]int, nc+1)
	for c := 0; c < nc; c++ {
		colStart[c+1] = colStart[c] + colCount[c]
	}
	entries := make([]clp.Nonzero, len(lp.rowCols))
	fill := append([]int(nil), colStart[:nc]...)
	for r := 0; r < nr; r++ {
		for k := lp.rowStart[r]; k < lp.rowStart[r+1]; k++ {
			c := lp.rowCols[k]
			entries[fill[c]] = clp.Nonzero{Index: r, Value: lp.rowVals[k]}
			fill[c]++
		}
	}
	m := clp.NewPackedMatrix()
	m.Reserve(nc, len(entries), false)
	m.SetDimensions(nr, 0)
	for c := 0; c < nc; c++ {
		m.AppendColumn(entries[colStart[c]:colStart[c+1]])
	}
	colBounds := make([]clp.Bounds, nc)
	for c := range colBounds {
		colBounds[c] = clp.Bounds{Lower: lp.colLo[c], Upper: lp.colHi[c]}
	}
	rowBounds := make([]clp.Bounds, nr)
	for r := range rowBounds {
		rowBounds[r] = clp.Bounds{Lower: lp.rowLo[r], Upper: lp.rowHi[r]}
	}
	s := clp.NewSimplex()
	s.LoadProblem(m, colBounds, lp.obj, rowBounds, nil)
	if lp.maximize {
		s.SetOptimizationDirection(clp.Maximize)
	} else {
		s.SetOptimizationDirection(clp.Minimize)
	}
	status := s.Dual(clp.NoValuesPass, clp.NoStartFinishOptions)
	switch status {
	case clp.Optimal:
	case clp.Infeasible:
		return nil, fmt.Errorf("lp with %d rows and %d columns: %w", nr, nc, ErrInfeasible)
	case clp.Unbounded:
		return nil, fmt.Errorf("lp with %d rows and %d columns: unbounded", nr, nc)
	default:
		return nil, fmt.Errorf("lp with %d rows and %d columns: solver stopped with status %d", nr, nc, status)
	}
	return &LPResult{
		X:           s.PrimalColumnSolution(),
		Objective:   s.ObjectiveValue(),
		RowDuals:    s.DualRowSolution(),
		ColumnDuals: s.DualColumnSolution(),
		RowValues:   s.PrimalRowSolution(),
	}, nil
}
