package policy

import (
	"slices"
	"testing"
)

// Gavel's FIFO stops at the first job no type has room for; the jobs
// behind it wait even where they would fit (FIFOBlocking). fifo_perf may
// also put a job on a type it cannot run on when that is the only type with
// room (FIFOZeroRates, which needs FIFOBlocking).
func TestFIFOBlocking(t *testing.T) {
	// v100: 4 GPUs, k80: 2. "big" takes the four V100s, "wide" (4 GPUs)
	// then finds no type with room, "small" would fit on a K80.
	queue := &Problem{GPUs: map[string]int{"v100": 4, "k80": 2}, Jobs: []Job{
		{ID: "big", ScaleFactor: 4, Arrival: 1, Throughputs: map[string]float64{"v100": 4, "k80": 1}},
		{ID: "wide", ScaleFactor: 4, Arrival: 2, Throughputs: map[string]float64{"v100": 4, "k80": 1}},
		{ID: "small", ScaleFactor: 1, Arrival: 3, Throughputs: map[string]float64{"v100": 2, "k80": 1}},
	}}
	// Only the K80s have room for "nok80", which cannot run there.
	zero := &Problem{GPUs: map[string]int{"v100": 2, "k80": 2}, Jobs: []Job{
		{ID: "first", ScaleFactor: 2, Arrival: 1, Throughputs: map[string]float64{"v100": 4, "k80": 1}},
		{ID: "nok80", ScaleFactor: 2, Arrival: 2, Throughputs: map[string]float64{"v100": 4}},
		{ID: "after", ScaleFactor: 1, Arrival: 3, Throughputs: map[string]float64{"v100": 2, "k80": 1}},
	}}
	for _, tc := range []struct {
		name   string
		policy string
		opts   Options
		p      *Problem
		want   map[string]string // job -> type ("" waits)
	}{
		{"perf backfills", "fifo_perf", Options{}, queue, map[string]string{"big": "v100", "wide": "", "small": "k80"}},
		{"perf blocks", "fifo_perf", Options{FIFOBlocking: true}, queue, map[string]string{"big": "v100", "wide": "", "small": ""}},
		// The agnostic FIFO piles every job onto the last type with room when
		// the call began, beyond its capacity.
		{"agnostic piles up", "fifo", Options{}, queue, map[string]string{"big": "v100", "wide": "v100", "small": "v100"}},
		{"agnostic blocks", "fifo", Options{FIFOBlocking: true}, queue, map[string]string{"big": "v100", "wide": "", "small": ""}},
		{"zero rate skipped", "fifo_perf", Options{FIFOBlocking: true}, zero, map[string]string{"first": "v100", "nok80": "", "after": "k80"}},
		{"zero rate allocated", "fifo_perf", Options{FIFOBlocking: true, FIFOZeroRates: true}, zero, map[string]string{"first": "v100", "nok80": "k80", "after": ""}},
		{"zero rates need blocking", "fifo_perf", Options{FIFOZeroRates: true}, zero, map[string]string{"first": "v100", "nok80": "", "after": "k80"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol, err := New(tc.policy, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			a, err := pol.Allocate(tc.p)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, r := range a.Rows {
				if len(r.Jobs) != 1 {
					continue
				}
				got[r.Jobs[0]] = ""
				if k := slices.IndexFunc(r.Fractions, func(x float64) bool { return x > 0 }); k >= 0 {
					got[r.Jobs[0]] = a.Types[k]
				}
			}
			for id, want := range tc.want {
				if got[id] != want {
					t.Errorf("%s on %q, want %q (all: %v)", id, got[id], want, got)
				}
			}
		})
	}
}
