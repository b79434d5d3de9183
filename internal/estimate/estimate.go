package estimate

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
	"github.com/gavel-slurm/gavel-slurm/policy"
)

// Source says where a rate comes from, best first.
type Source string

const (
	// SourceMeasured is the job's own fresh rate on the type.
	SourceMeasured Source = "measured"
	// SourceEstimated is predicted from the job's rates on other types (or
	// from a measurement that has gone stale).
	SourceEstimated Source = "estimated"
	// SourceTable is the reference table's entry for the tagged model.
	SourceTable Source = "table"
	// SourceDefault is a guess: the same rate on every type.
	SourceDefault Source = "default"
)

// Measurement is one interval of a job's progress on one GPU type, as a
// node collector reports it.
type Measurement struct {
	JobID string
	// Model is the model named in the job's tag, as written ("" if none).
	Model string
	// Scale is the number of GPUs the job runs on.
	Scale int
	// Type is the GPU type the job ran on during the interval.
	Type string
	// StepsPerSecond is the whole job's rate over the interval.
	StepsPerSecond float64
	// At is the end of the interval.
	At time.Time
	// SinceStart is how long the job had been running on this placement
	// at the end of the interval; intervals within the warm-up are skipped.
	SinceStart time.Duration
	// Steps is the job's total steps done at At, when it reports its
	// progress (0 when it does not).
	Steps int64
	// Shared is set when the job shared its GPU with another job during
	// the interval: its progress counts, its rate is no rate of the job
	// alone and is left out of the estimates.
	Shared bool
}

// JobKey names the job a question is about.
type JobKey struct {
	ID string
	// Model is the model named in the job's tag ("" if none).
	Model string
	// Scale is the number of GPUs the job asks for.
	Scale int
}

// Estimate is one job's rate on one GPU type.
type Estimate struct {
	StepsPerSecond float64
	Source         Source
	// Detail explains the figure for status output.
	Detail string
}

// Options tune the estimator. Zero fields take the defaults of
// DefaultOptions.
type Options struct {
	// WarmUp is how long after a start a job's intervals are skipped.
	// SinceStart is taken at the end of an interval, so WarmUp must be
	// longer than one collector interval for the first one to be skipped;
	// the default suits collectors that report every minute.
	WarmUp time.Duration
	// StaleAfter is the age past which a type's measurement no longer
	// counts as measured. Past it, the measurement is blended with the
	// estimate from the job's other types, its weight halving every
	// further StaleAfter.
	StaleAfter time.Duration
	// Alpha is the weight of a new interval in the moving average.
	Alpha float64
	// OutlierFactor rejects an interval whose rate is more than this
	// factor above or below the running median.
	OutlierFactor float64
	// OutlierWindow is how many recent intervals the running median spans.
	OutlierWindow int
	// OutlierMinSamples is how many intervals the median needs before it
	// rejects anything.
	OutlierMinSamples int
	// Rank is the number of shape factors of the matrix completion.
	Rank int
	// Ridge regularizes the completion's shape factors while they are
	// fitted to the known jobs.
	Ridge float64
	// PriorWeight pulls a job's shape in the completion towards the mean
	// shape of its family at its GPU count; larger trusts the job's own
	// measurements less.
	PriorWeight float64
	// Neighbors is how many of the closest known jobs a fingerprint
	// averages.
	Neighbors int
	// TagTolerance is the largest root mean square log error between a
	// job's measurements and its tagged model's table row (scaled) at
	// which the row is still trusted to predict its other types. 0.2 is
	// about 22% off per type.
	TagTolerance float64
	// MinSupport is how many jobs a GPU type needs measured on it before
	// the completion predicts rates there.
	MinSupport int
}

// DefaultOptions are the settings used for unset fields.
func DefaultOptions() Options {
	return Options{
		WarmUp:            2 * time.Minute,
		StaleAfter:        6 * time.Hour,
		Alpha:             0.5, // Gavel's moving average weight for online updates
		OutlierFactor:     2,
		OutlierWindow:     9,
		OutlierMinSamples: 3,
		Rank:              1,
		Ridge:             0.1,
		PriorWeight:       1,
		Neighbors:         3,
		TagTolerance:      0.2,
		MinSupport:        3,
	}
}

