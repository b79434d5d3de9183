package sim

import (
	"fmt"
	"math"
	"slices"
)

// Result holds a run's measurements. Times are in seconds.
type Result struct {
	Policy string   `json:"policy"`
	Types  []string `json:"types"`
	// JobsMeasured is the number of jobs in the measurement window.
	JobsMeasured int     `json:"jobs_measured"`
	AvgJCT       float64 `json:"avg_jct_s"`
	P50JCT       float64 `json:"p50_jct_s"`
	P95JCT       float64 `json:"p95_jct_s"`
	// Makespan is the simulated time when the run stopped.
	Makespan float64 `json:"makespan_s"`
	// Utilization is the busy fraction of each type's GPUs over the run,
	// and "all" over the whole cluster.
	Utilization map[string]float64 `json:"utilization"`
	// FTF summarizes the measured jobs' online finish-time fairness
	// ρ = JCT / time on the isolated 1/n share, that share being
	// recomputed at every allocation from the jobs then in the system
	// (Themis' definition, which the FTF policies optimize).
	FTF Summary `json:"ftf_online_rho"`
	// FTFIsolated is finish-time fairness as Gavel's figures report it:
	// the mean over the measured jobs of JCT divided by the same job's
	// JCT in a separate run of the isolated policy on the same workload
	// (see FTFAgainstIsolated). 0 when no such run was made or it did
	// not finish.
	FTFIsolated float64 `json:"ftf_isolated,omitempty"`
	// Cost is the GPU-hours used times the configured prices.
	Cost float64 `json:"cost,omitempty"`
	// SLOJobs and SLOViolations count measured jobs with a deadline and
	// those that finished after it.
	SLOJobs       int `json:"slo_jobs,omitempty"`
	SLOViolations int `json:"slo_violations,omitempty"`
	Preemptions   int `json:"preemptions"`
	// Restarts counts the starts of jobs that had run before (moved,
	// or resumed after waiting); RestartLost is the time they lost to
	// their restart costs (Config.PreemptionOverhead, RestartCosts),
	// summed over restarts, and RestartLostGPU the same in GPU-seconds.
	Restarts        int     `json:"restarts"`
	RestartLost     float64 `json:"restart_lost_s"`
	RestartLostGPU  float64 `json:"restart_lost_gpu_s"`
	LeaseExtensions int     `json:"lease_extensions"`
	Rounds          int     `json:"rounds"`
	Allocations     int     `json:"allocations"`
	// LPs is the number of linear programs the policy solved over all
	// allocations, and LargestLP the rows and columns of the biggest one:
	// together with Allocations they tell whether solver time comes from
	// many resets, many LPs per reset or large LPs.
	LPs          int    `json:"lps"`
	LargestLP    [2]int `json:"largest_lp_rows_cols"`
	JobsAdmitted int    `json:"jobs_admitted"`
	// JobsDropped counts the jobs the reference's failed micro-task rule
	// gave up on (Config.Faithful only; measured or not).
	JobsDropped int `json:"jobs_dropped,omitempty"`
	// PeakActive is the largest number of jobs in the system at once.
	PeakActive int `json:"peak_active"`
	// WallSeconds and SolverSeconds are real time spent (0 without a Clock).
	WallSeconds   float64 `json:"wall_s"`
	SolverSeconds float64 `json:"solver_s"`
	// Estimated says the policy saw learned throughputs (Config.Estimate).
	Estimated bool `json:"estimated,omitempty"`
	// EstimateError summarizes, under estimation, how far the rates the
	// policy was given were from the true ones: |estimated − true| / true
	// of every job and type at every allocation.
	EstimateError *Summary `json:"estimate_error,omitempty"`
	// Jobs has one record per admitted job, by id.
	Jobs []JobRecord `json:"-"`
	// Timeline has one span per round when Config.Timeline is set.
	Timeline []Span `json:"-"`

	busy []float64 // GPU-seconds used per type
}

// Span is one round of the timeline: from Start to End (seconds), Busy
// GPU-seconds of each type (indexed like Result.Types).
type Span struct {
	Start, End float64
	Busy       []float64
}

// Summary describes a distribution.
type Summary struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P95  float64 `json:"p95"`
	Max  float64 `json:"max"`
	// AboveOne is the fraction of values > 1 (jobs that did worse than on
	// their isolated share).
	AboveOne float64 `json:"above_one"`
}

// JobRecord is one job's outcome.
type JobRecord struct {
	ID          int
	Model       string
	ScaleFactor int
	Priority    float64
	Arrival     float64
	// Start is the first time the job ran, Finish its completion; both are
	// -1 for jobs still unfinished when the run stopped.
	Start, Finish float64
	// TimePerType is the time the job held GPUs of each type (indexed like
	// Result.Types).
	TimePerType []float64
	Measured    bool
	// FTF is the job's finish-time fairness ρ (0 when unfinished).
	FTF float64
	// Estimated is, under estimation, the rates (steps/s, indexed like
	// Result.Types) the policy was last given for the job; nil otherwise.
	Estimated []float64
	// Dropped marks a job the reference's failed micro-task rule gave up
	// on (Config.Faithful); it has no finish and counts in no average.
	Dropped bool
}

