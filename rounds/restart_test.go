package rounds

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestHoldDecision(t *testing.T) {
	cases := []struct {
		name                         string
		hold, finish, ran, remaining float64
		want                         Pin
	}{
		{"free restart: nothing held", 0, 0, 0, 10, NotPinned},
		{"restart not yet paid for", 600, 1200, 360, 0, PinRestartUnpaid},
		{"restart paid for, far from its end", 600, 1200, 600, 5000, NotPinned},
		{"restart paid for, remaining unknown", 600, 1200, 720, 0, NotPinned},
		{"near its end", 600, 1200, 720, 1200, PinNearEnd},
		{"just past near its end", 600, 1200, 720, 1201, NotPinned},
		{"unpaid wins over near its end", 600, 1200, 0, 100, PinRestartUnpaid},
		{"near its end until hold + finish", 600, 1200, 1799, 1, PinNearEnd},
		// Past its announced steps (or steps=1 with no progress reported)
		// it always reads one step from its end: the pin lapses all the
		// same, so no tag keeps a GPU for good.
		{"past its announced end: the pin lapses at hold + finish", 600, 1200, 1800, 1, NotPinned},
		{"an end that never comes", 600, 1200, 72000, 0.001, NotPinned},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := holdDecision(tc.hold, tc.finish, tc.ran, tc.remaining); got != tc.want {
				t.Errorf("holdDecision(%v, %v, %v, %v) = %v, want %v", tc.hold, tc.finish, tc.ran, tc.remaining, got, tc.want)
			}
		})
	}
}

func TestRestartHoldCap(t *testing.T) {
	cases := []struct {
		k, floor, cap, cost, want float64
	}{
		{0, 0, 0, 60, 0},
		{10, 0, 0, 60, 600},
		{10, 0, 300, 60, 300},
		{40, 0, 4 * 3600, 0, 0},
		// The floor lifts cheap restarts' holds, never a free one's, and
		// the cap still bounds it.
		{40, 3600, 4 * 3600, 30, 3600},
		{40, 3600, 4 * 3600, 180, 7200},
		{40, 3600, 4 * 3600, 0, 0},
		{0, 3600, 4 * 3600, 30, 0},
		{40, 3600, 1800, 30, 1800},
	}
	for _, tc := range cases {
		o := Options{RestartHold: tc.k, RestartHoldMin: tc.floor, RestartHoldMax: tc.cap}
		if got := o.restartHold(tc.cost); got != tc.want {
			t.Errorf("hold of K=%v floor %v cap %v for cost %v: %v, want %v", tc.k, tc.floor, tc.cap, tc.cost, got, tc.want)
		}
	}
}

func TestRestartOptionsChecked(t *testing.T) {
	for _, o := range []Options{{RestartHold: -1}, {RestartHold: math.NaN()}, {RestartHoldMax: -5}, {RestartHoldMin: -1}, {RestartHoldMin: math.Inf(1)}, {RestartFinish: math.Inf(1)}} {
		if _, err := New(cluster(servers("v100", 1, 1)), o); err == nil {
			t.Errorf("options %+v accepted", o)
		}
	}
	m := mustNew(t, cluster(servers("v100", 1, 1)), restartOpts(10, 0))
	if err := m.AddJob(Job{ID: "a", ScaleFactor: 1, Throughputs: everywhere("v100"), RestartCost: -1}, 0); err == nil {
		t.Error("a negative restart cost was accepted")
	}
	mustAdd(t, m, Job{ID: "b", ScaleFactor: 1, Throughputs: everywhere("v100")})
	if err := m.SetRestartCost("b", math.NaN()); err == nil {
		t.Error("a NaN restart cost was accepted")
	}
	if err := m.SetRemainingSteps("nobody", 3); err == nil {
		t.Error("remaining steps of an unknown job were accepted")
	}
}

// restartOpts is the improved mechanism with the restart rule: hold k
// times the cost, a job within twice its hold of its end finishes.
func restartOpts(k, holdMax float64) Options {
	o := improved()
	o.RestartHold, o.RestartHoldMax, o.RestartFinish = k, holdMax, 2
	return o
}

