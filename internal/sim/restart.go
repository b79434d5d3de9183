package sim

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// RestartCosts draws each job's restart cost: the time it loses each time
// it starts again after having run (saving its checkpoint in the grace
// period, the requeue, the start, the reload). It adds to the flat
// Config.PreemptionOverhead. The zero value draws 0 for every job.
//
// A job's draw depends only on the seed, its id and its model, not on the
// order of draws, so two runs of the same workload that differ only in
// the mechanism give every job the same cost.
type RestartCosts struct {
	kind     restartKind
	min, max float64 // fixed (min) and uniform draws, seconds
	// byModel lists per-model costs: a model matches a name equal to it
	// or followed by a space ("ResNet-50" matches "ResNet-50 (batch size
	// 64)"); the longest match wins, fallback covers the rest.
	byModel  []modelCost
	fallback float64
	spec     string
}

type restartKind uint8

const (
	restartNone restartKind = iota
	restartFixed
	restartUniform
	restartModel
)

type modelCost struct {
	name    string
	seconds float64
}

// ParseRestartCosts reads a restart cost distribution:
//
//	fixed:D             every job D (also just D)
//	uniform:A:B         uniform between A and B
//	model:M=D,M=D,*=D   per model (a measured table); * for the others (0 without)
//
// Durations are Go durations (30s, 5m).
func ParseRestartCosts(s string) (RestartCosts, error) {
	bad := func(why string) (RestartCosts, error) {
		return RestartCosts{}, fmt.Errorf("restart costs %q: %s (want fixed:D, uniform:A:B or model:NAME=D,...,*=D)", s, why)
	}
	dur := func(v string) (float64, error) {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil {
			return 0, err
		}
		if d < 0 {
			return 0, fmt.Errorf("%v is negative", d)
		}
		return d.Seconds(), nil
	}
	kind, rest, _ := strings.Cut(s, ":")
	r := RestartCosts{spec: s}
	switch kind {
	case "uniform":
		a, b, ok := strings.Cut(rest, ":")
		if !ok {
			return bad("uniform needs A:B")
		}
		var err error
		if r.min, err = dur(a); err != nil {
			return bad(err.Error())
		}
		if r.max, err = dur(b); err != nil {
			return bad(err.Error())
		}
		if r.max < r.min {
			return bad("B is below A")
		}
		r.kind = restartUniform
	case "model":
		r.kind = restartModel
		for _, part := range strings.Split(rest, ",") {
			name, v, ok := strings.Cut(part, "=")
			name = strings.TrimSpace(name)
			if !ok || name == "" {
				return bad(fmt.Sprintf("%q is not NAME=D", part))
			}
			sec, err := dur(v)
			if err != nil {
				return bad(err.Error())
			}
			if name == "*" {
				r.fallback = sec
				continue
			}
			r.byModel = append(r.byModel, modelCost{name, sec})
		}
		// Longest names first, so the most specific match wins.
		slices.SortStableFunc(r.byModel, func(a, b modelCost) int { return len(b.name) - len(a.name) })
	default:
		v := rest
		if kind != "fixed" {
			v = s
		}
		var err error
		if r.min, err = dur(v); err != nil {
			return bad(err.Error())
		}
		r.kind = restartFixed
	}
	return r, nil
}

// String is the spec the costs were parsed from ("" for none).
func (r RestartCosts) String() string { return r.spec }

// Max is the largest cost the distribution can draw.
func (r RestartCosts) Max() float64 {
	switch r.kind {
	case restartFixed:
		return r.min
	case restartUniform:
		return r.max
	case restartModel:
		m := r.fallback
		for _, c := range r.byModel {
			m = max(m, c.seconds)
		}
		return m
	}
	return 0
}

// Draw is the restart cost (seconds) of job id of the given model in a run
// with this seed.
func (r RestartCosts) Draw(seed int64, id int, model string) float64 {
	switch r.kind {
	case restartFixed:
		return r.min
	case restartUniform:
		return r.min + unitDraw(seed, id)*(r.max-r.min)
	case restartModel:
		for _, c := range r.byModel {
			if model == c.name || strings.HasPrefix(model, c.name+" ") {
				return c.seconds
			}
		}
		return r.fallback
	}
	return 0
}

// unitDraw is a number in [0, 1) that depends only on seed and id
// (SplitMix64), so costs are drawn apart from the workload's streams.
func unitDraw(seed int64, id int) float64 {
	z := uint64(seed)*0x9e3779b97f4a7c15 + uint64(id)*0xbf58476d1ce4e5b9 + 0x94d049bb133111eb
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11) / (1 << 53)
}

// validRestartCost checks a job's total restart cost against the round.
func validRestartCost(cost, round float64) error {
	if math.IsNaN(cost) || cost < 0 || cost >= round {
		return fmt.Errorf("restart cost %v s: must be >= 0 and shorter than a round (%v s)", cost, round)
	}
	return nil
}
