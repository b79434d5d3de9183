package rounds

import (
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
)

// The paper's §3 example: three jobs, one GPU of each type, and
//
//	        V100 P100 K80
//	job 0   0.6  0.4  0.0
//	job 1   0.2  0.6  0.2
//	job 2   0.2  0.0  0.8
//
// Over many rounds each job's share of each type's time must approach the
// allocation.
func TestPaperExampleConverges(t *testing.T) {
	types := []string{"k80", "p100", "v100"} // allocation columns, sorted
	want := map[string][]float64{
		"0": {0.0, 0.4, 0.6},
		"1": {0.2, 0.6, 0.2},
		"2": {0.8, 0.0, 0.2},
	}
	cases := []struct {
		name string
		opts func() Options
	}{
		{"fixed type order", DefaultOptions},
		{"global order", func() Options { o := DefaultOptions(); o.GlobalOrder = true; return o }},
		{"shuffled type order", func() Options { o := DefaultOptions(); o.Shuffle = shuffler(7); return o }},
		{"no credit", func() Options { o := DefaultOptions(); o.Credit = 0; return o }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := mustNew(t, cluster(servers("v100", 1, 1), servers("p100", 1, 1), servers("k80", 1, 1)), tc.opts())
			for _, id := range []string{"0", "1", "2"} {
				mustAdd(t, m, Job{ID: id, ScaleFactor: 1, Throughputs: everywhere(types...)})
			}
			if err := m.SetAllocation(allocation(types, []string{"0", "1", "2"}, want), 0); err != nil {
				t.Fatal(err)
			}
			const rounds = 500
			r := newRunner(t, m)
			r.steps(rounds)
			for id, row := range want {
				for i, typ := range types {
					got := r.seconds[id][typ] / (rounds * r.round)
					if math.Abs(got-row[i]) > 0.02 {
						t.Errorf("job %s on %s: ran %.3f of the time, allocation %.2f", id, typ, got, row[i])
					}
				}
			}
		})
	}
}

// A 4-GPU job among eight 1-GPU jobs on one 4-GPU server. Max-min fairness
// over scale-factor-weighted time gives every job the same sf·x: 4x + 8x' …
// with sf·x equal for all, 9z = 4 GPUs, so the big job gets x = 1/9 and
// each small job 4/9. The big job must get its ninth, not be starved by
// small jobs filling the server first.
func TestMultiGPUJobNotStarved(t *testing.T) {
	m := mustNew(t, cluster(servers("v100", 1, 4)), DefaultOptions())
	keys := []string{"big"}
	rows := map[string][]float64{"big": {1.0 / 9}}
	mustAdd(t, m, Job{ID: "big", ScaleFactor: 4, Throughputs: everywhere("v100")})
	for _, id := range []string{"s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7"} {
		mustAdd(t, m, Job{ID: id, ScaleFactor: 1, Throughputs: everywhere("v100")})
		keys = append(keys, id)
		rows[id] = []float64{4.0 / 9}
	}
	if err := m.SetAllocation(allocation([]string{"v100"}, keys, rows), 0); err != nil {
		t.Fatal(err)
	}
	r := newRunner(t, m)
	lastBig, longestGap := -1, 0
	round := 0
	r.onPlan = func(p *Plan) {
		if d := p.Find("big"); d.Type != "" {
			longestGap = max(longestGap, round-lastBig)
			lastBig = round
		}
		round++
	}
	const rounds = 900
	r.steps(rounds)
	got := r.seconds["big"]["v100"] / (rounds * r.round)
	if math.Abs(got-1.0/9) > 0.02 {
		t.Errorf("big job ran %.3f of the time, want 1/9 = %.3f", got, 1.0/9)
	}
	// Its fair period is 9 rounds; allow twice that between runs.
	if longestGap > 18 {
		t.Errorf("big job waited %d rounds in a row", longestGap)
	}
	for _, id := range keys[1:] {
		if got := r.seconds[id]["v100"] / (rounds * r.round); math.Abs(got-4.0/9) > 0.02 {
			t.Errorf("small job %s ran %.3f of the time, want 4/9", id, got)
		}
	}
}

