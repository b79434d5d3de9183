package rest

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// A shape goes out as one update: the node count as minimum and maximum,
// the GPUs per node or per job with the other form cleared (Slurm would
// otherwise keep both), and the constraint.
func TestApplySendsShape(t *testing.T) {
	tests := map[string]struct {
		action bridge.Action
		want   map[string]any
	}{
		"per node": {
			bridge.Action{Kind: bridge.ActSetShape, Job: 5, Nodes: 2, GPUsPerNode: 2, Constraints: "[v100*1&k80*1]"},
			map[string]any{"minimum_nodes": 2.0, "maximum_nodes": 2.0, "tres_per_node": "gres/gpu:2", "tres_per_job": "", "constraints": "[v100*1&k80*1]"},
		},
		"per job": {
			bridge.Action{Kind: bridge.ActSetShape, Job: 5, Nodes: 2, GPUs: 4, Constraints: "v100|k80"},
			map[string]any{"minimum_nodes": 2.0, "maximum_nodes": 2.0, "tres_per_node": "", "tres_per_job": "gres/gpu:4", "constraints": "v100|k80"},
		},
		"back to one type": {
			bridge.Action{Kind: bridge.ActSetShape, Job: 5, Nodes: 1, GPUsPerNode: 4, Constraints: "ib&v100"},
			map[string]any{"minimum_nodes": 1.0, "maximum_nodes": 1.0, "tres_per_node": "gres/gpu:4", "tres_per_job": "", "constraints": "ib&v100"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := &fakeRestd{t: t}
			c, _ := newTestClient(t, f)
			if err := c.Apply(context.Background(), tc.action); err != nil {
				t.Fatal(err)
			}
			last := len(f.requests) - 1
			if f.requests[last] != "POST /slurm/v0.0.42/job/5" {
				t.Fatalf("request %q", f.requests[last])
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(f.bodies[last]), &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("body %v, want %v", got, tc.want)
			}
		})
	}
}

// Shapes that Slurm would refuse or that make no sense never leave.
func TestApplyRefusesBadShapes(t *testing.T) {
	for name, a := range map[string]bridge.Action{
		"no nodes":              {Kind: bridge.ActSetShape, Job: 5, GPUsPerNode: 2},
		"fewer GPUs than nodes": {Kind: bridge.ActSetShape, Job: 5, Nodes: 3, GPUs: 2},
		"negative per node":     {Kind: bridge.ActSetShape, Job: 5, Nodes: 1, GPUsPerNode: -1},
		"inconsistent total":    {Kind: bridge.ActSetShape, Job: 5, Nodes: 2, GPUsPerNode: 2, GPUs: 5},
		"huge":                  {Kind: bridge.ActSetShape, Job: 5, Nodes: 1 << 30, GPUsPerNode: 1},
		"newline":               {Kind: bridge.ActSetShape, Job: 5, Nodes: 1, GPUsPerNode: 1, Constraints: "v100\nk80"},
	} {
		t.Run(name, func(t *testing.T) {
			f := &fakeRestd{t: t}
			c, _ := newTestClient(t, f)
			if err := c.Apply(context.Background(), a); err == nil {
				t.Fatal("sent")
			}
			if len(f.bodies) != 0 {
				t.Fatalf("sent %v", f.bodies)
			}
		})
	}
}