// A job running on a slow K80 while the V100 it would rather have is busy;
// the V100's job ends and leaves it idle. The job moves there only when
// the time the move saves over the time ahead (its hold on the V100, or
// its remaining work there if shorter) exceeds its restart cost.
func TestMoveOnlyWhenGainExceedsCost(t *testing.T) {
	speeds := map[string]float64{"v100": 4, "k80": 1} // steps/s
	cases := []struct {
		name      string
		cost      float64
		remaining float64 // steps; 0: unknown
		holdMax   float64
		want      string
	}{
		{"free restart: moved, as today", 0, 40, 0, "v100"},
		{"gain over the hold exceeds the cost", 60, 0, 0, "v100"},
		{"near its end: 40 steps are 10 s on the v100, saving 30 s of a 60 s restart", 60, 40, 0, "k80"},
		{"far from its end", 60, 1e6, 0, "v100"},
		{"hold capped at 300 s: 900 s saved for a 1000 s restart", 1000, 0, 300, "k80"},
		{"hold capped at 300 s: 900 s saved for an 800 s restart", 800, 0, 300, "v100"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := mustNew(t, cluster(servers("v100", 1, 1), servers("k80", 1, 1)), restartOpts(10, tc.holdMax))
			mustAdd(t, m, Job{ID: "slow", ScaleFactor: 1, Throughputs: speeds, RestartCost: tc.cost})
			mustAdd(t, m, Job{ID: "busy", ScaleFactor: 1, Throughputs: speeds})
			if err := m.SetRemainingSteps("slow", tc.remaining); err != nil {
				t.Fatal(err)
			}
			rows := map[string][]float64{"slow": {1, 0}, "busy": {0, 1}}
			if err := m.SetAllocation(allocation([]string{"k80", "v100"}, []string{"slow", "busy"}, rows), 0); err != nil {
				t.Fatal(err)
			}
			r := newRunner(t, m)
			if d := r.step().Find("slow"); d.Type != "k80" {
				t.Fatalf("first round: slow on %q (%s), want k80", d.Type, d.Reason)
			}
			if err := m.RemoveJob("busy", r.now); err != nil {
				t.Fatal(err)
			}
			d := r.step().Find("slow")
			if d.Type != tc.want {
				t.Fatalf("after the v100 freed: slow on %q (%s), want %s", d.Type, d.Reason, tc.want)
			}
			if moved := d.Action == Preempt; moved != (tc.want == "v100") {
				t.Errorf("action %v (%s)", d.Action, d.Reason)
			}
		})
	}
}

// One V100, job a runs from t = 0 with a 60 s restart (hold 600 s with
// K = 10, near its end within 1200 s); b arrives at t = 360 with the
// larger share and would take the GPU at once were restarts free.
func TestPreemptOnlyOnceTheRestartIsPaid(t *testing.T) {
	cases := []struct {
		name      string
		cost      float64
		remaining float64 // seconds of a's work left at t = 720
		wantAt    []Pin   // a's pin at rounds 1, 2 (NotPinned: b takes the GPU)
	}{
		{"free restart: preempted at once", 0, 1e5, []Pin{NotPinned}},
		{"kept until it has run its hold", 60, 1e5, []Pin{PinRestartUnpaid, NotPinned}},
		{"then kept to its end when that is near", 60, 1000, []Pin{PinRestartUnpaid, PinNearEnd}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := mustNew(t, cluster(servers("v100", 1, 1)), restartOpts(10, 0))
			mustAdd(t, m, Job{ID: "a", ScaleFactor: 1, Throughputs: everywhere("v100"), RestartCost: tc.cost})
			if err := m.SetAllocation(allocation([]string{"v100"}, []string{"a"}, map[string][]float64{"a": {1}}), 0); err != nil {
				t.Fatal(err)
			}
			r := newRunner(t, m)
			r.step()
			if err := m.AddJob(Job{ID: "b", ScaleFactor: 1, Throughputs: everywhere("v100")}, r.now); err != nil {
				t.Fatal(err)
			}
			both := map[string][]float64{"a": {0.4}, "b": {0.6}}
			if err := m.SetAllocation(allocation([]string{"v100"}, []string{"a", "b"}, both), r.now); err != nil {
				t.Fatal(err)
			}
			// Steps at 1 step/s: a's remaining work at t = 720.
			if err := m.SetRemainingSteps("a", tc.remaining+360); err != nil {
				t.Fatal(err)
			}
			for i, want := range tc.wantAt {
				if i == 1 {
					if err := m.SetRemainingSteps("a", tc.remaining); err != nil {
						t.Fatal(err)
					}
				}
				p := r.step()
				a, b := p.Find("a"), p.Find("b")
				if want == NotPinned {
					if a.Action != Preempt || b.Action != Run {
						t.Errorf("round %d: a %v (%s), b %v (%s); want a preempted for b", i+1, a.Action, a.Reason, b.Action, b.Reason)
					}
					continue
				}
				if a.Action != Keep || a.Reason.Code != ReasonPinned || a.Reason.Pin != want {
					t.Errorf("round %d: a %v (%s), want kept with pin %v", i+1, a.Action, a.Reason, want)
				}
			}
		})
	}
}