// A pair and its members compete for three GPUs, so there is always room
// for a member next to the pair; the pair must still never run in the same
// round as either member, and members of a running pair report their
// partner.
func TestPairNeverRunsWithItsMembers(t *testing.T) {
	m := mustNew(t, cluster(servers("v100", 1, 3)), DefaultOptions())
	for _, id := range []string{"a", "b", "c"} {
		mustAdd(t, m, Job{ID: id, ScaleFactor: 1, Throughputs: everywhere("v100")})
	}
	if err := m.AddPair(Pair{Jobs: [2]string{"a", "b"}, Throughputs: map[string][2]float64{"v100": {0.6, 0.7}}}, 0); err != nil {
		t.Fatal(err)
	}
	keys := []string{"a", "b", "c", "a+b"}
	rows := map[string][]float64{"a": {0.25}, "b": {0.25}, "c": {1}, "a+b": {0.5}}
	if err := m.SetAllocation(allocation([]string{"v100"}, keys, rows), 0); err != nil {
		t.Fatal(err)
	}
	r := newRunner(t, m)
	pairRounds := 0
	r.onPlan = func(p *Plan) {
		seen := map[string]string{}
		gpus := map[Slot]string{}
		for _, a := range p.Assignments {
			for _, j := range a.Jobs {
				if other, dup := seen[j]; dup {
					t.Fatalf("at %v job %s runs in %s and %s", p.Time, j, other, a.Key)
				}
				seen[j] = a.Key
			}
			for _, s := range a.Slots {
				if other, dup := gpus[s]; dup {
					t.Fatalf("at %v GPU %v given to %s and %s", p.Time, s, other, a.Key)
				}
				gpus[s] = a.Key
			}
			if a.Key == "a+b" {
				pairRounds++
				if d := p.Find("a"); d.Partner != "b" {
					t.Errorf("a runs in the pair but reports partner %q", d.Partner)
				}
			}
		}
	}
	const rounds = 400
	r.steps(rounds)
	// The allocation uses 2 of the 3 GPUs; spare GPUs go to whoever ranks
	// next, so the pair gets at least its share.
	if got := float64(pairRounds) / rounds; got < 0.47 {
		t.Errorf("pair ran in %.3f of the rounds, allocation 0.5", got)
	}
}

func TestLeaseExtensionAndPreemption(t *testing.T) {
	v100 := servers("v100", 1, 2)
	k80 := servers("k80", 1, 1)
	cases := []struct {
		name    string
		cluster Cluster
		rows    map[string][]float64 // over types (k80, v100) or (v100)
		types   []string
		running []Assignment
		// received is time recorded per job on v100 before planning.
		received   map[string]float64
		wantAction map[string]Action
		wantReason map[string]string
		wantSlots  map[string][]Slot
	}{
		{
			name:    "same job wins the same type again: same GPUs, no restart",
			cluster: cluster(v100),
			types:   []string{"v100"},
			rows:    map[string][]float64{"a": {1}, "b": {1}},
			running: []Assignment{
				{Key: "a", Jobs: []string{"a"}, Type: "v100", Slots: []Slot{{"v100-0", 1}}},
				{Key: "b", Jobs: []string{"b"}, Type: "v100", Slots: []Slot{{"v100-0", 0}}},
			},
			wantAction: map[string]Action{"a": Keep, "b": Keep},
			wantReason: map[string]string{"a": "lease extended on v100", "b": "lease extended on v100"},
			wantSlots:  map[string][]Slot{"a": {{"v100-0", 1}}, "b": {{"v100-0", 0}}},
		},
		{
			name:    "allocation moves the job to another type",
			cluster: cluster(v100, k80),
			types:   []string{"k80", "v100"},
			rows:    map[string][]float64{"a": {0, 1}, "b": {0, 1}},
			running: []Assignment{
				{Key: "a", Jobs: []string{"a"}, Type: "k80", Slots: []Slot{{"k80-0", 0}}},
			},
			wantAction: map[string]Action{"a": Preempt, "b": Run},
			wantReason: map[string]string{"a": "preempted: moved to v100", "b": "selected on v100: priority 2.00"},
		},
		{
			// 1 GPU; a ran 3600 s: fraction (180+3600)/(3·180+3600) = 0.913,
			// priority 0.5/0.913 = 0.55; b and c: 180/4140 → 11.5.
			name:     "running job loses to a job that received less",
			cluster:  cluster(servers("v100", 1, 1)),
			types:    []string{"v100"},
			rows:     map[string][]float64{"a": {0.5}, "b": {0.5}, "c": {0.5}},
			received: map[string]float64{"a": 3600},
			running: []Assignment{
				{Key: "a", Jobs: []string{"a"}, Type: "v100", Slots: []Slot{{"v100-0", 0}}},
			},
			wantAction: map[string]Action{"a": Preempt, "b": Run, "c": Wait},
			wantReason: map[string]string{
				"a": "preempted: priority 0.55 below the 1 selected on v100",
				"b": "selected on v100: priority 11.50",
				"c": "waiting: priority 11.50 below the 1 selected on v100",
			},
			wantSlots: map[string][]Slot{"b": {{"v100-0", 0}}},
		},
		{
			// The same round as above, but a cannot be preempted: it
			// keeps its GPU and b and c wait for another.
			name:     "a pinned job keeps its GPU against higher priorities",
			cluster:  cluster(servers("v100", 1, 1)),
			types:    []string{"v100"},
			rows:     map[string][]float64{"a": {0.5}, "b": {0.5}, "c": {0.5}},
			received: map[string]float64{"a": 3600},
			running: []Assignment{
				{Key: "a", Jobs: []string{"a"}, Type: "v100", Slots: []Slot{{"v100-0", 0}}, Pin: PinNotPreemptible},
			},
			wantAction: map[string]Action{"a": Keep, "b": Wait, "c": Wait},
			wantReason: map[string]string{
				"a": "kept running on v100: it cannot be preempted",
				"b": "waiting: priority 11.50 below the 1 selected on v100",
				"c": "waiting: priority 11.50 below the 1 selected on v100",
			},
			wantSlots: map[string][]Slot{"a": {{"v100-0", 0}}},
		},
		{
			// The allocation wants a on v100, but a has not yet run the
			// minimum time on k80: it stays, and b takes the v100.
			name:    "a job within its minimum run time is not moved to a better type",
			cluster: cluster(v100, k80),
			types:   []string{"k80", "v100"},
			rows:    map[string][]float64{"a": {0, 1}, "b": {0, 1}},
			running: []Assignment{
				{Key: "a", Jobs: []string{"a"}, Type: "k80", Slots: []Slot{{"k80-0", 0}}, Pin: PinMinRunTime},
			},
			wantAction: map[string]Action{"a": Keep, "b": Run},
			wantReason: map[string]string{"a": "kept running on k80: minimum run time not reached", "b": "selected on v100: priority 2.00"},
			wantSlots:  map[string][]Slot{"a": {{"k80-0", 0}}},
		},
		{
			// a runs on GPUs of several types, outside the cluster the
			// mechanism sees: though its priority is the highest, the one
			// GPU goes to b, and a is neither placed nor preempted.
			// Fractions with the half-round credits: a 180/3960, priority
			// 0.5/0.045 = 11; b 3780/3960, priority 0.52.
			name:     "a job running outside the mechanism's view is not selected",
			cluster:  cluster(servers("v100", 1, 1)),
			types:    []string{"v100"},
			rows:     map[string][]float64{"a": {0.5}, "b": {0.5}},
			received: map[string]float64{"b": 3600},
			running: []Assignment{
				{Key: "a", Jobs: []string{"a"}, Pin: PinOutside},
			},
			wantAction: map[string]Action{"a": Wait, "b": Run},
			wantReason: map[string]string{
				"a": "waiting: priority 11.00 below the 1 selected on v100",
				"b": "selected on v100: priority 0.52",
			},
			wantSlots: map[string][]Slot{"b": {{"v100-0", 0}}},
		},
		{
			// A pinned job whose GPUs left the cluster cannot keep them.
			name:    "a pin does not hold GPUs that left",
			cluster: cluster(v100),
			types:   []string{"v100"},
			rows:    map[string][]float64{"a": {1}},
			running: []Assignment{
				{Key: "a", Jobs: []string{"a"}, Type: "k80", Slots: []Slot{{"k80-0", 0}}, Pin: PinNotPreemptible},
			},
			wantAction: map[string]Action{"a": Preempt},
			wantReason: map[string]string{"a": "preempted: moved to v100"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := mustNew(t, tc.cluster, DefaultOptions())
			keys := slices.Sorted(maps.Keys(tc.rows))
			for _, id := range keys {
				mustAdd(t, m, Job{ID: id, ScaleFactor: 1, Throughputs: everywhere(tc.types...)})
			}
			if err := m.SetAllocation(allocation(tc.types, keys, tc.rows), 0); err != nil {
				t.Fatal(err)
			}
			for id, s := range tc.received {
				if err := m.Record([]Usage{{Key: id, Type: "v100", Seconds: s}}); err != nil {
					t.Fatal(err)
				}
			}
			p, err := m.Plan(10, tc.running)
			if err != nil {
				t.Fatal(err)
			}
			for id, want := range tc.wantAction {
				d := p.Find(id)
				if d.Action != want {
					t.Errorf("%s: action %v, want %v (%s)", id, d.Action, want, d.Reason)
				}
				if got := d.Reason.String(); got != tc.wantReason[id] {
					t.Errorf("%s: reason %q, want %q", id, got, tc.wantReason[id])
				}
				if w, ok := tc.wantSlots[id]; ok && !slices.Equal(d.Slots, w) {
					t.Errorf("%s: slots %v, want %v", id, d.Slots, w)
				}
			}
			for _, a := range p.Assignments {
				if d := p.Find(a.Jobs[0]); a.Extended != (d.Action == Keep) {
					t.Errorf("%s: Extended=%v but action %v", a.Key, a.Extended, d.Action)
				}
			}
		})
	}
}

