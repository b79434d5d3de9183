package estimate

import "math"

// ratios holds, for each ordered pair of columns (t, s), the sum of
// log(rate on t / rate on s) over the rows known on both, and how many
// rows that is. exp(sum/n) is the geometric mean speed ratio of t against
// s: how the jobs that ran on both sped up or slowed down. It is how a GPU
// type that no table knows is learned from the jobs measured there.
type ratios struct {
	sum [][]float64
	n   [][]int
}

// newRatios sums the pairwise log ratios of rows.
func newRatios(rows []poolRow, ncols int) ratios {
	r := ratios{sum: make([][]float64, ncols), n: make([][]int, ncols)}
	for t := range r.sum {
		r.sum[t] = make([]float64, ncols)
		r.n[t] = make([]int, ncols)
	}
	for _, row := range rows {
		r.add(row.logs, 1)
	}
	return r
}

// add adds (sign 1) or removes (sign -1) one row's pairs.
func (r ratios) add(logs []float64, sign int) {
	for t, yt := range logs {
		if math.IsNaN(yt) {
			continue
		}
		for s, ys := range logs {
			if s == t || math.IsNaN(ys) {
				continue
			}
			r.sum[t][s] += float64(sign) * (yt - ys)
			r.n[t][s] += sign
		}
	}
}

// ratioPrediction is a prediction by speed ratios.
type ratioPrediction struct {
	log float64
	// via is the known column with the most support, for the detail.
	via, support int
	ratio        float64
}

// predict estimates the log rate on column t from known log rates (NaN
// where unknown, column skip ignored): each known column s gives
// known[s] + mean log ratio (t vs s), and the answers are averaged
// weighted by how many rows back each ratio. selfLogs, when not nil, is
// the job's own row in the sums, taken out so a job does not vouch for
// itself.
func (r ratios) predict(known []float64, t, skip int, selfLogs []float64) (ratioPrediction, bool) {
	best := ratioPrediction{via: -1}
	total, weight := 0.0, 0
	for s, y := range known {
		if s == t || s == skip || math.IsNaN(y) || t >= len(r.sum) || s >= len(r.sum) {
			continue
		}
		sum, n := r.sum[t][s], r.n[t][s]
		if selfLogs != nil && t < len(selfLogs) && s < len(selfLogs) && !math.IsNaN(selfLogs[t]) && !math.IsNaN(selfLogs[s]) {
			sum -= selfLogs[t] - selfLogs[s]
			n--
		}
		if n <= 0 {
			continue
		}
		total += float64(n) * (y + sum/float64(n))
		weight += n
		if n > best.support {
			best.via, best.support, best.ratio = s, n, math.Exp(sum/float64(n))
		}
	}
	if weight == 0 {
		return best, false
	}
	best.log = total / float64(weight)
	return best, true
}
