// Package reports is the wire format between the per-node collectors and
// the daemon: what a collector measured on one node over one interval
// (GPU use and training progress of each job), and the strict decoding the
// daemon applies before it lets a report near its throughput estimates.
package reports

import (
	"errors"
	"fmt"
	"math"
	"time"
	"unicode"
	"unicode/utf8"
)

// Path is where the daemon receives reports; a collector given a bare
// daemon URL posts there.
const Path = "/v1/reports"

// Report is one node's measurements over one interval.
type Report struct {
	// Node is the Slurm node name the collector runs on.
	Node string `json:"node"`
	// Time is when the interval ended, on the node's clock.
	Time time.Time `json:"time"`
	// IntervalS is the interval's length in seconds.
	IntervalS float64 `json:"interval_s"`
	// Jobs has one entry per job and GPU type on the node; a node with no
	// job still reports (an empty list), which tells the daemon that its
	// collector is alive.
	Jobs []Job `json:"jobs"`
}

// Job is one job's use of the GPUs of one type on the node.
type Job struct {
	JobID   string `json:"job_id"`
	GPUType string `json:"gpu_type"`
	// GPUs is how many GPUs of that type the job holds on the node.
	GPUs int `json:"gpus"`
	// Steps is the cumulative step count the job last reported, absent
	// when it never reported progress.
	Steps *int64 `json:"steps,omitempty"`
	// StepsPerS is the job's training rate over the interval. It is
	// absent when unknown: no progress reported, or the first interval
	// after the job (re)started, whose rate includes its warm-up.
	StepsPerS *float64 `json:"steps_per_s,omitempty"`
	// SMUtil is the mean fraction of time (0..1) the job's GPUs were
	// running a kernel, as NVML's utilization rate counts it.
	SMUtil float64 `json:"sm_util"`
	// MemUsedBytes is the GPU memory in use on the job's GPUs.
	MemUsedBytes int64 `json:"mem_used_bytes"`
	// FirstProgress is when the job's current run first reported
	// progress: the time on its first progress line, or when the
	// collector found that line. Every report of the run carries it,
	// the warm-up's included, so that the daemon measures the run's
	// restart cost to the line rather than to the end of an interval.
	// Absent until the run reports, and from collectors that predate it.
	FirstProgress *time.Time `json:"first_progress,omitempty"`
}

// Bounds beyond which a value is taken for a bug or a forgery rather than
// a measurement. They are far above any real node, so that no honest
// report is refused.
const (
	MaxJobs         = 4096           // entries in one report
	MaxGPUsPerJob   = 1024           // GPUs of one type a job holds on one node
	MaxNameLen      = 255            // node names (host names stop at 253)
	MaxTypeLen      = 64             // GPU type names
	MaxJobIDLen     = 20             // decimal job ids (Slurm's are 32-bit)
	MaxIntervalS    = 86400          // one day
	MaxStepsPerS    = 1e9            // steps a second
	MaxSteps        = int64(1) << 53 // exact in a float64, so rates stay exact
	MaxMemUsedBytes = int64(1) << 50 // 1 PiB
)

// MaxFirstProgressAge is how long before its report a first progress may
// be: a run that has gone on for longer than a year is not one Slurm
// would have kept running, so an older time is a job's clock or a bug.
const MaxFirstProgressAge = 366 * 24 * time.Hour

// MaxFutureSkew is how far ahead of the daemon's clock a report's time may
// be: node clocks drift a little even under NTP (Slurm's munge credentials
// tolerate five minutes), but a report from further ahead would be taken
// as fresh for too long.
const MaxFutureSkew = time.Minute

// Kinds of rejection, as Error.Kind and Counters.Reject name them.
const (
	KindMalformed      = "malformed"       // not one JSON object
	KindUnknownField   = "unknown_field"   // a key the format does not have
	KindDuplicateField = "duplicate_field" // a key given twice in one object
	KindTooLarge       = "too_large"       // body over the size limit
	KindStale          = "stale"           // time older than the maximum age
	KindFuture         = "future"          // time ahead of the daemon's clock
	KindInvalid        = "invalid"         // a value of the wrong type or out of range
)

// Error is why a report was refused.
type Error struct {
	Kind string
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

func reject(kind, format string, args ...any) error {
	return &Error{Kind: kind, Err: fmt.Errorf(format, args...)}
}

// KindOf returns the rejection kind of err, KindInvalid when err does not
// carry one.
func KindOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindInvalid
}