// Two rounds in a row with an unchanged winner: the second plan keeps every
// job where it was (nothing to restart).
func TestSecondRoundExtendsAllLeases(t *testing.T) {
	m := mustNew(t, cluster(servers("v100", 2, 4)), DefaultOptions())
	keys := []string{"j4", "j2", "j1a", "j1b"}
	sf := map[string]int{"j4": 4, "j2": 2, "j1a": 1, "j1b": 1}
	rows := map[string][]float64{}
	for _, k := range keys {
		mustAdd(t, m, Job{ID: k, ScaleFactor: sf[k], Throughputs: everywhere("v100")})
		rows[k] = []float64{1}
	}
	if err := m.SetAllocation(allocation([]string{"v100"}, keys, rows), 0); err != nil {
		t.Fatal(err)
	}
	r := newRunner(t, m)
	first := r.step()
	if n := first.Count(Run); n != 4 {
		t.Fatalf("first round started %d jobs, want 4", n)
	}
	second := r.step()
	for _, d := range second.Decisions {
		if d.Action != Keep || !slices.Equal(d.Slots, first.Find(d.Job).Slots) {
			t.Errorf("%s: %v on %v, want keep on %v", d.Job, d.Action, d.Slots, first.Find(d.Job).Slots)
		}
	}
}