// withDefaults fills unset fields and checks the rest.
func (o Options) withDefaults() (Options, error) {
	d := DefaultOptions()
	setDuration(&o.WarmUp, d.WarmUp)
	setDuration(&o.StaleAfter, d.StaleAfter)
	setFloat(&o.Alpha, d.Alpha)
	setFloat(&o.OutlierFactor, d.OutlierFactor)
	setInt(&o.OutlierWindow, d.OutlierWindow)
	setInt(&o.OutlierMinSamples, d.OutlierMinSamples)
	setInt(&o.Rank, d.Rank)
	setFloat(&o.Ridge, d.Ridge)
	setFloat(&o.PriorWeight, d.PriorWeight)
	setInt(&o.Neighbors, d.Neighbors)
	setFloat(&o.TagTolerance, d.TagTolerance)
	setInt(&o.MinSupport, d.MinSupport)
	switch {
	case o.WarmUp < 0 || o.StaleAfter < 0:
		return o, errors.New("warm-up and staleness limit must not be negative")
	case o.Alpha < 0 || o.Alpha > 1:
		return o, fmt.Errorf("alpha %v is outside (0, 1]", o.Alpha)
	case o.OutlierFactor <= 1:
		return o, fmt.Errorf("outlier factor %v must be above 1", o.OutlierFactor)
	case o.OutlierWindow < 1 || o.OutlierMinSamples < 1 || o.MinSupport < 1 || o.Neighbors < 1:
		return o, errors.New("outlier window, outlier minimum samples, minimum support and neighbors must be positive")
	case o.OutlierMinSamples > o.OutlierWindow:
		// The window could never hold enough intervals to judge one: no
		// outlier would ever be rejected.
		return o, fmt.Errorf("outlier minimum samples %d exceed the outlier window %d", o.OutlierMinSamples, o.OutlierWindow)
	case o.Rank < 0 || o.Rank > 4:
		return o, fmt.Errorf("rank %d is outside 1..4", o.Rank)
	case o.Ridge < 0 || o.PriorWeight < 0 || o.TagTolerance < 0:
		return o, errors.New("ridge, prior weight and tag tolerance must not be negative")
	}
	return o, nil
}

func setDuration(p *time.Duration, d time.Duration) {
	if *p == 0 {
		*p = d
	}
}

func setFloat(p *float64, d float64) {
	if *p == 0 {
		*p = d
	}
}

func setInt(p *int, d int) {
	if *p == 0 {
		*p = d
	}
}

// Estimator holds the reference table, each job's measurements per GPU
// type and what is learned from them. It is safe for concurrent use.
type Estimator struct {
	opts Options
	ref  reference

	mu   sync.Mutex
	jobs map[string]*job
	// version counts changes to the accepted figures; the learned state
	// is rebuilt when it moved.
	version uint64
	learned *learned
	// latest is the newest measurement time seen, the clock of last
	// resort for callers that have none (see Models).
	latest time.Time
}

// job is one job's measurements.
type job struct {
	model string
	// identity groups the jobs of one model (see modelIdentity).
	identity string
	scale    int
	cells    map[string]*cell
	// steps is the latest progress reported, at stepsAt.
	steps   int64
	stepsAt time.Time
}

// New returns an estimator over the reference table.
func New(table *throughputs.Table, opts Options) (*Estimator, error) {
	ref, err := newReference(table)
	if err != nil {
		return nil, err
	}
	return newEstimator(ref, opts)
}

func newEstimator(ref reference, opts Options) (*Estimator, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("estimator options: %w", err)
	}
	return &Estimator{opts: o, ref: ref, jobs: map[string]*job{}}, nil
}

