package rounds

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// limitJob is one job of a limits case: its scale factor, its allocation
// (the same share on every type) and the limits it counts in.
type limitJob struct {
	id     string
	sf     int
	share  float64
	limits []string
}

// jobsOf returns n jobs prefix0, prefix1, ... alike.
func jobsOf(prefix string, n, sf int, share float64, limits ...string) []limitJob {
	out := make([]limitJob, n)
	for i := range out {
		out[i] = limitJob{id: fmt.Sprintf("%s%d", prefix, i), sf: sf, share: share, limits: limits}
	}
	return out
}

func ids(prefix string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}

// limitWalks are the walks every limits case runs under: types one after
// another, one order across types, and the improved variant, which also
// moves jobs to idle faster GPUs after the walk.
func limitWalks() []struct {
	name string
	opts Options
} {
	base := Options{Credit: DefaultRoundSeconds / 2, TypeOrder: []string{"v100", "k80"}}
	global := base
	global.GlobalOrder = true
	return []struct {
		name string
		opts Options
	}{
		{"per type", base},
		{"global order", global},
		{"improved", VariantImproved.Apply(base)},
	}
}

const (
	alice4  = "qos gpu4 user alice"
	alice2  = "qos gpu2 user alice"
	alice1  = "qos gpu1 user alice"
	physics = "association physics"
)