// The bound the rule keeps: whatever the costs and the work left, a job
// that would win a GPU waits at most H (the hold of the job on it) +
// RestartFinish × H (its run to its end) + one round more than with free
// restarts, with the hold H = max(K × c, floor) for a floor drawn too.
// One V100; a runs from t = 0 and b, given the larger share, arrives at
// t = 360.
func TestRestartHoldWaitBounded(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const k, finish = 10.0, 2.0
	for range 50 {
		cost := 1 + rng.Float64()*300
		remaining := rng.Float64() * 20000 // seconds at 1 step/s, from t = 360
		floor := 0.0
		if rng.IntN(2) == 0 {
			floor = rng.Float64() * 5000
		}
		name := fmt.Sprintf("cost %.0f s, floor %.0f s, %.0f s left", cost, floor, remaining)
		opts := restartOpts(k, 0)
		opts.RestartHoldMin = floor
		m := mustNew(t, cluster(servers("v100", 1, 1)), opts)
		mustAdd(t, m, Job{ID: "a", ScaleFactor: 1, Throughputs: everywhere("v100"), RestartCost: cost})
		if err := m.SetAllocation(allocation([]string{"v100"}, []string{"a"}, map[string][]float64{"a": {1}}), 0); err != nil {
			t.Fatal(err)
		}
		r := newRunner(t, m)
		r.step()
		if err := m.AddJob(Job{ID: "b", ScaleFactor: 1, Throughputs: everywhere("v100")}, r.now); err != nil {
			t.Fatal(err)
		}
		if err := m.SetAllocation(allocation([]string{"v100"}, []string{"a", "b"}, map[string][]float64{"a": {0.3}, "b": {0.7}}), r.now); err != nil {
			t.Fatal(err)
		}
		arrived, hold := r.now, max(k*cost, floor)
		bound := hold + finish*hold + r.round
		left, ended := remaining, false
		for {
			if !ended {
				if err := m.SetRemainingSteps("a", left); err != nil {
					t.Fatal(err)
				}
			}
			if r.step().Find("b").Action == Run {
				break
			}
			if left -= r.round; left <= 0 && !ended { // a ended: its GPU is free
				if err := m.RemoveJob("a", r.now); err != nil {
					t.Fatal(err)
				}
				ended = true
			}
			if r.now-arrived > bound+r.round {
				t.Fatalf("%s: b waited %.0f s, bound %.0f s", name, r.now-arrived, bound)
			}
		}
		if waited := r.now - r.round - arrived; waited > bound {
			t.Errorf("%s: b waited %.0f s, bound %.0f s", name, waited, bound)
		}
	}
}

