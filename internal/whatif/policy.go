package whatif

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/gavel-slurm/gavel-slurm/internal/sim"
	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
	"github.com/gavel-slurm/gavel-slurm/internal/workload"
)

// jobModel names job i's own row of the replay's throughput table: every
// job of a history is a job type of its own.
func jobModel(i int) string { return "job-" + strconv.Itoa(i) }

// Table is the workload's throughput table for the simulator: one job
// type per job, with its rates on every type of the cluster.
func (w *Workload) Table() (*throughputs.Table, error) {
	rows := make(map[throughputs.Key][]float64, len(w.Jobs))
	for i := range w.Jobs {
		j := &w.Jobs[i]
		row := make([]float64, len(w.Types))
		for k, t := range w.Types {
			row[k] = j.Rates[t]
		}
		rows[throughputs.Key{Model: jobModel(i), ScaleFactor: j.GPUs}] = row
	}
	t, err := throughputs.New(w.Types, rows)
	if err != nil {
		return nil, fmt.Errorf("replay throughput table: %w", err)
	}
	return t, nil
}

// SimJobs is the workload as the simulator's jobs, in the same order.
func (w *Workload) SimJobs() sim.Jobs {
	out := make(sim.Jobs, len(w.Jobs))
	for i := range w.Jobs {
		j := &w.Jobs[i]
		out[i] = workload.Job{Model: jobModel(i), ScaleFactor: j.GPUs, TotalSteps: j.Steps,
			Priority: j.Weight, Arrival: j.Arrival}
	}
	return out
}

// SimConfig is what a policy replay needs beyond the workload: the
// simulator's settings less the cluster, table and policy, which the
// replay sets.
type SimConfig = sim.Config

// ReplayPolicy runs the workload under a policy with the simulator (the
// daemon's own policy and round code). base carries the round length,
// mechanism and restart settings; its GPUs, Table, PolicyName and Seed are
// set here.
func ReplayPolicy(w *Workload, base SimConfig, policyName string, seed int64) (*Schedule, error) {
	table, err := w.Table()
	if err != nil {
		return nil, err
	}
	cfg := base
	cfg.GPUs = w.Cluster.GPUs
	cfg.GPUsPerServer = nil
	for t, per := range w.Cluster.PerServer {
		if per > 1 {
			if cfg.GPUsPerServer == nil {
				cfg.GPUsPerServer = map[string]int{}
			}
			cfg.GPUsPerServer[t] = per
		}
	}
	cfg.Table = table
	cfg.PolicyName = policyName
	cfg.Policy = nil
	cfg.Seed = seed
	cfg.Timeline = true
	cfg.FirstMeasured, cfg.EndMeasured = 0, 0
	res, err := sim.Run(cfg, w.SimJobs().Source())
	if err != nil {
		return nil, fmt.Errorf("replay under %s (seed %d): %w", policyName, seed, err)
	}
	if len(res.Jobs) != len(w.Jobs) {
		return nil, fmt.Errorf("replay under %s: %d of %d jobs admitted", policyName, len(res.Jobs), len(w.Jobs))
	}
	n := len(w.Jobs)
	s := &Schedule{Name: fmt.Sprintf("%s seed %d", policyName, seed), Policy: policyName, Seed: seed,
		Start: make([]float64, n), End: make([]float64, n), Type: make([]string, n), GPUSeconds: make([]map[string]float64, n)}
	for i, rec := range res.Jobs {
		if rec.ID != i {
			return nil, fmt.Errorf("replay under %s: job record %d has id %d", policyName, i, rec.ID)
		}
		s.Start[i], s.End[i] = rec.Start, rec.Finish
		s.GPUSeconds[i] = map[string]float64{}
		most := -1.0
		for k, secs := range rec.TimePerType {
			if secs > 0 {
				s.GPUSeconds[i][res.Types[k]] = secs * float64(rec.ScaleFactor)
				if secs > most {
					most, s.Type[i] = secs, res.Types[k]
				}
			}
		}
	}
	for _, sp := range res.Timeline {
		busy := make(map[string]float64, len(res.Types))
		if d := sp.End - sp.Start; d > 0 {
			for k, b := range sp.Busy {
				busy[res.Types[k]] = b / d
			}
		}
		s.Use = append(s.Use, Use{Start: sp.Start, End: sp.End, Busy: busy})
	}
	return s, nil
}

// Real is what really happened, as a schedule.
func (w *Workload) Real() *Schedule {
	n := len(w.Jobs)
	s := &Schedule{Name: "history", Start: make([]float64, n), End: make([]float64, n), Type: make([]string, n),
		GPUSeconds: make([]map[string]float64, n)}
	type edge struct {
		at   float64
		typ  string
		gpus int
	}
	var edges []edge
	for i := range w.Jobs {
		j := &w.Jobs[i]
		s.Start[i], s.End[i], s.Type[i] = j.RealStart, j.RealEnd, j.Ran
		s.GPUSeconds[i] = map[string]float64{j.Ran: (j.RealEnd - j.RealStart) * float64(j.GPUs)}
		edges = append(edges, edge{j.RealStart, j.Ran, j.GPUs}, edge{j.RealEnd, j.Ran, -j.GPUs})
	}
	s.Use = useFromEdges(len(edges), func(k int) (float64, string, int) { e := edges[k]; return e.at, e.typ, e.gpus })
	return s
}

// useFromEdges turns start (+GPUs) and end (−GPUs) edges into spans of
// constant use.
func useFromEdges(n int, edge func(int) (float64, string, int)) []Use {
	idx := make([]int, n)
	for k := range idx {
		idx[k] = k
	}
	at := func(k int) float64 { t, _, _ := edge(idx[k]); return t }
	// Insertion order does not matter: edges at one time apply together.
	sort.Slice(idx, func(a, b int) bool { ta, _, _ := edge(idx[a]); tb, _, _ := edge(idx[b]); return ta < tb })
	var out []Use
	busy := map[string]float64{}
	for k := 0; k < n; {
		t := at(k)
		for ; k < n && at(k) == t; k++ {
			_, typ, g := edge(idx[k])
			busy[typ] += float64(g)
		}
		if k < n {
			snap := make(map[string]float64, len(busy))
			for typ, v := range busy {
				snap[typ] = v
			}
			out = append(out, Use{Start: t, End: at(k), Busy: snap})
		}
	}
	return out
}
