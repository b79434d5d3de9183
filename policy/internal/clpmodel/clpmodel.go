// Package clpmodel keeps a COIN-OR CLP model loaded between solves, so that
// a sequence of closely related LPs (the probes of one search, the same
// search a round later) each starts from the previous optimal basis instead
// of from scratch.
//
// github.com/lanl/clp, which solves every other LP of the project, loads a
// fresh model for each solve and cannot change a loaded model's matrix, so
// this package binds the few calls of CLP's C interface that warm starts
// need: load, change a coefficient or a row's bounds, set the starting
// basis, solve with the dual simplex, read the solution.
package clpmodel

// #cgo pkg-config: clp
// #include <stdlib.h>
// #include <stdbool.h>
// #include "Clp_C_Interface.h"
//
// // Clp_modifyCoefficient's last parameter is a bool up to CLP 1.17 and an
// // int from 1.18; a literal 0 suits both.
// static void modify_coefficient(Clp_Simplex *m, int row, int col, double v) {
//   Clp_modifyCoefficient(m, row, col, v, 0);
// }
import "C"

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"unsafe"
)

// Basis status of a column or a row's slack, as CLP numbers them.
const (
	Free       byte = 0
	Basic      byte = 1
	AtUpper    byte = 2
	AtLower    byte = 3
	SuperBasic byte = 4
	Fixed      byte = 5
)

// ErrInfeasible is returned by Solve when the LP has no feasible point.
var ErrInfeasible = errors.New("infeasible")

// ErrUnbounded is returned by Solve when the objective is unbounded.
var ErrUnbounded = errors.New("unbounded")

// Problem is an LP in column-major sparse form: column c has the entries
// Index[Start[c]:Start[c+1]] (row numbers) with values Value[...].
type Problem struct {
	Rows, Columns int
	Start         []int
	Index         []int
	Value         []float64
	ColLo, ColHi  []float64
	Objective     []float64
	RowLo, RowHi  []float64
	Maximize      bool
}

// Model is a loaded CLP model. It is not safe for concurrent use.
type Model struct {
	m             unsafe.Pointer // Clp_Simplex *
	rows, columns int
	iterations    int
}

// Load builds a model from p. Infinite bounds map to CLP's own infinity;
// non-finite coefficients, NaN bounds and two entries of one column in one
// row are errors.
func Load(p *Problem) (*Model, error) {
	if p == nil {
		return nil, errors.New("clpmodel: nil problem")
	}
	if err := p.check(); err != nil {
		return nil, err
	}
	nnz := p.Start[p.Columns]
	// CLP copies every array during load, so C-allocated scratch that is
	// freed right after is enough.
	start := cInts(p.Start)
	defer C.free(unsafe.Pointer(start))
	index := cInts(p.Index[:nnz])
	defer C.free(unsafe.Pointer(index))
	value := cDoubles(p.Value[:nnz])
	defer C.free(unsafe.Pointer(value))
	colLo := cDoubles(p.ColLo)
	defer C.free(unsafe.Pointer(colLo))
	colHi := cDoubles(p.ColHi)
	defer C.free(unsafe.Pointer(colHi))
	obj := cDoubles(p.Objective)
	defer C.free(unsafe.Pointer(obj))
	rowLo := cDoubles(p.RowLo)
	defer C.free(unsafe.Pointer(rowLo))
	rowHi := cDoubles(p.RowHi)
	defer C.free(unsafe.Pointer(rowHi))

	model := &Model{m: C.Clp_newModel(), rows: p.Rows, columns: p.Columns}
	C.Clp_setLogLevel(model.m, 0)
	C.Clp_loadProblem(model.m, C.int(p.Columns), C.int(p.Rows), start, index, value,
		colLo, colHi, obj, rowLo, rowHi)
	if p.Maximize {
		C.Clp_setOptimizationDirection(model.m, -1)
	} else {
		C.Clp_setOptimizationDirection(model.m, 1)
	}
	runtime.SetFinalizer(model, (*Model).Close)
	return model, nil
}

