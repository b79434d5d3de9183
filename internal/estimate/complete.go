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
// in a few dozen. Leave-one-out median errors over the reference table
// move by less than half a percent from 20 passes up.
const completionIters = 100

// completionTolerance is the relative decrease of the objective below
// which the fit stops.
const completionTolerance = 1e-5

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
	nu := make([]float64, rank)
	prev := 0.0
	for it := 0; it < completionIters; it++ {
		for i, row := range rows {
			na, ok := m.solveRow(row, -1, nil, m.ridgeU, nu)
			if ok {
				a[i], fitted[i] = na, true
				copy(u[i], nu)
			}
		}
		for t := range m.b {
			m.solveColumn(t, rows, a, u)
		}
		// Alternating least squares lowers the objective at every pass but
		// crawls along directions that leave predictions unchanged (trading
		// scale between u and v); stop once the objective settles rather
		// than the parameters.
		obj := m.objective(rows, a, u)
		if it > 0 && prev-obj <= completionTolerance*prev {
			break
		}
		prev = obj
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

// objective is the regularized squared error the fit minimizes.
func (m *lowRank) objective(rows [][]float64, a []float64, u [][]float64) float64 {
	sum := 0.0
	for i, row := range rows {
		for t, y := range row {
			if !math.IsNaN(y) {
				d := y - m.predict(a[i], u[i], t)
				sum += d * d
			}
		}
		sum += m.ridgeU * dot(u[i], u[i])
	}
	for t := range m.v {
		sum += m.ridgeU * dot(m.v[t], m.v[t])
	}
	return sum
}

func dot(x, y []float64) float64 {
	s := 0.0
	for i := range x {
		s += x[i] * y[i]
	}
	return s
}

// solveRow fits a row's level and shape to its known log rates, skipping
// column skip (-1 for none) and columns seen in too few rows; the shape
// goes to u. The shape is pulled towards prior (zero when nil) with
// weight ridge: with one known rate the shape is not observable and the
// prior is the answer.
func (m *lowRank) solveRow(row []float64, skip int, prior []float64, ridge float64, u []float64) (float64, bool) {
	q := normalEq{n: m.rank + 1}
	var x [maxParams]float64
	count := 0
	for t, y := range row {
		if t == skip || t >= len(m.b) || math.IsNaN(y) || !m.usable(t) {
			continue
		}
		x[0] = 1
		copy(x[1:], m.v[t])
		q.add(&x, y-m.mu-m.b[t])
		count++
	}
	if count == 0 {
		return 0, false
	}
	q.a[0][0] += levelRidge
	for k := 1; k < q.n; k++ {
		q.a[k][k] += ridge
		if prior != nil {
			q.b[k] += ridge * prior[k-1]
		}
	}
	theta, err := q.solve()
	if err != nil {
		return 0, false
	}
	copy(u, theta[1:q.n])
	return theta[0], true
}

// solveColumn refits column t's offset and factors to the rows' current
// parameters.
func (m *lowRank) solveColumn(t int, rows [][]float64, a []float64, u [][]float64) {
	q := normalEq{n: m.rank + 1}
	var x [maxParams]float64
	count := 0
	for i, row := range rows {
		if t >= len(row) || math.IsNaN(row[t]) {
			continue
		}
		x[0] = 1
		copy(x[1:], u[i])
		q.add(&x, row[t]-m.mu-a[i])
		count++
	}
	if count == 0 {
		return
	}
	q.a[0][0] += levelRidge
	for k := 1; k < q.n; k++ {
		q.a[k][k] += m.ridgeU
	}
	theta, err := q.solve()
	if err != nil {
		return
	}
	m.b[t] = theta[0]
	copy(m.v[t], theta[1:q.n])
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

// maxParams bounds the parameters of one least-squares solve: a level
// and at most four shape factors (Options.Rank).
const maxParams = 5

// normalEq holds the normal equations of a small least squares with n
// parameters, on the stack: the fit solves thousands of them per pass.
type normalEq struct {
	n int
	a [maxParams][maxParams]float64
	b [maxParams]float64
}

// add adds the observation y ≈ x·θ.
func (q *normalEq) add(x *[maxParams]float64, y float64) {
	for i := 0; i < q.n; i++ {
		q.b[i] += x[i] * y
		for j := 0; j < q.n; j++ {
			q.a[i][j] += x[i] * x[j]
		}
	}
}

var errSingular = errors.New("singular system")

// solve solves the equations by Gaussian elimination with partial
// pivoting, destroying them.
func (q *normalEq) solve() ([maxParams]float64, error) {
	var x [maxParams]float64
	n, a, b := q.n, &q.a, &q.b
	for col := 0; col < n; col++ {
		p := col
		for r := col + 1; r < n; r++ {
			if math.Abs(a[r][col]) > math.Abs(a[p][col]) {
				p = r
			}
		}
		if math.Abs(a[p][col]) < 1e-12 {
			return x, errSingular
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
	for r := n - 1; r >= 0; r-- {
		s := b[r]
		for c := r + 1; c < n; c++ {
			s -= a[r][c] * x[c]
		}
		x[r] = s / a[r][r]
	}
	return x, nil
}
