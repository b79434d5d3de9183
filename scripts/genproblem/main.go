// Command genproblem writes a `gavel-slurm allocate` input with N jobs drawn
// from the reference throughput table, on k80/p100/v100 with N/4 GPUs of
// each type. scripts/bench.sh uses it to time whole allocate runs.
//
// With --distinct every job is different, as measured throughputs make them:
// each job's rates are its model's single-GPU rates times its scale factor
// (1 to 8, uniform) times an independent factor in [0.5, 1.5) per type, and
// its weight is uniform in [1, 2). No two jobs then fall in one LP class.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"

	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
	"github.com/gavel-slurm/gavel-slurm/policy"
)

func main() {
	jobs := flag.Int("jobs", 2048, "number of jobs")
	seed := flag.Int64("seed", 0, "random seed")
	entities := flag.Int("entities", 0, "spread jobs over this many entities (weights 1..k, alternating fairness/fifo)")
	pairs := flag.Bool("pairs", false, "add every co-location pair of single-GPU jobs that the table measured")
	history := flag.Bool("history", false, "give every job an isolated time below its time since start (finish-time fairness inputs)")
	costs := flag.Bool("costs", false, "add cloud-like prices per GPU-hour and, for every third job, an SLO it can meet")
	distinct := flag.Bool("distinct", false, "make every job distinct: scale factors 1-8, weights 1-2, rates perturbed per job and type")
	flag.Parse()

	table, err := throughputs.Reference()
	if err != nil {
		fmt.Fprintln(os.Stderr, "genproblem:", err)
		os.Exit(1)
	}
	rng := rand.New(rand.NewSource(*seed))
	types := table.Types()
	p := policy.Problem{GPUs: map[string]int{}}
	for _, t := range types {
		p.GPUs[t] = max(*jobs/4, 1)
	}
	if *entities > 0 {
		p.Entities = map[string]policy.Entity{}
		for e := 0; e < *entities; e++ {
			pol := "fairness"
			if e%2 == 1 {
				pol = "fifo"
			}
			p.Entities[fmt.Sprintf("e%d", e)] = policy.Entity{Weight: float64(e + 1), Policy: pol}
		}
	}
	if *costs {
		// Approximate on-demand prices, $ per GPU-hour.
		p.Costs = map[string]float64{"k80": 0.90, "p100": 1.46, "v100": 3.06}
	}
	var models []string
	for i := 0; i < *jobs; i++ {
		tpl := throughputs.Templates[rng.Intn(len(throughputs.Templates))]
		sf := 1
		if tpl.Distributed && rng.Float64() < 0.2 {
			sf = []int{2, 4, 8}[rng.Intn(3)]
		}
		j := policy.Job{
			ID:             fmt.Sprint(i),
			Throughputs:    map[string]float64{},
			ScaleFactor:    sf,
			Weight:         1,
			StepsRemaining: float64(1000 + rng.Intn(100000)),
			TimeSinceStart: float64(rng.Intn(36000)),
			Arrival:        float64(i),
		}
		if *distinct {
			j.ScaleFactor = 1 + rng.Intn(8)
			j.Weight = 1 + rng.Float64()
			for _, t := range types {
				j.Throughputs[t] = table.Isolated(tpl.Model, 1, t) * float64(j.ScaleFactor) * (0.5 + rng.Float64())
			}
		} else {
			for _, t := range types {
				j.Throughputs[t] = table.Isolated(tpl.Model, sf, t)
			}
		}
		if *history {
			j.IsolatedTime = j.TimeSinceStart * (0.2 + 0.8*rng.Float64())
		}
		if *costs && i%3 == 0 {
			// Ten times the time the job needs alone on its fastest type.
			fastest := 0.0
			for _, v := range j.Throughputs {
				fastest = max(fastest, v)
			}
			j.SLO = 10 * j.StepsRemaining / fastest
		}
		if *entities > 0 {
			j.Entity = fmt.Sprintf("e%d", rng.Intn(*entities))
		}
		p.Jobs = append(p.Jobs, j)
		models = append(models, tpl.Model)
	}
	if *pairs {
		for a := 0; a < len(p.Jobs); a++ {
			for b := a + 1; b < len(p.Jobs); b++ {
				if p.Jobs[a].ScaleFactor != 1 || p.Jobs[b].ScaleFactor != 1 {
					continue
				}
				pair := policy.Pair{Jobs: [2]string{p.Jobs[a].ID, p.Jobs[b].ID}, Throughputs: map[string][2]float64{}}
				for _, t := range types {
					if x, y, ok := table.Pair(models[a], models[b], 1, t); ok && x > 0 && y > 0 {
						pair.Throughputs[t] = [2]float64{x, y}
					}
				}
				if len(pair.Throughputs) > 0 {
					p.Pairs = append(p.Pairs, pair)
				}
			}
		}
	}
	enc := json.NewEncoder(os.Stdout)
	if err := enc.Encode(p); err != nil {
		fmt.Fprintln(os.Stderr, "genproblem:", err)
		os.Exit(1)
	}
}
