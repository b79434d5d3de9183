// Package sim is the trace-driven simulator: it replays a workload on a
// virtual cluster with a virtual clock, driving the same policy code
// (package policy) and the same round mechanism (package rounds) as the
// daemon, so a simulated schedule is the one the daemon would produce.
//
// The loop follows the reference simulator: rounds of RoundSeconds in which
// every scheduled job runs min(int(rate·round), remaining) steps; a round
// ends when its last micro-task ends; arrivals are admitted at round
// boundaries; the allocation is recomputed on arrivals and completions, at
// most every MinResetInterval seconds.
//
// The package does no I/O; wall-clock measurements use the injected Clock.
package sim

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
	"github.com/gavel-slurm/gavel-slurm/internal/workload"
	"github.com/gavel-slurm/gavel-slurm/policy"
	"github.com/gavel-slurm/gavel-slurm/rounds"
)

// Config describes one simulation run.
type Config struct {
	// GPUs is the number of GPUs of each type.
	GPUs map[string]int
	// GPUsPerServer groups each type's GPUs into servers (1 when missing).
	// Placement does not change throughputs, as in the reference, but it
	// decides which moves count as lease extensions.
	GPUsPerServer map[string]int
	// PolicyName is the registered policy to run (see policy.Names).
	PolicyName string
	// Policy, when set, is used instead of policy.New(PolicyName); tests
	// inject hand-checkable policies this way.
	Policy policy.Policy
	// Table gives every job's step rates.
	Table *throughputs.Table
	// Seed feeds the policy's and the mechanism's random choices (the type
	// order shuffle of heterogeneity-agnostic policies uses Seed+5, as in
	// the reference).
	Seed int64
	// RoundSeconds is the round length.
	RoundSeconds float64
	// MinResetInterval is the least time between allocation recomputations
	// (with the improved mechanism: between resets of the time received;
	// the allocation follows every arrival and completion).
	MinResetInterval float64
	// Mechanism is the round mechanism's variant. Empty means
	// rounds.VariantGavel, the reference's, which the package's tests and
	// the reproductions of the paper compare against.
	Mechanism rounds.Variant
	// Faithful adds, with the reference mechanism, the reference's
	// behaviours that the paper does not intend (see reference.go); the
	// reproductions of the paper leave it off.
	Faithful bool
	// PreemptionOverhead is the time a job loses each time it restarts
	// after having run before (moved to other GPUs, or resumed after
	// waiting). Lease extensions cost nothing. The paper's simulations use 0.
	PreemptionOverhead float64
	// RestartCosts draws each job's own restart cost, added to
	// PreemptionOverhead (zero value: none). The job loses its cost at
	// every restart, and the mechanism is told it (rounds.Job.RestartCost).
	RestartCosts RestartCosts
	// RestartHold and RestartHoldMax are the restart rule's knobs
	// (rounds.Options); 0 leaves the variant's (on for
	// rounds.VariantRestart only).
	RestartHold, RestartHoldMax, RestartFinish float64
	// KeepRunningRoom is policy.Options.KeepRunningRoom, for the restart
	// mechanism's finish_time_fairness_perf (0: no job's ρ above the
	// vertex's).
	KeepRunningRoom float64
	// RestartHoldMin is rounds.Options.RestartHoldMin (0: the variant's,
	// rounds.DefaultRestartHoldRounds rounds for rounds.VariantRestart).
	RestartHoldMin float64
	// MaxTime is the simulated time (seconds) after which a run stops
	// with an error instead of running on (0: ten years), so a job of
	// absurd length cannot make a run last forever.
	MaxTime float64
	// MinRunTime is the least time (seconds) a job runs after a start
	// before the mechanism may stop it (the daemon's scheduler.min_run_time;
	// 0, the reference behaviour, lets every round move any job).
	MinRunTime float64
	// FirstMeasured and EndMeasured select the measured jobs by id
	// [FirstMeasured, EndMeasured). The run continues until all of them
	// finish. EndMeasured 0 measures every job and needs a finite workload.
	FirstMeasured, EndMeasured int
	// MaxActive stops the run with ErrSaturated once more jobs than this
	// are in the system at once (0: no limit). Past saturation a
	// continuous workload's queue grows without bound, so sweeps use it to
	// cut such points short.
	MaxActive int
	// Costs is an optional price per GPU-hour of each type.
	Costs map[string]float64
	// Estimate, when set, hides the jobs' true throughputs from the policy,
	// which sees only what the learning estimator measures (see
	// Estimation); nil gives the policy the true throughputs.
	Estimate *Estimation
	// Timeline records, round by round, the GPU-seconds each type was
	// busy (Result.Timeline), for charts of use over time.
	Timeline bool
	// Clock, when set, times the run and the solver; nil leaves the wall
	// times at 0.
	Clock func() time.Time
}

// Defaults returns the reference settings: 360 s rounds, resets at most
// every 1920 s, no preemption overhead, the embedded throughput table.
func Defaults() (Config, error) {
	table, err := throughputs.Reference()
	if err != nil {
		return Config{}, err
	}
	return Config{
		Table:            table,
		RoundSeconds:     rounds.DefaultRoundSeconds,
		MinResetInterval: rounds.DefaultMinResetInterval,
	}, nil
}

// ErrSaturated reports a run stopped because Config.MaxActive jobs were
// in the system at once.
var ErrSaturated = errors.New("cluster saturated")

// Source yields jobs in non-decreasing arrival order. *workload.Generator
// is one; Jobs wraps a slice.
type Source interface {
	Next() (workload.Job, bool)
}