func TestPlacementConsolidates(t *testing.T) {
	srv := func(id string, gpus int) Server { return Server{ID: id, Type: "v100", GPUs: gpus} }
	cases := []struct {
		name    string
		servers []Server
		jobs    []Job // arrival order
		want    map[string][]string
	}{
		{
			name:    "every job fits one server exactly",
			servers: []Server{srv("A", 4), srv("B", 8), srv("C", 2), srv("D", 1)},
			jobs:    []Job{{ID: "j1", ScaleFactor: 1}, {ID: "j2", ScaleFactor: 2}, {ID: "j4", ScaleFactor: 4}, {ID: "j8", ScaleFactor: 8}},
			want:    map[string][]string{"j8": {"B"}, "j4": {"A"}, "j2": {"C"}, "j1": {"D"}},
		},
		{
			name:    "a 4-GPU job takes the 4-GPU server, not two 2-GPU ones",
			servers: []Server{srv("A", 2), srv("B", 2), srv("C", 4)},
			jobs:    []Job{{ID: "j4", ScaleFactor: 4}},
			want:    map[string][]string{"j4": {"C"}},
		},
		{
			name:    "a job larger than any server spans the fewest servers",
			servers: []Server{srv("A", 2), srv("B", 4), srv("C", 4)},
			jobs:    []Job{{ID: "j2", ScaleFactor: 2}, {ID: "j6", ScaleFactor: 6}},
			want:    map[string][]string{"j6": {"B", "C"}, "j2": {"A"}},
		},
		{
			name:    "small jobs fill partly used servers before empty ones",
			servers: []Server{srv("A", 4), srv("B", 4)},
			jobs:    []Job{{ID: "s1", ScaleFactor: 1}, {ID: "s2", ScaleFactor: 1}, {ID: "j2", ScaleFactor: 2}, {ID: "j4", ScaleFactor: 4}},
			want:    map[string][]string{"j4": {"A"}, "j2": {"B"}, "s1": {"B"}, "s2": {"B"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := mustNew(t, Cluster{Servers: tc.servers}, DefaultOptions())
			var keys []string
			rows := map[string][]float64{}
			for _, j := range tc.jobs {
				j.Throughputs = everywhere("v100")
				mustAdd(t, m, j)
				keys = append(keys, j.ID)
				rows[j.ID] = []float64{1}
			}
			if err := m.SetAllocation(allocation([]string{"v100"}, keys, rows), 0); err != nil {
				t.Fatal(err)
			}
			p, err := m.Plan(0, nil)
			if err != nil {
				t.Fatal(err)
			}
			used := map[Slot]bool{}
			for id, want := range tc.want {
				d := p.Find(id)
				var got []string
				for _, s := range d.Slots {
					if used[s] {
						t.Errorf("GPU %v given twice", s)
					}
					used[s] = true
					if !slices.Contains(got, s.Server) {
						got = append(got, s.Server)
					}
				}
				slices.Sort(got)
				if !slices.Equal(got, want) {
					t.Errorf("%s on servers %v, want %v", id, got, want)
				}
			}
		})
	}
}

func TestPriorities(t *testing.T) {
	// One v100 GPU, jobs a (allocation 0.5) and b (0.5) and c (0) after a
	// reset; a then ran 360 s.
	cases := []struct {
		name   string
		credit float64
		ranA   float64
		want   map[string]float64
	}{
		// Type total 3·180 = 540: fraction 1/3 each, priority 0.5·3.
		{"credit, nothing ran", 180, 0, map[string]float64{"a": 1.5, "b": 1.5, "c": 0}},
		// Total 900: a (540/900) → 0.5/0.6; b (180/900) → 0.5/0.2.
		{"credit, a ran one round", 180, 360, map[string]float64{"a": 0.5 / 0.6, "b": 2.5, "c": 0}},
		// No credit: nothing received yet means allocation × 1e9.
		{"no credit, nothing ran", 0, 0, map[string]float64{"a": 0.5e9, "b": 0.5e9, "c": 0}},
		// No credit: a has all the time (fraction 1); b never ran.
		{"no credit, a ran one round", 0, 360, map[string]float64{"a": 0.5, "b": 0.5e9, "c": 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			o.Credit = tc.credit
			m := mustNew(t, cluster(servers("v100", 1, 1)), o)
			for _, id := range []string{"a", "b", "c"} {
				mustAdd(t, m, Job{ID: id, ScaleFactor: 1, Throughputs: everywhere("v100")})
			}
			rows := map[string][]float64{"a": {0.5}, "b": {0.5}, "c": {0}}
			if err := m.SetAllocation(allocation([]string{"v100"}, []string{"a", "b", "c"}, rows), 0); err != nil {
				t.Fatal(err)
			}
			if tc.ranA > 0 {
				if err := m.Record([]Usage{{Key: "a", Type: "v100", Seconds: tc.ranA}}); err != nil {
					t.Fatal(err)
				}
			}
			for id, want := range tc.want {
				s, err := m.State(id, "v100")
				if err != nil {
					t.Fatal(err)
				}
				if math.Abs(s.Priority-want) > 1e-9*math.Max(1, want) {
					t.Errorf("%s: priority %v, want %v", id, s.Priority, want)
				}
			}
		})
	}
}

// Without credit a job that has not run since the reset outranks one that
// has, even with a much smaller allocation.
func TestNewJobsGoFirst(t *testing.T) {
	o := DefaultOptions()
	o.Credit = 0
	m := mustNew(t, cluster(servers("v100", 1, 1)), o)
	mustAdd(t, m, Job{ID: "veteran", ScaleFactor: 1, Throughputs: everywhere("v100")})
	mustAdd(t, m, Job{ID: "new", ScaleFactor: 1, Throughputs: everywhere("v100")})
	rows := map[string][]float64{"veteran": {0.9}, "new": {0.1}}
	if err := m.SetAllocation(allocation([]string{"v100"}, []string{"veteran", "new"}, rows), 0); err != nil {
		t.Fatal(err)
	}
	r := newRunner(t, m)
	if d := r.step().Find("veteran"); d.Action != Run {
		t.Fatalf("round 1: larger allocation should start first, got %v (%s)", d.Action, d.Reason)
	}
	d := r.step().Find("new")
	if d.Action != Run || d.Reason.String() != "selected on v100: priority new" {
		t.Errorf("round 2: new job got %v (%s), want run with priority new", d.Action, d.Reason)
	}
}

func TestFoldIntoDeficits(t *testing.T) {
	m := mustNew(t, cluster(servers("v100", 1, 1)), DefaultOptions())
	mustAdd(t, m, Job{ID: "a", ScaleFactor: 1, Throughputs: everywhere("v100")})
	mustAdd(t, m, Job{ID: "b", ScaleFactor: 1, Throughputs: everywhere("v100")})
	rows := map[string][]float64{"a": {0.75}, "b": {0.25}}
	alloc := allocation([]string{"v100"}, []string{"a", "b"}, rows)
	if err := m.SetAllocation(alloc, 100); err != nil {
		t.Fatal(err)
	}
	if err := m.Record([]Usage{{Key: "a", Type: "v100", Seconds: 360}}); err != nil {
		t.Fatal(err)
	}
	if err := m.SetAllocation(alloc, 1100); err != nil {
		t.Fatal(err)
	}
	// a should have had 0.75·1000 = 750 s and got 360; b 250 and got 0.
	for id, want := range map[string]State{
		"a": {Received: 180, Deficit: 390, Allocation: 0.75, Priority: 0.75 / 0.5},
		"b": {Received: 180, Deficit: 250, Allocation: 0.25, Priority: 0.25 / 0.5},
	} {
		got, err := m.State(id, "v100")
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got.Received-want.Received) > 1e-9 || math.Abs(got.Deficit-want.Deficit) > 1e-9 ||
			math.Abs(got.Allocation-want.Allocation) > 1e-9 || math.Abs(got.Priority-want.Priority) > 1e-9 {
			t.Errorf("%s: %+v, want %+v", id, got, want)
		}
	}
}

