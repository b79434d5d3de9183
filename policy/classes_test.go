package policy

import (
	"reflect"
	"testing"
)

func TestGroupBySignature(t *testing.T) {
	tests := []struct {
		name        string
		features    []float64 // NaN-free; negative means excluded
		wantOf      []int
		wantMembers [][]int
	}{
		{"all distinct", []float64{1, 2, 3}, []int{0, 1, 2}, [][]int{{0}, {1}, {2}}},
		{"duplicates in first-seen order", []float64{5, 1, 5, 1, 5}, []int{0, 1, 0, 1, 0}, [][]int{{0, 2, 4}, {1, 3}}},
		{"excluded jobs", []float64{-1, 2, -1, 2}, []int{-1, 0, -1, 0}, [][]int{{1, 3}}},
		{"no jobs", nil, []int{}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := groupBySignature(len(tc.features), func(i int, k classKey) classKey {
				if tc.features[i] < 0 {
					return nil
				}
				return k.float(tc.features[i])
			})
			if !reflect.DeepEqual(got.Of, tc.wantOf) {
				t.Errorf("Of = %v, want %v", got.Of, tc.wantOf)
			}
			if !reflect.DeepEqual(got.Members, tc.wantMembers) {
				t.Errorf("Members = %v, want %v", got.Members, tc.wantMembers)
			}
		})
	}
}

func TestRefineByPairs(t *testing.T) {
	side := func(b byte) []byte { return []byte{b} }
	tests := []struct {
		name         string
		jobs         int
		pairs        []pairLink
		wantOf       []int
		wantPairOf   []int
		wantSwapped  []bool
		wantPairSize []int
	}{
		{
			// Jobs 0..3 look alike but only 0 and 1 are paired: they must
			// leave the class of 2 and 3.
			name:         "paired jobs split from unpaired ones",
			jobs:         4,
			pairs:        []pairLink{{Jobs: [2]int{0, 1}, Side: [2][]byte{side(1), side(1)}}},
			wantOf:       []int{0, 0, 1, 1},
			wantPairOf:   []int{0},
			wantSwapped:  []bool{false},
			wantPairSize: []int{1},
		},
		{
			// A pair and its mirror image (roles swapped) are one class.
			name: "mirrored pairs share a class",
			jobs: 4,
			pairs: []pairLink{
				{Jobs: [2]int{0, 1}, Side: [2][]byte{side(1), side(2)}},
				{Jobs: [2]int{3, 2}, Side: [2][]byte{side(2), side(1)}},
			},
			wantOf:       []int{0, 1, 0, 1},
			wantPairOf:   []int{0, 0},
			wantSwapped:  []bool{false, true},
			wantPairSize: []int{2},
		},
		{
			// A ring of four identical jobs: every job is in two pairs,
			// so nothing splits.
			name: "regular structure keeps one class",
			jobs: 4,
			pairs: []pairLink{
				{Jobs: [2]int{0, 1}, Side: [2][]byte{side(1), side(1)}},
				{Jobs: [2]int{1, 2}, Side: [2][]byte{side(1), side(1)}},
				{Jobs: [2]int{2, 3}, Side: [2][]byte{side(1), side(1)}},
				{Jobs: [2]int{3, 0}, Side: [2][]byte{side(1), side(1)}},
			},
			wantOf:       []int{0, 0, 0, 0},
			wantPairOf:   []int{0, 0, 0, 0},
			wantSwapped:  []bool{false, false, false, false},
			wantPairSize: []int{4},
		},
		{
			// A path 0-1-2: the middle job has two pairs, the ends one;
			// after the split the two edges are still one class.
			name: "path splits the middle job",
			jobs: 3,
			pairs: []pairLink{
				{Jobs: [2]int{0, 1}, Side: [2][]byte{side(1), side(1)}},
				{Jobs: [2]int{1, 2}, Side: [2][]byte{side(1), side(1)}},
			},
			wantOf:       []int{0, 1, 0},
			wantPairOf:   []int{0, 0},
			wantSwapped:  []bool{false, true},
			wantPairSize: []int{2},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := groupBySignature(tc.jobs, func(i int, k classKey) classKey { return k.int(0) })
			got, pcs := refineByPairs(base, tc.pairs)
			if !reflect.DeepEqual(got.Of, tc.wantOf) {
				t.Errorf("job classes = %v, want %v", got.Of, tc.wantOf)
			}
			if !reflect.DeepEqual(pcs.Of, tc.wantPairOf) {
				t.Errorf("pair classes = %v, want %v", pcs.Of, tc.wantPairOf)
			}
			if !reflect.DeepEqual(pcs.Swapped, tc.wantSwapped) {
				t.Errorf("swapped = %v, want %v", pcs.Swapped, tc.wantSwapped)
			}
			var sizes []int
			for _, m := range pcs.Members {
				sizes = append(sizes, len(m))
			}
			if !reflect.DeepEqual(sizes, tc.wantPairSize) {
				t.Errorf("pair class sizes = %v, want %v", sizes, tc.wantPairSize)
			}
			// Equitable: every job of a class has the same pair count.
			count := make([]int, tc.jobs)
			for _, l := range tc.pairs {
				count[l.Jobs[0]]++
				count[l.Jobs[1]]++
			}
			for _, members := range got.Members {
				for _, j := range members {
					if count[j] != count[members[0]] {
						t.Errorf("class %v mixes pair counts %d and %d", members, count[members[0]], count[j])
					}
				}
			}
		})
	}
}