func TestLimitsInTheWalk(t *testing.T) {
	// 8 GPUs: one v100 server and one k80 server of 4 each.
	eight := cluster(servers("v100", 1, 4), servers("k80", 1, 4))
	cases := []struct {
		name    string
		jobs    []limitJob
		pairs   []string           // pair keys
		shares  map[string]float64 // the pairs' allocations
		limits  []Limit
		running []Assignment
		// runs are the keys of the plan's assignments, in any order.
		runs []string
		// reasons are expected Reason.String()s; notLimited jobs wait for
		// some other reason than a limit.
		reasons    map[string]string
		notLimited []string
	}{
		{
			name:   "a user capped at 4 GPUs runs 4 jobs and the other 4 GPUs go to the next user",
			jobs:   slices.Concat(jobsOf("a", 8, 1, 0.2, alice4), jobsOf("b", 8, 1, 0.1)),
			limits: []Limit{{Name: alice4, GPUs: 4, Jobs: NoCap}},
			runs:   slices.Concat(ids("a", 0, 4), ids("b", 0, 4)),
			reasons: map[string]string{
				"a4": "waiting: limit qos gpu4 user alice (4 of 4 GPUs)",
				"a7": "waiting: limit qos gpu4 user alice (4 of 4 GPUs)",
			},
			notLimited: ids("b", 4, 8),
		},
		{
			name:       "without limits the capped user's priorities win every GPU",
			jobs:       slices.Concat(jobsOf("a", 8, 1, 0.2, alice4), jobsOf("b", 8, 1, 0.1)),
			runs:       ids("a", 0, 8),
			notLimited: ids("b", 0, 8),
		},
		{
			name:   "GPUs held outside the mechanism count",
			jobs:   slices.Concat(jobsOf("a", 8, 1, 0.2, alice4), jobsOf("b", 8, 1, 0.1)),
			limits: []Limit{{Name: alice4, GPUs: 4, Jobs: NoCap, UsedGPUs: 3, UsedJobs: 3}},
			runs:   slices.Concat(ids("a", 0, 1), ids("b", 0, 7)),
			reasons: map[string]string{
				"a1": "waiting: limit qos gpu4 user alice (4 of 4 GPUs)",
			},
			notLimited: []string{"b7"},
		},
		{
			// Her candidates are never reached: the cap did not stop her.
			name:       "a user at her cap who is outranked anyway waits on priority",
			jobs:       slices.Concat(jobsOf("a", 2, 1, 0.1, alice4), jobsOf("b", 8, 1, 0.2)),
			limits:     []Limit{{Name: alice4, GPUs: 4, Jobs: NoCap, UsedGPUs: 4}},
			runs:       ids("b", 0, 8),
			notLimited: []string{"a0", "a1"},
		},
		{
			name:   "pinned jobs over the cap keep their GPUs and block new ones",
			jobs:   slices.Concat(jobsOf("a", 8, 1, 0.2, alice2), jobsOf("b", 8, 1, 0.1)),
			limits: []Limit{{Name: alice2, GPUs: 2, Jobs: NoCap}},
			running: []Assignment{
				{Key: "a5", Jobs: []string{"a5"}, Type: "v100", Slots: []Slot{{"v100-0", 0}}, Pin: PinMinRunTime},
				{Key: "a6", Jobs: []string{"a6"}, Type: "v100", Slots: []Slot{{"v100-0", 1}}, Pin: PinNotPreemptible},
				{Key: "a7", Jobs: []string{"a7"}, Type: "k80", Slots: []Slot{{"k80-0", 0}}, Pin: PinMinRunTime},
			},
			runs: slices.Concat(ids("a", 5, 8), ids("b", 0, 5)),
			reasons: map[string]string{
				"a0": "waiting: limit qos gpu2 user alice (3 of 2 GPUs)",
				"a5": "kept running on v100: minimum run time not reached",
			},
		},
		{
			name:   "a job running outside the cluster counts its GPUs",
			jobs:   slices.Concat([]limitJob{{id: "out", sf: 2, share: 0.3, limits: []string{alice4}}}, jobsOf("a", 4, 1, 0.2, alice4), jobsOf("b", 8, 1, 0.1)),
			limits: []Limit{{Name: alice4, GPUs: 4, Jobs: NoCap}},
			running: []Assignment{
				{Key: "out", Jobs: []string{"out"}, Pin: PinOutside},
			},
			runs:       slices.Concat(ids("a", 0, 2), ids("b", 0, 6)),
			reasons:    map[string]string{"a2": "waiting: limit qos gpu4 user alice (4 of 4 GPUs)"},
			notLimited: []string{"out"},
		},
		{
			name: "running jobs over a lowered cap are preempted",
			jobs: slices.Concat(jobsOf("a", 4, 1, 0.3, alice4), []limitJob{
				{id: "x0", sf: 1, share: 0.2, limits: []string{alice4}},
				{id: "x1", sf: 1, share: 0.2, limits: []string{alice4}},
			}, jobsOf("b", 8, 1, 0.1)),
			limits: []Limit{{Name: alice4, GPUs: 4, Jobs: NoCap}},
			running: []Assignment{
				{Key: "a0", Jobs: []string{"a0"}, Type: "v100", Slots: []Slot{{"v100-0", 0}}},
				{Key: "a1", Jobs: []string{"a1"}, Type: "v100", Slots: []Slot{{"v100-0", 1}}},
				{Key: "a2", Jobs: []string{"a2"}, Type: "v100", Slots: []Slot{{"v100-0", 2}}},
				{Key: "a3", Jobs: []string{"a3"}, Type: "v100", Slots: []Slot{{"v100-0", 3}}},
				{Key: "x0", Jobs: []string{"x0"}, Type: "k80", Slots: []Slot{{"k80-0", 0}}},
				{Key: "x1", Jobs: []string{"x1"}, Type: "k80", Slots: []Slot{{"k80-0", 1}}},
			},
			runs: slices.Concat(ids("a", 0, 4), ids("b", 0, 4)),
			reasons: map[string]string{
				"a0": "lease extended on v100",
				"x0": "preempted: limit qos gpu4 user alice (4 of 4 GPUs)",
				"x1": "preempted: limit qos gpu4 user alice (4 of 4 GPUs)",
			},
		},
		{
			name:    "a job cap",
			jobs:    slices.Concat(jobsOf("a", 8, 1, 0.2, "qos normal user alice"), jobsOf("b", 8, 1, 0.1)),
			limits:  []Limit{{Name: "qos normal user alice", GPUs: NoCap, Jobs: 2}},
			runs:    slices.Concat(ids("a", 0, 2), ids("b", 0, 6)),
			reasons: map[string]string{"a2": "waiting: limit qos normal user alice (2 of 2 jobs)"},
		},
		{
			name:   "jobs held outside count against a job cap",
			jobs:   slices.Concat(jobsOf("a", 8, 1, 0.2, "qos normal user alice"), jobsOf("b", 8, 1, 0.1)),
			limits: []Limit{{Name: "qos normal user alice", GPUs: NoCap, Jobs: 2, UsedJobs: 2, UsedGPUs: 16}},
			runs:   ids("b", 0, 8),
			reasons: map[string]string{
				"a0": "waiting: limit qos normal user alice (2 of 2 jobs)",
			},
		},
		{
			name: "a larger job over the room left waits and smaller ones fill it",
			jobs: slices.Concat([]limitJob{{id: "big", sf: 4, share: 0.5, limits: []string{alice4}}},
				jobsOf("a", 4, 1, 0.2, alice4), jobsOf("b", 8, 1, 0.1)),
			limits: []Limit{{Name: alice4, GPUs: 4, Jobs: NoCap, UsedGPUs: 2}},
			runs:   slices.Concat(ids("a", 0, 2), ids("b", 0, 6)),
			reasons: map[string]string{
				"big": "waiting: limit qos gpu4 user alice (4 of 4 GPUs, needs 4)",
				"a2":  "waiting: limit qos gpu4 user alice (4 of 4 GPUs)",
			},
		},
		{
			name: "a user cap and a group cap over two users",
			jobs: slices.Concat(jobsOf("a", 6, 1, 0.3, alice4, physics), jobsOf("c", 4, 1, 0.2, "qos gpu4 user carol", physics),
				jobsOf("b", 4, 1, 0.1)),
			limits: []Limit{
				{Name: alice4, GPUs: 4, Jobs: NoCap},
				{Name: "qos gpu4 user carol", GPUs: 4, Jobs: NoCap},
				{Name: physics, GPUs: 5, Jobs: NoCap},
			},
			runs: slices.Concat(ids("a", 0, 4), []string{"b0", "b1", "b2", "c0"}),
			reasons: map[string]string{
				"a4": "waiting: limit qos gpu4 user alice (4 of 4 GPUs)",
				"c1": "waiting: limit association physics (5 of 5 GPUs)",
			},
			notLimited: []string{"b3"},
		},
		{
			name:  "a pair whose member's user is at her cap is not selected",
			jobs:  slices.Concat(jobsOf("a", 2, 1, 0.5, alice4), jobsOf("b", 2, 1, 0.1)),
			pairs: []string{"a0+b0"}, shares: map[string]float64{"a0+b0": 0.9},
			limits: []Limit{{Name: alice4, GPUs: 4, Jobs: NoCap, UsedGPUs: 4}},
			runs:   []string{"b0", "b1"},
			reasons: map[string]string{
				"a0": "waiting: limit qos gpu4 user alice (4 of 4 GPUs)",
				"a1": "waiting: limit qos gpu4 user alice (4 of 4 GPUs)",
			},
		},
		{
			name: "a pair counts both members in the limit they share",
			jobs: slices.Concat([]limitJob{
				{id: "a0", sf: 1, share: 0.5, limits: []string{alice1}},
				{id: "a1", sf: 1, share: 0.4, limits: []string{alice1}},
			}, jobsOf("b", 1, 1, 0.1)),
			pairs: []string{"a0+a1"}, shares: map[string]float64{"a0+a1": 0.9},
			limits:  []Limit{{Name: alice1, GPUs: 1, Jobs: NoCap}},
			runs:    []string{"a0", "b0"},
			reasons: map[string]string{"a1": "waiting: limit qos gpu1 user alice (1 of 1 GPUs)"},
		},
		{
			// Sharing its GPUs, a0 still counts the 2 GPUs it asked for.
			name: "a pair member counts the pair's whole scale factor",
			jobs: slices.Concat([]limitJob{
				{id: "a0", sf: 2, share: 0.5, limits: []string{alice2}},
				{id: "a1", sf: 1, share: 0.4, limits: []string{alice2}},
				{id: "b0", sf: 2, share: 0.3},
			}, jobsOf("c", 4, 1, 0.1)),
			pairs: []string{"a0+b0"}, shares: map[string]float64{"a0+b0": 0.9},
			limits:  []Limit{{Name: alice2, GPUs: 2, Jobs: NoCap}},
			runs:    slices.Concat([]string{"a0+b0"}, ids("c", 0, 4)),
			reasons: map[string]string{"a1": "waiting: limit qos gpu2 user alice (2 of 2 GPUs)"},
		},
		{
			// 2 k80 GPUs are left when its turn comes: it would not fit
			// whatever its cap says.
			name:       "a job that does not fit the GPUs left keeps its reason",
			jobs:       slices.Concat(jobsOf("b", 6, 1, 0.3), []limitJob{{id: "big", sf: 4, share: 0.2, limits: []string{alice4}}}),
			limits:     []Limit{{Name: alice4, GPUs: 4, Jobs: NoCap, UsedGPUs: 4}},
			runs:       ids("b", 0, 6),
			notLimited: []string{"big"},
		},
		{
			name:       "a name no limit has constrains nothing",
			jobs:       slices.Concat(jobsOf("a", 8, 1, 0.2, "qos gone user alice"), jobsOf("b", 8, 1, 0.1)),
			limits:     []Limit{{Name: alice4, GPUs: 4, Jobs: NoCap}},
			runs:       ids("a", 0, 8),
			notLimited: ids("b", 0, 8),
		},
		{
			name:   "a cap of zero runs nothing under it",
			jobs:   slices.Concat(jobsOf("a", 2, 1, 0.2, "qos none user alice"), jobsOf("b", 2, 1, 0.1)),
			limits: []Limit{{Name: "qos none user alice", GPUs: 0, Jobs: NoCap}},
			runs:   ids("b", 0, 2),
			reasons: map[string]string{
				"a0": "waiting: limit qos none user alice (0 of 0 GPUs)",
			},
		},
	}
	for _, tc := range cases {
		for _, walk := range limitWalks() {
			t.Run(tc.name+"/"+walk.name, func(t *testing.T) {
				m := mustNew(t, eight, walk.opts)
				speeds := map[string]float64{"v100": 2, "k80": 1}
				var keys []string
				rows := map[string][]float64{}
				for _, j := range tc.jobs {
					mustAdd(t, m, Job{ID: j.id, ScaleFactor: j.sf, Throughputs: speeds, Limits: j.limits})
					keys = append(keys, j.id)
					rows[j.id] = []float64{j.share, j.share}
				}
				for _, key := range tc.pairs {
					jobs := splitKey(key)
					if err := m.AddPair(Pair{Jobs: [2]string{jobs[0], jobs[1]},
						Throughputs: map[string][2]float64{"v100": {1, 1}, "k80": {1, 1}}}, 0); err != nil {
						t.Fatal(err)
					}
					keys = append(keys, key)
					rows[key] = []float64{tc.shares[key], tc.shares[key]}
				}
				if err := m.SetAllocation(allocation([]string{"k80", "v100"}, keys, rows), 0); err != nil {
					t.Fatal(err)
				}
				if err := m.SetLimits(tc.limits); err != nil {
					t.Fatal(err)
				}
				p, err := m.Plan(10, tc.running)
				if err != nil {
					t.Fatal(err)
				}
				var runs []string
				for _, a := range p.Assignments {
					runs = append(runs, a.Key)
				}
				slices.Sort(runs)
				want := slices.Sorted(slices.Values(tc.runs))
				if !slices.Equal(runs, want) {
					t.Errorf("runs %v, want %v", runs, want)
				}
				for _, id := range slices.Sorted(maps.Keys(tc.reasons)) {
					if got := p.Find(id).Reason.String(); got != tc.reasons[id] {
						t.Errorf("%s: reason %q, want %q", id, got, tc.reasons[id])
					}
				}
				for _, id := range tc.notLimited {
					if r := p.Find(id).Reason; r.Code == ReasonLimit {
						t.Errorf("%s: reason %q, want one that is not a limit", id, r)
					}
				}
				checkWithinLimits(t, tc.jobs, tc.limits, tc.running, p)
			})
		}
	}
}