func TestNeedsReset(t *testing.T) {
	type step struct {
		at     float64
		do     string // "event", "reset", or "" to only ask
		expect bool   // NeedsReset(at) after the step
	}
	cases := []struct {
		name     string
		interval float64
		every    bool
		steps    []step
	}{
		{"nothing happened", 1920, false, []step{{0, "", false}, {5000, "", false}}},
		{"first event always resets", 1920, false, []step{{50, "event", true}}},
		{"interval counts from the last reset", 1920, false, []step{
			{100, "event", true}, {100, "reset", false}, {500, "event", false}, {2019, "", false}, {2020, "", true},
		}},
		{"a reset at time 0 does not start the interval", 1920, false, []step{
			{0, "event", true}, {0, "reset", false}, {360, "event", true},
		}},
		{"no event, no reset however long", 1920, false, []step{
			{100, "event", true}, {100, "reset", false}, {100000, "", false},
		}},
		{"interval 0: every event", 0, false, []step{
			{100, "event", true}, {100, "reset", false}, {100, "", false}, {460, "event", true},
		}},
		{"every round", 1920, true, []step{{0, "", true}, {100, "reset", true}, {200, "", true}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			o.MinResetInterval = tc.interval
			o.ResetEveryRound = tc.every
			m := mustNew(t, cluster(servers("v100", 1, 1)), o)
			for i, s := range tc.steps {
				switch s.do {
				case "event":
					m.NoteEvent(EventArrival)
				case "reset":
					if err := m.SetAllocation(allocation([]string{"v100"}, nil, nil), s.at); err != nil {
						t.Fatal(err)
					}
				}
				if got := m.NeedsReset(s.at); got != s.expect {
					t.Fatalf("step %d (%s at %v): NeedsReset = %v, want %v", i, s.do, s.at, got, s.expect)
				}
			}
		})
	}
}

func TestArrivalAndCompletionAreEvents(t *testing.T) {
	o := DefaultOptions()
	m := mustNew(t, cluster(servers("v100", 1, 1)), o)
	if err := m.SetAllocation(allocation([]string{"v100"}, nil, nil), 100); err != nil {
		t.Fatal(err)
	}
	mustAdd(t, m, Job{ID: "a", ScaleFactor: 1, Throughputs: everywhere("v100")})
	if m.NeedsReset(200) || !m.NeedsReset(2020) {
		t.Errorf("arrival: NeedsReset(200)=%v NeedsReset(2020)=%v, want false, true", m.NeedsReset(200), m.NeedsReset(2020))
	}
	if err := m.SetAllocation(allocation([]string{"v100"}, []string{"a"}, map[string][]float64{"a": {1}}), 2020); err != nil {
		t.Fatal(err)
	}
	if got := m.PendingEvents(); len(got) != 0 {
		t.Errorf("events pending after a reset: %v", got)
	}
	if err := m.RemoveJob("a", 4000); err != nil {
		t.Fatal(err)
	}
	if !m.NeedsReset(4000) {
		t.Error("completion did not ask for a reset")
	}
	if got := m.PendingEvents(); !slices.Equal(got, []Event{EventCompletion}) {
		t.Errorf("pending events %v, want [completion]", got)
	}
}

