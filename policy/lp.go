package policy

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/gavel-slurm/gavel-slurm/policy/internal/clpmodel"
	"github.com/lanl/clp"
)

// Inf is an unbounded side of a row or column bound.
var Inf = math.Inf(1)

// ErrInfeasible is returned when an LP (and so the policy's problem) has no
// feasible point.
var ErrInfeasible = errors.New("infeasible")

// linearProgram is a linear program built column by column and row by row and solved
// with COIN-OR CLP's dual simplex. Every policy builds its LPs through it so
// solver settings and status handling live in one place.
//
// Columns default to bounds [0, +inf) and objective coefficient 0.
type linearProgram struct {
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

// lpResult is the solution of an LP.
type lpResult struct {
	X         []float64 // column values
	Objective float64
	RowDuals  []float64 // dual value of each row (CLP's sign convention)
	// ColumnDuals are the reduced costs of the columns (CLP's sign
	// convention): nonzero only for columns at a bound.
	ColumnDuals []float64
	RowValues   []float64 // activity of each row
}

// newLinearProgram returns an LP with n columns.
func newLinearProgram(n int) *linearProgram {
	lp := &linearProgram{
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
func (lp *linearProgram) AddColumn(lo, hi, objective float64) int {
	lp.obj = append(lp.obj, objective)
	lp.colLo = append(lp.colLo, lo)
	lp.colHi = append(lp.colHi, hi)
	return len(lp.obj) - 1
}

// reserveColumns makes room for n more columns without regrowing.
func (lp *linearProgram) reserveColumns(n int) {
	lp.obj = slices.Grow(lp.obj, n)
	lp.colLo = slices.Grow(lp.colLo, n)
	lp.colHi = slices.Grow(lp.colHi, n)
}

// NumColumns is the number of columns.
func (lp *linearProgram) NumColumns() int { return len(lp.obj) }

// NumRows is the number of rows.
func (lp *linearProgram) NumRows() int { return len(lp.rowLo) }

// Maximize makes the objective a maximization (the default is minimization).
func (lp *linearProgram) Maximize() { lp.maximize = true }

// SetObjective sets column col's objective coefficient.
func (lp *linearProgram) SetObjective(col int, coef float64) { lp.obj[col] = coef }

// SetBounds sets column col's bounds; use -Inf/Inf for free sides.
func (lp *linearProgram) SetBounds(col int, lo, hi float64) { lp.colLo[col], lp.colHi[col] = lo, hi }

// AddRow adds the constraint lo <= Σ coefs[k]·x[cols[k]] <= hi and returns
// the row index. Zero coefficients are dropped.
func (lp *linearProgram) AddRow(cols []int, coefs []float64, lo, hi float64) int {
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
func (lp *linearProgram) Solve() (*lpResult, error) {
	nr, nc := len(lp.rowLo), len(lp.obj)
	if nc == 0 {
		// Every row's activity is 0: feasible exactly when 0 is within
		// every row's bounds.
		for r := range lp.rowLo {
			if lp.rowLo[r] > 0 || lp.rowHi[r] < 0 {
				return nil, fmt.Errorf("lp with %d rows and no columns: row %d needs [%g, %g]: %w", nr, r, lp.rowLo[r], lp.rowHi[r], ErrInfeasible)
			}
		}
		return &lpResult{RowDuals: make([]float64, nr), RowValues: make([]float64, nr)}, nil
	}
	colStart, rowIndex, values, err := lp.columnMajor()
	if err != nil {
		return nil, err
	}
	entries := make([]clp.Nonzero, len(rowIndex))
	for k := range entries {
		entries[k] = clp.Nonzero{Index: rowIndex[k], Value: values[k]}
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
	return &lpResult{
		X:           s.PrimalColumnSolution(),
		Objective:   s.ObjectiveValue(),
		RowDuals:    s.DualRowSolution(),
		ColumnDuals: s.DualColumnSolution(),
		RowValues:   s.PrimalRowSolution(),
	}, nil
}

// columnMajor transposes the row lists into CLP's column-major form:
// column c has the entries rowIndex[colStart[c]:colStart[c+1]].
func (lp *linearProgram) columnMajor() (colStart, rowIndex []int, values []float64, err error) {
	nr, nc := len(lp.rowLo), len(lp.obj)
	colCount := make([]int, nc)
	for _, c := range lp.rowCols {
		if c < 0 || c >= nc {
			return nil, nil, nil, fmt.Errorf("lp: row references column %d of %d", c, nc)
		}
		colCount[c]++
	}
	colStart = make([]int, nc+1)
	for c := 0; c < nc; c++ {
		colStart[c+1] = colStart[c] + colCount[c]
	}
	rowIndex = make([]int, len(lp.rowCols))
	values = make([]float64, len(lp.rowCols))
	fill := append([]int(nil), colStart[:nc]...)
	for r := 0; r < nr; r++ {
		for k := lp.rowStart[r]; k < lp.rowStart[r+1]; k++ {
			c := lp.rowCols[k]
			rowIndex[fill[c]], values[fill[c]] = r, lp.rowVals[k]
			fill[c]++
		}
	}
	return colStart, rowIndex, values, nil
}

// keptLP is an LP loaded into the solver once and changed in place: each
// Solve starts from the basis the previous one ended with (or one set by
// SetBasis), which is what makes a sequence of closely related LPs cheap.
// The LP it was made from must not be changed while it is kept.
type keptLP struct {
	lp    *linearProgram
	model *clpmodel.Model
}

// Keep loads the LP into a kept model. Close it when done.
func (lp *linearProgram) Keep() (*keptLP, error) {
	colStart, rowIndex, values, err := lp.columnMajor()
	if err != nil {
		return nil, err
	}
	m, err := clpmodel.Load(&clpmodel.Problem{
		Rows: len(lp.rowLo), Columns: len(lp.obj),
		Start: colStart, Index: rowIndex, Value: values,
		ColLo: lp.colLo, ColHi: lp.colHi, Objective: lp.obj,
		RowLo: lp.rowLo, RowHi: lp.rowHi, Maximize: lp.maximize,
	})
	if err != nil {
		return nil, err
	}
	return &keptLP{lp: lp, model: m}, nil
}

// SetCoefficient changes the coefficient of column col in row r, which
// must already hold an entry for it.
func (k *keptLP) SetCoefficient(r, col int, v float64) {
	k.lp.setCoefficient(r, col, v)
	k.model.SetCoefficient(r, col, v)
}

// Basis is the current basis: a status per column, then one per row.
func (k *keptLP) Basis() []byte { return k.model.Status() }

// SetBasis sets the basis the next Solve starts from.
func (k *keptLP) SetBasis(s []byte) error { return k.model.SetStatus(s) }

// Iterations is the number of simplex iterations of the last Solve.
func (k *keptLP) Iterations() int { return k.model.Iterations() }

// Close frees the solver's copy.
func (k *keptLP) Close() { k.model.Close() }

// Solve solves the LP as it now stands, from the current basis.
func (k *keptLP) Solve() (*lpResult, error) {
	nr, nc := len(k.lp.rowLo), len(k.lp.obj)
	if err := k.model.Solve(); err != nil {
		if errors.Is(err, clpmodel.ErrInfeasible) {
			return nil, fmt.Errorf("lp with %d rows and %d columns: %w", nr, nc, ErrInfeasible)
		}
		return nil, err
	}
	return &lpResult{
		X:           k.model.ColumnValues(nil),
		Objective:   k.model.Objective(),
		RowDuals:    k.model.RowDuals(nil),
		ColumnDuals: k.model.ReducedCosts(nil),
		RowValues:   k.model.RowValues(nil),
	}, nil
}

// setCoefficient changes the coefficient of column col in row r, which
// must already hold an entry for it (rows keep the entries they were built
// with).
func (lp *linearProgram) setCoefficient(r, col int, v float64) {
	for k := lp.rowStart[r]; k < lp.rowStart[r+1]; k++ {
		if lp.rowCols[k] == col {
			lp.rowVals[k] = v
			return
		}
	}
	panic(fmt.Sprintf("policy: row %d has no entry for column %d", r, col))
}
