package bridge

import (
	"slices"
	"testing"
)

func TestRequestsJoinOneJobsUpdates(t *testing.T) {
	features := Action{Kind: ActSetConstraints, Job: 1, Constraints: "v100"}
	priority := Action{Kind: ActSetPriority, Job: 1, Priority: 5}
	beginNow := Action{Kind: ActBeginNow, Job: 1}
	release := Action{Kind: ActRelease, Job: 1}
	other := func(a Action) Action { a.Job = 2; return a }
	tests := map[string]struct {
		actions []Action
		want    [][]int
	}{
		"a moved job's updates: one request":  {[]Action{features, priority, beginNow}, [][]int{{0, 1, 2}}},
		"a release stands alone":              {[]Action{features, release, priority, beginNow}, [][]int{{0}, {1}, {2, 3}}},
		"other jobs' updates stay apart":      {[]Action{features, other(priority), other(beginNow), beginNow}, [][]int{{0}, {1, 2}, {3}}},
		"a field set twice: a second request": {[]Action{priority, beginNow, priority}, [][]int{{0, 1}, {2}}},
		"holds and signals alone":             {[]Action{{Kind: ActHold, Job: 1}, {Kind: ActHold, Job: 1}, {Kind: ActSignal, Job: 1, Signal: "USR1"}}, [][]int{{0}, {1}, {2}}},
		"empty":                               {nil, nil},
		"a shape joins nothing":               {[]Action{{Kind: ActSetShape, Job: 1, Nodes: 1, GPUs: 2}, priority}, [][]int{{0}, {1}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Requests(tc.actions)
			if !slices.EqualFunc(got, tc.want, slices.Equal) {
				t.Errorf("Requests = %v, want %v", got, tc.want)
			}
		})
	}
}