func TestSkipZeroPriorityAndHoldUnallocated(t *testing.T) {
	// Two v100 GPUs; "a" has allocation 0 on v100 (priority 0) and "late"
	// arrives after the allocation was computed.
	cases := []struct {
		name      string
		skipZero  bool
		hold      bool
		wantA     Action
		wantLate  Action
		lateWhy   string
		wantIdleV int
	}{
		{"reference LAS: priority 0 still runs; late job holds a GPU idle", false, true, Run, Wait,
			"waiting: no allocation yet (arrived after the last reset)", 1},
		{"FIFO: priority 0 never runs", true, true, Wait, Wait,
			"waiting: priority 0 on every usable type", 2},
		{"without holding, the late job runs at priority 0", false, false, Run, Run,
			"selected on v100: priority 0.00", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			o.SkipZeroPriority, o.HoldUnallocated = tc.skipZero, tc.hold
			m := mustNew(t, cluster(servers("v100", 1, 2)), o)
			mustAdd(t, m, Job{ID: "a", ScaleFactor: 1, Throughputs: everywhere("v100")})
			if err := m.SetAllocation(allocation([]string{"v100"}, []string{"a"}, map[string][]float64{"a": {0}}), 0); err != nil {
				t.Fatal(err)
			}
			mustAdd(t, m, Job{ID: "late", ScaleFactor: 1, Throughputs: everywhere("v100")})
			p, err := m.Plan(10, nil)
			if err != nil {
				t.Fatal(err)
			}
			if d := p.Find("a"); d.Action != tc.wantA {
				t.Errorf("a: %v (%s), want %v", d.Action, d.Reason, tc.wantA)
			}
			d := p.Find("late")
			if d.Action != tc.wantLate || d.Reason.String() != tc.lateWhy {
				t.Errorf("late: %v (%s), want %v (%s)", d.Action, d.Reason, tc.wantLate, tc.lateWhy)
			}
			if p.Idle[0] != tc.wantIdleV {
				t.Errorf("idle v100 GPUs %d, want %d", p.Idle[0], tc.wantIdleV)
			}
		})
	}
}

// Throughput 0 on a type means never running there, whatever the
// allocation says.
func TestZeroThroughputTypesNeverUsed(t *testing.T) {
	c := cluster(servers("v100", 1, 2), servers("k80", 2, 1))
	m := mustNew(t, c, DefaultOptions())
	mustAdd(t, m, Job{ID: "nok80", ScaleFactor: 1, Throughputs: map[string]float64{"v100": 2}})
	mustAdd(t, m, Job{ID: "any", ScaleFactor: 1, Throughputs: map[string]float64{"v100": 2, "k80": 1}})
	mustAdd(t, m, Job{ID: "other", ScaleFactor: 1, Throughputs: map[string]float64{"v100": 2, "k80": 1}})
	mustAdd(t, m, Job{ID: "nowhere", ScaleFactor: 1, Throughputs: map[string]float64{"v100": 0, "k80": 0}})
	if err := m.AddPair(Pair{Jobs: [2]string{"any", "other"}, Throughputs: map[string][2]float64{"v100": {1, 1}, "k80": {0.5, 0}}}, 0); err != nil {
		t.Fatal(err)
	}
	// A careless allocation that puts everyone on k80.
	types := []string{"k80", "v100"}
	keys := []string{"nok80", "any", "other", "nowhere", "any+other"}
	rows := map[string][]float64{}
	for _, k := range keys {
		rows[k] = []float64{0.5, 0.5}
	}
	if err := m.SetAllocation(allocation(types, keys, rows), 0); err != nil {
		t.Fatal(err)
	}
	r := newRunner(t, m)
	r.onPlan = func(p *Plan) {
		for _, a := range p.Assignments {
			if a.Type == "k80" && (a.Key == "nok80" || a.Key == "any+other") {
				t.Fatalf("%s placed on k80 where its throughput is 0", a.Key)
			}
			if a.Key == "nowhere" {
				t.Fatalf("job without any usable type placed on %s", a.Type)
			}
		}
		if d := p.Find("nowhere"); d.Reason.String() != "waiting: no GPU type of the cluster can run it" {
			t.Fatalf("nowhere: %s", d.Reason)
		}
	}
	r.steps(50)
	if r.seconds["nok80"]["v100"] == 0 {
		t.Error("nok80 never ran on v100")
	}
}

