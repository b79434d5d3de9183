package sched

import (
	"github.com/gavel-slurm/gavel-slurm/rounds"
	"math"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/policy"
)

// JobInput is what the policies need of one job, as the daemon and the
// simulator both know it. Times are seconds on one clock.
type JobInput struct {
	ID          string
	Throughputs map[string]float64
	ScaleFactor int
	// Weight 0 means 1.
	Weight  float64
	Arrival float64
	// StepsRemaining 0 means unknown.
	StepsRemaining float64
	// Deadline is the absolute time by which the job should finish; 0
	// means none.
	Deadline float64
	Entity   string
	// EntityWeight is the entity's weight; 0 means 1.
	EntityWeight float64
	// IsolatedTime is Themis' C_i.
	IsolatedTime float64
	// RunningOn is the GPU type the job runs on now, "" while it waits.
	RunningOn string
}

// BuildProblem is the policy's input for jobs at time now on a cluster
// with gpus GPUs of each type: the one place that decides how a job's
// facts become an LP's row, shared by the daemon and the simulator.
// Only the types with GPUs are offered to the policy; a deadline already
// missed asks for the fastest finish (1 s) rather than a negative one;
// every named entity takes part with its EntityWeight (1 unless given).
func BuildProblem(gpus map[string]int, costs map[string]float64, now float64, jobs []JobInput) *policy.Problem {
	p := &policy.Problem{GPUs: gpus, Costs: costs, Jobs: make([]policy.Job, 0, len(jobs))}
	entities := map[string]policy.Entity{}
	for _, in := range jobs {
		rates := offeredRates(in.Throughputs, gpus)
		weight := in.Weight
		if weight <= 0 {
			weight = 1
		}
		since := now - in.Arrival
		job := policy.Job{ID: in.ID, Throughputs: rates, ScaleFactor: in.ScaleFactor, Weight: weight,
			StepsRemaining: in.StepsRemaining, TimeSinceStart: since, Arrival: in.Arrival,
			IsolatedTime: in.IsolatedTime, Entity: in.Entity, RunningOn: in.RunningOn}
		if in.Deadline > 0 {
			job.SLO = math.Max(in.Deadline-now, 1)
		}
		if in.Entity != "" {
			ew := in.EntityWeight
			if ew <= 0 {
				ew = 1
			}
			entities[in.Entity] = policy.Entity{Weight: ew}
		}
		p.Jobs = append(p.Jobs, job)
	}
	if len(entities) > 0 {
		p.Entities = entities
	}
	return p
}

// offeredRates is a job's rates on exactly the offered types (0 where it
// has none). A map that already lists exactly those types is used as it
// is, not copied: policies do not change their problem, and the daemon and
// the simulator replace a job's map rather than change it, while copying
// one per job per re-solve was a tenth of a long simulation.
func offeredRates(rates map[string]float64, gpus map[string]int) map[string]float64 {
	if len(rates) == len(gpus) {
		exact := true
		for t := range gpus {
			if _, ok := rates[t]; !ok {
				exact = false
				break
			}
		}
		if exact {
			return rates
		}
	}
	out := make(map[string]float64, len(gpus))
	for t := range gpus {
		out[t] = rates[t]
	}
	return out
}

// stepsRemaining is how many steps the job has left: its tag's total,
// less the steps it reported when the estimator hears progress; 0 when
// the tag gives no total (unknown to the policies). A job that ran past
// its announced total has 1 left, not 0, which would read as unknown.
func (c *Core) stepsRemaining(js *jobState) int64 {
	total := js.tag.Steps
	if total <= 0 {
		return 0
	}
	if done, ok := c.stepsDone(js); ok {
		return max(total-done, 1)
	}
	return total
}

// stepsDone is the job's reported progress, when the estimator hears it;
// a slot, which is no Slurm job, reports none.
func (c *Core) stepsDone(js *jobState) (int64, bool) {
	p, ok := c.est.(Progress)
	id, isJob := js.key.Job()
	if !ok || !isJob {
		return 0, false
	}
	return p.StepsDone(id)
}

// problem builds the policy's input from the managed jobs.
func (c *Core) problem(snap *bridge.Snapshot, now time.Time) *policy.Problem {
	gpus := map[string]int{}
	for _, s := range c.cluster {
		gpus[s.Type] += s.GPUs
	}
	costs := map[string]float64{}
	for t := range gpus {
		if v, ok := c.set.CostPerGPUHour[t]; ok {
			costs[t] = v
		}
	}
	// The type each managed job runs on, as Slurm reports it, when the
	// policy is told (policy.Options.KeepRunning).
	runningOn := map[string]string{}
	if keepsRunning(c.set) {
		for _, j := range snap.Jobs {
			if js := c.jobs[keyOf(j.ID)]; js != nil && isRunning(j) {
				runningOn[js.name] = j.RunningGPUType
			}
		}
	}
	var jobs []JobInput
	for _, key := range c.order {
		js := c.jobs[key]
		if js.scale == 0 {
			continue
		}
		// Isolated time (Themis' C_i) needs measured progress; without it
		// the job's time in the system is the best available stand-in.
		in := JobInput{ID: js.name, Throughputs: js.throughputs, ScaleFactor: js.scale, Weight: js.weight,
			Arrival: seconds(js.firstSeen), Entity: js.entity, EntityWeight: c.entityWeight(js.entity), StepsRemaining: float64(c.stepsRemaining(js)),
			IsolatedTime: now.Sub(js.firstSeen).Seconds(), RunningOn: runningOn[js.name]}
		if js.tag.SLO > 0 {
			in.Deadline = seconds(js.firstSeen.Add(js.tag.SLO))
		}
		jobs = append(jobs, in)
	}
	p := BuildProblem(gpus, costs, seconds(now), jobs)
	if c.packs() {
		for _, pr := range c.mech.Pairs() {
			p.Pairs = append(p.Pairs, policy.Pair{Jobs: pr.Jobs, Throughputs: pr.Throughputs})
		}
	}
	return p
}

// policyOptions are the options the daemon's policy is built with. Under
// the restart mechanism every restart costs something (the default cost
// until one is measured), so the finish-time fairness policies are asked
// for the optimum that keeps running jobs where they run
// (policy.Options.KeepRunning).
func policyOptions(set Settings) policy.Options {
	return policy.Options{Seed: set.Seed, KeepRunning: keepsRunning(set)}
}

// keepsRunning reports whether the policy is told where jobs run.
func keepsRunning(set Settings) bool { return set.Mechanism == rounds.VariantRestart }
