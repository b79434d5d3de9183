package workload

import (
	"errors"
	"fmt"
	"math"

	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
)

// GeneratorOptions describe a synthetic workload.
type GeneratorOptions struct {
	// Rate is the mean arrival rate in jobs per hour; 0 puts every job at
	// t = 0 (a static workload).
	Rate float64
	// Jobs is the number of jobs to generate; 0 means unbounded (only
	// allowed with a positive Rate).
	Jobs int
	// Seed is the run's seed. As in the reference simulator, job
	// properties are drawn from the stream seeded with Seed+2 and
	// inter-arrival gaps from the stream seeded with Seed+3.
	Seed int64
	// MultiGPU draws scale factors from the Philly mix (70% 1, 10% 2,
	// 15% 4, 5% 8) instead of always 1.
	MultiGPU bool
	// MultiPriority gives 20% of the jobs weight 5.
	MultiPriority bool
}

// Generator yields synthetic jobs in arrival order.
type Generator struct {
	opts     GeneratorOptions
	table    *throughputs.Table
	jobRNG   *Rand
	gapRNG   *Rand
	lam      float64 // mean gap in seconds; 0 for static workloads
	next     float64 // arrival time of the next job
	produced int
}

// NewGenerator checks opts against table and returns a generator.
func NewGenerator(table *throughputs.Table, opts GeneratorOptions) (*Generator, error) {
	if table == nil {
		return nil, errors.New("workload generator needs a throughput table")
	}
	switch {
	case opts.Rate < 0 || math.IsNaN(opts.Rate) || math.IsInf(opts.Rate, 0):
		return nil, fmt.Errorf("arrival rate %v jobs/hour: must be a finite number >= 0", opts.Rate)
	case opts.Jobs < 0:
		return nil, fmt.Errorf("job count %d: must be >= 0", opts.Jobs)
	case opts.Rate == 0 && opts.Jobs == 0:
		return nil, errors.New("a static workload (rate 0) needs a job count")
	}
	for _, tpl := range throughputs.Templates {
		sfs := ScaleFactors[:1]
		if tpl.Distributed && opts.MultiGPU {
			sfs = ScaleFactors[:]
		}
		for _, sf := range sfs {
			if _, err := ReferenceRate(table, tpl.Model, sf); err != nil {
				return nil, err
			}
		}
	}
	g := &Generator{
		opts:   opts,
		table:  table,
		jobRNG: NewRand(opts.Seed + 2),
		gapRNG: NewRand(opts.Seed + 3),
	}
	if opts.Rate > 0 {
		g.lam = 3600 / opts.Rate
	}
	return g, nil
}

// Next returns the next job, or false once Jobs jobs have been produced.
func (g *Generator) Next() (Job, bool) {
	if g.opts.Jobs > 0 && g.produced >= g.opts.Jobs {
		return Job{}, false
	}
	job := g.draw()
	job.Arrival = g.next
	g.next += g.gapRNG.ExpGap(g.lam)
	g.produced++
	return job, true
}

// All returns the remaining jobs; it is an error on unbounded workloads.
func (g *Generator) All() ([]Job, error) {
	if g.opts.Jobs == 0 {
		return nil, errors.New("cannot list an unbounded workload")
	}
	var jobs []Job
	for j, ok := g.Next(); ok; j, ok = g.Next() {
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// draw produces one job's properties. The order and number of draws follow
// the reference generator so that the same seed yields the same jobs: the
// scale factor is always drawn, even for single-GPU workloads.
func (g *Generator) draw() Job {
	r := g.jobRNG
	sf := referenceScale(r.Uniform(0, 1))
	var duration float64
	if r.Float64() >= 0.8 {
		duration = 60 * libmPow(10, r.Uniform(3, 4))
	} else {
		duration = 60 * libmPow(10, r.Uniform(1.5, 3))
	}
	if !g.opts.MultiGPU {
		sf = 1
	}
	tpl := throughputs.Templates[r.Choice(len(throughputs.Templates))]
	for sf > 1 && !tpl.Distributed {
		tpl = throughputs.Templates[r.Choice(len(throughputs.Templates))]
	}
	priority := 1.0
	if g.opts.MultiPriority {
		if r.Uniform(0, 1) <= 0.2 {
			priority = 5
		}
	}
	return Job{
		Model:       tpl.Model,
		ScaleFactor: sf,
		Duration:    duration,
		TotalSteps:  duration * g.table.Isolated(tpl.Model, sf, ReferenceType),
		Priority:    priority,
	}
}

// referenceScale is the scale factor of the Philly mix (ScaleFactors by
// PhillyScaleWeights) that u in [0, 1) stands for, with the reference
// generator's bounds: 70%, 80% and 95%, each inclusive at the top, so
// that u of exactly 0.8 or 0.95 gives the smaller scale factor where Pick
// would give the larger one.
func referenceScale(u float64) int {
	switch {
	case u < 0.7:
		return ScaleFactors[0]
	case u <= 0.8:
		return ScaleFactors[1]
	case u <= 0.95:
		return ScaleFactors[2]
	}
	return ScaleFactors[3]
}