// checkWithinLimits fails when a plan takes a limit over a cap beyond what
// outside and pinned jobs, which it must keep, already hold.
func checkWithinLimits(t *testing.T, jobs []limitJob, limits []Limit, running []Assignment, p *Plan) {
	t.Helper()
	sf := map[string]int{}
	member := map[string][]string{}
	for _, j := range jobs {
		sf[j.id] = j.sf
		member[j.id] = j.limits
	}
	type usage struct{ gpus, jobs int }
	count := func(u map[string]usage, key string, members []string) {
		for _, id := range members {
			for _, l := range member[id] {
				v := u[l]
				v.gpus += sf[splitKey(key)[0]]
				v.jobs++
				u[l] = v
			}
		}
	}
	kept, total := map[string]usage{}, map[string]usage{}
	for _, a := range running {
		if a.Pin != NotPinned {
			count(kept, a.Key, splitKey(a.Key))
		}
		if a.Pin == PinOutside {
			count(total, a.Key, splitKey(a.Key))
		}
	}
	for _, a := range p.Assignments {
		count(total, a.Key, a.Jobs)
	}
	for _, l := range limits {
		k, tot := kept[l.Name], total[l.Name]
		if l.GPUs != NoCap && l.UsedGPUs+tot.gpus > max(l.GPUs, l.UsedGPUs+k.gpus) {
			t.Errorf("limit %s: %d GPUs held, cap %d (%d kept)", l.Name, l.UsedGPUs+tot.gpus, l.GPUs, l.UsedGPUs+k.gpus)
		}
		if l.Jobs != NoCap && l.UsedJobs+tot.jobs > max(l.Jobs, l.UsedJobs+k.jobs) {
			t.Errorf("limit %s: %d jobs running, cap %d (%d kept)", l.Name, l.UsedJobs+tot.jobs, l.Jobs, l.UsedJobs+k.jobs)
		}
	}
}

