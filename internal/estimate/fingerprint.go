package estimate

import "math"

// poolRow is one known job in the job × type matrix: a reference job type
// or a measured job.
type poolRow struct {
	// label names the row in details: "ResNet-50 (batch size 64) x1" or
	// "job 42 (ResNet-50 (batch size 64))".
	label string
	// family is the model's name without its batch size (see family).
	family string
	scale  int
	// logs holds log rates per column, NaN where unknown.
	logs []float64
}

// match is one candidate of a fingerprint search.
type match struct {
	row int
	// log is the predicted log rate on the target column.
	log float64
	// overlap is how many of the job's known types the row shares.
	overlap int
	// err is the mean squared log ratio on those types once the row is
	// scaled to the job (0 is a perfect match of shape), plus the
	// penalties for another family or GPU count.
	err float64
}

// minFingerprintOverlap is the fewest shared types that can show a shape:
// with one, every row matches perfectly once scaled.
const minFingerprintOverlap = 2

// otherFamilyPenalty and otherScalePenalty are added to the error of a
// candidate of another family or another GPU count: such a candidate must
// match the shape better by this much (0.2 is about 45% per type) to win.
// Models of one family, and jobs spanning as many GPUs, gain alike from a
// faster type; a shape seen on two or three types alone matches
// unrelated jobs by chance. Leave-one-out over the reference table halves
// the error with them.
const (
	otherFamilyPenalty = 0.2
	otherScalePenalty  = 0.2
)

// fingerprintQuery is the job a fingerprint search is for.
type fingerprintQuery struct {
	// known holds the job's log rates per column, NaN where unknown.
	known []float64
	// target is the column to predict; it is ignored in known.
	target int
	// self is the job's own row (-1 for none): it is never a match.
	self   int
	family string
	scale  int
	// neighbors is how many of the closest rows are averaged.
	neighbors int
}

// fingerprint finds the rows whose rates, scaled to the job's level, are
// closest to the job's known rates, among rows that know the target
// column and share at least two of the job's types. More shared types win
// first, since a shape seen on more types is better evidence; the error
// (with the penalties above) breaks ties. It returns the closest rows,
// best first, and the prediction: the mean of their scaled log rates on
// the target, over the rows sharing as many types as the best one.
// Averaging a few neighbours rather than taking one guards against a
// single row that matches by chance.
func fingerprint(rows []poolRow, q fingerprintQuery) ([]match, float64, bool) {
	var top []match
	for i, r := range rows {
		if i == q.self || q.target >= len(r.logs) || math.IsNaN(r.logs[q.target]) {
			continue
		}
		shift, err, n := fit(r.logs, q.known, q.target)
		if n < minFingerprintOverlap {
			continue
		}
		if q.family == "" || r.family != q.family {
			// Untagged jobs share no family: nothing says they compute alike.
			err += otherFamilyPenalty
		}
		if r.scale != q.scale {
			err += otherScalePenalty
		}
		top = insertTop(top, match{row: i, log: r.logs[q.target] + shift, overlap: n, err: err}, q.neighbors)
	}
	if len(top) == 0 {
		return nil, 0, false
	}
	sum, n := 0.0, 0
	for _, m := range top {
		if m.overlap == top[0].overlap {
			sum += m.log
			n++
		}
	}
	return top[:n], sum / float64(n), true
}

// better orders matches: more shared types, then lower error.
func better(a, b match) bool {
	return a.overlap > b.overlap || a.overlap == b.overlap && a.err < b.err
}

// insertTop inserts m into top, kept sorted best first and at most k long.
func insertTop(top []match, m match, k int) []match {
	i := len(top)
	for i > 0 && better(m, top[i-1]) {
		i--
	}
	if i >= k {
		return top
	}
	if len(top) < k {
		top = append(top, match{})
	}
	copy(top[i+1:], top[i:])
	top[i] = m
	return top
}

// fit scales candidate to known in log space over the columns both know
// (except skip): it returns the shift (mean log ratio), the mean squared
// residual and the number of shared columns.
func fit(candidate, known []float64, skip int) (shift, err float64, n int) {
	sum := 0.0
	for t, y := range known {
		if t == skip || t >= len(candidate) || math.IsNaN(y) || math.IsNaN(candidate[t]) {
			continue
		}
		sum += y - candidate[t]
		n++
	}
	if n == 0 {
		return 0, 0, 0
	}
	shift = sum / float64(n)
	for t, y := range known {
		if t == skip || t >= len(candidate) || math.IsNaN(y) || math.IsNaN(candidate[t]) {
			continue
		}
		d := y - candidate[t] - shift
		err += d * d
	}
	return shift, err / float64(n), n
}
