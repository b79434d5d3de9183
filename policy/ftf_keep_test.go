package policy

import (
	"math"
	"slices"
	"testing"
)

// keepRunningProblem has room to spare: five jobs on four GPUs of two
// types, three of them running, two on a type the vertex does not give
// them.
func keepRunningProblem() *Problem {
	return &Problem{GPUs: map[string]int{"k80": 2, "v100": 2}, Jobs: []Job{
		{ID: "a", ScaleFactor: 1, Throughputs: map[string]float64{"k80": 1, "v100": 2}, StepsRemaining: 4000, TimeSinceStart: 600, RunningOn: "k80"},
		{ID: "b", ScaleFactor: 1, Throughputs: map[string]float64{"k80": 1, "v100": 4}, StepsRemaining: 9000, TimeSinceStart: 300, RunningOn: "v100"},
		{ID: "c", ScaleFactor: 1, Throughputs: map[string]float64{"k80": 1, "v100": 3}, StepsRemaining: 2000},
		{ID: "d", ScaleFactor: 1, Throughputs: map[string]float64{"k80": 2, "v100": 3}, StepsRemaining: 3000, TimeSinceStart: 900, RunningOn: "v100"},
		{ID: "e", ScaleFactor: 1, Throughputs: map[string]float64{"k80": 1, "v100": 5}, StepsRemaining: 500},
	}}
}

// timeWhereRunning is the running jobs' time, under a, on the types
// they run on.
func timeWhereRunning(p *Problem, a *Allocation) float64 {
	sum := 0.0
	for i, j := range p.Jobs {
		if k := slices.Index(a.Types, j.RunningOn); k >= 0 {
			sum += a.Rows[i].Fractions[k]
		}
	}
	return sum
}

// With room 0 no job's ρ rises above the vertex's; with room 1 jobs may
// rise to the max ρ, and the running ones keep more of their time.
func TestKeepRunningRoom(t *testing.T) {
	p := keepRunningProblem()
	vertexPol, _ := New("finish_time_fairness_perf", Options{})
	vertex, _ := vertexPol.Allocate(p)
	vr := viewRhos(p, vertex, realThroughput)
	kept := map[float64]*Allocation{}
	for _, room := range []float64{0, 1} {
		pol, _ := New("finish_time_fairness_perf", Options{KeepRunning: true, KeepRunningRoom: room})
		a, err := pol.Allocate(p)
		if err != nil {
			t.Fatal(err)
		}
		kept[room] = a
		for i, r := range viewRhos(p, a, realThroughput) {
			if room == 0 && r > vr[i]*(1+2*keepRunningSlack) {
				t.Errorf("room 0: %s's ρ %v above the vertex's %v", p.Jobs[i].ID, r, vr[i])
			}
			if r > vertex.Objective*(1+2*keepRunningSlack) {
				t.Errorf("room %v: %s's ρ %v above the optimum %v", room, p.Jobs[i].ID, r, vertex.Objective)
			}
		}
	}
	if held1, held0 := timeWhereRunning(p, kept[1]), timeWhereRunning(p, kept[0]); held1 < held0-1e-6 {
		t.Errorf("running jobs keep %v of their time with room 1, %v with room 0", held1, held0)
	}
}

// With KeepRunning finish_time_fairness_perf stays optimal (max ρ
// within keepRunningSlack), give every job at least what it needs at that
// optimum, and among such allocations keep the running jobs' time on the
// types they run on: more of it than the same policy gives when it is not
// told where they run, and no less than the vertex. The agnostic policy
// ignores the option: its view rates a running job's slow type as fast.
func TestKeepRunningFinishTimeFairness(t *testing.T) {
	for _, name := range []string{"finish_time_fairness_perf"} {
		t.Run(name, func(t *testing.T) {
			p := keepRunningProblem()
			vertexPol, _ := New(name, Options{})
			vertex, err := vertexPol.Allocate(p)
			if err != nil {
				t.Fatal(err)
			}
			pol, _ := New(name, Options{KeepRunning: true})
			kept, err := pol.Allocate(p)
			if err != nil {
				t.Fatal(err)
			}
			if kept.Objective > vertex.Objective*(1+2*keepRunningSlack)+1e-9 {
				t.Errorf("max ρ %v, the optimum is %v", kept.Objective, vertex.Objective)
			}
			blind := keepRunningProblem()
			for i := range blind.Jobs {
				blind.Jobs[i].RunningOn = ""
			}
			unaware, err := pol.Allocate(blind)
			if err != nil {
				t.Fatal(err)
			}
			if got, blindGot := timeWhereRunning(p, kept), timeWhereRunning(p, unaware); got <= blindGot+1e-6 {
				t.Errorf("running jobs' time where they run: %v told, %v not told; want more when told", got, blindGot)
			}
			if got, v := timeWhereRunning(p, kept), timeWhereRunning(p, vertex); got < v-1e-6 {
				t.Errorf("running jobs' time where they run: %v, the vertex gives %v", got, v)
			}
			for i, r := range kept.Rows {
				sum := 0.0
				for _, f := range r.Fractions {
					if f < -1e-9 {
						t.Errorf("%s: negative fraction %v", r.Jobs[0], f)
					}
					sum += f
				}
				if sum > 1+1e-6 {
					t.Errorf("%s: %v of its time", p.Jobs[i].ID, sum)
				}
			}
			for k, ty := range kept.Types {
				used := 0.0
				for _, r := range kept.Rows {
					used += r.Fractions[k]
				}
				if used > float64(p.GPUs[ty])+1e-6 {
					t.Errorf("%s: %v GPUs used of %d", ty, used, p.GPUs[ty])
				}
			}
		})
	}
}

// Without a running job to keep, the choice still spends the room the
// optimum leaves: every job's rate is at least the vertex's total in
// units of its need, and a problem whose vertex already fills the cluster
// keeps its max ρ.
func TestKeepRunningSpendsTheRoom(t *testing.T) {
	p := keepRunningProblem()
	for i := range p.Jobs {
		p.Jobs[i].RunningOn = ""
	}
	vertexPol, _ := New("finish_time_fairness_perf", Options{})
	vertex, _ := vertexPol.Allocate(p)
	pol, _ := New("finish_time_fairness_perf", Options{KeepRunning: true})
	kept, err := pol.Allocate(p)
	if err != nil {
		t.Fatal(err)
	}
	total := func(a *Allocation) float64 {
		s := 0.0
		for i := range p.Jobs {
			for k, ty := range a.Types {
				s += a.Rows[i].Fractions[k] * p.Jobs[i].Throughput(ty) / math.Max(p.Jobs[i].StepsRemaining, 1)
			}
		}
		return s
	}
	if total(kept) < total(vertex)*(1-1e-3) {
		t.Errorf("normalized throughput %v, the vertex's %v", total(kept), total(vertex))
	}
}
