package daemon

import (
	"cmp"
	"fmt"
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
	// firsts is, by job, its current run's first reported progress
	// (sched.FirstProgress): the step measures restart costs with it.
	firstMu sync.Mutex
	firsts  map[string]firstProgress
	// pairs are the rates each member of a pair reported while the two
	// shared a GPU (observePair).
	pairMu sync.Mutex
	pairs  map[pairKey]map[string]*pairRate
}

// firstProgress is the earliest progress a job reported in the run Slurm
// started at start: the first progress its collector reported for the
// run, else (a collector that does not report it) the end of its first
// interval with a rate.
type firstProgress struct{ start, at time.Time }

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

var (
	_ sched.Progress      = (*Measured)(nil)
	_ sched.FirstProgress = (*Measured)(nil)
)

// StepsDone implements sched.Progress: the job's latest reported
// cumulative steps.
func (m *Measured) StepsDone(job bridge.JobID) (int64, bool) {
	done, _, ok := m.est.StepsDone(job.String())
	return done, ok
}

// FirstProgress implements sched.FirstProgress: the earliest first
// progress the job's collectors reported for the run that started at
// start, which is the time of the run's first progress line (its own
// time, else about when the collector first saw it written). A collector
// that does not report it leaves the end of the run's first interval
// with a rate, which is late by up to two collector intervals: the first
// interval with progress, whose rate holds the start-up, has none.
func (m *Measured) FirstProgress(job bridge.JobID, start time.Time) (time.Time, bool) {
	m.firstMu.Lock()
	defer m.firstMu.Unlock()
	f, ok := m.firsts[job.String()]
	if !ok || !f.start.Equal(start) {
		return time.Time{}, false
	}
	return f.at, true
}