// Every job of every plan has a decision with a reason that matches its
// action, in a busy mixed cluster.
func TestEveryDecisionHasAReason(t *testing.T) {
	c := cluster(servers("v100", 2, 4), servers("p100", 2, 2), servers("k80", 4, 1))
	m := mustNew(t, c, DefaultOptions())
	sfs := []int{1, 1, 2, 4, 1, 8, 1, 2}
	var keys []string
	rows := map[string][]float64{}
	for i := range 24 {
		id := string(rune('a' + i))
		tp := map[string]float64{"v100": 3, "p100": 2, "k80": 1}
		if i%5 == 0 {
			tp["k80"] = 0
		}
		mustAdd(t, m, Job{ID: id, ScaleFactor: sfs[i%len(sfs)], Throughputs: tp})
		keys = append(keys, id)
		rows[id] = []float64{0.1, 0.2, 0.1}
	}
	if err := m.SetAllocation(allocation([]string{"k80", "p100", "v100"}, keys, rows), 0); err != nil {
		t.Fatal(err)
	}
	prefix := map[Action]string{Run: "selected on ", Keep: "lease extended on ", Preempt: "preempted: ", Wait: "waiting: "}
	r := newRunner(t, m)
	r.onPlan = func(p *Plan) {
		if len(p.Decisions) != m.Len() {
			t.Fatalf("%d decisions for %d jobs", len(p.Decisions), m.Len())
		}
		for _, d := range p.Decisions {
			if d.Reason.Code == 0 || !strings.HasPrefix(d.Reason.String(), prefix[d.Action]) {
				t.Fatalf("%s: action %v with reason %q", d.Job, d.Action, d.Reason)
			}
			if d.Starts() != (d.Type != "" && d.Action != Keep) {
				t.Fatalf("%s: Starts()=%v for %v on %q", d.Job, d.Starts(), d.Action, d.Type)
			}
		}
	}
	r.steps(100)
}

