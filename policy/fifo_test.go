package policy

import (
	"fmt"
	"testing"
)

// fifoTestProblem has one GPU of each type and jobs 0..n-1 (arrival = id).
func fifoTestProblem(ids ...int) *Problem {
	p := &Problem{GPUs: map[string]int{"v100": 1, "p100": 1, "k80": 1}}
	for _, id := range ids {
		p.Jobs = append(p.Jobs, Job{ID: fmt.Sprint(id), ScaleFactor: 1, Weight: 1, Arrival: float64(id),
			Throughputs: map[string]float64{"v100": 3, "p100": 2, "k80": 1}})
	}
	return p
}

// fifoPlaced maps each job to the type it got (absent when waiting).
func fifoPlaced(a *Allocation) map[string]string {
	out := map[string]string{}
	for _, r := range a.Rows {
		for k, x := range r.Fractions {
			if x == 1 {
				out[r.Key()] = a.Types[k]
			}
		}
	}
	return out
}

func TestFIFOReproducesTheReferenceTypeChoice(t *testing.T) {
	pol, _ := New("fifo", Options{Seed: 3})
	// All GPUs free: every job goes to the last type with room, v100, even
	// beyond its single GPU.
	a, err := pol.Allocate(fifoTestProblem(0, 1, 2))
	if err != nil {
		t.Fatal(err)
	}
	if got := fifoPlaced(a); got["0"] != "v100" || got["1"] != "v100" || got["2"] != "v100" {
		t.Fatalf("first call: %v, want all on v100", got)
	}
	// Job 0 leaves, job 3 arrives: 1 and 2 stay on the (still full) v100,
	// so the last type with room is p100.
	a, err = pol.Allocate(fifoTestProblem(1, 2, 3))
	if err != nil {
		t.Fatal(err)
	}
	if got := fifoPlaced(a); got["1"] != "v100" || got["2"] != "v100" || got["3"] != "p100" {
		t.Fatalf("second call: %v, want 1, 2 on v100 and 3 on p100", got)
	}
}

func TestRandomTypeFIFOIsStickyAndRespectsCapacity(t *testing.T) {
	pol := NewRandomTypeFIFO(7)
	p := fifoTestProblem(0, 1, 2, 3)
	a, err := pol.Allocate(p)
	if err != nil {
		t.Fatal(err)
	}
	first := fifoPlaced(a)
	if err := VerifyAllocation(p, a, 0); err != nil {
		t.Fatal(err)
	}
	if len(first) != 3 || first["3"] != "" {
		t.Fatalf("placements %v: want jobs 0-2 on the three GPUs and 3 waiting", first)
	}
	a, _ = pol.Allocate(fifoTestProblem(1, 2, 3))
	second := fifoPlaced(a)
	if second["1"] != first["1"] || second["2"] != first["2"] || second["3"] != first["0"] {
		t.Fatalf("after job 0 left: %v, want 1 and 2 unmoved and 3 on job 0's %s", second, first["0"])
	}
}

func TestFIFOPerfGivesEarlyJobsTheirFastestType(t *testing.T) {
	p := fifoTestProblem(0, 1, 2, 3)
	p.Jobs[1].Throughputs["p100"] = 5 // job 1 prefers p100
	p.Jobs[0].ScaleFactor = 1
	a := obAllocate(t, "fifo_perf", p)
	got := fifoPlaced(a)
	if got["0"] != "v100" || got["1"] != "p100" || got["2"] != "k80" || got["3"] != "" {
		t.Fatalf("placements %v", got)
	}
	// A two-GPU job at the head cannot fit anywhere; later jobs backfill.
	p = fifoTestProblem(0, 1)
	p.GPUs["v100"] = 2
	p.Jobs[0].ScaleFactor = 3
	if got := fifoPlaced(obAllocate(t, "fifo_perf", p)); got["0"] != "" || got["1"] != "v100" {
		t.Fatalf("backfill placements %v", got)
	}
}

func TestFIFOPackedSharesOnlyWhenItPays(t *testing.T) {
	tests := []struct {
		name   string
		shared [2]float64 // rates of running job 0 and waiting job 3 on v100
		pack   bool
	}{
		{"gain 1.6", [2]float64{2.4, 0.8}, true},  // 2.4/3 + 0.8/1
		{"gain 1.2", [2]float64{1.8, 0.6}, false}, // 1.8/3 + 0.6/1
	}
	for _, tc := range tests {
		p := fifoTestProblem(0, 1, 2, 3)
		// Job 3 runs 1 step/s alone on v100 so its ratio is its shared rate.
		p.Jobs[3].Throughputs["v100"] = 1
		p.Pairs = []Pair{{Jobs: [2]string{"3", "0"}, Throughputs: map[string][2]float64{"v100": {tc.shared[1], tc.shared[0]}}}}
		a := obAllocate(t, "fifo_packed", p)
		m := a.Map()
		gain := tc.shared[0]/3 + tc.shared[1]/1
		if packed := m["0+3"]["v100"] == 1; packed != tc.pack {
			t.Errorf("%s (gain %.2f): packed %v, want %v; allocation %v", tc.name, gain, packed, tc.pack, m)
		}
		if tc.pack && m["0"]["v100"] != 0 {
			t.Errorf("%s: job 0 keeps its single row besides the pair", tc.name)
		}
		if err := VerifyAllocation(p, a, 0); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// A job that cannot run on the type every new job goes to (a typed request
// for another type) takes the last type with room where it can, rather
// than waiting for ever on an idle cluster.
func TestFIFOPlacesAJobThatCannotRunOnTheLastType(t *testing.T) {
	pol, _ := New("fifo", Options{Seed: 3})
	p := fifoTestProblem(0, 1)
	p.Jobs[1].Throughputs = map[string]float64{"k80": 1} // a k80 request
	a, err := pol.Allocate(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := fifoPlaced(a); got["0"] != "v100" || got["1"] != "k80" {
		t.Fatalf("placed %v, want 0 on v100 and 1 on the k80", got)
	}
	// Like every type the agnostic fifo gives, the k80 may be
	// oversubscribed: a second k80 job goes there too, and the round
	// mechanism shares the GPU.
	p = fifoTestProblem(0, 1, 2)
	p.Jobs[1].Throughputs = map[string]float64{"k80": 1}
	p.Jobs[2].Throughputs = map[string]float64{"k80": 1}
	pol, _ = New("fifo", Options{Seed: 3})
	a, err = pol.Allocate(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := fifoPlaced(a); got["0"] != "v100" || got["1"] != "k80" || got["2"] != "k80" {
		t.Fatalf("placed %v, want 0 on v100, 1 and 2 on the k80", got)
	}
}