// A selection held idle for want of an allocation (the reference's
// HoldUnallocated) must fit the caps, but does not count in them: nothing
// runs on its GPUs.
func TestHeldSelectionDoesNotCount(t *testing.T) {
	m := mustNew(t, cluster(servers("v100", 1, 4)), DefaultOptions())
	for _, id := range []string{"late", "a0", "a1"} {
		mustAdd(t, m, Job{ID: id, ScaleFactor: 1, Throughputs: everywhere("v100"), Limits: []string{alice2}})
	}
	// "late" has no row: the walk holds a GPU for it, ahead of a1.
	rows := map[string][]float64{"a0": {0.5}, "a1": {0}}
	if err := m.SetAllocation(allocation([]string{"v100"}, []string{"a0", "a1"}, rows), 0); err != nil {
		t.Fatal(err)
	}
	if err := m.SetLimits([]Limit{{Name: alice2, GPUs: 2, Jobs: NoCap}}); err != nil {
		t.Fatal(err)
	}
	p, err := m.Plan(10, nil)
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]Action{"a0": Run, "a1": Run, "late": Wait} {
		if d := p.Find(id); d.Action != want {
			t.Errorf("%s: %v (%s), want %v", id, d.Action, d.Reason, want)
		}
	}
	if got := p.Find("late").Reason.Code; got != ReasonNoAllocation {
		t.Errorf("late: reason %v, want no allocation", p.Find("late").Reason)
	}
}

