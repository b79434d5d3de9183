package rounds

import (
	"encoding/json"
	"reflect"
	"testing"
)

// savedFixture returns a mechanism on one v100 and one k80 server (credit
// 10 s) with the given one-GPU jobs added in that order.
func savedFixture(t *testing.T, order ...string) *Mechanism {
	t.Helper()
	m := mustNew(t, cluster(servers("v100", 1, 1), servers("k80", 1, 1)), Options{Credit: 10})
	for _, id := range order {
		mustAdd(t, m, Job{ID: id, ScaleFactor: 1, Throughputs: everywhere("v100", "k80")})
	}
	return m
}

func TestSaveLoadRestoresPrioritiesAcrossRebuild(t *testing.T) {
	m := savedFixture(t, "a", "b")
	alloc := allocation([]string{"k80", "v100"}, []string{"a", "b"}, map[string][]float64{"a": {0.25, 0.75}, "b": {0.75, 0.25}})
	if err := m.SetAllocation(alloc, 100); err != nil {
		t.Fatal(err)
	}
	if err := m.Record([]Usage{{Key: "a", Type: "v100", Seconds: 30}, {Key: "b", Type: "k80", Seconds: 30}}); err != nil {
		t.Fatal(err)
	}
	m.NoteEvent(EventThroughputChange) // pending, to be carried over

	// Through JSON, as the daemon stores it, into a mechanism whose jobs
	// were added in the other order (other slots).
	data, err := json.Marshal(m.Save())
	if err != nil {
		t.Fatal(err)
	}
	var saved Saved
	if err := json.Unmarshal(data, &saved); err != nil {
		t.Fatal(err)
	}
	r := savedFixture(t, "b", "a")
	r.Load(saved)

	for _, key := range []string{"a", "b"} {
		for _, typ := range []string{"v100", "k80"} {
			want, _ := m.State(key, typ)
			got, err := r.State(key, typ)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("%s on %s: restored %+v, want %+v", key, typ, got, want)
			}
		}
	}
	// By hand: a received 10+30 of v100's 10+10+30, so its v100 priority
	// is 0.75 / (40/50).
	if st, _ := r.State("a", "v100"); st.Priority != 0.75/(40.0/50.0) {
		t.Errorf("a's v100 priority %v", st.Priority)
	}
	last, ever := r.LastReset()
	if last != 100 || !ever {
		t.Errorf("last reset %v %v, want 100 true", last, ever)
	}
	if !r.NeedsReset(100) || !reflect.DeepEqual(r.PendingEvents(), []Event{EventOther}) {
		t.Errorf("pending events %v, want the saved pending event carried over", r.PendingEvents())
	}
}

func TestLoadNotesWhatChangedWhileDown(t *testing.T) {
	m := savedFixture(t, "a", "b")
	if err := m.SetAllocation(allocation([]string{"k80", "v100"}, []string{"a", "b"},
		map[string][]float64{"a": {0.5, 0.5}, "b": {0.5, 0.5}}), 50); err != nil {
		t.Fatal(err)
	}
	saved := m.Save()

	tests := map[string]struct {
		jobs []string
		want []Event
	}{
		"same jobs":         {jobs: []string{"a", "b"}, want: nil},
		"b finished":        {jobs: []string{"a"}, want: []Event{EventCompletion}},
		"c arrived":         {jobs: []string{"a", "b", "c"}, want: []Event{EventArrival}},
		"b gone, c arrived": {jobs: []string{"a", "c"}, want: []Event{EventArrival, EventCompletion}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := savedFixture(t, tc.jobs...)
			r.Load(saved)
			if got := r.PendingEvents(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("pending events %v, want %v", got, tc.want)
			}
			if tc.want == nil && r.NeedsReset(60) {
				t.Error("a reset is due although nothing changed")
			}
			// A new job starts from the credit, without an allocation.
			if st, err := r.State(tc.jobs[len(tc.jobs)-1], "k80"); err == nil && tc.jobs[len(tc.jobs)-1] == "c" &&
				(st.Received != 10 || st.Allocation != 0) {
				t.Errorf("new job state %+v, want the credit and no allocation", st)
			}
		})
	}
}
