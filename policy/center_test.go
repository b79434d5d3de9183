package policy

import (
	"math"
	"slices"
	"testing"
)

// With InteriorOptimum the max-min policies return the analytic center of
// their optimal face, as Gavel's interior-point solver does: still optimal
// (within centerRelax), still feasible, identical jobs given identical
// rows, and time on every type where some optimum gives time, where the
// simplex method's vertex leaves most jobs on one type.
func TestInteriorOptimum(t *testing.T) {
	mixed := &Problem{GPUs: map[string]int{"k80": 2, "v100": 2}, Jobs: []Job{
		{ID: "a", ScaleFactor: 1, Throughputs: map[string]float64{"k80": 1, "v100": 2}},
		{ID: "b", ScaleFactor: 1, Throughputs: map[string]float64{"k80": 1, "v100": 4}},
		{ID: "c", ScaleFactor: 1, Throughputs: map[string]float64{"k80": 1, "v100": 3}},
		{ID: "d", ScaleFactor: 2, Throughputs: map[string]float64{"k80": 1, "v100": 3}},
		{ID: "e", ScaleFactor: 2, Throughputs: map[string]float64{"k80": 1, "v100": 3}},
	}}
	// Fewer jobs than GPUs: any split of each job's time is optimal.
	idle := &Problem{GPUs: map[string]int{"k80": 4, "p100": 4, "v100": 4}, Jobs: []Job{
		{ID: "x", ScaleFactor: 2, Throughputs: map[string]float64{"k80": 1, "p100": 2, "v100": 3}},
		{ID: "y", ScaleFactor: 1, Throughputs: map[string]float64{"p100": 2, "v100": 3}},
	}}
	for _, tc := range []struct {
		name   string
		policy string
		p      *Problem
		spread []string // jobs the center must give time on every usable type
		twins  [2]string
	}{
		{"perf contended", "max_min_fairness_perf", mixed, []string{"c", "d", "e"}, [2]string{"d", "e"}},
		{"agnostic contended", "max_min_fairness", mixed, []string{"a", "b", "c", "d", "e"}, [2]string{"d", "e"}},
		// y is the bottleneck (all of its time on V100s); x may spread.
		{"perf idle cluster", "max_min_fairness_perf", idle, []string{"x"}, [2]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vertexPol, _ := New(tc.policy, Options{})
			vertex, err := vertexPol.Allocate(tc.p)
			if err != nil {
				t.Fatal(err)
			}
			pol, _ := New(tc.policy, Options{InteriorOptimum: true})
			a, err := pol.Allocate(tc.p)
			if err != nil {
				t.Fatal(err)
			}
			if a.Objective < vertex.Objective*(1-2*centerRelax) {
				t.Errorf("objective %v, the optimum is %v", a.Objective, vertex.Objective)
			}
			rows := map[string][]float64{}
			used := make([]float64, len(a.Types))
			for _, r := range a.Rows {
				rows[r.Jobs[0]] = r.Fractions
				sum := 0.0
				for k, x := range r.Fractions {
					if x < 0 {
						t.Errorf("%s: fraction %v on %s", r.Jobs[0], x, a.Types[k])
					}
					sum += x
					used[k] += x * float64(tc.p.Jobs[jobIndex(tc.p, r.Jobs[0])].ScaleFactor)
				}
				if sum > 1+1e-9 {
					t.Errorf("%s: fractions sum to %v", r.Jobs[0], sum)
				}
			}
			for k, ty := range a.Types {
				if used[k] > float64(tc.p.GPUs[ty])+1e-9 {
					t.Errorf("%s: %v GPUs allocated of %d", ty, used[k], tc.p.GPUs[ty])
				}
			}
			spreadVertex := true
			for _, id := range tc.spread {
				j := &tc.p.Jobs[jobIndex(tc.p, id)]
				for k, ty := range a.Types {
					if j.Throughput(ty) <= 0 {
						if rows[id][k] != 0 {
							t.Errorf("%s has time on %s, where it cannot run", id, ty)
						}
						continue
					}
					if rows[id][k] < 1e-3 {
						t.Errorf("%s: %v on %s, want time on every type it can use", id, rows[id][k], ty)
					}
					if vertex.Rows[jobIndex(tc.p, id)].Fractions[k] < 1e-9 {
						spreadVertex = false
					}
				}
			}
			if spreadVertex {
				t.Errorf("the vertex already spreads every job; the case tests nothing")
			}
			if tc.twins[0] != "" {
				for k := range a.Types {
					if math.Abs(rows[tc.twins[0]][k]-rows[tc.twins[1]][k]) > 1e-9 {
						t.Errorf("identical jobs %v got %v and %v", tc.twins, rows[tc.twins[0]], rows[tc.twins[1]])
					}
				}
			}
		})
	}
}