func TestSetLimitsErrors(t *testing.T) {
	cases := []struct {
		name   string
		limits []Limit
		want   string
	}{
		{"duplicate name", []Limit{{Name: "y", GPUs: 1, Jobs: NoCap}, {Name: "x", GPUs: 1, Jobs: NoCap}, {Name: "x", GPUs: 2, Jobs: NoCap}},
			`limit "x" listed twice`},
		{"no name", []Limit{{GPUs: 1, Jobs: NoCap}}, "limit 0 has no name"},
		{"GPU cap below NoCap", []Limit{{Name: "x", GPUs: -2, Jobs: NoCap}}, "GPU cap -2"},
		{"job cap below NoCap", []Limit{{Name: "x", GPUs: NoCap, Jobs: -3}}, "job cap -3"},
		{"negative GPUs used", []Limit{{Name: "x", GPUs: 4, Jobs: NoCap, UsedGPUs: -1}}, "-1 GPUs used outside"},
		{"negative jobs used", []Limit{{Name: "x", GPUs: 4, Jobs: NoCap, UsedJobs: -1}}, "-1 jobs running outside"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := mustNew(t, cluster(servers("v100", 1, 2)), DefaultOptions())
			for _, id := range []string{"a", "b"} {
				mustAdd(t, m, Job{ID: id, ScaleFactor: 1, Throughputs: everywhere("v100"), Limits: []string{"x"}})
			}
			if err := m.SetAllocation(allocation([]string{"v100"}, []string{"a", "b"},
				map[string][]float64{"a": {0.5}, "b": {0.5}}), 0); err != nil {
				t.Fatal(err)
			}
			if err := m.SetLimits([]Limit{{Name: "x", GPUs: 1, Jobs: NoCap}}); err != nil {
				t.Fatal(err)
			}
			err := m.SetLimits(tc.limits)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one mentioning %q", err, tc.want)
			}
			// The limits in force before the refused call still hold,
			// for jobs whose names are resolved again too.
			if err := m.SetJobLimits("b", []string{"x"}); err != nil {
				t.Fatal(err)
			}
			p, err := m.Plan(10, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Count(Run); got != 1 {
				t.Errorf("%d jobs run under a cap of 1 GPU, want 1", got)
			}
		})
	}
}

