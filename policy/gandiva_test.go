package policy

import (
	"fmt"
	"math"
	"reflect"
	"testing"
)

// gandivaTestProblem: 2 v100s, n single-GPU jobs, every pair listed with
// the given rates (as fractions of each member's rate alone).
func gandivaTestProblem(n int, shared float64) *Problem {
	p := &Problem{GPUs: map[string]int{"v100": 2}}
	for i := 0; i < n; i++ {
		p.Jobs = append(p.Jobs, Job{ID: fmt.Sprint(i), ScaleFactor: 1, Weight: 1, Throughputs: map[string]float64{"v100": 2}})
	}
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			p.Pairs = append(p.Pairs, Pair{Jobs: [2]string{fmt.Sprint(i), fmt.Sprint(j)}, Throughputs: map[string][2]float64{"v100": {2 * shared, 2 * shared}}})
		}
	}
	return p
}

func TestGandivaSplitsEquallyWithoutOversubscription(t *testing.T) {
	a := obAllocate(t, "gandiva", gandivaTestProblem(2, 0.9))
	if len(a.Rows) != 2 || a.Rows[0].Fractions[0] != 1 || a.Rows[1].Fractions[0] != 1 {
		t.Fatalf("rows %+v, want each job alone on a v100", a.Rows)
	}
}

func TestGandivaPairsWhenOversubscribed(t *testing.T) {
	// 4 jobs on 2 GPUs: pairs with gain 1.8 are made until demand fits,
	// i.e. two pairs each owning one GPU.
	p := gandivaTestProblem(4, 0.9)
	a := obAllocate(t, "gandiva", p)
	pairs := 0
	for _, r := range a.Rows {
		if len(r.Jobs) == 2 {
			pairs++
			if math.Abs(r.Fractions[0]-1) > 1e-12 {
				t.Errorf("pair %s got %v of the v100, want 1 (2 GPUs / 2 units)", r.Key(), r.Fractions[0])
			}
		}
	}
	if pairs != 2 {
		t.Fatalf("%d pairs, want 2: %+v", pairs, a.Rows)
	}
	if err := VerifyAllocation(p, a, 1e-12); err != nil {
		t.Fatal(err)
	}
	// Same seed, same pairs; pairs persist across calls.
	pol, _ := New("gandiva", Options{Seed: 1})
	first, _ := pol.Allocate(p)
	second, _ := pol.Allocate(p)
	if !reflect.DeepEqual(first.Map(), a.Map()) || !reflect.DeepEqual(second.Map(), a.Map()) {
		t.Fatalf("not reproducible: %v / %v / %v", a.Map(), first.Map(), second.Map())
	}
}

func TestGandivaRejectsHarmfulPairs(t *testing.T) {
	// Gain 2·0.4 = 0.8 < 1: sharing would slow both jobs, so no pair.
	p := gandivaTestProblem(4, 0.4)
	a := obAllocate(t, "gandiva", p)
	for _, r := range a.Rows {
		if len(r.Jobs) == 2 {
			t.Fatalf("harmful pair %s made", r.Key())
		}
		if math.Abs(r.Fractions[0]-0.5) > 1e-12 {
			t.Fatalf("job %s got %v, want 2 GPUs / 4 jobs = 0.5", r.Key(), r.Fractions[0])
		}
	}
}

func TestGandivaNamesPairsAsTheProblemLists(t *testing.T) {
	// Callers find pair rows by key; a pair drawn as (j, i) must still
	// come back as the problem's "i+j".
	p := gandivaTestProblem(6, 0.9)
	listed := map[string]bool{}
	for _, pr := range p.Pairs {
		listed[pr.Jobs[0]+"+"+pr.Jobs[1]] = true
	}
	for seed := int64(0); seed < 20; seed++ {
		pol, err := New("gandiva", Options{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		a, err := pol.Allocate(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range a.Rows {
			if len(r.Jobs) == 2 && !listed[r.Key()] {
				t.Fatalf("seed %d: pair row %q is not spelled as the problem lists it", seed, r.Key())
			}
		}
	}
}