func TestNoFitReason(t *testing.T) {
	m := mustNew(t, cluster(servers("v100", 1, 8)), DefaultOptions())
	keys := []string{"big"}
	rows := map[string][]float64{"big": {0.1}}
	mustAdd(t, m, Job{ID: "big", ScaleFactor: 8, Throughputs: everywhere("v100")})
	for _, id := range []string{"s1", "s2", "s3", "s4", "s5"} {
		mustAdd(t, m, Job{ID: id, ScaleFactor: 1, Throughputs: everywhere("v100")})
		keys = append(keys, id)
		rows[id] = []float64{1}
	}
	if err := m.SetAllocation(allocation([]string{"v100"}, keys, rows), 0); err != nil {
		t.Fatal(err)
	}
	p, err := m.Plan(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Find("big").Reason.String(); got != "waiting: needs 8 v100 GPUs, 3 free" {
		t.Errorf("big: %q", got)
	}
}

func TestBadInput(t *testing.T) {
	newM := func(t *testing.T) *Mechanism {
		m := mustNew(t, cluster(servers("v100", 1, 2)), DefaultOptions())
		mustAdd(t, m, Job{ID: "a", ScaleFactor: 1, Throughputs: everywhere("v100")})
		mustAdd(t, m, Job{ID: "b", ScaleFactor: 2, Throughputs: everywhere("v100")})
		return m
	}
	cases := []struct {
		name string
		call func(m *Mechanism) error
		want string
	}{
		{"duplicate job", func(m *Mechanism) error { return m.AddJob(Job{ID: "a", ScaleFactor: 1}, 0) }, "already added"},
		{"no scale factor", func(m *Mechanism) error { return m.AddJob(Job{ID: "c"}, 0) }, "scale factor 0"},
		{"plus in ID", func(m *Mechanism) error { return m.AddJob(Job{ID: "x+y", ScaleFactor: 1}, 0) }, "names pairs"},
		{"negative throughput", func(m *Mechanism) error {
			return m.AddJob(Job{ID: "c", ScaleFactor: 1, Throughputs: map[string]float64{"v100": -1}}, 0)
		}, "throughput"},
		{"pair of unequal sizes", func(m *Mechanism) error { return m.AddPair(Pair{Jobs: [2]string{"a", "b"}}, 0) }, "scale factors differ"},
		{"pair with unknown job", func(m *Mechanism) error { return m.AddPair(Pair{Jobs: [2]string{"a", "z"}}, 0) }, "unknown job"},
		{"remove unknown", func(m *Mechanism) error { return m.RemoveJob("z", 0) }, "unknown job"},
		{"short allocation row", func(m *Mechanism) error {
			return m.SetAllocation(allocation([]string{"v100", "k80"}, []string{"a"}, map[string][]float64{"a": {1}}), 0)
		}, "1 fractions for 2 types"},
		{"NaN allocation", func(m *Mechanism) error {
			return m.SetAllocation(allocation([]string{"v100"}, []string{"a"}, map[string][]float64{"a": {math.NaN()}}), 0)
		}, "NaN"},
		{"nil allocation", func(m *Mechanism) error { return m.SetAllocation(nil, 0) }, "nil allocation"},
		{"usage on unknown type", func(m *Mechanism) error { return m.Record([]Usage{{Key: "a", Type: "h100", Seconds: 1}}) }, "unknown GPU type"},
		{"negative usage", func(m *Mechanism) error { return m.Record([]Usage{{Key: "a", Type: "v100", Seconds: -1}}) }, "-1 seconds"},
		{"one GPU held twice", func(m *Mechanism) error {
			_, err := m.Plan(0, []Assignment{
				{Key: "a", Type: "v100", Slots: []Slot{{"v100-0", 0}}},
				{Key: "b", Type: "v100", Slots: []Slot{{"v100-0", 0}, {"v100-0", 1}}},
			})
			return err
		}, "held twice"},
		{"job listed twice", func(m *Mechanism) error {
			_, err := m.Plan(0, []Assignment{
				{Key: "a", Type: "v100", Slots: []Slot{{"v100-0", 0}}},
				{Key: "a", Type: "v100", Slots: []Slot{{"v100-0", 1}}},
			})
			return err
		}, "listed twice"},
		{"server without GPUs", func(m *Mechanism) error {
			return m.SetCluster(Cluster{Servers: []Server{{ID: "x", Type: "v100"}}}, 0)
		}, "0 GPUs"},
		{"duplicate server", func(m *Mechanism) error {
			return m.SetCluster(Cluster{Servers: []Server{{ID: "x", Type: "v100", GPUs: 1}, {ID: "x", Type: "k80", GPUs: 1}}}, 0)
		}, "listed twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call(newM(t))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

func TestShuffledOrderIsSeededAndComplete(t *testing.T) {
	c := cluster(servers("v100", 1, 1), servers("p100", 1, 1), servers("k80", 1, 1))
	orders := func(seed uint64) [][]string {
		o := DefaultOptions()
		o.Shuffle = shuffler(seed)
		m := mustNew(t, c, o)
		var out [][]string
		for range 20 {
			p, err := m.Plan(0, nil)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, slices.Clone(p.Order))
		}
		return out
	}
	a, b := orders(3), orders(3)
	distinct := map[string]bool{}
	for i := range a {
		if !slices.Equal(a[i], b[i]) {
			t.Fatalf("round %d: same seed gave %v and %v", i, a[i], b[i])
		}
		sorted := slices.Sorted(slices.Values(a[i]))
		if !slices.Equal(sorted, []string{"k80", "p100", "v100"}) {
			t.Fatalf("round %d: order %v is not a permutation of the types", i, a[i])
		}
		distinct[strings.Join(a[i], ",")] = true
	}
	if len(distinct) < 2 {
		t.Errorf("20 shuffled rounds all used order %v", a[0])
	}
}

func TestClusterChangeKeepsState(t *testing.T) {
	m := mustNew(t, cluster(servers("v100", 1, 1)), DefaultOptions())
	mustAdd(t, m, Job{ID: "a", ScaleFactor: 1, Throughputs: everywhere("v100", "k80")})
	if err := m.SetAllocation(allocation([]string{"v100"}, []string{"a"}, map[string][]float64{"a": {1}}), 100); err != nil {
		t.Fatal(err)
	}
	if err := m.Record([]Usage{{Key: "a", Type: "v100", Seconds: 360}}); err != nil {
		t.Fatal(err)
	}
	if err := m.SetCluster(cluster(servers("v100", 1, 1), servers("k80", 1, 1)), 500); err != nil {
		t.Fatal(err)
	}
	if m.NeedsReset(500) || !m.NeedsReset(2020) {
		t.Error("cluster change: want a reset once the interval since 100 has passed, not before")
	}
	v, _ := m.State("a", "v100")
	k, err := m.State("a", "k80")
	if err != nil {
		t.Fatal(err)
	}
	if v.Received != 540 || k.Received != 180 {
		t.Errorf("received v100 %v (want 540), k80 %v (want the 180 credit)", v.Received, k.Received)
	}
	if got := m.Types(); !slices.Equal(got, []string{"k80", "v100"}) {
		t.Errorf("types %v", got)
	}
}

// GPUs that left the cluster cannot be kept: their job restarts elsewhere
// when selected, and the plan does not fail.
func TestRunningOnVanishedGPUs(t *testing.T) {
	cases := []struct {
		name    string
		running Assignment
	}{
		{"server removed", Assignment{Key: "a", Jobs: []string{"a"}, Type: "v100", Slots: []Slot{{"gone", 0}}}},
		{"server shrank", Assignment{Key: "a", Jobs: []string{"a"}, Type: "v100", Slots: []Slot{{"v100-0", 7}}}},
		{"server changed type", Assignment{Key: "a", Jobs: []string{"a"}, Type: "p100", Slots: []Slot{{"v100-0", 0}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := mustNew(t, cluster(servers("v100", 1, 2)), DefaultOptions())
			mustAdd(t, m, Job{ID: "a", ScaleFactor: 1, Throughputs: everywhere("v100")})
			if err := m.SetAllocation(allocation([]string{"v100"}, []string{"a"}, map[string][]float64{"a": {1}}), 0); err != nil {
				t.Fatal(err)
			}
			p, err := m.Plan(0, []Assignment{tc.running})
			if err != nil {
				t.Fatal(err)
			}
			d := p.Find("a")
			if d.Action != Preempt || !d.Starts() || d.Type != "v100" || len(d.Slots) != 1 || d.Slots[0].Server != "v100-0" {
				t.Errorf("got %v on %v (%s), want a restart on v100-0", d.Action, d.Slots, d.Reason)
			}
		})
	}
}
