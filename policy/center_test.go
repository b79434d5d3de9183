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

// Gavel's solvers give a job time on a type it cannot run on where its
// program keeps that fraction as a variable: max_min_fairness_perf's LP
// keeps one on every type (InteriorUnusableTypes; the center then gives
// it time there, while the optimal level stays what it is), and the
// agnostic finish_time_fairness rates the job at its V100 rate on every
// type (AgnosticUnusableTypes). Without the options it gets none.
func TestInteriorUnusableTypes(t *testing.T) {
	p := &Problem{GPUs: map[string]int{"k80": 2, "v100": 2}, Jobs: []Job{
		{ID: "any", ScaleFactor: 1, Throughputs: map[string]float64{"k80": 1, "v100": 2}, StepsRemaining: 1000},
		{ID: "nok80", ScaleFactor: 1, Throughputs: map[string]float64{"k80": 0, "v100": 3}, StepsRemaining: 2000},
		{ID: "other", ScaleFactor: 1, Throughputs: map[string]float64{"k80": 1, "v100": 4}, StepsRemaining: 3000},
	}}
	k80 := slices.Index(p.Types(), "k80")
	for _, tc := range []struct {
		name    string
		policy  string
		opts    Options
		wantK80 bool
	}{
		{"LAS, usable types only", "max_min_fairness_perf", Options{InteriorOptimum: true}, false},
		{"LAS, every type", "max_min_fairness_perf", Options{InteriorOptimum: true, InteriorUnusableTypes: true}, true},
		{"agnostic FTF, usable types only", "finish_time_fairness", Options{InteriorOptimum: true}, false},
		{"agnostic FTF, every type", "finish_time_fairness", Options{InteriorOptimum: true, AgnosticUnusableTypes: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol, _ := New(tc.policy, tc.opts)
			a, err := pol.Allocate(p)
			if err != nil {
				t.Fatal(err)
			}
			if tc.policy == "max_min_fairness_perf" {
				vertexPol, _ := New(tc.policy, Options{})
				vertex, _ := vertexPol.Allocate(p)
				if a.Objective < vertex.Objective*(1-2*centerRelax) {
					t.Errorf("objective %v, the optimum is %v", a.Objective, vertex.Objective)
				}
			}
			if got := a.Rows[1].Fractions[k80] > 1e-4; got != tc.wantK80 {
				t.Errorf("nok80 on k80: %v", a.Rows[1].Fractions[k80])
			}
		})
	}
}

// The agnostic finish_time_fairness is centered too: while the cluster has
// room, the vertex gives jobs all of their time (or none), where the center
// leaves every job below all of it and spreads it over the types, at the
// same optimal max ρ in the policy's own view.
func TestInteriorOptimumAgnosticFinishTimeFairness(t *testing.T) {
	p := &Problem{GPUs: map[string]int{"k80": 4, "p100": 4, "v100": 4}, Jobs: []Job{
		{ID: "a", ScaleFactor: 1, Throughputs: map[string]float64{"k80": 1, "p100": 2, "v100": 4}, StepsRemaining: 4000, TimeSinceStart: 100},
		{ID: "b", ScaleFactor: 2, Throughputs: map[string]float64{"k80": 1, "p100": 3, "v100": 5}, StepsRemaining: 9000, TimeSinceStart: 10},
		{ID: "c", ScaleFactor: 1, Throughputs: map[string]float64{"k80": 2, "p100": 3, "v100": 3}, StepsRemaining: 3000},
	}}
	rhos := func(a *Allocation) ([]float64, float64) {
		out := viewRhos(p, a, agnosticThroughput(p))
		return out, slices.Max(out)
	}
	vertexPol, _ := New("finish_time_fairness", Options{})
	vertex, err := vertexPol.Allocate(p)
	if err != nil {
		t.Fatal(err)
	}
	pol, _ := New("finish_time_fairness", Options{InteriorOptimum: true})
	a, err := pol.Allocate(p)
	if err != nil {
		t.Fatal(err)
	}
	centered, got := rhos(a)
	if _, want := rhos(vertex); got > want*(1+2*centerRelax) {
		t.Errorf("max ρ in the agnostic view %v, the optimum is %v", got, want)
	}
	// A job below the max ρ has room to spare: the vertex may give it all
	// of its time, the center does not.
	spared := 0
	for i, r := range a.Rows {
		sum, vsum := 0.0, 0.0
		for k, f := range r.Fractions {
			sum += f
			vsum += vertex.Rows[i].Fractions[k]
			if f < 1e-4 {
				t.Errorf("%s: %v on %s, want time on every type", r.Jobs[0], f, a.Types[k])
			}
		}
		if centered[i] > got*(1-1e-2) {
			continue // binds the optimum: may need all of its time
		}
		if sum > 1-1e-3 {
			t.Errorf("%s (ρ %v below the max %v): all of its time (%v)", r.Jobs[0], centered[i], got, sum)
		}
		if vsum > 1-1e-6 {
			spared++
		}
	}
	if spared == 0 {
		t.Error("the vertex gives no job below the max all of its time; the case tests nothing")
	}
}

