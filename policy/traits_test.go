package policy

import (
	"strings"
	"testing"
)

// nameRuleTraits are the traits that callers used to read off policy names
// before policies declared them: the round mechanism's type order and FIFO
// rules, the simulator's pair offer and the allocate command's objective
// units. Declared traits must agree with them for every registered policy,
// so moving to declared traits changes no schedule and no output.
func nameRuleTraits(name string) Traits {
	t := Traits{
		TypeAware: strings.Contains(name, "_perf") || strings.Contains(name, "_packed") ||
			name == "gandiva" || strings.HasPrefix(name, "allox"),
		FIFO:  strings.HasPrefix(name, "fifo"),
		Packs: name == "gandiva" || strings.Contains(name, "packed"),
	}
	switch {
	case strings.HasPrefix(name, "finish_time_fairness"):
		t.Objective = ObjectiveMaxFinishTimeFairness
	case strings.HasPrefix(name, "min_total_duration"):
		t.Objective = ObjectiveMakespan
	case strings.HasPrefix(name, "max_sum_throughput_normalized_by_cost"):
		t.Objective = ObjectiveStepsPerCost
	case strings.HasPrefix(name, "max_sum_throughput"), strings.HasPrefix(name, "fifo"):
		t.Objective = ObjectiveTotalThroughput
	case strings.HasPrefix(name, "shortest_job_first"):
		t.Objective = ObjectiveShortestCompletion
	default:
		t.Objective = ObjectiveMinNormalizedThroughput
	}
	return t
}

func TestDeclaredTraitsMatchTheNameRules(t *testing.T) {
	for _, name := range Names() {
		got, err := TraitsOf(name)
		if err != nil {
			t.Fatalf("TraitsOf(%q): %v", name, err)
		}
		if got.Objective == objectiveUndeclared {
			t.Errorf("%s declares no traits", name)
			continue
		}
		if want := nameRuleTraits(name); got != want {
			t.Errorf("%s: traits %+v, the name rules give %+v", name, got, want)
		}
	}
}

func TestTraitsDoNotDependOnOptions(t *testing.T) {
	for _, name := range Names() {
		a, _ := New(name, Options{})
		b, _ := New(name, Options{Seed: 7})
		if a.Traits() != b.Traits() {
			t.Errorf("%s: traits %+v with seed 0, %+v with seed 7", name, a.Traits(), b.Traits())
		}
	}
}

func TestEveryDeclarationNamesARegisteredPolicy(t *testing.T) {
	registered := map[string]bool{}
	for _, n := range Names() {
		registered[n] = true
	}
	for name := range declaredTraits {
		if !registered[name] {
			t.Errorf("traits declared for %q, which is not registered", name)
		}
	}
}

func TestTraitsOfUnknownPolicy(t *testing.T) {
	if _, err := TraitsOf("no_such_policy"); err == nil || !strings.Contains(err.Error(), "unknown policy") {
		t.Errorf("error %v, want unknown policy", err)
	}
}

func TestObjectiveUnits(t *testing.T) {
	cases := []struct {
		o    Objective
		want string
	}{
		{ObjectiveMinNormalizedThroughput, "min normalized throughput"},
		{ObjectiveMaxFinishTimeFairness, "max finish-time fairness ρ"},
		{ObjectiveMakespan, "makespan, s"},
		{ObjectiveTotalThroughput, "total steps/s"},
		{ObjectiveStepsPerCost, "steps per cost unit"},
		{ObjectiveShortestCompletion, "first completion, s"},
		{objectiveUndeclared, "undeclared objective"},
	}
	for _, c := range cases {
		if got := c.o.Unit(); got != c.want {
			t.Errorf("Objective(%d).Unit() = %q, want %q", c.o, got, c.want)
		}
	}
}
