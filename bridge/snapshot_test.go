package bridge

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestNewSnapshotSortsAndFinds(t *testing.T) {
	taken := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	s, err := NewSnapshot(taken, "v0.0.42",
		[]Node{{Name: "n2", GPUType: "k80", GPUs: 4, State: []string{"IDLE"}}, {Name: "n1", GPUType: "v100", GPUs: 4, GPUsUsed: 2, State: []string{"MIXED"}}},
		[]Job{{ID: 9, State: JobPending}, {ID: 3, State: JobRunning}},
	)
	if err != nil {
		t.Fatal(err)
	}
	if s.Nodes[0].Name != "n1" || s.Jobs[0].ID != 3 {
		t.Fatalf("not sorted: %+v %+v", s.Nodes, s.Jobs)
	}
	if j, ok := s.Job(9); !ok || j.State != JobPending {
		t.Fatalf("Job(9) = %+v, %v", j, ok)
	}
	if _, ok := s.Job(4); ok {
		t.Fatal("Job(4) found in a snapshot without it")
	}
	if n, ok := s.Node("n2"); !ok || n.GPUType != "k80" {
		t.Fatalf("Node(n2) = %+v, %v", n, ok)
	}
	got := s.GPUTypes()
	if got["v100"] != 4 || got["k80"] != 4 || len(got) != 2 {
		t.Fatalf("GPUTypes() = %v", got)
	}
}

func TestNewSnapshotRejectsInconsistentViews(t *testing.T) {
	tests := map[string]struct {
		nodes   []Node
		jobs    []Job
		wantErr string
	}{
		"duplicate node": {nodes: []Node{{Name: "a"}, {Name: "a"}}, wantErr: "node a listed twice"},
		"nameless node":  {nodes: []Node{{}}, wantErr: "node without a name"},
		"overused gpus":  {nodes: []Node{{Name: "a", GPUs: 2, GPUsUsed: 3}}, wantErr: "3 of 2 GPUs"},
		"duplicate job":  {jobs: []Job{{ID: 1, State: JobPending}, {ID: 1, State: JobRunning}}, wantErr: "job 1 listed twice"},
		"job without id": {jobs: []Job{{State: JobPending}}, wantErr: "job without an id"},
		"stateless job":  {jobs: []Job{{ID: 5}}, wantErr: "job 5 has no state"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := NewSnapshot(time.Time{}, "", tc.nodes, tc.jobs)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestNodeAvailable(t *testing.T) {
	tests := map[string]struct {
		state []string
		want  bool
	}{
		"idle":       {[]string{"IDLE"}, true},
		"mixed":      {[]string{"MIXED"}, true},
		"allocated":  {[]string{"ALLOCATED"}, true},
		"drain flag": {[]string{"IDLE", "DRAIN"}, false},
		"down":       {[]string{"DOWN", "NOT_RESPONDING"}, false},
		"no state":   {nil, false},
		// Node states added in API v0.0.44 (BLOCKED, EXTERNAL) and v0.0.45.
		"blocked":          {[]string{"IDLE", "BLOCKED"}, false},
		"external":         {[]string{"IDLE", "EXTERNAL"}, false},
		"power down asap":  {[]string{"MIXED", "POWER_DOWN_ASAP"}, false},
		"power down force": {[]string{"IDLE", "POWER_DOWN_FORCE"}, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := (Node{Name: "n", State: tc.state}).Available(); got != tc.want {
				t.Fatalf("Available(%v) = %v, want %v", tc.state, got, tc.want)
			}
		})
	}
}

func TestCloneIsDeep(t *testing.T) {
	s, err := NewSnapshot(time.Time{}, "", []Node{{Name: "n", State: []string{"IDLE"}}}, []Job{{ID: 1, State: JobRunning, RunningNodes: []string{"n"}}})
	if err != nil {
		t.Fatal(err)
	}
	c := s.Clone()
	c.Nodes[0].State[0] = "DOWN"
	c.Jobs[0].RunningNodes[0] = "m"
	if s.Nodes[0].State[0] != "IDLE" || s.Jobs[0].RunningNodes[0] != "n" {
		t.Fatal("changing the clone changed the original")
	}
}

func TestJobWithComment(t *testing.T) {
	j := Job{ID: 1}.WithComment("gavel: steps=10k")
	if !j.Managed() || j.Tag.Steps != 10000 {
		t.Fatalf("tagged job: %+v", j)
	}
	j = j.WithComment("plain")
	if j.Managed() || !errors.Is(j.TagErr, ErrNoTag) || j.Tag != (Tag{}) {
		t.Fatalf("untagged job: %+v", j)
	}
}

func TestActionValidate(t *testing.T) {
	tests := map[string]struct {
		a       Action
		wantErr string
	}{
		"priority ok":    {Action{Kind: ActSetPriority, Job: 4, Priority: 10}, ""},
		"signal ok":      {Action{Kind: ActSignal, Job: 4, Signal: "SIGUSR1"}, ""},
		"signal number":  {Action{Kind: ActSignal, Job: 4, Signal: "10"}, ""},
		"no job":         {Action{Kind: ActHold}, "no job id"},
		"unknown kind":   {Action{Kind: "explode", Job: 1}, "unknown action kind"},
		"unknown signal": {Action{Kind: ActSignal, Job: 1, Signal: "WINCH2"}, "unknown signal"},
		"bad constraint": {Action{Kind: ActSetConstraints, Job: 1, Constraints: "a\nb"}, "control character"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.a.Validate()
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Validate(%v) = %v, want %q", tc.a, err, tc.wantErr)
			}
		})
	}
}

func TestParseJobIDReadsWhatStringWrites(t *testing.T) {
	for _, id := range []JobID{0, 7, 4294967295} {
		if got, err := ParseJobID(id.String()); err != nil || got != id {
			t.Errorf("ParseJobID(%q) = %d, %v; want %d", id.String(), got, err, id)
		}
	}
	for _, s := range []string{"", "07", "+7", " 7", "7 ", "-1", "4294967296", "130_2", "x"} {
		if got, err := ParseJobID(s); err == nil {
			t.Errorf("ParseJobID(%q) = %d, want an error", s, got)
		}
	}
}
