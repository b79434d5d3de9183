package rounds

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"unsafe"
)

// A plan, a usage record and a new job on a fork leave the original's
// saved state and its next plan exactly as they were.
func TestForkLeavesTheOriginalAsItWas(t *testing.T) {
	shuffle := func() *rand.Rand { return rand.New(rand.NewPCG(1, 2)) }
	m := mustNew(t, cluster(servers("v100", 2, 1), servers("k80", 2, 1)), Options{Credit: 10, Shuffle: shuffle()})
	for _, id := range []string{"a", "b", "c"} {
		mustAdd(t, m, Job{ID: id, ScaleFactor: 1, Throughputs: map[string]float64{"v100": 2, "k80": 1}})
	}
	alloc := allocation([]string{"k80", "v100"}, []string{"a", "b", "c"},
		map[string][]float64{"a": {0.5, 0.5}, "b": {0.5, 0.5}, "c": {0.25, 0.25}})
	if err := m.SetAllocation(alloc, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Plan(0, nil); err != nil {
		t.Fatal(err)
	}
	before := m.Save()

	f := m.Fork(shuffle())
	if err := f.Record([]Usage{{Key: "a", Type: "v100", Seconds: 360}}); err != nil {
		t.Fatal(err)
	}
	if err := f.SetThroughputs("b", map[string]float64{"v100": 9, "k80": 9}); err != nil {
		t.Fatal(err)
	}
	mustAdd(t, f, Job{ID: "d", ScaleFactor: 1, Throughputs: map[string]float64{"v100": 1}})
	if _, err := f.Plan(360, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.RemoveJob("c", 400); err != nil {
		t.Fatal(err)
	}

	if after := m.Save(); !reflect.DeepEqual(before, after) {
		t.Errorf("the fork changed the original's state:\nbefore %+v\nafter  %+v", before, after)
	}
	if m.Len() != 3 {
		t.Errorf("original has %d jobs, want 3", m.Len())
	}
	// The original still plans after the fork took its working buffers.
	got, err := m.Plan(360, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Decisions) == 0 {
		t.Fatal("original plans nothing after the fork")
	}
}

// Every slice and map the mechanism holds is the fork's own: a field added
// to Mechanism (or to combo) and left out of Fork shares memory with the
// original and fails here.
func TestForkSharesNoMemory(t *testing.T) {
	m := mustNew(t, cluster(servers("v100", 2, 2), servers("k80", 1, 4)), Options{Credit: 10, TypeOrder: []string{"v100"}})
	for _, id := range []string{"a", "b"} {
		mustAdd(t, m, Job{ID: id, ScaleFactor: 1, Throughputs: map[string]float64{"v100": 2, "k80": 1}})
	}
	if err := m.AddPair(Pair{Jobs: [2]string{"a", "b"}, Throughputs: map[string][2]float64{"v100": {1, 1}}}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Plan(0, nil); err != nil {
		t.Fatal(err)
	}
	f := m.Fork(nil)
	checkNoSharing(t, "Mechanism", reflect.ValueOf(m).Elem(), reflect.ValueOf(f).Elem())
}

// checkNoSharing fails for every non-empty slice or map reachable from a
// and b (through structs and slices of structs) that is the same memory in
// both. Working buffers (scratch) and the shuffler are the fork's by
// construction and skipped.
func checkNoSharing(t *testing.T, path string, a, b reflect.Value) {
	t.Helper()
	switch a.Kind() {
	case reflect.Struct:
		for i := range a.NumField() {
			name := a.Type().Field(i).Name
			if name == "scratch" || name == "Shuffle" {
				continue
			}
			checkNoSharing(t, path+"."+name, a.Field(i), b.Field(i))
		}
	case reflect.Slice:
		if a.Len() > 0 && b.Len() > 0 && a.Pointer() == b.Pointer() {
			t.Errorf("%s: the fork shares the slice with the original", path)
		}
		for i := range min(a.Len(), b.Len()) {
			checkNoSharing(t, path+"[]", a.Index(i), b.Index(i))
		}
	case reflect.Map:
		if a.Len() > 0 && b.Len() > 0 && a.UnsafePointer() == b.UnsafePointer() {
			t.Errorf("%s: the fork shares the map with the original", path)
		}
	case reflect.Pointer, reflect.Interface:
		if !a.IsNil() && a.Kind() == reflect.Pointer && unsafe.Pointer(a.Pointer()) == unsafe.Pointer(b.Pointer()) {
			t.Errorf("%s: the fork shares the pointer with the original", path)
		}
	}
}
