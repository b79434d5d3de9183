package policy

import (
	"math"
	"strings"
	"testing"
)

var sloPolicies = []string{"max_sum_throughput_normalized_by_cost_perf_SLOs", "max_sum_throughput_normalized_by_cost_packed_SLOs"}

// checkSLOs fails the test unless every job named in met gets at least
// the rate its SLO needs, and the notes name exactly the jobs of dropped,
// each note containing the text given.
func checkSLOs(t *testing.T, name string, p *Problem, a *Allocation, met []string, dropped map[string]string) {
	t.Helper()
	if err := VerifyAllocation(p, a, 1e-7); err != nil {
		t.Errorf("%s: %v", name, err)
	}
	eff, err := JobThroughputs(p, a)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range met {
		for i := range p.Jobs {
			if j := &p.Jobs[i]; j.ID == id {
				if need := j.StepsRemaining / j.SLO; eff[i] < need*(1-1e-6) {
					t.Errorf("%s: job %s gets %g steps/s, its SLO needs %g", name, id, eff[i], need)
				}
				if note, ok := a.Notes[id]; ok {
					t.Errorf("%s: job %s, whose SLO is met, has the note %q", name, id, note)
				}
			}
		}
	}
	if len(a.Notes) != len(dropped) {
		t.Errorf("%s: notes %q, want notes for %d jobs", name, a.Notes, len(dropped))
	}
	for id, want := range dropped {
		if note := a.Notes[id]; !strings.Contains(note, want) {
			t.Errorf("%s: job %s's note %q, want it to contain %q", name, id, note, want)
		}
	}
}

// An SLO that cannot be met, or whose deadline has passed, used to make
// the LP infeasible and leave every job without an allocation. It is now
// dropped with a note, and the other jobs' SLOs are still met.
func TestSLOPoliciesDropUnreachableSLOs(t *testing.T) {
	p := &Problem{
		GPUs:  map[string]int{"v100": 2, "k80": 2},
		Costs: map[string]float64{"v100": 3, "k80": 1},
		Jobs: []Job{
			{ID: "a", Throughputs: map[string]float64{"v100": 4, "k80": 1}, ScaleFactor: 1, Weight: 1, StepsRemaining: 3000, SLO: 1000},
			// 36,000 steps at 2 steps/s is 5 h on the v100, with 2 h left.
			{ID: "b", Throughputs: map[string]float64{"v100": 2, "k80": 1}, ScaleFactor: 1, Weight: 1, StepsRemaining: 36000, SLO: 7200},
			{ID: "c", Throughputs: map[string]float64{"v100": 2, "k80": 1.5}, ScaleFactor: 1, Weight: 1, StepsRemaining: 1000, SLO: 1000},
			{ID: "d", Throughputs: map[string]float64{"v100": 2, "k80": 1}, ScaleFactor: 1, Weight: 1, StepsRemaining: 1000, SLO: -1800},
			{ID: "e", Throughputs: map[string]float64{"v100": 2}, ScaleFactor: 4, Weight: 1, StepsRemaining: 1000, SLO: 1e6},
		},
	}
	for _, name := range sloPolicies {
		a := obAllocate(t, name, p)
		checkSLOs(t, name, p, a, []string{"a", "c"}, map[string]string{
			"b": "SLO dropped: needs 5.0 h on v100 alone, 2.0 h left",
			"d": "SLO dropped: the deadline passed 30.0 min ago",
			"e": "SLO dropped: the job cannot run on any GPU type",
		})
		if a.Objective <= 0 || math.IsNaN(a.Objective) {
			t.Errorf("%s: objective %v", name, a.Objective)
		}
	}
}

// SLOs that can each be met but not all together: the tightest are
// dropped, as few as will do, and the rest are met.
func TestSLOPoliciesDropTheTightestOfConflictingSLOs(t *testing.T) {
	two := obTwoJobs()
	two.Jobs[0].SLO, two.Jobs[1].SLO = 1000.0/3.5, 500.0/1.5 // 87.5% and 75% of their best
	one := func(id string, share float64) Job {
		return Job{ID: id, Throughputs: map[string]float64{"v100": 1}, ScaleFactor: 1, Weight: 1, StepsRemaining: 1000, SLO: 1000 / share}
	}
	three := &Problem{GPUs: map[string]int{"v100": 1}, Costs: map[string]float64{"v100": 2},
		Jobs: []Job{one("x", 0.6), one("y", 0.8), one("z", 0.7)}}
	for _, name := range sloPolicies {
		checkSLOs(t, name, two, obAllocate(t, name, two), []string{"b"},
			map[string]string{"a": "the SLOs cannot all be met together and this is one of the 1 tightest (it needs 88% of"})
		checkSLOs(t, name, three, obAllocate(t, name, three), []string{"x"},
			map[string]string{"y": "one of the 2 tightest", "z": "one of the 2 tightest"})
	}
}

// Without SLOs to drop, nothing changes: no notes.
func TestSLOPoliciesWithoutTroubleHaveNoNotes(t *testing.T) {
	p := obTwoJobs()
	p.Jobs[1].SLO = 600
	for _, name := range sloPolicies {
		if a := obAllocate(t, name, p); a.Notes != nil {
			t.Errorf("%s: notes %v", name, a.Notes)
		}
	}
}
