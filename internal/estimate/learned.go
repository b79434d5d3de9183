package estimate

import (
	"fmt"
	"math"
	"slices"
	"sort"
)

// learned is what the estimator knows from the table and all measurements
// at one version: the job × type matrix and the models fitted to it.
type learned struct {
	version uint64
	// cols are the table's types, then every other measured type, sorted.
	cols []string
	col  map[string]int
	// inTable[c] says whether the table knows column c.
	inTable []bool
	// rows are the table's job types, then the measured jobs by id.
	rows   []poolRow
	jobRow map[string]int
	model  *lowRank
	ratios ratios
	// priors caches shape priors by family and GPU count.
	priors map[priorKey][]float64
}

type priorKey struct {
	family string
	scale  int
}

// learn returns the learned state, rebuilding it when measurements
// changed since the last call. The caller holds e.mu.
func (e *Estimator) learn() *learned {
	if e.learned != nil && e.learned.version == e.version {
		return e.learned
	}
	l := &learned{version: e.version, col: map[string]int{}, jobRow: map[string]int{}, priors: map[priorKey][]float64{}}
	l.addColumns(e.ref.types, true)
	l.addColumns(e.measuredTypes(), false)
	l.addReferenceRows(&e.ref)
	l.addJobRows(e.jobs)
	logs := make([][]float64, len(l.rows))
	for i, r := range l.rows {
		logs[i] = r.logs
	}
	l.model = fitLowRank(logs, len(l.cols), e.opts.Rank, e.opts.Ridge, e.opts.MinSupport)
	l.ratios = newRatios(l.rows, len(l.cols))
	e.learned = l
	return l
}

// measuredTypes lists the GPU types measured anywhere, sorted.
func (e *Estimator) measuredTypes() []string {
	seen := map[string]bool{}
	for _, j := range e.jobs {
		for t, c := range j.cells {
			if c.accepted > 0 {
				seen[t] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for t := range seen {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

func (l *learned) addColumns(types []string, inTable bool) {
	for _, t := range types {
		if _, ok := l.col[t]; !ok {
			l.col[t] = len(l.cols)
			l.cols = append(l.cols, t)
			l.inTable = append(l.inTable, inTable)
		}
	}
}

// newLogs is a row of unknown log rates.
func (l *learned) newLogs() []float64 {
	logs := make([]float64, len(l.cols))
	for i := range logs {
		logs[i] = math.NaN()
	}
	return logs
}

// addReferenceRows adds the table's job types. A zero rate means the job
// type cannot run on the type; it is left unknown rather than fitted, so
// that it neither drags the fit nor is ever predicted for another job.
func (l *learned) addReferenceRows(ref *reference) {
	for _, r := range ref.rows {
		l.rows = append(l.rows, poolRow{label: r.key.String(), family: family(r.key.Model), scale: r.key.ScaleFactor, logs: l.tableLogs(ref, r.rates)})
	}
}

// tableLogs places a table row's rates in the learned columns.
func (l *learned) tableLogs(ref *reference, rates []float64) []float64 {
	logs := l.newLogs()
	for k, t := range ref.types {
		if rates[k] > 0 {
			logs[l.col[t]] = math.Log(rates[k])
		}
	}
	return logs
}

// addJobRows adds every job with at least one accepted measurement,
// fresh or not: an old rate is still evidence of how types compare.
func (l *learned) addJobRows(jobs map[string]*job) {
	ids := make([]string, 0, len(jobs))
	for id := range jobs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		j := jobs[id]
		logs := l.newLogs()
		n := 0
		for t, c := range j.cells {
			if c.accepted > 0 {
				logs[l.col[t]] = math.Log(c.rate)
				n++
			}
		}
		if n == 0 {
			continue
		}
		l.jobRow[id] = len(l.rows)
		l.rows = append(l.rows, poolRow{label: jobLabel(id, j.model), family: family(j.model), scale: j.scale, logs: logs})
	}
}

func jobLabel(id, model string) string {
	if model == "" {
		return "job " + id
	}
	return fmt.Sprintf("job %s (%s)", id, model)
}

// prior is the expected shape of a job of the given family and GPU count
// before its shape is observed: the mean fitted shape of the known rows
// of that family at that count, else of all rows at that count, else
// none (zero). How much a job gains from a faster type depends on what it
// computes (its family) and on how many GPUs it spans (communication).
func (l *learned) prior(fam string, scale int) []float64 {
	key := priorKey{fam, scale}
	if p, ok := l.priors[key]; ok {
		return p
	}
	p := l.meanShape(func(r poolRow) bool { return fam != "" && r.family == fam && r.scale == scale })
	if p == nil {
		p = l.meanShape(func(r poolRow) bool { return r.scale == scale })
	}
	l.priors[key] = p
	return p
}

// meanShape averages the fitted shapes of the rows that keep selects, nil
// when none does.
func (l *learned) meanShape(keep func(poolRow) bool) []float64 {
	var sum []float64
	n := 0
	for i, r := range l.rows {
		u := l.model.u[i]
		if u == nil || !keep(r) {
			continue
		}
		if sum == nil {
			sum = make([]float64, len(u))
		}
		for k := range u {
			sum[k] += u[k]
		}
		n++
	}
	for k := range sum {
		sum[k] /= float64(n)
	}
	return sum
}
