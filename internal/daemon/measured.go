package daemon

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/estimate"
	"github.com/gavel-slurm/gavel-slurm/internal/reports"
	"github.com/gavel-slurm/gavel-slurm/internal/sched"
	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
)

// Measured is the scheduling step's estimator when node collectors report
// measured throughputs: the learning estimator (internal/estimate) behind
// the step's Estimator interface, with a version that changes whenever a
// measurement is taken in, so the step asks again only then.
type Measured struct {
	est     *estimate.Estimator
	table   sched.TableEstimator
	version atomic.Uint64
}

// NewMeasured returns a measured estimator over the reference table.
func NewMeasured(table *throughputs.Table) (*Measured, error) {
	return NewMeasuredWith(table, estimate.Options{})
}

// NewMeasuredWith is NewMeasured with the estimator's options (zero
// fields take its defaults).
func NewMeasuredWith(table *throughputs.Table, opts estimate.Options) (*Measured, error) {
	e, err := estimate.New(table, opts)
	if err != nil {
		return nil, err
	}
	return &Measured{est: e, table: sched.TableEstimator{Table: table}}, nil
}

// NewMeasuredWarmUp is NewMeasured that leaves out each run's first
// warmUp of measurements; 0 takes every report (the estimator's own zero
// means its default).
func NewMeasuredWarmUp(table *throughputs.Table, warmUp time.Duration) (*Measured, error) {
	return NewMeasuredWith(table, estimate.Options{WarmUp: max(warmUp, time.Nanosecond)})
}

// Rates implements sched.Estimator.
func (m *Measured) Rates(job sched.JobQuery, types []string, now time.Time) (string, map[string]sched.Rate) {
	// The model's name as status shows it is the table's resolution.
	name, _, _ := m.table.Estimate(job.Model, job.Scale, nil)
	out := make(map[string]sched.Rate, len(types))
	for t, e := range m.est.Rates(estimate.JobKey{ID: job.ID, Model: job.Model, Scale: job.Scale}, types, now) {
		out[t] = sched.Rate{StepsPerSecond: e.StepsPerSecond, Source: string(e.Source), Detail: e.Detail}
	}
	return name, out
}

// StepsDone implements sched.Progress: the job's latest reported
// cumulative steps.
func (m *Measured) StepsDone(jobID string) (int64, bool) {
	done, _, ok := m.est.StepsDone(jobID)
	return done, ok
}

// Version implements sched.Versioned.
func (m *Measured) Version() uint64 { return m.version.Load() }

// Observe takes in one measurement.
func (m *Measured) Observe(ms estimate.Measurement) error {
	if err := m.est.Observe(ms); err != nil {
		return err
	}
	m.version.Add(1)
	return nil
}

// Forget drops a job that left.
func (m *Measured) Forget(id string) { m.est.Forget(id) }

// reportQueue holds collector reports between rounds: the HTTP handler
// adds, the round drains. Bounded: when collectors send faster than rounds
// drain, the oldest reports go first (newer ones supersede them).
type reportQueue struct {
	mu      sync.Mutex
	reports []reports.Report
	dropped int
}

// maxQueuedReports bounds the queue: a few intervals of a large cluster.
const maxQueuedReports = 4096

func (q *reportQueue) add(r reports.Report) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.reports) >= maxQueuedReports {
		q.reports = q.reports[1:]
		q.dropped++
	}
	q.reports = append(q.reports, r)
}

func (q *reportQueue) drain() []reports.Report {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.reports
	q.reports = nil
	return out
}

// Receive queues a collector report for the next round; it is the sink of
// the collector endpoint (reports.NewHandler).
func (d *Daemon) Receive(r reports.Report) { d.queue.add(r) }

// feed hands the queued reports to the estimator, each job's rate joined
// with what Slurm says of the job (its tag's model, its GPU count, when it
// started): a report about a job Slurm does not show running, on the type
// and a node the report names, is dropped, so a stale or forged report
// cannot teach the estimator a rate for a placement that is not real. So
// is a report about a job the daemon does not manage: nothing would
// forget its measurements when it ends (Result.Forget lists managed jobs).
func (d *Daemon) feed(snap *bridge.Snapshot) (taken, dropped int) {
	if d.Measured == nil {
		return 0, 0
	}
	for _, r := range d.queue.drain() {
		if _, known := snap.Node(r.Node); len(r.Jobs) > 0 && !known && !d.strangers[r.Node] {
			// Every report of this collector would be dropped: its host
			// name is not the Slurm node name (NodeName in slurm.conf).
			if d.strangers == nil {
				d.strangers = map[string]bool{}
			}
			d.strangers[r.Node] = true
			d.Log.Warn().Str("node", r.Node).Msg("collector reports as a node Slurm does not know; its reports are dropped: run it with --node set to the node's Slurm name")
		}
		for _, rj := range r.Jobs {
			if rj.StepsPerS == nil {
				continue
			}
			jid, err := sched.ParseJobID(rj.JobID)
			j, ok := snap.Job(jid)
			if err != nil || !ok || j.State != bridge.JobRunning || j.RunningGPUType != rj.GPUType ||
				!slices.Contains(j.RunningNodes, r.Node) || !d.Core.Tracks(rj.JobID) {
				dropped++
				continue
			}
			m := estimate.Measurement{JobID: rj.JobID, Model: j.Tag.Model, Scale: j.GPUs, Type: rj.GPUType,
				StepsPerSecond: *rj.StepsPerS, At: r.Time}
			if !j.StartTime.IsZero() {
				m.SinceStart = r.Time.Sub(j.StartTime)
			}
			if rj.Steps != nil {
				// The job's progress: what the policies count its
				// remaining steps down from (sched.Progress).
				m.Steps = *rj.Steps
			}
			if err := d.Measured.Observe(m); err != nil {
				dropped++
				continue
			}
			taken++
		}
	}
	return taken, dropped
}