// Observe records one interval. Repeated or out-of-order intervals, those
// within the warm-up and outliers are not errors: they are counted and
// shown in the measured detail. A change of GPU count starts the job's
// measurements afresh, since rates at another scale say little about the
// new one.
func (e *Estimator) Observe(m Measurement) error {
	if err := m.validate(); err != nil {
		return fmt.Errorf("measurement of job %q on %q: %w", m.JobID, m.Type, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if m.At.After(e.latest) {
		e.latest = m.At
	}
	j := e.jobs[m.JobID]
	if j == nil || j.scale != m.Scale {
		fresh := &job{scale: m.Scale, cells: map[string]*cell{}}
		if j != nil {
			// Progress is the job's, whatever it runs on.
			fresh.steps, fresh.stepsAt = j.steps, j.stepsAt
			e.version++
		}
		j = fresh
		e.jobs[m.JobID] = j
	}
	if m.Steps > 0 && m.At.After(j.stepsAt) {
		j.steps, j.stepsAt = m.Steps, m.At
	}
	if j.model != m.Model || j.identity == "" {
		j.model, j.identity = m.Model, e.ref.identity(m.Model)
		e.version++
	}
	if m.Shared {
		return nil
	}
	c := j.cells[m.Type]
	if c == nil {
		c = &cell{}
		j.cells[m.Type] = c
	}
	if c.add(m.StepsPerSecond, m.At, m.SinceStart, e.opts) == verdictAccepted {
		e.version++
	}
	return nil
}

func (m Measurement) validate() error {
	switch {
	case m.JobID == "":
		return errors.New("no job id")
	case m.Type == "":
		return errors.New("no GPU type")
	case m.Scale < 1:
		return fmt.Errorf("scale %d is not a GPU count", m.Scale)
	case m.At.IsZero():
		return errors.New("no time")
	case m.Steps < 0:
		return fmt.Errorf("negative steps %d", m.Steps)
	case !(m.StepsPerSecond > 0) || math.IsInf(m.StepsPerSecond, 0):
		// No progress is a stall, not a rate: it would say the type is
		// infinitely slow.
		return fmt.Errorf("rate %v is not a positive number", m.StepsPerSecond)
	}
	return nil
}

// Forget drops a job's measurements, once it has ended.
func (e *Estimator) Forget(jobID string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.jobs[jobID]; ok {
		delete(e.jobs, jobID)
		e.version++
	}
}

// StepsDone is the job's latest reported cumulative step count and when
// it was reported; false when it never reported any.
func (e *Estimator) StepsDone(jobID string) (int64, time.Time, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	j := e.jobs[jobID]
	if j == nil || j.stepsAt.IsZero() {
		return 0, time.Time{}, false
	}
	return j.steps, j.stepsAt, true
}

// RemainingSteps is how many of total steps the job has left by its
// latest reported progress, and when it reported it; false when it never
// reported any. It never goes below zero: a job may run past the steps
// its tag announced.
func (e *Estimator) RemainingSteps(jobID string, total int64) (int64, time.Time, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	j := e.jobs[jobID]
	if j == nil || j.stepsAt.IsZero() {
		return 0, time.Time{}, false
	}
	return max(total-j.steps, 0), j.stepsAt, true
}

// Rates estimates the job's rate on each of types at time now.
func (e *Estimator) Rates(key JobKey, types []string, now time.Time) map[string]Estimate {
	e.mu.Lock()
	defer e.mu.Unlock()
	l := e.learn()
	p := e.jobProbe(l, key)
	out := make(map[string]Estimate, len(types))
	for _, t := range types {
		out[t] = inPolicyRange(e.rate(l, p, t, now))
	}
	return out
}

// inPolicyRange keeps an estimate within the throughputs the policies
// take: reports may carry any rate from 0 to 1e9 steps/s, and a speed
// ratio learned from two extreme ones can overflow (e^711 is +Inf), or
// underflow to 0. Only the table's zero stays zero: its way of saying a
// model cannot run on a type.
func inPolicyRange(x Estimate) Estimate {
	v := x.StepsPerSecond
	switch {
	case v == 0 && x.Source == SourceTable:
		return x // the table says the model cannot run there
	case math.IsNaN(v):
		return Estimate{StepsPerSecond: 1, Source: SourceDefault, Detail: "default: equal on every type (the estimate was not a number)"}
	case v < policy.MinThroughput:
		x.StepsPerSecond = policy.MinThroughput
	case v > policy.MaxThroughput:
		x.StepsPerSecond = policy.MaxThroughput
	default:
		return x
	}
	x.Detail += fmt.Sprintf(" (%.3g steps/s, brought within the policies' range)", v)
	return x
}

// StepsPerSecond extracts the rates of estimates.
func StepsPerSecond(est map[string]Estimate) map[string]float64 {
	out := make(map[string]float64, len(est))
	for t, x := range est {
		out[t] = x.StepsPerSecond
	}
	return out
}