func (p *Problem) check() error {
	if p.Rows < 0 || p.Columns < 0 {
		return fmt.Errorf("clpmodel: %d rows and %d columns", p.Rows, p.Columns)
	}
	if len(p.Start) != p.Columns+1 || p.Start[0] != 0 {
		return fmt.Errorf("clpmodel: %d column starts for %d columns", len(p.Start), p.Columns)
	}
	for c := 0; c < p.Columns; c++ {
		if p.Start[c+1] < p.Start[c] {
			return fmt.Errorf("clpmodel: column %d starts after column %d", c, c+1)
		}
	}
	nnz := p.Start[p.Columns]
	if len(p.Index) < nnz || len(p.Value) < nnz {
		return fmt.Errorf("clpmodel: %d entries, %d row numbers, %d values", nnz, len(p.Index), len(p.Value))
	}
	seen := make(map[int]bool)
	for c := 0; c < p.Columns; c++ {
		clear(seen)
		for k := p.Start[c]; k < p.Start[c+1]; k++ {
			r := p.Index[k]
			if r < 0 || r >= p.Rows {
				return fmt.Errorf("clpmodel: column %d has an entry in row %d of %d", c, r, p.Rows)
			}
			if seen[r] {
				return fmt.Errorf("clpmodel: column %d has two entries in row %d", c, r)
			}
			seen[r] = true
			if !finite(p.Value[k]) {
				return fmt.Errorf("clpmodel: entry (%d, %d) is %g", r, c, p.Value[k])
			}
		}
	}
	if len(p.ColLo) != p.Columns || len(p.ColHi) != p.Columns || len(p.Objective) != p.Columns {
		return fmt.Errorf("clpmodel: column bounds or objective not of length %d", p.Columns)
	}
	if len(p.RowLo) != p.Rows || len(p.RowHi) != p.Rows {
		return fmt.Errorf("clpmodel: row bounds not of length %d", p.Rows)
	}
	for c := range p.Objective {
		if !finite(p.Objective[c]) || math.IsNaN(p.ColLo[c]) || math.IsNaN(p.ColHi[c]) {
			return fmt.Errorf("clpmodel: column %d: objective %g, bounds [%g, %g]", c, p.Objective[c], p.ColLo[c], p.ColHi[c])
		}
	}
	for r := range p.RowLo {
		if math.IsNaN(p.RowLo[r]) || math.IsNaN(p.RowHi[r]) {
			return fmt.Errorf("clpmodel: row %d: bounds [%g, %g]", r, p.RowLo[r], p.RowHi[r])
		}
	}
	return nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// Close frees the model; a closed model must not be used again.
func (m *Model) Close() {
	if m.m != nil {
		C.Clp_deleteModel(m.m)
		m.m = nil
		runtime.SetFinalizer(m, nil)
	}
}

// Rows is the number of rows.
func (m *Model) Rows() int { return m.rows }

// Columns is the number of columns.
func (m *Model) Columns() int { return m.columns }

// SetCoefficient changes the matrix entry of row r and column c. The
// basis is kept: the next Solve starts from it.
func (m *Model) SetCoefficient(r, c int, v float64) {
	m.checkRow(r)
	m.checkColumn(c)
	if !finite(v) {
		panic(fmt.Sprintf("clpmodel: coefficient (%d, %d) set to %g", r, c, v))
	}
	C.modify_coefficient(m.m, C.int(r), C.int(c), C.double(v))
	runtime.KeepAlive(m)
}

// SetRowBounds changes row r's bounds (±Inf for a free side).
func (m *Model) SetRowBounds(r int, lo, hi float64) {
	m.checkRow(r)
	lower := unsafe.Slice((*float64)(unsafe.Pointer(C.Clp_rowLower(m.m))), m.rows)
	upper := unsafe.Slice((*float64)(unsafe.Pointer(C.Clp_rowUpper(m.m))), m.rows)
	if math.IsNaN(lo) || math.IsNaN(hi) {
		panic(fmt.Sprintf("clpmodel: row %d bounds set to [%g, %g]", r, lo, hi))
	}
	lower[r], upper[r] = clpBound(lo), clpBound(hi)
	// chg* with the model's own arrays tells CLP that bounds changed.
	C.Clp_chgRowLower(m.m, C.Clp_rowLower(m.m))
	C.Clp_chgRowUpper(m.m, C.Clp_rowUpper(m.m))
	runtime.KeepAlive(m)
}

// Status is the basis: one entry per column, then one per row (the row's
// slack), each one of the constants above.
func (m *Model) Status() []byte {
	s := unsafe.Slice((*byte)(unsafe.Pointer(C.Clp_statusArray(m.m))), m.columns+m.rows)
	out := make([]byte, len(s))
	for i, v := range s {
		out[i] = v & 7 // the upper bits are CLP's own flags
	}
	runtime.KeepAlive(m)
	return out
}

// SetStatus sets the basis the next Solve starts from; every entry must be
// one of the constants above. CLP repairs a basis with too few or too many
// basic entries when it factorizes it.
func (m *Model) SetStatus(s []byte) error {
	if len(s) != m.columns+m.rows {
		return fmt.Errorf("clpmodel: status of %d entries for %d columns and %d rows", len(s), m.columns, m.rows)
	}
	for i, v := range s {
		if v > Fixed {
			return fmt.Errorf("clpmodel: status %d of entry %d is not a basis status", v, i)
		}
	}
	if len(s) == 0 {
		return nil
	}
	C.Clp_copyinStatus(m.m, (*C.uchar)(unsafe.Pointer(&s[0])))
	runtime.KeepAlive(m)
	return nil
}

// Solve runs CLP's dual simplex from the current basis (all slacks before
// the first solve).
func (m *Model) Solve() error {
	C.Clp_dual(m.m, 0)
	m.iterations = int(C.Clp_numberIterations(m.m))
	status := int(C.Clp_status(m.m))
	runtime.KeepAlive(m)
	switch status {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("clpmodel: lp with %d rows and %d columns: %w", m.rows, m.columns, ErrInfeasible)
	case 2:
		return fmt.Errorf("clpmodel: lp with %d rows and %d columns: %w", m.rows, m.columns, ErrUnbounded)
	default:
		return fmt.Errorf("clpmodel: lp with %d rows and %d columns: solver stopped with status %d", m.rows, m.columns, status)
	}
}

// Iterations is the number of simplex iterations of the last Solve.
func (m *Model) Iterations() int { return m.iterations }

// Objective is the objective value of the last Solve.
func (m *Model) Objective() float64 {
	v := float64(C.Clp_objectiveValue(m.m))
	runtime.KeepAlive(m)
	return v
}

// ColumnValues copies the primal column solution into dst (grown as needed).
func (m *Model) ColumnValues(dst []float64) []float64 {
	return m.copyOut(dst, C.Clp_primalColumnSolution(m.m), m.columns)
}

// RowDuals copies the row duals (CLP's sign convention) into dst.
func (m *Model) RowDuals(dst []float64) []float64 {
	return m.copyOut(dst, C.Clp_dualRowSolution(m.m), m.rows)
}

// RowValues copies the row activities into dst.
func (m *Model) RowValues(dst []float64) []float64 {
	return m.copyOut(dst, C.Clp_primalRowSolution(m.m), m.rows)
}

// ReducedCosts copies the columns' reduced costs into dst.
func (m *Model) ReducedCosts(dst []float64) []float64 {
	return m.copyOut(dst, C.Clp_dualColumnSolution(m.m), m.columns)
}

func (m *Model) checkRow(r int) {
	if r < 0 || r >= m.rows {
		panic(fmt.Sprintf("clpmodel: row %d of %d", r, m.rows))
	}
}

func (m *Model) checkColumn(c int) {
	if c < 0 || c >= m.columns {
		panic(fmt.Sprintf("clpmodel: column %d of %d", c, m.columns))
	}
}

// copyOut copies n doubles of one of m's solution arrays into dst; m is
// kept alive until the copy is done, so its finalizer cannot free them.
func (m *Model) copyOut(dst []float64, src *C.double, n int) []float64 {
	dst = append(dst[:0], make([]float64, n)...)
	if n > 0 {
		copy(dst, unsafe.Slice((*float64)(unsafe.Pointer(src)), n))
	}
	runtime.KeepAlive(m)
	return dst
}

// clpInfinity is the magnitude CLP treats as unbounded.
const clpInfinity = 1e30

func clpBound(v float64) float64 {
	switch {
	case math.IsInf(v, 1) || v > clpInfinity:
		return clpInfinity
	case math.IsInf(v, -1) || v < -clpInfinity:
		return -clpInfinity
	}
	return v
}

func cInts(v []int) *C.int {
	p := (*C.int)(C.malloc(C.size_t(max(len(v), 1)) * C.size_t(unsafe.Sizeof(C.int(0)))))
	s := unsafe.Slice(p, max(len(v), 1))
	for i, x := range v {
		s[i] = C.int(x)
	}
	return p
}

func cDoubles(v []float64) *C.double {
	p := (*C.double)(C.malloc(C.size_t(max(len(v), 1)) * C.size_t(unsafe.Sizeof(C.double(0)))))
	s := unsafe.Slice((*float64)(unsafe.Pointer(p)), max(len(v), 1))
	for i, x := range v {
		s[i] = clpBound(x)
	}
	return p
}
