package estimate

import (
	"errors"
	"math"
)

// lowRank is a completion of the job × type matrix of log rates:
//
//	log rate[i][t] ≈ mu + a[i] + b[t] + u[i]·v[t]
//
// a[i] is how fast job i is overall, b[t] how fast type t is for the
// average job, and the rank-r term how job i's speed-up across types
// differs from the average (a large model gains more from a V100 than a
// recommendation model does). Working with logs makes the fit care about
// ratios, which is what scheduling cares about: 10% off on a slow job
// matters as much as 10% off on a fast one.
type lowRank struct {
	rank int
	mu   float64
	b    []float64
	v    [][]float64
	// support counts the rows observed in each column: a column seen in
	// too few rows has an unreliable b and v.
	support []int
	// u holds the fitted shape of each row, nil for rows with no usable
	// rate; averages of them are the shape priors of new jobs.
	u      [][]float64
	ridgeU float64
	// minSupport is the support a column needs to be used or predicted.
	minSupport int
}

// Small ridge on the level terms keeps the normal equations solvable when
// a row or column has a single observation, without pulling the levels
// (which the data always determine well) away from their values.
const levelRidge = 1e-6

// completionIters bounds the alternating passes; the fit usually settles
// in a few dozen.
const completionIters = 200

// fitLowRank fits the model to rows of log rates (NaN where unknown).
func fitLowRank(rows [][]float64, ncols, rank int, ridge float64, minSupport int) *lowRank {
	m := &lowRank{
		rank:    rank,
		b:       make([]float64, ncols),
		v:       make([][]float64, ncols),
		support: make([]int, ncols),
		ridgeU:  ridge,

		minSupport: minSupport,
	}
	a := make([]float64, len(rows))
	u := make([][]float64, len(rows))
	for i := range u {
		u[i] = make([]float64, rank)
	}
	fitted := make([]bool, len(rows))
	m.initialize(rows)
	for it := 0; it < completionIters; it++ {
		change := 0.0
		for i, row := range rows {
			na, nu, ok := m.solveRow(row, -1, nil, m.ridgeU)
			if !ok {
				continue
			}
			change = math.Max(change, diff(a[i], u[i], na, nu))
			a[i], u[i], fitted[i] = na, nu, true
		}
		for t := range m.b {
			change = math.Max(change, m.solveColumn(t, rows, a, u))
		}
		if change < 1e-9 {
			break
		}
	}
	m.u = make([][]float64, len(rows))
	for i := range u {
		if fitted[i] {
			m.u[i] = u[i]
		}
	}
	return m
}

// initialize sets mu to the mean log rate, b to each column's mean offset
// and v to small distinct values: starting v at zero would leave u
// undetermined in the first pass and the factors would never grow.
func (m *lowRank) initialize(rows [][]float64) {
	sum, n := 0.0, 0
	colSum := make([]float64, len(m.b))
	for _, row := range rows {
		for t, y := range row {
			if !math.IsNaN(y) {
				sum += y
				n++
				colSum[t] += y
				m.support[t]++
			}
		}
	}
	if n > 0 {
		m.mu = sum / float64(n)
	}
	for t := range m.b {
		if m.support[t] > 0 {
			m.b[t] = colSum[t]/float64(m.support[t]) - m.mu
		}
		m.v[t] = make([]float64, m.rank)
		for k := range m.v[t] {
			// Deterministic, different per column and factor.
			m.v[t][k] = 0.1 * math.Cos(float64(1+t*(k+2)))
		}
	}
}

// diff is the largest change between two row parameter sets.
func diff(a0 float64, u0 []float64, a1 float64, u1 []float64) float64 {
	d := math.Abs(a1 - a0)
	for k := range u0 {
		d = math.Max(d, math.Abs(u1[k]-u0[k]))
	}
	return d
}