func TestJobLimitNames(t *testing.T) {
	setup := func(t *testing.T) *Mechanism {
		m := mustNew(t, cluster(servers("v100", 1, 4)), DefaultOptions())
		for _, id := range []string{"a0", "a1", "a2"} {
			mustAdd(t, m, Job{ID: id, ScaleFactor: 1, Throughputs: everywhere("v100"), Limits: []string{alice1}})
		}
		mustAdd(t, m, Job{ID: "b0", ScaleFactor: 1, Throughputs: everywhere("v100")})
		if err := m.AddPair(Pair{Jobs: [2]string{"a0", "b0"}}, 0); err != nil {
			t.Fatal(err)
		}
		rows := map[string][]float64{"a0": {0.5}, "a1": {0.4}, "a2": {0.3}, "b0": {0.1}}
		if err := m.SetAllocation(allocation([]string{"v100"}, []string{"a0", "a1", "a2", "b0"}, rows), 0); err != nil {
			t.Fatal(err)
		}
		return m
	}
	running := func(t *testing.T, m *Mechanism) []string {
		t.Helper()
		p, err := m.Plan(10, nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, a := range p.Assignments {
			out = append(out, a.Key)
		}
		slices.Sort(out)
		return out
	}
	cases := []struct {
		name    string
		call    func(m *Mechanism) error
		wantErr string
		runs    []string
	}{
		{"names set before their limit take effect with it", func(m *Mechanism) error {
			return m.SetLimits([]Limit{{Name: alice1, GPUs: 1, Jobs: NoCap}})
		}, "", []string{"a0", "b0"}},
		{"a job moved out of the capped limit runs", func(m *Mechanism) error {
			if err := m.SetLimits([]Limit{{Name: alice1, GPUs: 1, Jobs: NoCap}}); err != nil {
				return err
			}
			return m.SetJobLimits("a1", []string{"qos normal user alice"})
		}, "", []string{"a0", "a1", "b0"}},
		{"a job moved into a capped limit waits", func(m *Mechanism) error {
			if err := m.SetLimits([]Limit{{Name: alice1, GPUs: 1, Jobs: NoCap}}); err != nil {
				return err
			}
			return m.SetJobLimits("b0", []string{alice1, alice1})
		}, "", []string{"a0"}},
		{"limits removed", func(m *Mechanism) error {
			if err := m.SetLimits([]Limit{{Name: alice1, GPUs: 1, Jobs: NoCap}}); err != nil {
				return err
			}
			return m.SetLimits(nil)
		}, "", []string{"a0", "a1", "a2", "b0"}},
		{"unknown job", func(m *Mechanism) error { return m.SetJobLimits("zz", nil) }, `unknown job "zz"`, nil},
		{"a pair has no limits of its own", func(m *Mechanism) error { return m.SetJobLimits("a0+b0", nil) }, "unknown job", nil},
		{"empty name", func(m *Mechanism) error { return m.SetJobLimits("a0", []string{alice1, ""}) }, "limit name 1 is empty", nil},
		{"empty name on arrival", func(m *Mechanism) error {
			return m.AddJob(Job{ID: "new", ScaleFactor: 1, Limits: []string{""}}, 0)
		}, "limit name 0 is empty", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := setup(t)
			err := tc.call(m)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := running(t, m); !slices.Equal(got, tc.runs) {
				t.Errorf("runs %v, want %v", got, tc.runs)
			}
		})
	}
}

