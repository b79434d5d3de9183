package policy

import "math"

// The min_total_duration policies minimize the makespan
// max_j R_j / Σ_t T[j][t]·X[j][t]. With z = 1/makespan this is one exact
// LP instead of a bisection over feasibility LPs:
//
//	maximize z  s.t.  Σ_t T[j][t]·X[j][t] >= R_j·z  for every job with R_j > 0
//
// min_total_duration is the heterogeneity-agnostic baseline (every usable
// type assumed as fast as the job's v100), min_total_duration_perf uses the
// measured throughputs, min_total_duration_packed adds the problem's pairs.
//
// Jobs that cannot run on any type of the cluster get an empty row and are
// left out of the makespan. Allocation.Objective is the makespan in seconds under the measured
// throughputs (for the agnostic variant, the makespan its allocation would
// really give).

func init() {
	declareTraits(Traits{Objective: ObjectiveMakespan}, "min_total_duration")
	declareTraits(Traits{TypeAware: true, Objective: ObjectiveMakespan}, "min_total_duration_perf")
	declareTraits(Traits{TypeAware: true, Packs: true, Objective: ObjectiveMakespan}, "min_total_duration_packed")
	registerFunc("min_total_duration", func(p *Problem) (*Allocation, error) {
		return minMakespan(p, "min_total_duration", agnosticThroughput(p), false)
	})
	registerFunc("min_total_duration_perf", func(p *Problem) (*Allocation, error) {
		return minMakespan(p, "min_total_duration_perf", realThroughput, false)
	})
	registerFunc("min_total_duration_packed", func(p *Problem) (*Allocation, error) {
		return minMakespan(p, "min_total_duration_packed", realThroughput, true)
	})
}

func minMakespan(p *Problem, name string, tput throughputFunc, packed bool) (*Allocation, error) {
	b, err := newPlacementLP(p, tput, packed)
	if err != nil {
		return nil, err
	}
	// The jobs with steps left that can run somewhere (a job that runs
	// nowhere is left out, as in Makespan).
	var rows []int
	scale := 0.0 // steps scaled so z is of order 1 whatever the units: z' = z·scale
	for i := range p.Jobs {
		r := p.Jobs[i].StepsRemaining
		scale = math.Max(scale, r)
		if r > 0 && len(b.effCols[i]) > 0 {
			rows = append(rows, i)
		}
	}
	var a *Allocation
	if len(rows) == 0 {
		// Nothing left that can run: nothing to allocate (and z alone
		// would be unbounded).
		a = b.allocation(p, name, make([]float64, b.lp.NumColumns()))
	} else {
		z := b.lp.AddColumn(0, Inf, 1)
		b.lp.Maximize()
		for _, i := range rows {
			b.effectiveRow(i, []int{z}, []float64{-p.Jobs[i].StepsRemaining / scale}, 0, Inf)
		}
		if a, err = b.solve(p, name); err != nil {
			return nil, err
		}
	}
	if a.Objective, err = Makespan(p, a); err != nil {
		return nil, err
	}
	return a, nil
}