// solveRow fits a row's level and shape to its known log rates, skipping
// column skip (-1 for none) and columns seen in too few rows. The shape is
// pulled towards prior (zero when nil) by the ridge: with one known rate
// the shape is not observable and the prior is the answer.
func (m *lowRank) solveRow(row []float64, skip int, prior []float64, ridge float64) (float64, []float64, bool) {
	n := m.rank + 1
	ata, atb := newNormal(n)
	x := make([]float64, n)
	count := 0
	for t, y := range row {
		if t == skip || t >= len(m.b) || math.IsNaN(y) || !m.usable(t) {
			continue
		}
		x[0] = 1
		copy(x[1:], m.v[t])
		accumulate(ata, atb, x, y-m.mu-m.b[t])
		count++
	}
	if count == 0 {
		return 0, nil, false
	}
	ata[0][0] += levelRidge
	for k := 1; k < n; k++ {
		ata[k][k] += ridge
		if prior != nil {
			atb[k] += ridge * prior[k-1]
		}
	}
	theta, err := solve(ata, atb)
	if err != nil {
		return 0, nil, false
	}
	return theta[0], theta[1:], true
}

// solveColumn refits column t's offset and factors to the rows' current
// parameters and returns how much they moved.
func (m *lowRank) solveColumn(t int, rows [][]float64, a []float64, u [][]float64) float64 {
	n := m.rank + 1
	ata, atb := newNormal(n)
	x := make([]float64, n)
	count := 0
	for i, row := range rows {
		if t >= len(row) || math.IsNaN(row[t]) {
			continue
		}
		x[0] = 1
		copy(x[1:], u[i])
		accumulate(ata, atb, x, row[t]-m.mu-a[i])
		count++
	}
	if count == 0 {
		return 0
	}
	ata[0][0] += levelRidge
	for k := 1; k < n; k++ {
		ata[k][k] += m.ridgeU
	}
	theta, err := solve(ata, atb)
	if err != nil {
		return 0
	}
	change := diff(m.b[t], m.v[t], theta[0], theta[1:])
	m.b[t] = theta[0]
	copy(m.v[t], theta[1:])
	return change
}

// usable says whether column t is seen in enough rows to fit or predict.
func (m *lowRank) usable(t int) bool {
	return t < len(m.support) && m.support[t] >= m.minSupport
}

// predict is the log rate of a row with level a and shape u on column t.
func (m *lowRank) predict(a float64, u []float64, t int) float64 {
	y := m.mu + a + m.b[t]
	for k := range u {
		y += u[k] * m.v[t][k]
	}
	return y
}

// newNormal allocates the normal equations of an n-parameter least squares.
func newNormal(n int) ([][]float64, []float64) {
	ata := make([][]float64, n)
	for i := range ata {
		ata[i] = make([]float64, n)
	}
	return ata, make([]float64, n)
}

// accumulate adds the observation y ≈ x·θ to the normal equations.
func accumulate(ata [][]float64, atb []float64, x []float64, y float64) {
	for i := range x {
		atb[i] += x[i] * y
		for j := range x {
			ata[i][j] += x[i] * x[j]
		}
	}
}

var errSingular = errors.New("singular system")

// solve solves the small dense system a·x = b by Gaussian elimination
// with partial pivoting; a and b are overwritten.
func solve(a [][]float64, b []float64) ([]float64, error) {
	n := len(b)
	for col := 0; col < n; col++ {
		p := col
		for r := col + 1; r < n; r++ {
			if math.Abs(a[r][col]) > math.Abs(a[p][col]) {
				p = r
			}
		}
		if math.Abs(a[p][col]) < 1e-12 {
			return nil, errSingular
		}
		a[col], a[p] = a[p], a[col]
		b[col], b[p] = b[p], b[col]
		for r := col + 1; r < n; r++ {
			f := a[r][col] / a[col][col]
			for c := col; c < n; c++ {
				a[r][c] -= f * a[col][c]
			}
			b[r] -= f * b[col]
		}
	}
	x := make([]float64, n)
	for r := n - 1; r >= 0; r-- {
		s := b[r]
		for c := r + 1; c < n; c++ {
			s -= a[r][c] * x[c]
		}
		x[r] = s / a[r][r]
	}
	return x, nil
}
