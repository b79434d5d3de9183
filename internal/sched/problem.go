package sched

import (
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/policy"
)

// problem builds the policy's input from the managed jobs.
func (c *Core) problem(snap *bridge.Snapshot, now time.Time) *policy.Problem {
	p := &policy.Problem{GPUs: map[string]int{}, Costs: map[string]float64{}}
	for _, s := range c.cluster {
		p.GPUs[s.Type] += s.GPUs
	}
	for t := range p.GPUs {
		if v, ok := c.set.CostPerGPUHour[t]; ok {
			p.Costs[t] = v
		}
	}
	entities := map[string]policy.Entity{}
	for _, id := range c.order {
		js := c.jobs[id]
		if js.scale == 0 {
			continue
		}
		weight := js.weight
		if weight <= 0 {
			weight = 1
		}
		since := now.Sub(js.firstSeen).Seconds()
		// Estimates cover every known type; the policy sees the types
		// with GPUs for managed jobs now.
		rates := make(map[string]float64, len(p.GPUs))
		for t := range p.GPUs {
			rates[t] = js.throughputs[t]
		}
		job := policy.Job{
			ID: id, Throughputs: rates, ScaleFactor: js.scale, Weight: weight,
			TimeSinceStart: since, Arrival: seconds(js.firstSeen), Entity: js.entity,
		}
		if js.tag.Steps > 0 {
			job.StepsRemaining = float64(js.tag.Steps)
		}
		if js.tag.SLO > 0 {
			job.SLO = max(js.tag.SLO.Seconds()-since, 1)
		}
		// Isolated time (Themis' C_i) needs measured progress; without it
		// the job's time in the system is the best available stand-in.
		job.IsolatedTime = since
		if js.entity != "" {
			entities[js.entity] = policy.Entity{Weight: 1}
		}
		p.Jobs = append(p.Jobs, job)
	}
	if len(entities) > 0 {
		p.Entities = entities
	}
	return p
}
