package policy

import (
	"fmt"
	"strings"
)

// Traits are the properties of a policy that the code around it must act
// on: the round mechanism, the simulator and the daemon ask a policy for
// its traits instead of reading them off its name.
type Traits struct {
	// TypeAware is set when the allocation already says which GPU type
	// each job should use (measured per-type throughputs, or a packing
	// that chose the type). The round mechanism then fills the types in a
	// fixed order; for a heterogeneity-agnostic policy it shuffles the
	// order every round so that no type is systematically filled first.
	TypeAware bool
	// FIFO is set when the allocation places each job whole on one type in
	// arrival order: a job must not run where its allocation is 0, or a
	// queued job would overtake the queue on that type.
	FIFO bool
	// Packs is set when the allocation may hold rows for co-located pairs
	// of jobs (space sharing): the caller must offer candidate pairs in
	// Problem.Pairs and be able to run two jobs on the same GPUs.
	Packs bool
	// Objective says what Allocation.Objective measures.
	Objective Objective
}

// Objective names the quantity in Allocation.Objective.
type Objective uint8

const (
	// objectiveUndeclared is the zero value: a policy that never declared
	// its traits. No registered policy may report it.
	objectiveUndeclared Objective = iota
	// ObjectiveMinNormalizedThroughput is MinNormalizedThroughput.
	ObjectiveMinNormalizedThroughput
	// ObjectiveMaxFinishTimeFairness is MaxFinishTimeFairness (Themis' ρ).
	ObjectiveMaxFinishTimeFairness
	// ObjectiveMakespan is Makespan, in seconds.
	ObjectiveMakespan
	// ObjectiveTotalThroughput is TotalThroughput in steps/s.
	ObjectiveTotalThroughput
	// ObjectiveStepsPerCost is StepsPerCost.
	ObjectiveStepsPerCost
	// ObjectiveShortestCompletion is ShortestCompletion: the time in
	// seconds until the first job completes.
	ObjectiveShortestCompletion
)

// Unit describes the objective and its unit for people, e.g. "makespan, s".
func (o Objective) Unit() string {
	switch o {
	case ObjectiveMinNormalizedThroughput:
		return "min normalized throughput"
	case ObjectiveMaxFinishTimeFairness:
		return "max finish-time fairness ρ"
	case ObjectiveMakespan:
		return "makespan, s"
	case ObjectiveTotalThroughput:
		return "total steps/s"
	case ObjectiveStepsPerCost:
		return "steps per cost unit"
	case ObjectiveShortestCompletion:
		return "first completion, s"
	}
	return "undeclared objective"
}

// declaredTraits holds the traits of the policies registered with
// registerFunc, which share one implementation type and so cannot carry
// traits in their own methods. Each family declares its names in the init
// function that registers them.
var declaredTraits = map[string]Traits{}

// declareTraits records t as the traits of the named policies.
func declareTraits(t Traits, names ...string) {
	for _, name := range names {
		if _, dup := declaredTraits[name]; dup {
			panic("policy: traits of " + name + " declared twice")
		}
		declaredTraits[name] = t
	}
}

// TraitsOf returns the traits of the named policy, for callers that hold a
// name rather than a Policy.
func TraitsOf(name string) (Traits, error) {
	p, err := New(name, Options{})
	if err != nil {
		return Traits{}, err
	}
	return p.Traits(), nil
}

// CheckDaemonSupport returns an error when the daemon cannot run the named
// policy as it is meant to be run. A packing policy's allocation gives
// time to pairs of jobs sharing GPUs; the daemon has no way yet to start
// two jobs on the same GPUs, so it would silently leave the pairs' time
// unused instead of scheduling what the policy computed.
func CheckDaemonSupport(name string) error {
	t, err := TraitsOf(name)
	if err != nil {
		return err
	}
	if !t.Packs {
		return nil
	}
	return fmt.Errorf("policy %s packs jobs in pairs (space sharing), which the daemon cannot enforce yet; %s", name, unpackedAlternative(name))
}

// unpackedAlternative suggests the policy to run instead of a packing one:
// its _perf counterpart when one is registered and does not pack.
func unpackedAlternative(name string) string {
	if alt := strings.Replace(name, "_packed", "_perf", 1); alt != name {
		if t, err := TraitsOf(alt); err == nil && !t.Packs {
			return "use " + alt
		}
	}
	return "use a policy that does not pack jobs, e.g. max_min_fairness_perf"
}
