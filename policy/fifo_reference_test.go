package policy

import (
	"maps"
	"slices"
	"testing"
)

// scriptedDraws returns its values in turn and counts the draws.
type scriptedDraws struct {
	vals []int
	n    int
}

func (s *scriptedDraws) Below(n int) int {
	v := s.vals[s.n%len(s.vals)] % n
	s.n++
	return v
}

// fifoTypes runs pol on every problem in turn and returns, for the last,
// each job's type ("" waits).
func fifoTypes(t *testing.T, pol Policy, calls []*Problem) map[string]string {
	t.Helper()
	var a *Allocation
	for _, p := range calls {
		var err error
		if a, err = pol.Allocate(p); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]string{}
	for _, r := range a.Rows {
		got[r.Jobs[0]] = ""
		if k := slices.IndexFunc(r.Fractions, func(x float64) bool { return x > 0 }); k >= 0 {
			got[r.Jobs[0]] = a.Types[k]
		}
	}
	return got
}

// Gavel's agnostic FIFO hands the type of each job that left to the head
// of its queue (FIFOReplace), walking the earlier placements in arrival
// order and counting as free only the GPUs of that walk so far; a head that
// does not fit stays first. Without it, every waiting job piles onto the
// last type with room.
func TestFIFOReplace(t *testing.T) {
	gpus := map[string]int{"k80": 1, "p100": 1, "v100": 1}
	job := func(id string, arrival float64, sf int) Job {
		return Job{ID: id, ScaleFactor: sf, Arrival: arrival, Throughputs: map[string]float64{"k80": 1, "p100": 2, "v100": 3}}
	}
	a, b, c, d := job("a", 1, 1), job("b", 2, 1), job("c", 3, 1), job("d", 4, 1)
	// Calls 1-4 place a on v100, b on p100, c on k80, then d on p100 when
	// b has left; the last call finds c (k80) and d (p100) gone.
	history := []*Problem{
		{GPUs: gpus, Jobs: []Job{a}},
		{GPUs: gpus, Jobs: []Job{a, b}},
		{GPUs: gpus, Jobs: []Job{a, b, c}},
		{GPUs: gpus, Jobs: []Job{a, c, d}},
	}
	for _, tc := range []struct {
		name    string
		replace bool
		last    []Job
		want    map[string]string
	}{
		// c arrived before d: e takes c's K80, f d's P100.
		{"replaced in arrival order", true, []Job{a, job("e", 5, 1), job("f", 6, 1)},
			map[string]string{"a": "v100", "e": "k80", "f": "p100"}},
		{"piled up", false, []Job{a, job("e", 5, 1), job("f", 6, 1)},
			map[string]string{"a": "v100", "e": "p100", "f": "p100"}},
		// A 2-GPU head fits neither freed type and stays first; no type has
		// room for it, so the strict queue stops there.
		{"head too wide", true, []Job{a, job("e", 5, 2), job("f", 6, 1)},
			map[string]string{"a": "v100", "e": "", "f": ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol, err := New("fifo", Options{FIFOBlocking: true, FIFOReplace: tc.replace})
			if err != nil {
				t.Fatal(err)
			}
			calls := append(slices.Clone(history), &Problem{GPUs: gpus, Jobs: tc.last})
			got := fifoTypes(t, pol, calls)
			for id, want := range tc.want {
				if got[id] != want {
					t.Errorf("%s on %q, want %q (all: %v)", id, got[id], want, got)
				}
			}
		})
	}
	// The count is the walk's so far: "x" (v100) left before "y" (v100)
	// was walked, so the head takes x's V100 although y still holds the
	// only one, and the type is oversubscribed, as in the reference.
	big := map[string]int{"k80": 1, "v100": 1}
	x, y := job("x", 1, 1), job("y", 2, 1)
	pol, err := New("fifo", Options{FIFOBlocking: true, FIFOReplace: true})
	if err != nil {
		t.Fatal(err)
	}
	// At first y piles onto the V100 behind x; when x has left, z takes
	// its V100 before y's is counted.
	got := fifoTypes(t, pol, []*Problem{
		{GPUs: big, Jobs: []Job{x, y}},
		{GPUs: big, Jobs: []Job{y, job("z", 3, 1)}},
	})
	if got["y"] != "v100" || got["z"] != "v100" {
		t.Errorf("y on %q, z on %q; want both on v100", got["y"], got["z"])
	}
}

// Gavel's agnostic FIFO draws, for every job it considers, an index over
// the listed types with room for it, and drops that entry from the list
// when the chosen (last) type's count reaches exactly zero
// (FIFODropDraws). Which entry is dropped decides where the next jobs go.
func TestFIFODropDraws(t *testing.T) {
	gpus := map[string]int{"k80": 1, "p100": 1, "v100": 1}
	jobs := []Job{
		{ID: "a", ScaleFactor: 1, Arrival: 1, Throughputs: map[string]float64{"k80": 1, "p100": 2, "v100": 3}},
		{ID: "b", ScaleFactor: 1, Arrival: 2, Throughputs: map[string]float64{"k80": 1, "p100": 2, "v100": 3}},
		{ID: "c", ScaleFactor: 1, Arrival: 3, Throughputs: map[string]float64{"k80": 1, "p100": 2, "v100": 3}},
	}
	for _, tc := range []struct {
		name  string
		draws []int // nil: no draws
		want  map[string]string
		drawn int
	}{
		{"no draws", nil, map[string]string{"a": "v100", "b": "v100", "c": "v100"}, 0},
		// a fills v100 and the draw drops v100 itself; b fills p100 and the
		// draw (index 1 of [k80, p100]) drops p100; c gets the K80.
		{"full types dropped", []int{2, 1, 0}, map[string]string{"a": "v100", "b": "p100", "c": "k80"}, 3},
		// The first draw drops k80, not the full v100, which stays last:
		// b and c pile onto it, their count never again exactly zero.
		{"another type dropped", []int{0}, map[string]string{"a": "v100", "b": "v100", "c": "v100"}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{FIFOBlocking: true}
			var s *scriptedDraws
			if tc.draws != nil {
				s = &scriptedDraws{vals: tc.draws}
				o.FIFODropDraws = s
			}
			pol, err := New("fifo", o)
			if err != nil {
				t.Fatal(err)
			}
			got := fifoTypes(t, pol, []*Problem{{GPUs: gpus, Jobs: jobs}})
			for id, want := range tc.want {
				if got[id] != want {
					t.Errorf("%s on %q, want %q (all: %v)", id, got[id], want, got)
				}
			}
			if s != nil && s.n != tc.drawn {
				t.Errorf("%d draws, want %d", s.n, tc.drawn)
			}
		})
	}
	// fifo_perf ignores both options: it places every job afresh.
	pol, err := New("fifo_perf", Options{FIFOBlocking: true, FIFOReplace: true, FIFODropDraws: &scriptedDraws{vals: []int{0}}})
	if err != nil {
		t.Fatal(err)
	}
	got := fifoTypes(t, pol, []*Problem{{GPUs: gpus, Jobs: jobs}})
	if want := map[string]string{"a": "v100", "b": "p100", "c": "k80"}; !maps.Equal(got, want) {
		t.Errorf("fifo_perf: %v, want %v", got, want)
	}
}
