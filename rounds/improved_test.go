package rounds

import (
	"math"
	"testing"
)

// improved is the improved variant of the reference options.
func improved() Options { return VariantImproved.Apply(DefaultOptions()) }

func TestParseVariant(t *testing.T) {
	cases := []struct {
		in      string
		want    Variant
		wantErr bool
	}{
		{"improved", VariantImproved, false},
		{"gavel", VariantGavel, false},
		{"", "", true},
		{"Gavel", "", true},
		{"ideal", "", true},
	}
	for _, tc := range cases {
		got, err := ParseVariant(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseVariant(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestVariantApply(t *testing.T) {
	base := DefaultOptions()
	if got := VariantGavel.Apply(base); got.GlobalOrder || got.ReallocateOnEvents || got.UpgradeIdle || !got.HoldUnallocated {
		t.Errorf("gavel changed the reference options: %+v", got)
	}
	got := VariantImproved.Apply(base)
	if !got.GlobalOrder || !got.ReallocateOnEvents || !got.UpgradeIdle || got.HoldUnallocated {
		t.Errorf("improved options: %+v", got)
	}
	if got.Credit != base.Credit || got.MinResetInterval != base.MinResetInterval || len(got.TypeOrder) != len(base.TypeOrder) {
		t.Errorf("improved changed the credit, interval or type order: %+v", got)
	}
	if got.RestartHold != 0 || got.RestartHoldMin != 0 {
		t.Errorf("improved holds restarts: %+v", got)
	}
	// The restart variant's floor counts rounds of the caller's length;
	// a floor the caller set stays.
	withRound := base
	withRound.RoundSeconds = 360
	if got := VariantRestart.Apply(withRound); got.RestartHoldMin != DefaultRestartHoldRounds*360 || got.RestartHold != DefaultRestartHold {
		t.Errorf("restart: hold K %v, floor %v s; want %v, %v", got.RestartHold, got.RestartHoldMin, DefaultRestartHold, DefaultRestartHoldRounds*360)
	}
	withRound.RestartHoldMin = 1
	if got := VariantRestart.Apply(withRound); got.RestartHoldMin != 1 {
		t.Errorf("restart replaced the caller's floor: %v", got.RestartHoldMin)
	}
}

// On a cluster with idle GPUs of every type, the reference walk fills the
// V100s first whatever the allocation says; the improved one runs each job
// where its allocation puts it. "rec" runs 2.2x faster on a P100 (as the
// Recommendation model does) and the allocation gives it the P100 only.
func TestPlacementFollowsAllocation(t *testing.T) {
	cases := []struct {
		name string
		opts Options
		want map[string]string // job → type it runs on in the first round
	}{
		{"gavel fills the v100s first", DefaultOptions(), map[string]string{"rec": "v100", "cnn": "v100"}},
		{"improved follows the allocation", improved(), map[string]string{"rec": "p100", "cnn": "v100"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := mustNew(t, cluster(servers("v100", 2, 1), servers("p100", 2, 1)), tc.opts)
			mustAdd(t, m, Job{ID: "rec", ScaleFactor: 1, Throughputs: map[string]float64{"v100": 1, "p100": 2.2}})
			mustAdd(t, m, Job{ID: "cnn", ScaleFactor: 1, Throughputs: map[string]float64{"v100": 3, "p100": 1}})
			rows := map[string][]float64{"rec": {1, 0}, "cnn": {0, 1}}
			if err := m.SetAllocation(allocation([]string{"p100", "v100"}, []string{"rec", "cnn"}, rows), 0); err != nil {
				t.Fatal(err)
			}
			r := newRunner(t, m)
			for round := range 3 {
				p := r.step()
				for id, typ := range tc.want {
					if d := p.Find(id); d.Type != typ {
						t.Errorf("round %d: %s on %q (%s), want %s", round, id, d.Type, d.Reason, typ)
					}
				}
			}
		})
	}
}

// A job whose allocation is on a slow type runs on a faster one when the
// walk left that one idle, and goes back when the faster GPUs are wanted.
func TestUpgradeIdle(t *testing.T) {
	speeds := map[string]float64{"v100": 4, "k80": 1}
	cases := []struct {
		name    string
		upgrade bool
		rivals  bool // a job allocated the V100 is in the system
		want    string
	}{
		{"without upgrade the allocation's slow type", false, false, "k80"},
		{"idle v100 taken", true, false, "v100"},
		{"v100 wanted by its allocated job", true, true, "k80"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := improved()
			o.UpgradeIdle = tc.upgrade
			m := mustNew(t, cluster(servers("v100", 1, 1), servers("k80", 1, 1)), o)
			mustAdd(t, m, Job{ID: "slow", ScaleFactor: 1, Throughputs: speeds})
			keys := []string{"slow"}
			rows := map[string][]float64{"slow": {1, 0}}
			if tc.rivals {
				mustAdd(t, m, Job{ID: "fast", ScaleFactor: 1, Throughputs: speeds})
				keys = append(keys, "fast")
				rows["fast"] = []float64{0, 1}
			}
			if err := m.SetAllocation(allocation([]string{"k80", "v100"}, keys, rows), 0); err != nil {
				t.Fatal(err)
			}
			r := newRunner(t, m)
			for round := range 3 {
				if d := r.step().Find("slow"); d.Type != tc.want {
					t.Errorf("round %d: slow on %q (%s), want %s", round, d.Type, d.Reason, tc.want)
				}
			}
		})
	}
}

// A job arriving between resets gets its share at the next round under the
// improved mechanism; the reference holds it until MinResetInterval has
// passed since the last reset. One V100, rounds of 360 s, the first job
// alone from t = 360 (a reset at 0 would not start the interval), the
// newcomer at t = 1080.
func TestNewcomerGetsAllocationAtArrival(t *testing.T) {
	cases := []struct {
		name      string
		opts      Options
		firstRun  float64 // when the newcomer first runs
		keepsTime bool    // the first job's service count survives the reallocation
	}{
		// The reset is due at 2280, so at the round of 2520; both jobs then
		// have the same priority and no deficit, and the earlier one wins.
		{"gavel waits for the reset", DefaultOptions(), 2880, false},
		// a has had 720 of the 900 s counted on the V100 since the reset
		// (priority 0.5 / 0.8), b only its credit (0.5 / 0.2).
		{"improved re-solves at once", improved(), 1080, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := mustNew(t, cluster(servers("v100", 1, 1)), tc.opts)
			mustAdd(t, m, Job{ID: "a", ScaleFactor: 1, Throughputs: everywhere("v100")})
			share := func(keys ...string) {
				t.Helper()
				rows := map[string][]float64{}
				for _, k := range keys {
					rows[k] = []float64{1 / float64(len(keys))}
				}
				if err := m.SetAllocation(allocation([]string{"v100"}, keys, rows), 360); err != nil {
					t.Fatal(err)
				}
			}
			share("a")
			r := newRunner(t, m)
			r.now = 360
			r.steps(2)
			if err := m.AddJob(Job{ID: "b", ScaleFactor: 1, Throughputs: everywhere("v100")}, r.now); err != nil {
				t.Fatal(err)
			}
			first := -1.0
			for first < 0 && r.now < 4000 {
				if m.NeedsReset(r.now) {
					rows := map[string][]float64{"a": {0.5}, "b": {0.5}}
					if err := m.SetAllocation(allocation([]string{"v100"}, []string{"a", "b"}, rows), r.now); err != nil {
						t.Fatal(err)
					}
					if r.now == 1080 {
						st, _ := m.State("a", "v100")
						if kept := st.Received == 180+720; kept != tc.keepsTime {
							t.Errorf("a's time received after the reallocation: %v", st.Received)
						}
					}
				}
				at := r.now
				if d := r.step().Find("b"); d.Action == Run {
					first = at
				}
			}
			if first != tc.firstRun {
				t.Errorf("newcomer first ran at %v, want %v", first, tc.firstRun)
			}
		})
	}
}

// The reset after reallocations folds into the deficits what every
// allocation owed while it was in force, and the owed share survives a
// restart (Save, Load).
func TestReallocationOwesEachAllocationItsTime(t *testing.T) {
	for _, restart := range []bool{false, true} {
		m := mustNew(t, cluster(servers("v100", 1, 1)), improved())
		add := func(m *Mechanism, ids ...string) {
			for _, id := range ids {
				mustAdd(t, m, Job{ID: id, ScaleFactor: 1, Throughputs: everywhere("v100")})
			}
		}
		add(m, "a")
		only := allocation([]string{"v100"}, []string{"a"}, map[string][]float64{"a": {1}})
		if err := m.SetAllocation(only, 100); err != nil { // a reset at 0 would not count
			t.Fatal(err)
		}
		if err := m.Record([]Usage{{Key: "a", Type: "v100", Seconds: 720}}); err != nil {
			t.Fatal(err)
		}
		add(m, "b")
		half := allocation([]string{"v100"}, []string{"a", "b"}, map[string][]float64{"a": {0.5}, "b": {0.5}})
		if err := m.SetAllocation(half, 820); err != nil { // before the interval: no reset
			t.Fatal(err)
		}
		if err := m.Record([]Usage{{Key: "b", Type: "v100", Seconds: 1200}}); err != nil {
			t.Fatal(err)
		}
		if restart {
			saved := m.Save()
			m = mustNew(t, cluster(servers("v100", 1, 1)), improved())
			add(m, "a", "b")
			m.Load(saved)
		}
		m.NoteEvent(EventOther)
		if err := m.SetAllocation(half, 2020); err != nil { // the interval has passed: reset
			t.Fatal(err)
		}
		// a: owed 1·720 + 0.5·1200, received 720 → +600;
		// b: owed 0.5·1200, received 1200 → −600.
		for id, want := range map[string]float64{"a": 600, "b": -600} {
			st, err := m.State(id, "v100")
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(st.Deficit-want) > 1e-9 || st.Received != 180 {
				t.Errorf("restart %v: %s deficit %v received %v, want %v and the credit", restart, id, st.Deficit, st.Received, want)
			}
		}
	}
}