// noteProgress keeps the earliest progress of a job's run started at
// start; a new start begins a new run.
func (m *Measured) noteProgress(jobID string, start, at time.Time) {
	if start.IsZero() || at.Before(start) {
		return
	}
	m.firstMu.Lock()
	defer m.firstMu.Unlock()
	if f, ok := m.firsts[jobID]; ok && f.start.Equal(start) && !at.Before(f.at) {
		return
	}
	if m.firsts == nil {
		m.firsts = map[string]firstProgress{}
	}
	m.firsts[jobID] = firstProgress{start: start, at: at}
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

// sharesWith finds the job that shares a GPU with running job j.
func sharesWith(snap *bridge.Snapshot, j bridge.Job) (string, bool) {
	if j.Shards == 0 || len(j.SharedGPUs) == 0 {
		return "", false
	}
	for _, o := range snap.Jobs {
		if o.ID != j.ID && o.Shards > 0 && bridge.SharesGPUWith(j, o) {
			return o.ID.String(), true
		}
	}
	return "", false
}

// pairKey names a pair of jobs on one GPU type, its members in sorted
// order.
type pairKey struct{ a, b, gpuType string }

// pairRate is a running mean of one member's rates while paired.
type pairRate struct {
	sum float64
	n   int
}

// observePair keeps job's rate while it shared a GPU of gpuType with
// partner.
func (m *Measured) observePair(job, partner, gpuType string, rate float64) {
	if !(rate >= 0) {
		return
	}
	k := pairKey{min(job, partner), max(job, partner), gpuType}
	m.pairMu.Lock()
	defer m.pairMu.Unlock()
	if m.pairs == nil {
		m.pairs = map[pairKey]map[string]*pairRate{}
	}
	if m.pairs[k] == nil {
		m.pairs[k] = map[string]*pairRate{}
	}
	r := m.pairs[k][job]
	if r == nil {
		r = &pairRate{}
		m.pairs[k][job] = r
	}
	r.sum += rate
	r.n++
}

var _ sched.PairEstimator = (*Measured)(nil)

// PairRates implements sched.PairEstimator: on the types where both jobs
// were measured while they shared a GPU, each one's mean rate then over
// its rate alone as estimated now; elsewhere the reference table's.
func (m *Measured) PairRates(a, b sched.JobQuery, types []string, now time.Time) map[string][2]sched.Rate {
	out := m.table.PairRates(a, b, types, now)
	if len(out) == 0 {
		out = m.nearestPairRates(a, b, types, now)
	}
	m.pairMu.Lock()
	measured := map[string][2]float64{}
	for _, t := range types {
		k := pairKey{min(a.ID, b.ID), max(a.ID, b.ID), t}
		if ra, rb := m.pairs[k][a.ID], m.pairs[k][b.ID]; ra != nil && rb != nil {
			measured[t] = [2]float64{ra.sum / float64(ra.n), rb.sum / float64(rb.n)}
		}
	}
	m.pairMu.Unlock()
	if len(measured) == 0 {
		return out
	}
	_, aloneA := m.Rates(a, types, now)
	_, aloneB := m.Rates(b, types, now)
	for t, r := range measured {
		ia, ib := aloneA[t].StepsPerSecond, aloneB[t].StepsPerSecond
		if !(ia > 0 && ib > 0) {
			continue
		}
		if out == nil {
			out = map[string][2]sched.Rate{}
		}
		detail := fmt.Sprintf("measured while %s and %s shared a %s: %.4g and %.4g steps/s", a.ID, b.ID, t, r[0], r[1])
		out[t] = [2]sched.Rate{{StepsPerSecond: r[0] / ia, Source: "measured", Detail: detail},
			{StepsPerSecond: r[1] / ib, Source: "measured", Detail: detail}}
	}
	return out
}

// nearestPairRates estimates a pair the table does not know from the
// table's entry for the reference models the two jobs compute most like
// (estimate.Estimator.Nearest): the slowdown of those models while
// sharing, as fractions of their rates alone. Nil when either job
// resembles no reference model yet.
func (m *Measured) nearestPairRates(a, b sched.JobQuery, types []string, now time.Time) map[string][2]sched.Rate {
	na, da, okA := m.est.Nearest(estimate.JobKey{ID: a.ID, Model: a.Model, Scale: a.Scale})
	nb, db, okB := m.est.Nearest(estimate.JobKey{ID: b.ID, Model: b.Model, Scale: b.Scale})
	if !okA || !okB {
		return nil
	}
	ref := m.table.PairRates(sched.JobQuery{ID: a.ID, Model: na, Scale: a.Scale}, sched.JobQuery{ID: b.ID, Model: nb, Scale: b.Scale}, types, now)
	for t, r := range ref {
		detail := fmt.Sprintf("estimated: the reference table's %s (%s) with %s (%s)", na, da, nb, db)
		for i := range r {
			r[i].Source, r[i].Detail = "estimated", detail
		}
		ref[t] = r
	}
	return ref
}

// Forget drops a job that left.
func (m *Measured) Forget(id string) {
	m.est.Forget(id)
	m.pairMu.Lock()
	for k := range m.pairs {
		if k.a == id || k.b == id {
			delete(m.pairs, k)
		}
	}
	m.pairMu.Unlock()
	m.firstMu.Lock()
	delete(m.firsts, id)
	m.firstMu.Unlock()
}

// ReportLimits bound what the collector endpoint holds between rounds.
// Zero fields take the defaults.
type ReportLimits struct {
	// Bytes bounds everything held, by the queue's estimate of its heap
	// use (nodeBytes, entryBytes).
	Bytes int64
	// NodeBytes bounds what one node's reports hold, so that one node
	// (or a token holder writing in one node's name) cannot take the
	// room of the others.
	NodeBytes int64
}

// Defaults of ReportLimits. A job measured on one node holds about
// 0.6 KiB (entryBytes), so 64 MiB is room for 100,000 node-job pairs: a
// 5,000-node cluster with 20 jobs on each node. 1 MiB is room for about
// 1,600 jobs on one node, far above any real node, and holds one
// well-formed report of up to 1,600 rated jobs.
const (
	DefaultReportBytes     = 64 << 20
	DefaultNodeReportBytes = 1 << 20
)

// keptIntervals is how many of the latest intervals the queue keeps for
// one job on one node and GPU type. The estimator uses every interval
// (internal/estimate: a moving average, and a median over the latest
// OutlierWindow raw intervals, 9 by default), so the queue keeps a short
// history rather than only the latest: 16 covers a whole default round
// (6 minutes of 30-second intervals) and more than the median's window.
// Older intervals pushed out would weigh at most 0.5^16 in the average and
// be out of the median's window anyway.
const keptIntervals = 16

// Costs charged against ReportLimits: estimates of what each record takes
// on the heap, rounded up (TestReportQueueCostCoversHeap checks them).
const (
	// nodeBytes is a node's record, its entry in the queue's map and its
	// own map of jobs, plus its name.
	nodeBytes = 512
	// entryBytes is one (node, job, GPU type) with keptIntervals
	// intervals, plus its job id and type name.
	entryBytes = 640
)

// interval is one reported interval of one job: what feed needs of it.
// (A run's first progress is kept by its entry, not by its intervals: the
// warm-up interval has no rate, yet carries it.)
type interval struct {
	at    int64 // end of the interval, Unix nanoseconds
	rate  float64
	steps int64 // -1: not reported
}

// jobEntry holds the latest intervals of one job on one node and GPU type,
// oldest first: a newer report for the same node, job and type adds its
// interval here instead of queuing a report beside the older one.
type jobEntry struct {
	intervals [keptIntervals]interval
	n, first  int // ring: intervals[first] is the oldest of n
	// Of the first progress times reported for the job (Unix
	// nanoseconds; 0: none), the earliest, and the latest report's
	// (firstLatestAt: that report's time). Feed keeps the earliest of
	// them in the run Slurm shows (Measured.noteProgress): the earliest
	// when the reports are all of that run, as they nearly always are
	// (a collector that restarted in the run reports a later time than
	// before); the latest report's when the job was requeued and started
	// again since the earliest.
	firstEarliest, firstLatest, firstLatestAt int64
}

// noteFirst keeps the first progress fp that a report at reportAt
// carried.
func (e *jobEntry) noteFirst(fp, reportAt int64) {
	if e.firstEarliest == 0 || fp < e.firstEarliest {
		e.firstEarliest = fp
	}
	switch {
	case e.firstLatest == 0 || reportAt > e.firstLatestAt:
		e.firstLatest, e.firstLatestAt = fp, reportAt
	case reportAt == e.firstLatestAt:
		e.firstLatest = min(e.firstLatest, fp)
	}
}

func (e *jobEntry) add(iv interval) (superseded bool) {
	if e.n > 0 && iv.at <= e.intervals[(e.first+e.n-1)%keptIntervals].at {
		// A repeat, or older than what the node sent already: the
		// estimator would ignore it.
		return false
	}
	if e.n < keptIntervals {
		e.intervals[(e.first+e.n)%keptIntervals] = iv
		e.n++
		return false
	}
	e.intervals[e.first] = iv
	e.first = (e.first + 1) % keptIntervals
	return true
}

type entryKey struct{ job, gpuType string }

// nodeQueue is what one node's reports hold.
type nodeQueue struct {
	bytes   int64
	entries map[entryKey]*jobEntry
}

// reportQueue holds what collector reports measured between rounds: the
// HTTP handler adds, the round drains. It keeps one entry per node, job
// and GPU type, with that job's latest intervals there, and refuses a
// report that would take it past its limits in bytes (whole: a report is
// taken or refused), so that what it holds is bounded whatever the
// collectors send. Only what feed uses is kept: rates, with their step
// counts, and each run's first progress; a job reported with neither
// costs nothing.
type reportQueue struct {
	mu     sync.Mutex
	limits ReportLimits
	nodes  map[string]*nodeQueue
	bytes  int64
	// superseded counts intervals pushed out of a full history since the
	// last drain.
	superseded int
}

func (q *reportQueue) setLimits(l ReportLimits) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.limits = l
}

