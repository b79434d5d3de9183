// Package policy computes Gavel allocations: for every job (or co-located
// pair of jobs) the fraction of time it should spend on each GPU type, as the
// optimum of a policy-specific linear program over measured throughputs.
//
// The package is pure: no I/O and no clocks. The daemon and the simulator
// build a Problem from their own view of the cluster and call a Policy.
package policy

import (
	"sort"
	"strings"
)

// Problem is everything a policy needs to know about the cluster and jobs.
// Its JSON form is the input of `gavel-slurm allocate`.
type Problem struct {
	// GPUs is the number of GPUs of each type in the cluster.
	GPUs map[string]int `json:"cluster"`
	// Costs is the optional price per GPU-hour of each type.
	Costs map[string]float64 `json:"costs,omitempty"`
	// Jobs in arrival order.
	Jobs []Job `json:"jobs"`
	// Entities groups jobs for hierarchical policies, keyed by Job.Entity.
	Entities map[string]Entity `json:"entities,omitempty"`
	// Pairs lists candidate space-sharing combinations for the policies
	// whose Traits say Packs.
	Pairs []Pair `json:"pairs,omitempty"`
}

// Job is one training job as the policies see it.
type Job struct {
	ID string `json:"id"`
	// RunningOn is the GPU type the job runs on now, "" while it waits
	// (Options.KeepRunning).
	RunningOn string `json:"running_on,omitempty"`
	// Throughputs is the job's whole-job step rate (steps/s at its scale
	// factor) on each GPU type; 0 or missing means it cannot run there.
	Throughputs map[string]float64 `json:"throughputs"`
	// ScaleFactor is the number of GPUs the job needs at once.
	ScaleFactor int `json:"scale_factor"`
	// Weight is the job's priority weight (1 by default).
	Weight float64 `json:"weight"`
	// StepsRemaining is the number of steps still to run.
	StepsRemaining float64 `json:"steps_remaining"`
	// TimeSinceStart is the seconds since the job arrived.
	TimeSinceStart float64 `json:"time_since_start"`
	// IsolatedTime is the cumulative time the job would have needed so far
	// under its isolated 1/n share (Themis' C_i).
	IsolatedTime float64 `json:"isolated_time"`
	// Arrival orders jobs for FIFO policies (smaller is earlier).
	Arrival float64 `json:"arrival"`
	// Entity names the job's group for hierarchical policies.
	Entity string `json:"entity,omitempty"`
	// SLO is the job's deadline in seconds from now; 0 means none.
	SLO float64 `json:"slo,omitempty"`
}

// Entity is a group of jobs (a user, a lab) with a weight across entities
// and a policy inside the entity.
type Entity struct {
	Weight float64 `json:"weight"`
	// Policy is "fairness" (default) or "fifo".
	Policy string `json:"policy"`
}

// Pair is a candidate co-location of two jobs on the same GPUs.
type Pair struct {
	Jobs [2]string `json:"jobs"`
	// Throughputs per GPU type: each member's step rate while sharing.
	Throughputs map[string][2]float64 `json:"throughputs"`
}

// Types returns the problem's GPU types in sorted order: the column order of
// every Allocation computed for it.
func (p *Problem) Types() []string {
	types := make([]string, 0, len(p.GPUs))
	for t := range p.GPUs {
		types = append(types, t)
	}
	sort.Strings(types)
	return types
}

// Allocation is a policy's answer: the fraction of time each job or pair
// should run on each GPU type.
type Allocation struct {
	Policy string
	// Types are the columns of every row (sorted GPU type names).
	Types []string
	// Rows: one per job of the problem (in problem order), then one per
	// pair that the policy uses.
	Rows []Row
	// Objective is the policy's objective value in the units the package
	// documents for each policy family.
	Objective float64
	Stats     Stats
	// Notes says, by job id, where the policy could not do what the
	// problem asked for a job and what it did instead (an SLO it could not
	// meet and dropped). Nil when there is nothing to say.
	Notes map[string]string
}

// Row is the allocation of one job or one co-located pair.
type Row struct {
	// Jobs holds one job id, or two for a pair.
	Jobs []string
	// Fractions of time per GPU type, indexed like Allocation.Types.
	Fractions []float64
}

// Key names the row: the job id, or "a+b" for a pair.
func (r Row) Key() string { return strings.Join(r.Jobs, "+") }

// Stats describes the work done by the solver.
type Stats struct {
	// LPs is the number of linear programs solved.
	LPs int `json:"lps"`
	// Classes is the number of distinct job classes the LPs were built
	// over (identical jobs share one set of variables).
	Classes int `json:"classes"`
	// Columns and Rows are the size of the largest LP solved.
	Columns int `json:"columns"`
	Rows    int `json:"rows"`
	// Pivots is the number of simplex iterations of the LPs solved from a
	// kept basis (finish-time fairness' probes), where it shows what the
	// warm starts save.
	Pivots int `json:"pivots,omitempty"`
	// Pooled tells that every job could use every type at one rate, so
	// the types were pooled and the answer found without an LP.
	Pooled bool `json:"pooled,omitempty"`
}

