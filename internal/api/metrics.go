package api

import (
	"maps"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the daemon's Prometheus series. All names start with
// gavel_slurm_.
type Metrics struct {
	roundDuration prometheus.Histogram
	solveDuration prometheus.Histogram
	rounds        prometheus.Counter
	roundsSkipped *prometheus.CounterVec
	jobs          *prometheus.GaugeVec
	allocatedGPUs *prometheus.GaugeVec
	busyGPUs      *prometheus.GaugeVec
	jobAllocation *prometheus.GaugeVec
	jobReceived   *prometheus.GaugeVec
	preemptions   prometheus.Counter
	actions       *prometheus.CounterVec
	reports       *prometheus.CounterVec
	active        prometheus.Gauge
	fallback      prometheus.Gauge
	preemptionOn  prometheus.Gauge
	requeueFail   prometheus.Gauge
	requeueWait   prometheus.Gauge
	leaseExpiry   prometheus.Gauge
	leaseFailing  prometheus.Gauge
	tokenExpiry   prometheus.Gauge
}

// NewMetrics creates the series and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	// Rounds last from milliseconds (small clusters) to a few seconds
	// (a thousand jobs with a slow slurmrestd).
	buckets := prometheus.ExponentialBuckets(0.001, 2.5, 12)
	m := &Metrics{
		roundDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "gavel_slurm_round_duration_seconds", Help: "Time from a round's snapshot to its last applied action.", Buckets: buckets}),
		solveDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "gavel_slurm_solve_duration_seconds", Help: "Time spent computing an allocation (only rounds that recomputed it).", Buckets: buckets}),
		rounds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gavel_slurm_rounds_total", Help: "Rounds run, skipped ones included."}),
		roundsSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gavel_slurm_rounds_skipped_total", Help: "Rounds that sent nothing because Slurm's view could not be trusted, by cause."}, []string{"cause"}),
		jobs: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gavel_slurm_jobs", Help: "Jobs in the managed partitions by Slurm state, GPU type they run on and whether they are managed."},
			[]string{"state", "gpu_type", "managed"}),
		allocatedGPUs: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gavel_slurm_allocated_gpus", Help: "GPUs of each type the allocation keeps busy on average (sum of fraction x GPUs)."}, []string{"gpu_type"}),
		busyGPUs: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gavel_slurm_busy_gpus", Help: "GPUs of each type used by running jobs."}, []string{"gpu_type"}),
		jobAllocation: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gavel_slurm_job_allocation_fraction", Help: "Fraction of time the policy gives a job on a GPU type."}, []string{"job_id", "gpu_type"}),
		jobReceived: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gavel_slurm_job_received_fraction", Help: "Fraction of the time since arrival a job has run on a GPU type; compare with the allocation."}, []string{"job_id", "gpu_type"}),
		preemptions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gavel_slurm_preemptions_total", Help: "Running jobs preempted (grace signal sent)."}),
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gavel_slurm_actions_total", Help: "Slurm actions by kind and result (sent, failed, unanswered: sent without an answer and checked against Slurm at the next read, dry_run)."}, []string{"kind", "result"}),
		reports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gavel_slurm_collector_reports_total", Help: "Node collector reports by result: accepted, or the kind of rejection (unauthorized, malformed, too_large, stale, invalid, ...)."}, []string{"result"}),
		active: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gavel_slurm_active", Help: "1 while this daemon holds the state and runs rounds, 0 while it waits as a standby for another one."}),
		fallback: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gavel_slurm_allocation_fallback", Help: "1 while the allocation in use is the stand-in's equal shares because the configured policy failed (status says how), else 0."}),
		preemptionOn: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gavel_slurm_preemption_enabled", Help: "1 while new preemptions may start (the requeue path is proven), else 0 (status says why)."}),
		requeueFail: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gavel_slurm_requeue_path_failing", Help: "1 while the last check of the requeue path, or a requeue, failed (preemption is off and /healthz is not ok), else 0."}),
		requeueWait: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gavel_slurm_requeue_waiting_jobs", Help: "Jobs already signalled for preemption whose requeue failed and is being retried."}),
		leaseExpiry: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gavel_slurm_lease_expiry_timestamp_seconds", Help: "When the daemon's lease runs out unless renewed (Unix time): then Slurm schedules the jobs the daemon keeps waiting on its own; 0 before the first renewal."}),
		leaseFailing: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gavel_slurm_lease_renewal_failing", Help: "1 while the last renewal of the lease failed, else 0."}),
		tokenExpiry: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gavel_slurm_token_expiry_timestamp_seconds", Help: "When the slurmrestd JWT expires (Unix time, its exp claim); 0 when it has none or cannot be read."}),
	}
	reg.MustRegister(m.roundDuration, m.solveDuration, m.rounds, m.roundsSkipped, m.jobs, m.allocatedGPUs,
		m.busyGPUs, m.jobAllocation, m.jobReceived, m.preemptions, m.actions, m.reports, m.active, m.fallback,
		m.preemptionOn, m.requeueFail, m.requeueWait, m.leaseExpiry, m.leaseFailing, m.tokenExpiry)
	return m
}