func (q *reportQueue) effectiveLimits() ReportLimits {
	l := q.limits
	if l.Bytes <= 0 {
		l.Bytes = DefaultReportBytes
	}
	if l.NodeBytes <= 0 {
		l.NodeBytes = DefaultNodeReportBytes
	}
	l.NodeBytes = min(l.NodeBytes, l.Bytes)
	return l
}

func nodeCost(node string) int64          { return nodeBytes + int64(len(node)) }
func entryCost(job, gpuType string) int64 { return entryBytes + int64(len(job)+len(gpuType)) }

// add keeps what r measured, or refuses the whole report with a
// *reports.Error: KindTooLarge when it alone is more than a node may hold,
// KindNodeFull when its node's share is used up, KindQueueFull when the
// whole queue is. A report that only adds intervals to entries its node
// already has costs nothing and is always taken.
func (q *reportQueue) add(r reports.Report) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	lim := q.effectiveLimits()
	if len(r.Jobs) == 0 {
		// A collector saying it is alive: nothing for the round.
		return nil
	}
	// A node with jobs is kept even when none has a rate: feed warns
	// about a node name Slurm does not know.
	n := q.nodes[r.Node]
	var cost, alone int64 // what r adds; what r alone would take
	alone = nodeCost(r.Node)
	if n == nil {
		cost = alone
	}
	rated := 0
	for _, j := range r.Jobs {
		if !kept(j) {
			continue
		}
		rated++
		c := entryCost(j.JobID, j.GPUType)
		alone += c
		if n == nil || n.entries[entryKey{j.JobID, j.GPUType}] == nil {
			cost += c
		}
	}
	var held int64
	if n != nil {
		held = n.bytes
	}
	switch {
	case alone > lim.NodeBytes:
		return &reports.Error{Kind: reports.KindTooLarge, Err: fmt.Errorf(
			"the report's %d measured jobs need %d bytes, more than the %d bytes the daemon keeps for one node",
			rated, alone, lim.NodeBytes)}
	case held+cost > lim.NodeBytes:
		return &reports.Error{Kind: reports.KindNodeFull, Err: fmt.Errorf(
			"node %s already holds %d of its %d bytes until the daemon's next round", r.Node, held, lim.NodeBytes)}
	case q.bytes+cost > lim.Bytes:
		return &reports.Error{Kind: reports.KindQueueFull, Err: fmt.Errorf(
			"the daemon holds %d of its %d bytes of reports until its next round", q.bytes, lim.Bytes)}
	}
	if n == nil {
		if q.nodes == nil {
			q.nodes = map[string]*nodeQueue{}
		}
		n = &nodeQueue{bytes: nodeCost(r.Node), entries: map[entryKey]*jobEntry{}}
		q.nodes[r.Node] = n
		q.bytes += n.bytes
	}
	for _, j := range r.Jobs {
		if !kept(j) {
			continue
		}
		k := entryKey{j.JobID, j.GPUType}
		e := n.entries[k]
		if e == nil {
			e = &jobEntry{}
			n.entries[k] = e
			c := entryCost(j.JobID, j.GPUType)
			n.bytes += c
			q.bytes += c
		}
		if j.FirstProgress != nil {
			e.noteFirst(j.FirstProgress.UnixNano(), r.Time.UnixNano())
		}
		if j.StepsPerS == nil {
			continue
		}
		iv := interval{at: r.Time.UnixNano(), rate: *j.StepsPerS, steps: -1}
		if j.Steps != nil {
			iv.steps = *j.Steps
		}
		if e.add(iv) {
			q.superseded++
		}
	}
	return nil
}

