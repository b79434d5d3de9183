package policy

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
