package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"time"

	"github.com/gavel-slurm/gavel-slurm/internal/estimate"
	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
	"github.com/gavel-slurm/gavel-slurm/rounds"
)

// Estimation hides every job's true throughputs from the policy: the
// policy sees only what the learning estimator (internal/estimate) has
// learned from measurements of the job's own rounds, as the daemon does
// with node collectors. Jobs still progress at their true rates.
//
// Every job is an unknown model to the estimator (its tag names none), so
// it starts at the estimator's default, the same rate on every type: the
// worst case of a site whose models the table does not know. A job tagged
// with a model the table knows would start at its exact rates, since the
// simulator's true rates are the table's; that case needs no simulation.
type Estimation struct {
	// Noise is the spread of each measurement's multiplicative error: the
	// measured rate is the true one times exp(Noise·z), z drawn from a
	// standard normal stream seeded by Config.Seed. 0 measures exactly.
	Noise float64
	// NoReference hides the reference table from the estimator as well:
	// it learns only from the jobs it measured. The simulator's true rates
	// are the table's rows, so with the table an unknown job measured on
	// two types is matched to its own row; without it, nothing is known in
	// advance, as for a site whose models all differ from the table's.
	NoReference bool
	// Options tune the estimator; zero fields take its defaults.
	Options estimate.Options
}

func (e *Estimation) validate() error {
	if e.Noise < 0 || math.IsNaN(e.Noise) || math.IsInf(e.Noise, 0) {
		return fmt.Errorf("estimation noise %v: must be a finite number >= 0", e.Noise)
	}
	return nil
}

// estimateEpoch is the wall-clock time of simulated time 0: the estimator
// takes times, the simulator counts seconds.
var estimateEpoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// learner is the simulator's side of estimation: it measures the rounds
// jobs run, as collectors would, and hands the policy the estimator's rates.
type learner struct {
	est   *estimate.Estimator
	noise float64
	rng   *rand.Rand
	// warmUp (seconds) is the estimator's: an interval ending sooner after
	// a start is skipped by the estimator, so it teaches nothing new.
	warmUp float64
	// fresh says that some job was measured on a type for the first time
	// since the last allocation: its rates changed from a guess to a
	// measurement, which is worth a new allocation. Later measurements of
	// the same type only refine the rate, and the next allocation due for
	// another reason picks them up, so the policy is not solved each round.
	fresh bool
	// errors collects |estimated − true| / true of every (job, type) the
	// policy was given, at every allocation.
	errors []float64
}

func newLearner(cfg Config, types []string) (*learner, error) {
	ref := cfg.Table
	if cfg.Estimate.NoReference {
		var err error
		if ref, err = emptyTable(types); err != nil {
			return nil, err
		}
	}
	est, err := estimate.New(ref, cfg.Estimate.Options)
	if err != nil {
		return nil, fmt.Errorf("estimator: %w", err)
	}
	warmUp := cfg.Estimate.Options.WarmUp
	if warmUp == 0 {
		warmUp = estimate.DefaultOptions().WarmUp
	}
	// The noise stream is the simulator's own, so that it leaves the
	// workload's and the mechanism's random choices as they are.
	seed := uint64(cfg.Seed)
	return &learner{
		est: est, noise: cfg.Estimate.Noise, warmUp: warmUp.Seconds(),
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}, nil
}

// emptyTable is a throughput table of the cluster's types without a job.
func emptyTable(types []string) (*throughputs.Table, error) {
	empty := make(map[string]map[string]any, len(types))
	for _, t := range types {
		empty[t] = map[string]any{}
	}
	data, err := json.Marshal(empty)
	if err != nil {
		return nil, fmt.Errorf("empty reference table: %w", err)
	}
	table, err := throughputs.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("empty reference table: %w", err)
	}
	return table, nil
}

// at converts simulated seconds to the estimator's time.
func at(seconds float64) time.Time {
	return estimateEpoch.Add(time.Duration(seconds * float64(time.Second)))
}

// key is the estimator's name for j: no model, whatever the trace says.
func (j *job) estimateKey() estimate.JobKey {
	return estimate.JobKey{ID: j.key, Scale: j.spec.ScaleFactor}
}

// observe reports that j ran on type index typ (named name) from its
// current start until end, at its true rate blurred by the noise.
func (l *learner) observe(j *job, typ int, name string, end float64) error {
	rate := j.rates[typ]
	if l.noise > 0 {
		rate *= math.Exp(l.noise * l.rng.NormFloat64())
	}
	since := end - j.runSince
	m := estimate.Measurement{
		JobID: j.key, Scale: j.spec.ScaleFactor, Type: name, StepsPerSecond: rate,
		At: at(end), SinceStart: time.Duration(since * float64(time.Second)),
	}
	if err := l.est.Observe(m); err != nil {
		return fmt.Errorf("measurement of job %s: %w", j.key, err)
	}
	if since >= l.warmUp && !j.measuredOn[typ] {
		j.measuredOn[typ] = true
		l.fresh = true
	}
	return nil
}

// placeholder is what the mechanism is told of a job before the estimator
// is first asked (at the next allocation, which the arrival triggers): it
// runs where its true rate is positive. The mechanism only uses it to
// know where the job can run, and holds the job until the allocation.
func placeholder(j *job, types []string) map[string]float64 {
	out := make(map[string]float64, len(types))
	for i, t := range types {
		if j.rates[i] > 0 {
			out[t] = 1
		} else {
			out[t] = 0
		}
	}
	return out
}

// refresh asks the estimator for every active job's rates and gives the
// mechanism those that changed. A type where the job's true rate is 0 (it
// does not fit there) stays 0: a job that cannot start on a type is known
// to the site from its first failure, not learned from a rate.
func (s *simulator) refreshEstimates() error {
	now := at(s.now)
	for _, j := range s.active {
		got := s.learn.est.Rates(j.estimateKey(), s.types, now)
		rates := make(map[string]float64, len(s.types))
		for i, t := range s.types {
			if j.rates[i] == 0 {
				rates[t] = 0
				continue
			}
			v := got[t].StepsPerSecond
			if !(v > 0) || math.IsInf(v, 0) {
				return fmt.Errorf("estimator gave job %s rate %v on %s (%s)", j.key, v, t, got[t].Detail)
			}
			rates[t] = v
		}
		for i, t := range s.types {
			if j.rates[i] > 0 {
				s.learn.errors = append(s.learn.errors, math.Abs(rates[t]-j.rates[i])/j.rates[i])
			}
		}
		if maps.Equal(rates, j.seen) {
			continue
		}
		if err := s.mech.SetThroughputs(j.key, rates); err != nil {
			return err
		}
		j.seen = rates
	}
	s.learn.fresh = false
	return nil
}

// noteFreshMeasurements asks the mechanism for a new allocation when a job
// was measured on a new type (it still honours the least interval between
// allocations).
func (s *simulator) noteFreshMeasurements() {
	if s.learn != nil && s.learn.fresh {
		s.mech.NoteEvent(rounds.EventThroughputChange)
	}
}

// errEstimatePairs refuses packing policies under estimation.
var errEstimatePairs = errors.New("estimation covers isolated rates only; packing policies need co-located rates, which are not estimated")