// kept tells whether the queue keeps anything of j: its rate, or its
// run's first progress.
func kept(j reports.Job) bool { return j.StepsPerS != nil || j.FirstProgress != nil }

// measuredInterval is one interval drained from the queue.
type measuredInterval struct {
	node, job, gpuType string
	interval
}

// reportedFirst is a first progress drained from the queue (jobEntry).
type reportedFirst struct {
	node, job, gpuType string
	at                 int64 // Unix nanoseconds
}

// drain empties the queue: the nodes that reported jobs (sorted), their
// intervals in the order of their times, as they were measured, and the
// first progress of their jobs' runs.
func (q *reportQueue) drain() (nodes []string, out []measuredInterval, firsts []reportedFirst, superseded int) {
	q.mu.Lock()
	held := q.nodes
	superseded = q.superseded
	q.nodes, q.bytes, q.superseded = nil, 0, 0
	q.mu.Unlock()
	for node, n := range held {
		nodes = append(nodes, node)
		for k, e := range n.entries {
			if e.firstEarliest != 0 {
				firsts = append(firsts, reportedFirst{node: node, job: k.job, gpuType: k.gpuType, at: e.firstEarliest})
			}
			if e.firstLatest != e.firstEarliest {
				firsts = append(firsts, reportedFirst{node: node, job: k.job, gpuType: k.gpuType, at: e.firstLatest})
			}
			for i := range e.n {
				out = append(out, measuredInterval{node: node, job: k.job, gpuType: k.gpuType,
					interval: e.intervals[(e.first+i)%keptIntervals]})
			}
		}
	}
	slices.Sort(nodes)
	slices.SortStableFunc(out, func(a, b measuredInterval) int {
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.node, b.node), cmp.Compare(a.job, b.job), cmp.Compare(a.gpuType, b.gpuType))
	})
	return nodes, out, firsts, superseded
}