// With every restart free the restart variant's plans are the improved
// variant's, round for round, on a random workload with arrivals,
// completions and new allocations.
func TestZeroRestartCostIsImproved(t *testing.T) {
	types := []string{"k80", "p100", "v100"}
	cl := cluster(servers("v100", 3, 2), servers("p100", 2, 2), servers("k80", 4, 1))
	for seed := range uint64(5) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			base := VariantImproved.Apply(DefaultOptions())
			mechs := []*Mechanism{mustNew(t, cl, base), mustNew(t, cl, VariantRestart.Apply(DefaultOptions()))}
			if mechs[1].opts.RestartHold == 0 {
				t.Fatal("the restart variant has no restart hold")
			}
			runners := []*runner{newRunner(t, mechs[0]), newRunner(t, mechs[1])}
			var alive []string
			next := 0
			for round := range 60 {
				// Events, the same for both.
				var events []func(m *Mechanism, now float64) error
				if round%3 == 0 || len(alive) < 4 {
					id := fmt.Sprint("j", next)
					next++
					tput := map[string]float64{}
					for _, ty := range types {
						if rng.Float64() < 0.9 {
							tput[ty] = 0.5 + 4*rng.Float64()
						}
					}
					sf := 1 + rng.IntN(2)
					alive = append(alive, id)
					events = append(events, func(m *Mechanism, now float64) error {
						return m.AddJob(Job{ID: id, ScaleFactor: sf, Throughputs: tput}, now)
					})
				}
				if round%4 == 1 && len(alive) > 3 {
					i := rng.IntN(len(alive))
					id := alive[i]
					alive = slices.Delete(alive, i, i+1)
					events = append(events, func(m *Mechanism, now float64) error { return m.RemoveJob(id, now) })
				}
				rows := map[string][]float64{}
				for _, id := range alive {
					row := make([]float64, len(types))
					for k := range row {
						row[k] = rng.Float64() / float64(len(alive))
					}
					rows[id] = row
				}
				steps := map[string]float64{}
				for _, id := range alive {
					steps[id] = rng.Float64() * 5000
				}
				var plans [2]*Plan
				for i, m := range mechs {
					now := runners[i].now
					for _, e := range events {
						if err := e(m, now); err != nil {
							t.Fatal(err)
						}
					}
					for _, id := range alive {
						if err := m.SetRemainingSteps(id, steps[id]); err != nil {
							t.Fatal(err)
						}
					}
					if m.NeedsReset(now) {
						if err := m.SetAllocation(allocation(types, alive, rows), now); err != nil {
							t.Fatal(err)
						}
					}
					plans[i] = runners[i].step()
				}
				if d := diffPlans(plans[0], plans[1]); d != "" {
					t.Fatalf("round %d: %s", round, d)
				}
			}
		})
	}
}

// diffPlans describes the first difference between two plans' decisions
// and assignments ("" when they agree).
func diffPlans(a, b *Plan) string {
	if len(a.Decisions) != len(b.Decisions) || len(a.Assignments) != len(b.Assignments) {
		return fmt.Sprintf("%d/%d decisions, %d/%d assignments", len(a.Decisions), len(b.Decisions), len(a.Assignments), len(b.Assignments))
	}
	for i := range a.Decisions {
		x, y := &a.Decisions[i], &b.Decisions[i]
		if x.Job != y.Job || x.Action != y.Action || x.Type != y.Type || !slices.Equal(x.Slots, y.Slots) || x.Reason != y.Reason {
			return fmt.Sprintf("job %s: %v on %s %v (%s) against %v on %s %v (%s)",
				x.Job, x.Action, x.Type, x.Slots, x.Reason, y.Action, y.Type, y.Slots, y.Reason)
		}
	}
	for i := range a.Assignments {
		x, y := &a.Assignments[i], &b.Assignments[i]
		if x.Key != y.Key || x.Type != y.Type || !slices.Equal(x.Slots, y.Slots) || x.Extended != y.Extended || x.Since != y.Since {
			return fmt.Sprintf("assignment %d: %+v against %+v", i, *x, *y)
		}
	}
	return ""
}