// The inv_pos barrier is the linear one's level term after its u_j is
// centered away: at every level L > τ, -2·log(L-τ) + log(L) equals
// min over u in (1/L, 1) of -log(1-u) - log(L·u-1), up to the constant
// 2·log(2) (with τ = 1 and U scaled to 1), and its derivatives are those
// of that closed form.
func TestLevelInvPosBarrier(t *testing.T) {
	ce := &centering{barrier: levelInvPos, tau: 1}
	for _, l := range []float64{1.001, 1.1, 1.5, 3, 10} {
		// Minimize over u by golden-section search, independently of the
		// closed form.
		lo, hi := 1/l, 1.0
		f := func(u float64) float64 { return -math.Log(1-u) - math.Log(l*u-1) }
		for i := 0; i < 200; i++ {
			m1, m2 := lo+(hi-lo)*0.382, lo+(hi-lo)*0.618
			if f(m1) < f(m2) {
				hi = m2
			} else {
				lo = m1
			}
		}
		got := ce.levelTerm(l, l-1)
		want := f((lo+hi)/2) - 2*math.Log(2)
		if math.Abs(got-want) > 1e-6*math.Max(1, math.Abs(want)) {
			t.Errorf("L=%v: term %v, minimum over u %v", l, got, want)
		}
		h := 1e-6 * l
		d1, d2 := ce.levelDerivatives(l, l-1)
		num1 := (ce.levelTerm(l+h, l+h-1) - ce.levelTerm(l-h, l-h-1)) / (2 * h)
		num2 := (ce.levelTerm(l+h, l+h-1) - 2*got + ce.levelTerm(l-h, l-h-1)) / (h * h)
		if math.Abs(d1-num1) > 1e-4*math.Max(1, math.Abs(d1)) || math.Abs(d2-num2) > 1e-2*math.Max(1, math.Abs(d2)) {
			t.Errorf("L=%v: derivatives %v, %v; numerically %v, %v", l, d1, d2, num1, num2)
		}
	}
}

// viewRhos is every job's ρ under a in the policy's view tput.
func viewRhos(p *Problem, a *Allocation, tput throughputFunc) []float64 {
	shares := NewIsolatedShares(p)
	out := make([]float64, len(p.Jobs))
	for i := range p.Jobs {
		j := &p.Jobs[i]
		iso, eff := 0.0, 0.0
		for k, ty := range a.Types {
			iso += tput(j, ty) * shares.Share(j)[k]
			eff += tput(j, ty) * a.Rows[i].Fractions[k]
		}
		out[i] = (j.TimeSinceStart + j.StepsRemaining/eff) / (j.IsolatedTime + j.StepsRemaining/iso)
	}
	return out
}