// Validate checks every value of r against the format and, with now, the
// age of its time. maxAge <= 0 skips the age checks (for the collector,
// which validates what it is about to send).
func (r *Report) Validate(now time.Time, maxAge time.Duration) error {
	if err := checkName("node", r.Node, MaxNameLen); err != nil {
		return err
	}
	if r.Time.IsZero() {
		return reject(KindInvalid, "time is missing")
	}
	if maxAge > 0 {
		if age := now.Sub(r.Time); age > maxAge {
			return reject(KindStale, "time %s is %s old, more than %s", r.Time.Format(time.RFC3339), age.Round(time.Second), maxAge)
		}
		if ahead := r.Time.Sub(now); ahead > MaxFutureSkew {
			return reject(KindFuture, "time %s is %s ahead of the daemon's clock", r.Time.Format(time.RFC3339), ahead.Round(time.Second))
		}
	}
	if !finite(r.IntervalS) || r.IntervalS <= 0 || r.IntervalS > MaxIntervalS {
		return reject(KindInvalid, "interval_s %v is not in (0, %d]", r.IntervalS, MaxIntervalS)
	}
	if len(r.Jobs) > MaxJobs {
		return reject(KindInvalid, "%d jobs, more than %d", len(r.Jobs), MaxJobs)
	}
	// One entry per job and type: two would leave the daemon to guess
	// which one holds.
	seen := make(map[[2]string]bool, len(r.Jobs))
	for i := range r.Jobs {
		j := &r.Jobs[i]
		if err := j.validate(r.Time); err != nil {
			return &Error{Kind: KindOf(err), Err: fmt.Errorf("jobs[%d]: %w", i, err)}
		}
		key := [2]string{j.JobID, j.GPUType}
		if seen[key] {
			return reject(KindInvalid, "jobs[%d]: job %s on %s is listed twice", i, j.JobID, j.GPUType)
		}
		seen[key] = true
	}
	return nil
}

// validate checks j's values; at is its report's time, which its first
// progress cannot be after.
func (j *Job) validate(at time.Time) error {
	if j.JobID == "" {
		return reject(KindInvalid, "job_id is empty")
	}
	if len(j.JobID) > MaxJobIDLen {
		return reject(KindInvalid, "job_id is longer than %d characters", MaxJobIDLen)
	}
	for _, c := range j.JobID {
		if c < '0' || c > '9' {
			return reject(KindInvalid, "job_id %q is not a decimal number", j.JobID)
		}
	}
	if err := checkType(j.GPUType); err != nil {
		return err
	}
	if j.GPUs < 1 || j.GPUs > MaxGPUsPerJob {
		return reject(KindInvalid, "gpus %d is not in [1, %d]", j.GPUs, MaxGPUsPerJob)
	}
	if j.Steps != nil && (*j.Steps < 0 || *j.Steps > MaxSteps) {
		return reject(KindInvalid, "steps %d is not in [0, 2^53]", *j.Steps)
	}
	if j.StepsPerS != nil && (!finite(*j.StepsPerS) || *j.StepsPerS < 0 || *j.StepsPerS > MaxStepsPerS) {
		return reject(KindInvalid, "steps_per_s %v is not in [0, %g]", *j.StepsPerS, MaxStepsPerS)
	}
	if !finite(j.SMUtil) || j.SMUtil < 0 || j.SMUtil > 1 {
		return reject(KindInvalid, "sm_util %v is not in [0, 1]", j.SMUtil)
	}
	if j.MemUsedBytes < 0 || j.MemUsedBytes > MaxMemUsedBytes {
		return reject(KindInvalid, "mem_used_bytes %d is not in [0, 2^50]", j.MemUsedBytes)
	}
	if fp := j.FirstProgress; fp != nil {
		// Progress the interval has not reached yet, or from before any
		// run that could still be going, is no measurement.
		if fp.After(at) {
			return reject(KindInvalid, "first_progress %s is after the report's time %s",
				fp.Format(time.RFC3339Nano), at.Format(time.RFC3339Nano))
		}
		if at.Sub(*fp) > MaxFirstProgressAge {
			return reject(KindInvalid, "first_progress %s is more than %s before the report's time %s",
				fp.Format(time.RFC3339Nano), MaxFirstProgressAge, at.Format(time.RFC3339Nano))
		}
	}
	return nil
}

// checkName accepts printable UTF-8 without spaces: a name ends up in logs,
// metrics labels and the status table, where a control or bidi character
// could forge or hide output.
func checkName(field, s string, max int) error {
	if s == "" {
		return reject(KindInvalid, "%s is empty", field)
	}
	if len(s) > max {
		return reject(KindInvalid, "%s is longer than %d bytes", field, max)
	}
	if !utf8.ValidString(s) {
		return reject(KindInvalid, "%s is not valid UTF-8", field)
	}
	for _, c := range s {
		if !unicode.IsPrint(c) || unicode.IsSpace(c) || unicode.Is(unicode.Bidi_Control, c) {
			return reject(KindInvalid, "%s %q has a space, control or bidi character", field, s)
		}
	}
	return nil
}

// checkType accepts the characters Slurm GRES type names use in practice.
// The daemon matches the name against its configured types, so anything
// else could only be a mistake.
func checkType(s string) error {
	if s == "" {
		return reject(KindInvalid, "gpu_type is empty")
	}
	if len(s) > MaxTypeLen {
		return reject(KindInvalid, "gpu_type is longer than %d bytes", MaxTypeLen)
	}
	for i := 0; i < len(s); i++ {
		if !ValidTypeByte(s[i]) {
			return reject(KindInvalid, "gpu_type %q has a character other than letters, digits, '_', '-' and '.'", s)
		}
	}
	return nil
}

// ValidTypeByte tells whether c may appear in a GPU type name.
func ValidTypeByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