// Map returns the allocation as {row key: {type: fraction}}.
func (a *Allocation) Map() map[string]map[string]float64 {
	out := make(map[string]map[string]float64, len(a.Rows))
	for _, r := range a.Rows {
		m := make(map[string]float64, len(a.Types))
		for i, t := range a.Types {
			m[t] = r.Fractions[i]
		}
		out[r.Key()] = m
	}
	return out
}

// Policy computes allocations. Implementations may keep state between
// calls (FIFO's sticky placements, a warm-start cache), so a daemon or a
// simulation run owns one Policy value for its lifetime.
type Policy interface {
	// Name is the Gavel name of the policy, e.g. "max_min_fairness_perf".
	Name() string
	// Allocate computes the allocation for p. It must not modify p.
	Allocate(p *Problem) (*Allocation, error)
	// Traits are the properties callers must act on (type order, pairs,
	// the meaning of the objective). They never change over a policy's
	// lifetime.
	Traits() Traits
}

// Draws is a stream of integers, each uniform in [0, n) for the n asked.
type Draws interface {
	Below(n int) int
}

// Options configure policies that need them.
type Options struct {
	// Seed feeds the randomized baselines (fifo's type choice, gandiva's
	// pairing).
	Seed int64
	// FIFOBlocking makes the FIFO policies stop at the first job in
	// arrival order that no GPU type has room for, as Gavel's FIFO does:
	// later jobs wait behind it even where they would fit. Without it a
	// later, smaller job may take GPUs a waiting multi-GPU job cannot use
	// yet. Only scale factors above 1 can tell the two apart.
	FIFOBlocking bool
	// FIFOZeroRates reproduces a flaw of Gavel's fifo_perf on top of
	// FIFOBlocking: a job whose only types with room are types it cannot
	// run on is still allocated one of them (taking that room in the
	// allocation, never running there). The paper does not intend it;
	// reproductions that must match the reference bit for bit ask for it.
	FIFOZeroRates bool
	// FIFOReplace makes the heterogeneity-agnostic fifo hand the GPUs of
	// each job that left since the last call to the head of its queue
	// first, as Gavel's FIFOPolicy does: for every placement of the last
	// call, in arrival order, a job still there keeps its type and counts
	// its GPUs as taken; a job that left offers its type to the first
	// waiting job, which takes it when the GPUs counted free so far on that
	// type are enough for it and it can run there, and otherwise stays
	// first in the queue. The jobs still waiting then pile onto the last
	// type with room, as without it.
	FIFOReplace bool
	// FIFODropDraws reproduces how Gavel's agnostic fifo picks the type
	// that waiting jobs pile onto: the last of a list of the types that
	// had free GPUs when the call began. It draws, for every job it
	// considers, an index over the listed types with room for that job
	// (the draw meant to choose the job's type, which the reference never
	// uses for that), and when a placement leaves the chosen type with
	// exactly no free GPU it drops the drawn entry from the list, which is
	// not necessarily the full type. nil: the type is the last with free
	// GPUs when the call began. The paper does not intend it;
	// reproductions that must follow the reference draw for draw pass a
	// stream that yields CPython's random.Random(seed).randrange values.
	FIFODropDraws Draws
	// InteriorOptimum makes the single-level max-min policies return the
	// analytic center of their LP's optimal face, the optimum Gavel's
	// interior-point solver returns, instead of the simplex method's vertex
	// (see center.go). Both are optimal; which one is installed changes
	// which jobs the round mechanism runs where.
	InteriorOptimum bool
	// KeepRunning makes finish_time_fairness_perf choose, among
	// the allocations within a hair of the optimal max ρ, the one that
	// leaves the jobs the most normalized throughput and keeps the
	// running ones' time on the type they run on (Job.RunningOn): the
	// optimum a mechanism that pays for restarts should be given (see
	// keepRunningFTF). The vertex the solver returns otherwise is as
	// optimal, but moves time between jobs at every event.
	KeepRunning bool
	// KeepRunningRoom is how far KeepRunning may raise a job's ρ from the
	// vertex's toward the optimal max ρ, in [0, 1] (keepRunningFTF): 0
	// leaves no job worse off than the vertex does.
	KeepRunningRoom float64
	// AgnosticUnusableTypes reproduces a flaw of Gavel's agnostic
	// policies: max_min_fairness sets every job's throughput to 1 on every
	// type, and finish_time_fairness to the job's V100 rate, also where the
	// job cannot run (ResNet-50 with batch size 128 on 2, 4 or 8 K80s), so
	// the solver gives such jobs time they can never use. The paper does
	// not intend it.
	AgnosticUnusableTypes bool
	// InteriorUnusableTypes makes the interior optimum of
	// max_min_fairness_perf (InteriorOptimum) keep, as Gavel's LP does, a
	// time fraction on every type for every job, also where the job cannot
	// run: the center then gives such jobs time there that they never use.
	// The paper does not intend it.
	InteriorUnusableTypes bool
}