// Jobs is a Source over a slice, e.g. a parsed trace.
type Jobs []workload.Job

// sliceSource walks a Jobs slice.
type sliceSource struct {
	jobs []workload.Job
	next int
}

func (s *sliceSource) Next() (workload.Job, bool) {
	if s.next >= len(s.jobs) {
		return workload.Job{}, false
	}
	s.next++
	return s.jobs[s.next-1], true
}

// Source returns a fresh Source over the jobs.
func (j Jobs) Source() Source { return &sliceSource{jobs: j} }

// validate checks the configuration and returns the sorted GPU types.
func (c *Config) validate() ([]string, error) {
	if c.Table == nil {
		return nil, errors.New("no throughput table")
	}
	if c.Policy == nil && c.PolicyName == "" {
		return nil, errors.New("no policy")
	}
	if len(c.GPUs) == 0 {
		return nil, errors.New("empty cluster")
	}
	types := make([]string, 0, len(c.GPUs))
	for t, n := range c.GPUs {
		if n < 1 {
			return nil, fmt.Errorf("cluster: %d GPUs of type %s, need at least 1", n, t)
		}
		types = append(types, t)
	}
	sort.Strings(types)
	for t, n := range c.GPUsPerServer {
		total, ok := c.GPUs[t]
		switch {
		case !ok:
			return nil, fmt.Errorf("GPUs per server given for %s, which the cluster does not have", t)
		case n < 1:
			return nil, fmt.Errorf("GPUs per server of %s: %d, need at least 1", t, n)
		case total%n != 0:
			return nil, fmt.Errorf("%d %s GPUs do not divide into servers of %d", total, t, n)
		}
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case !(c.RoundSeconds > 0) || !finite(c.RoundSeconds):
		return nil, fmt.Errorf("round length %v s: must be positive", c.RoundSeconds)
	case c.MinResetInterval < 0 || !finite(c.MinResetInterval):
		return nil, fmt.Errorf("minimum reset interval %v s: must be >= 0", c.MinResetInterval)
	case c.PreemptionOverhead < 0 || !finite(c.PreemptionOverhead) || c.PreemptionOverhead >= c.RoundSeconds:
		return nil, fmt.Errorf("preemption overhead %v s: must be >= 0 and shorter than a round (%v s)", c.PreemptionOverhead, c.RoundSeconds)
	case c.PreemptionOverhead+c.RestartCosts.Max() >= c.RoundSeconds:
		return nil, fmt.Errorf("restart costs up to %v s (overhead %v s and %s): must be shorter than a round (%v s)",
			c.PreemptionOverhead+c.RestartCosts.Max(), c.PreemptionOverhead, c.RestartCosts, c.RoundSeconds)
	case !(c.KeepRunningRoom >= 0 && c.KeepRunningRoom <= 1):
		return nil, fmt.Errorf("keep-running room %v: must be within [0, 1]", c.KeepRunningRoom)
	case c.RestartHoldMin < 0 || !finite(c.RestartHoldMin):
		return nil, fmt.Errorf("shortest restart hold %v s: must be >= 0", c.RestartHoldMin)
	case c.RestartHold < 0 || !finite(c.RestartHold) || c.RestartHoldMax < 0 || !finite(c.RestartHoldMax):
		return nil, fmt.Errorf("restart hold %v, cap %v s: must be >= 0", c.RestartHold, c.RestartHoldMax)
	case c.MaxTime < 0 || !finite(c.MaxTime):
		return nil, fmt.Errorf("maximum simulated time %v s: must be >= 0", c.MaxTime)
	case c.MinRunTime < 0 || !finite(c.MinRunTime):
		return nil, fmt.Errorf("minimum run time %v s: must be >= 0", c.MinRunTime)
	case c.MaxActive < 0:
		return nil, fmt.Errorf("maximum active jobs %d: must be >= 0", c.MaxActive)
	case c.FirstMeasured < 0 || c.EndMeasured < 0:
		return nil, fmt.Errorf("measurement window %d:%d: ids must be >= 0", c.FirstMeasured, c.EndMeasured)
	case c.EndMeasured > 0 && c.EndMeasured <= c.FirstMeasured:
		return nil, fmt.Errorf("measurement window %d:%d is empty", c.FirstMeasured, c.EndMeasured)
	case c.EndMeasured == 0 && c.FirstMeasured > 0:
		return nil, fmt.Errorf("measurement window starts at %d but has no end", c.FirstMeasured)
	}
	if c.Mechanism != "" {
		if _, err := rounds.ParseVariant(string(c.Mechanism)); err != nil {
			return nil, err
		}
	}
	if c.Estimate != nil {
		if err := c.Estimate.validate(); err != nil {
			return nil, err
		}
	}
	for t, p := range c.Costs {
		if _, ok := c.GPUs[t]; !ok {
			return nil, fmt.Errorf("cost given for %s, which the cluster does not have", t)
		}
		if p < 0 || !finite(p) {
			return nil, fmt.Errorf("cost of %s: %v, must be >= 0", t, p)
		}
	}
	return types, nil
}

// servers lays the cluster out as servers named <type>-<n>.
func (c *Config) servers(types []string) rounds.Cluster {
	var cl rounds.Cluster
	for _, t := range types {
		per := c.GPUsPerServer[t]
		if per == 0 {
			per = 1
		}
		for i := 0; i < c.GPUs[t]/per; i++ {
			cl.Servers = append(cl.Servers, rounds.Server{ID: fmt.Sprintf("%s-%d", t, i), Type: t, GPUs: per})
		}
	}
	return cl
}