func jobIndex(p *Problem, id string) int {
	for i := range p.Jobs {
		if p.Jobs[i].ID == id {
			return i
		}
	}
	return -1
}

// finish_time_fairness_perf with InteriorOptimum keeps the optimal max ρ
// (within the centering's relaxation) and gives time on every type where
// some optimum does.
func TestInteriorOptimumFinishTimeFairness(t *testing.T) {
	p := &Problem{GPUs: map[string]int{"k80": 2, "v100": 2}, Jobs: []Job{
		{ID: "a", ScaleFactor: 1, Throughputs: map[string]float64{"k80": 1, "v100": 2}, StepsRemaining: 1000, TimeSinceStart: 100},
		{ID: "b", ScaleFactor: 1, Throughputs: map[string]float64{"k80": 1, "v100": 4}, StepsRemaining: 4000, TimeSinceStart: 10},
		{ID: "c", ScaleFactor: 1, Throughputs: map[string]float64{"k80": 1, "v100": 3}, StepsRemaining: 2000},
		{ID: "d", ScaleFactor: 1, Throughputs: map[string]float64{"k80": 2, "v100": 3}, StepsRemaining: 3000, TimeSinceStart: 50},
		{ID: "e", ScaleFactor: 1, Throughputs: map[string]float64{"k80": 1, "v100": 5}, StepsRemaining: 500},
	}}
	vertexPol, _ := New("finish_time_fairness_perf", Options{})
	vertex, err := vertexPol.Allocate(p)
	if err != nil {
		t.Fatal(err)
	}
	pol, _ := New("finish_time_fairness_perf", Options{InteriorOptimum: true})
	a, err := pol.Allocate(p)
	if err != nil {
		t.Fatal(err)
	}
	if a.Objective > vertex.Objective*(1+2*centerRelax) {
		t.Errorf("max ρ %v, the optimum is %v", a.Objective, vertex.Objective)
	}
	zeros := 0
	for i, r := range vertex.Rows {
		for k := range r.Fractions {
			if r.Fractions[k] < 1e-9 {
				zeros++
			}
			if a.Rows[i].Fractions[k] < 1e-4 {
				t.Errorf("%s: %v on %s, want time on every type", r.Jobs[0], a.Rows[i].Fractions[k], a.Types[k])
			}
		}
	}
	if zeros == 0 {
		t.Error("the vertex already spreads every job; the case tests nothing")
	}
}

// InteriorUnusableTypes keeps, as Gavel's LP does, a fraction on every type
// as a variable: the center then gives a job time on a type it cannot run
// on, while the optimal level stays what it is.
func TestInteriorUnusableTypes(t *testing.T) {
	p := &Problem{GPUs: map[string]int{"k80": 2, "v100": 2}, Jobs: []Job{
		{ID: "any", ScaleFactor: 1, Throughputs: map[string]float64{"k80": 1, "v100": 2}},
		{ID: "nok80", ScaleFactor: 1, Throughputs: map[string]float64{"v100": 3}},
		{ID: "other", ScaleFactor: 1, Throughputs: map[string]float64{"k80": 1, "v100": 4}},
	}}
	k80 := slices.Index(p.Types(), "k80")
	for _, tc := range []struct {
		name     string
		unusable bool
		wantK80  bool
	}{
		{"usable types only", false, false},
		{"every type", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol, _ := New("max_min_fairness_perf", Options{InteriorOptimum: true, InteriorUnusableTypes: tc.unusable})
			a, err := pol.Allocate(p)
			if err != nil {
				t.Fatal(err)
			}
			vertexPol, _ := New("max_min_fairness_perf", Options{})
			vertex, _ := vertexPol.Allocate(p)
			if a.Objective < vertex.Objective*(1-2*centerRelax) {
				t.Errorf("objective %v, the optimum is %v", a.Objective, vertex.Objective)
			}
			if got := a.Rows[1].Fractions[k80] > 1e-4; got != tc.wantK80 {
				t.Errorf("nok80 on k80: %v", a.Rows[1].Fractions[k80])
			}
		})
	}
}