// A fork has its own limits and job limit names: changing them on the
// fork leaves the original's plans as they were.
func TestForkCopiesLimits(t *testing.T) {
	m := mustNew(t, cluster(servers("v100", 1, 4)), DefaultOptions())
	for _, id := range []string{"a0", "a1", "a2"} {
		mustAdd(t, m, Job{ID: id, ScaleFactor: 1, Throughputs: everywhere("v100"), Limits: []string{alice2}})
	}
	if err := m.SetAllocation(allocation([]string{"v100"}, []string{"a0", "a1", "a2"},
		map[string][]float64{"a0": {0.5}, "a1": {0.4}, "a2": {0.3}}), 0); err != nil {
		t.Fatal(err)
	}
	capped := []Limit{{Name: alice2, GPUs: 2, Jobs: NoCap}}
	if err := m.SetLimits(capped); err != nil {
		t.Fatal(err)
	}
	runs := func(m *Mechanism) int {
		t.Helper()
		p, err := m.Plan(10, nil)
		if err != nil {
			t.Fatal(err)
		}
		return p.Count(Run)
	}
	f := m.Fork(nil)
	checkNoSharing(t, "Mechanism", reflect.ValueOf(m).Elem(), reflect.ValueOf(f).Elem())
	if got := runs(f); got != 2 {
		t.Fatalf("the fork runs %d jobs under a cap of 2, want 2", got)
	}

	// Same length: a limits array shared with the original would be
	// overwritten in place.
	if err := f.SetLimits([]Limit{{Name: alice2, GPUs: 0, Jobs: NoCap}}); err != nil {
		t.Fatal(err)
	}
	if got := runs(f); got != 0 {
		t.Errorf("the fork runs %d jobs under a cap of 0", got)
	}
	if got := runs(m); got != 2 {
		t.Errorf("the original runs %d jobs after the fork changed its limits, want 2", got)
	}

	// A name array shared with the original would take the new name, and
	// the original's next SetLimits would resolve it.
	if err := f.SetJobLimits("a0", []string{"qos normal user alice"}); err != nil {
		t.Fatal(err)
	}
	if got := runs(f); got != 1 {
		t.Errorf("the fork runs %d jobs with a0 out of the zero cap, want 1", got)
	}
	if err := m.SetLimits(capped); err != nil {
		t.Fatal(err)
	}
	if got := runs(m); got != 2 {
		t.Errorf("the original runs %d jobs after the fork changed a job's limits, want 2", got)
	}
}

func TestLimitReasonString(t *testing.T) {
	cases := []struct {
		r    Reason
		want string
	}{
		{Reason{Code: ReasonLimit, Limit: alice4, Held: 4, Cap: 4, Needed: 1}, "waiting: limit qos gpu4 user alice (4 of 4 GPUs)"},
		{Reason{Code: ReasonLimit, Limit: alice4, Held: 3, Cap: 4, Needed: 2}, "waiting: limit qos gpu4 user alice (3 of 4 GPUs, needs 2)"},
		{Reason{Code: ReasonLimit, Limit: "association physics", Held: 10, Cap: 10, Needed: 8, JobCap: true},
			"waiting: limit association physics (10 of 10 jobs)"},
		{Reason{Code: ReasonLimit, Limit: alice4, Held: 4, Cap: 4, Needed: 1, Preempted: true},
			"preempted: limit qos gpu4 user alice (4 of 4 GPUs)"},
	}
	for _, tc := range cases {
		if got := tc.r.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.r, got, tc.want)
		}
	}
}