// JCT is the completion time of a finished job (-1 otherwise).
func (r *JobRecord) JCT() float64 {
	if r.Finish < 0 {
		return -1
	}
	return r.Finish - r.Arrival
}

func (s *simulator) finishResult() {
	r := &s.res
	r.Makespan = s.now
	r.JobsAdmitted = len(s.all)
	var jcts, rhos []float64
	r.Jobs = make([]JobRecord, len(s.all))
	for i, j := range s.all {
		rec := JobRecord{
			ID: j.id, Model: j.spec.Model, ScaleFactor: j.spec.ScaleFactor, Priority: j.spec.Priority,
			Arrival: j.spec.Arrival, Start: j.start, Finish: -1,
			TimePerType: j.perType, Measured: s.measuring(j.id),
		}
		if s.learn != nil {
			rec.Estimated = make([]float64, len(s.types))
			for k, t := range s.types {
				rec.Estimated[k] = j.seen[t]
			}
		}
		if j.done {
			rec.Finish = j.finish
			if j.isoTime > 0 {
				rec.FTF = rec.JCT() / j.isoTime
			}
		}
		if j.dropped {
			// The reference leaves a dropped job out of its averages.
			rec.Finish, rec.FTF = -1, 0
			rec.Dropped = true
			r.JobsDropped++
		}
		if rec.Measured && j.done && !j.dropped {
			jcts = append(jcts, rec.JCT())
			rhos = append(rhos, rec.FTF)
			if j.spec.SLO > 0 {
				r.SLOJobs++
				if rec.JCT() > j.spec.SLO {
					r.SLOViolations++
				}
			}
		}
		r.Jobs[i] = rec
	}
	r.JobsMeasured = len(jcts)
	r.AvgJCT = Mean(jcts)
	r.P50JCT = Percentile(jcts, 50)
	r.P95JCT = Percentile(jcts, 95)
	r.FTF = Summarize(rhos)
	if s.learn != nil {
		e := Summarize(s.learn.errors)
		r.EstimateError = &e
	}
	r.Utilization = map[string]float64{}
	totalBusy, totalGPUs := 0.0, 0
	for i, t := range s.types {
		n := s.cfg.GPUs[t]
		totalGPUs += n
		totalBusy += r.busy[i]
		if s.now > 0 {
			r.Utilization[t] = r.busy[i] / (float64(n) * s.now)
		}
	}
	if s.now > 0 {
		r.Utilization["all"] = totalBusy / (float64(totalGPUs) * s.now)
	}
}

// FTFAgainstIsolated is the mean over r's measured jobs of JCT / the
// same job's JCT in isolated, a run of the isolated policy on the same
// workload. Unlike the online ρ, both JCTs come from whole schedules, so
// the baseline feels the load its 1/n share really had over the job's
// life. Every measured job of r must have finished in isolated too (two
// runs with the same measurement window both run until it completes).
func FTFAgainstIsolated(r, isolated *Result) (float64, error) {
	baseline := make(map[int]float64, len(isolated.Jobs))
	for i := range isolated.Jobs {
		if j := &isolated.Jobs[i]; j.Measured && j.Finish >= 0 {
			baseline[j.ID] = j.JCT()
		}
	}
	var ratios []float64
	for i := range r.Jobs {
		j := &r.Jobs[i]
		if !j.Measured || j.Finish < 0 {
			continue
		}
		iso, ok := baseline[j.ID]
		if !ok {
			return 0, fmt.Errorf("finish-time fairness of %s: measured job %d has no finished counterpart in the isolated run", r.Policy, j.ID)
		}
		if iso <= 0 {
			return 0, fmt.Errorf("finish-time fairness of %s: job %d took %v s in the isolated run", r.Policy, j.ID, iso)
		}
		ratios = append(ratios, j.JCT()/iso)
	}
	if len(ratios) == 0 {
		return 0, fmt.Errorf("finish-time fairness of %s: no measured job finished", r.Policy)
	}
	return Mean(ratios), nil
}

// Mean is the average of xs (0 for none).
func Mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// Percentile interpolates linearly between closest ranks (numpy's
// default), so p50 of an even count is the mean of the middle two. Every
// simulator reports its percentiles this way.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sorted := slices.Clone(xs)
	slices.Sort(sorted)
	pos := p / 100 * float64(len(sorted)-1)
	lo := math.Floor(pos)
	frac := pos - lo
	i := int(lo)
	if i+1 >= len(sorted) {
		return sorted[len(sorted)-1]
	}
	return sorted[i] + frac*(sorted[i+1]-sorted[i])
}

// Summarize describes the distribution of xs (the zero Summary for
// none).
func Summarize(xs []float64) Summary {
	if len(xs) == 0 {
		return Summary{}
	}
	above := 0
	for _, x := range xs {
		if x > 1 {
			above++
		}
	}
	return Summary{
		Mean:     Mean(xs),
		P50:      Percentile(xs, 50),
		P95:      Percentile(xs, 95),
		Max:      slices.Max(xs),
		AboveOne: float64(above) / float64(len(xs)),
	}
}