// ObserveLease records the lease's end and whether its last renewal
// worked.
func (m *Metrics) ObserveLease(expires time.Time, renewed bool) {
	m.leaseExpiry.Set(unixOrZero(expires))
	m.leaseFailing.Set(boolGauge(!renewed))
}

// ObserveToken records when the slurmrestd JWT expires (zero: unknown).
func (m *Metrics) ObserveToken(expires time.Time) { m.tokenExpiry.Set(unixOrZero(expires)) }

func unixOrZero(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.Unix())
}

// ObserveRound records one round's timings; solve is 0 when the cached
// allocation was reused.
func (m *Metrics) ObserveRound(duration, solve time.Duration) {
	m.rounds.Inc()
	m.roundDuration.Observe(duration.Seconds())
	if solve > 0 {
		m.solveDuration.Observe(solve.Seconds())
	}
}

// CountSkip records a round that sent nothing, by a short fixed cause
// (snapshot_error, no_nodes, jobs_vanished, ...).
func (m *Metrics) CountSkip(cause string) {
	m.rounds.Inc()
	m.roundsSkipped.WithLabelValues(cause).Inc()
}

// CountAction records one Slurm action's outcome: "sent", "failed" or
// "dry_run".
func (m *Metrics) CountAction(kind, result string) { m.actions.WithLabelValues(kind, result).Inc() }

// Accept counts a collector report taken in (reports.Counters).
func (m *Metrics) Accept() { m.reports.WithLabelValues("accepted").Inc() }

// Reject counts a collector report refused, by kind (reports.Counters).
func (m *Metrics) Reject(kind string) { m.reports.WithLabelValues(kind).Inc() }

// SetActive records whether this daemon runs rounds (true) or waits as a
// standby (false).
func (m *Metrics) SetActive(active bool) {
	v := 0.0
	if active {
		v = 1
	}
	m.active.Set(v)
}

// CountPreemption records one preemption.
func (m *Metrics) CountPreemption() { m.preemptions.Inc() }

// ObserveStatus replaces the per-job and per-type gauges with the values
// of s. Series of jobs that are gone are dropped, so finished jobs do not
// linger in Prometheus.
func (m *Metrics) ObserveStatus(s Status) {
	m.fallback.Set(boolGauge(s.Round.AllocationFallback != ""))
	m.preemptionOn.Set(boolGauge(s.Preemption.Enabled))
	m.requeueFail.Set(boolGauge(s.Preemption.Failing))
	m.requeueWait.Set(float64(len(s.Preemption.Waiting)))
	m.jobs.Reset()
	m.jobAllocation.Reset()
	m.jobReceived.Reset()
	for _, j := range s.Jobs {
		managed := "false"
		if j.Managed {
			managed = "true"
		}
		m.jobs.WithLabelValues(j.State, j.GPUType, managed).Inc()
		for _, t := range slices.Sorted(maps.Keys(j.Allocation)) {
			m.jobAllocation.WithLabelValues(j.JobID, t).Set(j.Allocation[t])
		}
		if j.SinceArrival > 0 {
			for _, t := range slices.Sorted(maps.Keys(j.Received)) {
				m.jobReceived.WithLabelValues(j.JobID, t).Set(j.Received[t] / j.SinceArrival)
			}
		}
	}
	m.allocatedGPUs.Reset()
	m.busyGPUs.Reset()
	for _, ts := range s.Types {
		m.allocatedGPUs.WithLabelValues(ts.Type).Set(ts.AllocatedGPUs)
		m.busyGPUs.WithLabelValues(ts.Type).Set(float64(ts.Busy))
	}
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
