package estimate

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// probe is the subject of a question: one job, or all jobs of one model
// pooled (see Models).
type probe struct {
	// model is the tagged model as written.
	model string
	scale int
	// name is the table's name for the tagged model, "" if none matches.
	name string
	// tagRow is the table row of the tagged model at the probe's scale,
	// -1 if none.
	tagRow int
	// tagged is that row's log rates per learned column (nil without one).
	tagged []float64
	// measured holds the accepted measurements per GPU type.
	measured map[string]measured
	// known holds their log rates per learned column, NaN elsewhere.
	known []float64
	// self is the probe's own row among the learned rows (-1 if none): it
	// is never its own fingerprint.
	self int
}

// measured summarizes the accepted intervals on one type.
type measured struct {
	rate      float64
	intervals int
	outliers  int
	last      time.Time
	// jobs is how many jobs were pooled (1 for a single job).
	jobs int
}

// jobProbe builds the probe of one job.
func (e *Estimator) jobProbe(l *learned, key JobKey) *probe {
	p := e.newProbe(l, key.Model, key.Scale)
	j := e.jobs[key.ID]
	if j == nil || j.scale != key.Scale {
		// Measurements at another GPU count do not describe this job.
		return p
	}
	for t, c := range j.cells {
		if c.accepted > 0 {
			p.measured[t] = measured{rate: c.rate, intervals: c.accepted, outliers: c.outliers, last: c.last, jobs: 1}
			p.known[l.col[t]] = math.Log(c.rate)
		}
	}
	if i, ok := l.jobRow[key.ID]; ok {
		p.self = i
	}
	return p
}

// newProbe starts a probe with the tagged model's table row and no
// measurements.
func (e *Estimator) newProbe(l *learned, model string, scale int) *probe {
	p := &probe{model: model, scale: scale, tagRow: -1, self: -1, measured: map[string]measured{}, known: l.newLogs()}
	p.name, p.tagRow = e.ref.resolve(model, scale)
	if p.tagRow >= 0 {
		p.tagged = l.tableLogs(&e.ref, e.ref.rows[p.tagRow].rates)
	}
	return p
}

// rate answers for one type, walking the sources best first.
func (e *Estimator) rate(l *learned, p *probe, t string, now time.Time) Estimate {
	m, wasMeasured := p.measured[t]
	if wasMeasured && now.Sub(m.last) <= e.opts.StaleAfter {
		return Estimate{StepsPerSecond: m.rate, Source: SourceMeasured, Detail: m.detail()}
	}
	if !wasMeasured && p.tagRow >= 0 && e.ref.isType[t] && e.ref.rate(p.tagRow, t) == 0 {
		// The table says the model cannot run there (it does not fit):
		// nothing measured elsewhere overrides that.
		return Estimate{Source: SourceTable, Detail: fmt.Sprintf("reference table: %s cannot run on %s", e.tagLabel(p), t)}
	}
	c, haveCol := l.col[t]
	if haveCol {
		if y, detail, ok := e.predict(l, p, c); ok {
			if wasMeasured {
				return e.blendStale(m, y, detail, now)
			}
			return Estimate{StepsPerSecond: math.Exp(y), Source: SourceEstimated, Detail: "estimated from " + detail}
		}
	}
	if wasMeasured {
		return Estimate{StepsPerSecond: m.rate, Source: SourceEstimated, Detail: staleDetail(m, now)}
	}
	return e.fallback(l, p, t)
}

// blendStale mixes a stale measurement with the estimate from the job's
// other types: the older the measurement, the less it counts.
func (e *Estimator) blendStale(m measured, y float64, detail string, now time.Time) Estimate {
	past := float64(now.Sub(m.last)-e.opts.StaleAfter) / float64(e.opts.StaleAfter)
	w := math.Pow(0.5, math.Max(past, 0))
	rate := math.Exp(w*math.Log(m.rate) + (1-w)*y)
	return Estimate{
		StepsPerSecond: rate,
		Source:         SourceEstimated,
		Detail:         fmt.Sprintf("%s, weighted %.0f%% against an estimate from %s", staleDetail(m, now), 100*w, detail),
	}
}

func staleDetail(m measured, now time.Time) string {
	return fmt.Sprintf("estimated: measured %.3g steps/s %s ago (stale)", m.rate, now.Sub(m.last).Round(time.Second))
}

