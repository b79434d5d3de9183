package tesim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gavel-slurm/gavel-slurm/internal/tepreempt"
)

// Methods are the methods the experiment compares, in the paper's order.
var Methods = []string{"fifo", "lrtp", "random", "fitgpp"}

// Settings are a method's knobs.
type Settings struct {
	// Weight is FitGpp's s.
	Weight float64
	// Cap is the most preemptions per job; 0 is none. The paper caps
	// FitGpp at 1 and leaves its baselines uncapped.
	Cap int
}

// NewChooser returns the chooser of a method ("fifo" has none: nil).
// seed only matters to "random".
func NewChooser(method string, s Settings, seed uint64) (tepreempt.Chooser, error) {
	switch method {
	case "fifo":
		return nil, nil
	case "fitgpp":
		return tepreempt.FitGpp{Weight: s.Weight, MaxPreemptions: s.Cap}, nil
	case "lrtp":
		return tepreempt.LRTP{MaxPreemptions: s.Cap}, nil
	case "random":
		return tepreempt.Random{MaxPreemptions: s.Cap, Rand: rand.New(rand.NewPCG(seed, 0xbad5eed))}, nil
	}
	return nil, fmt.Errorf("unknown method %q (want one of %v)", method, Methods)
}

// Experiment is the synthetic experiment: Workloads sets of Jobs jobs each
// (seeds Seed, Seed+1, ...), arrivals set by FIFO at Load, every method run
// on the same jobs; the random method Repeats times per set.
type Experiment struct {
	Cluster   Cluster
	Workload  Workload
	Load      float64
	Jobs      int
	Workloads int
	Seed      uint64
	Repeats   int
}

// Percentiles are the 50th, 95th and 99th.
type Percentiles struct {
	P50, P95, P99 float64
}

// Result is one method's figures over every run, jobs pooled.
type Result struct {
	Method   string
	Settings Settings
	Runs     int
	TE, BE   Percentiles
	// PreemptedJobs is the share of all jobs preempted at least once,
	// and PreemptedTimes[k] the share preempted exactly k+1 times (k < 3)
	// or more (k = 3): the paper's Tables 3 and 4.
	PreemptedJobs  float64
	PreemptedTimes [4]float64
	// Interval is the minutes from the preemption signal to the
	// victim's next start, 50th/95th/99th (the paper's Table 2).
	Interval Percentiles
	// Rules counts the choosers' answers (see Outcome.Rules).
	Rules map[string]int
}

// Run runs one method with its settings over every workload.
func (x Experiment) Run(method string, s Settings) (Result, error) {
	if x.Workloads <= 0 || x.Jobs <= 0 {
		return Result{}, fmt.Errorf("experiment: want at least one workload of at least one job")
	}
	if x.Load <= 0 {
		return Result{}, fmt.Errorf("experiment: load %v: want > 0", x.Load)
	}
	if _, err := NewChooser(method, s, 0); err != nil {
		return Result{}, err
	}
	repeats := 1
	if method == "random" && x.Repeats > 1 {
		repeats = x.Repeats
	}
	res := Result{Method: method, Settings: s, Rules: map[string]int{}}
	var te, be, intervals []float64
	jobs, preempted := 0, [5]int{}
	for w := range x.Workloads {
		seed := x.Seed + uint64(w)
		set, err := Generate(x.Workload, x.Jobs, seed)
		if err != nil {
			return Result{}, err
		}
		if err := Arrivals(set, x.Cluster, x.Load); err != nil {
			return Result{}, fmt.Errorf("workload %d: arrivals: %w", seed, err)
		}
		for r := range repeats {
			ch, _ := NewChooser(method, s, seed*1000+uint64(r))
			out, err := Run(set, x.Cluster, ch)
			if err != nil {
				return Result{}, fmt.Errorf("workload %d, %s: %w", seed, method, err)
			}
			res.Runs++
			for i, sd := range out.Slowdown {
				if out.TE[i] {
					te = append(te, sd)
				} else {
					be = append(be, sd)
				}
				preempted[min(out.Preempted[i], 4)]++
			}
			jobs += len(out.Slowdown)
			intervals = append(intervals, out.Intervals...)
			for k, v := range out.Rules {
				res.Rules[k] += v
			}
		}
	}
	res.TE, res.BE, res.Interval = percentiles(te), percentiles(be), percentiles(intervals)
	for k := 1; k <= 4; k++ {
		res.PreemptedTimes[k-1] = float64(preempted[k]) / float64(jobs)
		res.PreemptedJobs += res.PreemptedTimes[k-1]
	}
	return res, nil
}

// percentiles interpolates linearly between the closest ranks; no values
// give zeros (FIFO has no preemption intervals), which JSON can carry.
func percentiles(v []float64) Percentiles {
	if len(v) == 0 {
		return Percentiles{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return Percentiles{P50: quantile(s, 0.50), P95: quantile(s, 0.95), P99: quantile(s, 0.99)}
}

func quantile(sorted []float64, q float64) float64 {
	pos := q * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(sorted)-1)
	return sorted[lo] + (pos-float64(lo))*(sorted[hi]-sorted[lo])
}
