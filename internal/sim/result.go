package sim

import (
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
	// FTF summarizes the measured jobs' finish-time fairness
	// ρ = JCT / time on the isolated 1/n share.
	FTF Summary `json:"ftf_rho"`
	// Cost is the GPU-hours used times the configured prices.
	Cost float64 `json:"cost,omitempty"`
	// SLOJobs and SLOViolations count measured jobs with a deadline and
	// those that finished after it.
	SLOJobs         int `json:"slo_jobs,omitempty"`
	SLOViolations   int `json:"slo_violations,omitempty"`
	Preemptions     int `json:"preemptions"`
	LeaseExtensions int `json:"lease_extensions"`
	Rounds          int `json:"rounds"`
	Allocations     int `json:"allocations"`
	// LPs is the number of linear programs the policy solved over all
	// allocations, and LargestLP the rows and columns of the biggest one:
	// together with Allocations they tell whether solver time comes from
	// many resets, many LPs per reset or large LPs.
	LPs          int    `json:"lps"`
	LargestLP    [2]int `json:"largest_lp_rows_cols"`
	JobsAdmitted int    `json:"jobs_admitted"`
	// PeakActive is the largest number of jobs in the system at once.
	PeakActive int `json:"peak_active"`
	// WallSeconds and SolverSeconds are real time spent (0 without a Clock).
	WallSeconds   float64 `json:"wall_s"`
	SolverSeconds float64 `json:"solver_s"`
	// Jobs has one record per admitted job, by id.
	Jobs []JobRecord `json:"-"`

	busy []float64 // GPU-seconds used per type
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
		if j.done {
			rec.Finish = j.finish
			if j.isoTime > 0 {
				rec.FTF = rec.JCT() / j.isoTime
			}
		}
		if rec.Measured && j.done {
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
	r.AvgJCT = mean(jcts)
	r.P50JCT = percentile(jcts, 50)
	r.P95JCT = percentile(jcts, 95)
	r.FTF = summarize(rhos)
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

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// percentile interpolates linearly between closest ranks (numpy's
// default), so p50 of an even count is the mean of the middle two.
func percentile(xs []float64, p float64) float64 {
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

func summarize(xs []float64) Summary {
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
		Mean:     mean(xs),
		P50:      percentile(xs, 50),
		P95:      percentile(xs, 95),
		Max:      slices.Max(xs),
		AboveOne: float64(above) / float64(len(xs)),
	}
}