func (m measured) detail() string {
	s := fmt.Sprintf("measured %.3g steps/s over %d interval%s", m.rate, m.intervals, plural(m.intervals))
	if m.jobs > 1 {
		s += fmt.Sprintf(" of %d jobs", m.jobs)
	}
	if m.outliers > 0 {
		s += fmt.Sprintf(" (%d outlier%s dropped)", m.outliers, plural(m.outliers))
	}
	return s
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func (e *Estimator) tagLabel(p *probe) string {
	return e.ref.rows[p.tagRow].key.String()
}

// predict estimates the log rate on column c from the probe's
// measurements on its other types. For a type the table knows:
//
//  1. the tagged model's table row scaled to the measurements, as long as
//     its shape agrees with them (the user said what the job is);
//  2. otherwise, with at least two types measured, the fingerprint: the
//     known jobs of closest shape, scaled;
//  3. otherwise (one type measured: no shape to match) the low-rank
//     completion, whose shape for the job is then that of its family at
//     its GPU count.
//
// Leave-one-out over the reference table picked this order: with two
// measured types the fingerprint alone did better than blended with the
// completion (see docs/estimator.md).
//
// For a type outside the table, the speed ratios of the jobs measured
// both there and on the probe's types.
func (e *Estimator) predict(l *learned, p *probe, c int) (float64, string, bool) {
	if !hasKnown(p.known, c) {
		return 0, "", false
	}
	if !l.inTable[c] {
		return e.predictByRatio(l, p, c)
	}
	mismatch := ""
	if p.tagged != nil && !math.IsNaN(p.tagged[c]) {
		shift, err, n := fit(p.tagged, p.known, c)
		switch {
		case n == 1 || n > 1 && math.Sqrt(err) <= e.opts.TagTolerance:
			return p.tagged[c] + shift, fmt.Sprintf("reference table: %s scaled to its measurements", e.tagLabel(p)), true
		case n > 1:
			mismatch = fmt.Sprintf(" (its measurements do not match %s)", e.tagLabel(p))
		}
	}
	q := fingerprintQuery{known: p.known, target: c, self: p.self, family: family(p.model), scale: p.scale, neighbors: e.opts.Neighbors}
	if top, y, ok := fingerprint(l.rows, q); ok {
		return y, "fingerprint " + matchLabels(l, top) + mismatch, true
	}
	if y, ok := e.complete(l, p, c); ok {
		return y, fmt.Sprintf("matrix completion over %d jobs%s", len(l.rows), mismatch), true
	}
	return 0, "", false
}

// matchLabels names the fingerprint's rows.
func matchLabels(l *learned, top []match) string {
	names := make([]string, len(top))
	for i, m := range top {
		names[i] = l.rows[m.row].label
	}
	return strings.Join(names, ", ")
}

// hasKnown says whether known has a value outside column skip.
func hasKnown(known []float64, skip int) bool {
	for t, y := range known {
		if t != skip && !math.IsNaN(y) {
			return true
		}
	}
	return false
}

// complete predicts column c by the low-rank model: the probe's level and
// shape are fitted to its known rates, its shape pulled towards that of
// its family at its GPU count.
func (e *Estimator) complete(l *learned, p *probe, c int) (float64, bool) {
	m := l.model
	if !m.usable(c) {
		return 0, false
	}
	u := make([]float64, m.rank)
	a, ok := m.solveRow(p.known, c, l.prior(family(p.model), p.scale), e.opts.PriorWeight, u)
	if !ok {
		return 0, false
	}
	return m.predict(a, u, c), true
}

// predictByRatio predicts a type outside the table from speed ratios.
func (e *Estimator) predictByRatio(l *learned, p *probe, c int) (float64, string, bool) {
	var self []float64
	if p.self >= 0 {
		self = l.rows[p.self].logs
	}
	r, ok := l.ratios.predict(p.known, c, c, self)
	if !ok {
		return 0, "", false
	}
	return r.log, ratioDetail(l, c, r), true
}

func ratioDetail(l *learned, c int, r ratioPrediction) string {
	return fmt.Sprintf("%s ≈ %.3g× %s over %d job%s", l.cols[c], r.ratio, l.cols[r.via], r.support, plural(r.support))
}

// fallback answers when the probe's measurements cannot predict type t:
// the tagged model's table entry, then a default.
func (e *Estimator) fallback(l *learned, p *probe, t string) Estimate {
	if p.tagRow >= 0 {
		return e.tableFallback(l, p, t)
	}
	if slow, ok := slowest(p); ok {
		// Measured elsewhere, nothing to compare with: assume the type
		// is no faster than the slowest type it ran on, so that the
		// policy does not send it there on a guess.
		return Estimate{StepsPerSecond: slow, Source: SourceDefault, Detail: "default: as fast as its slowest measured type"}
	}
	return Estimate{StepsPerSecond: 1, Source: SourceDefault, Detail: "default: equal on every type" + e.noTableReason(p)}
}

// tableFallback answers from the tagged model's table row; a type outside
// the table is predicted from the row by the speed ratios measured there,
// or else assumed as slow as the row's slowest type.
func (e *Estimator) tableFallback(l *learned, p *probe, t string) Estimate {
	label := e.tagLabel(p)
	if e.ref.isType[t] {
		return Estimate{StepsPerSecond: e.ref.rate(p.tagRow, t), Source: SourceTable, Detail: "reference table: " + label}
	}
	// A job measured on some types runs at its own scale, not the
	// table's (its steps may be smaller or larger than the reference
	// model's): the row is scaled to its measurements first, as predict
	// does for the table's own types.
	row, shift := p.tagged, 0.0
	if s, _, n := fit(p.tagged, p.known, -1); n > 0 {
		shift = s
		row = make([]float64, len(p.tagged))
		for i, y := range p.tagged {
			row[i] = y + shift
		}
		label += " scaled to its measurements"
	}
	if c, ok := l.col[t]; ok {
		if r, ok := l.ratios.predict(row, c, c, nil); ok {
			return Estimate{
				StepsPerSecond: math.Exp(r.log),
				Source:         SourceEstimated,
				Detail:         fmt.Sprintf("estimated from reference table: %s and %s", label, ratioDetail(l, c, r)),
			}
		}
	}
	slow := 0.0
	for _, x := range e.ref.rows[p.tagRow].rates {
		if x > 0 && (slow == 0 || x < slow) {
			slow = x
		}
	}
	return Estimate{StepsPerSecond: slow * math.Exp(shift), Source: SourceTable, Detail: fmt.Sprintf("reference table: %s (%s is not in the table: as slow as its slowest type)", label, t)}
}

// slowest is the lowest measured rate of the probe.
func slowest(p *probe) (float64, bool) {
	slow := 0.0
	for _, m := range p.measured {
		if slow == 0 || m.rate < slow {
			slow = m.rate
		}
	}
	return slow, slow > 0
}

func (e *Estimator) noTableReason(p *probe) string {
	switch {
	case p.model == "":
		return " (no model in the tag)"
	case p.name == "":
		return " (model not in the reference table)"
	default:
		return fmt.Sprintf(" (%s has no table entry for %d GPUs)", p.name, p.scale)
	}
}