// held is how many bytes the queue holds, by its estimate.
func (q *reportQueue) held() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.bytes
}

// SetReportLimits bounds what Receive holds until the next round.
func (d *Daemon) SetReportLimits(l ReportLimits) { d.queue.setLimits(l) }

// Receive keeps a collector report for the next round; it is the sink of
// the collector endpoint (reports.New). It refuses the report with a
// *reports.Error when it would take the queue past its limits
// (SetReportLimits): the endpoint answers 413 or 429, and the collector
// logs why.
func (d *Daemon) Receive(r reports.Report) error { return d.queue.add(r) }

// feed hands the queued measurements to the estimator, each job's rate
// joined with what Slurm says of the job (its tag's model, its GPU count,
// when it started): a measurement of a job Slurm does not show running,
// on the type and a node the report names, is dropped, so a stale or
// forged report cannot teach the estimator a rate for a placement that is
// not real. So is a measurement of a job the daemon does not manage:
// nothing would forget it when the job ends (Result.Forget lists managed
// jobs). A run's reported first progress goes, on the same terms, to the
// restart costs (Measured.FirstProgress); it is no measurement, and not
// counted.
func (d *Daemon) feed(snap *bridge.Snapshot) (taken, dropped int) {
	if d.Measured == nil {
		return 0, 0
	}
	nodes, intervals, firsts, superseded := d.queue.drain()
	if superseded > 0 {
		d.Log.Debug().Int("superseded", superseded).Int("kept_per_job", keptIntervals).
			Msg("collector intervals pushed out by newer ones since the last round")
	}
	for _, node := range nodes {
		if _, known := snap.Node(node); !known && !d.strangers[node] {
			// Every report of this collector would be dropped: its host
			// name is not the Slurm node name (NodeName in slurm.conf).
			if d.strangers == nil {
				d.strangers = map[string]bool{}
			}
			d.strangers[node] = true
			d.Log.Warn().Str("node", node).Msg("collector reports as a node Slurm does not know; its reports are dropped: run it with --node set to the node's Slurm name")
		}
	}
	for _, f := range firsts {
		if j, ok := d.runsThere(snap, f.job, f.gpuType, f.node); ok {
			// One before the start is no progress of this run: an
			// earlier run's line, or node and controller clocks apart;
			// the run's first interval with a rate stands in.
			d.Measured.noteProgress(f.job, j.StartTime, time.Unix(0, f.at))
		}
	}
	for _, iv := range intervals {
		j, ok := d.runsThere(snap, iv.job, iv.gpuType, iv.node)
		if !ok {
			dropped++
			continue
		}
		at := time.Unix(0, iv.at)
		m := estimate.Measurement{JobID: iv.job, Model: j.Tag.Model, Scale: j.GPUs, Type: iv.gpuType,
			StepsPerSecond: iv.rate, At: at}
		if !j.StartTime.IsZero() {
			m.SinceStart = at.Sub(j.StartTime)
		}
		if iv.steps >= 0 {
			// The job's progress: what the policies count its
			// remaining steps down from (sched.Progress).
			m.Steps = iv.steps
		}
		if partner, ok := sharesWith(snap, j); ok {
			// Its rate while sharing a GPU is the pair's, not its own
			// alone: kept for the pair (PairRates), not the estimates.
			m.Shared = true
			d.Measured.observePair(iv.job, partner, iv.gpuType, iv.rate)
		}
		if err := d.Measured.Observe(m); err != nil {
			dropped++
			continue
		}
		d.Measured.noteProgress(iv.job, j.StartTime, at)
		taken++
	}
	return taken, dropped
}

// runsThere returns the job a collector named (its id as written), when
// Slurm shows it running on gpuType on node and the daemon manages it.
func (d *Daemon) runsThere(snap *bridge.Snapshot, job, gpuType, node string) (bridge.Job, bool) {
	jid, err := bridge.ParseJobID(job)
	if err != nil {
		return bridge.Job{}, false
	}
	j, ok := snap.Job(jid)
	if !ok || j.State != bridge.JobRunning || j.RunningGPUType != gpuType ||
		!slices.Contains(j.RunningNodes, node) || !d.Core.Tracks(jid) {
		return bridge.Job{}, false
	}
	return j, true
}
