package rest

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// The records below are what Slurm 24.11.5 printed on the local Slurm with
// SLURM_GPU_SHARDS="v100:2:one_sharing" (docs/space-sharing.md).

// use is one GPU's shards: used of total.
func use(used, total int64) bridge.GPUShards { return bridge.GPUShards{Used: used, Total: total} }

func TestConvertNodeReadsShards(t *testing.T) {
	tests := []struct {
		name, gres, used string
		wantUsed         int
		wantShards       int
		wantUse          []bridge.GPUShards
		wantErr          string
	}{
		{"no sharing", "gpu:v100:4", "gpu:v100:1(IDX:0)", 1, 0, nil, ""},
		{"idle", "gpu:v100:4,shard:v100:8", "gpu:v100:0(IDX:N/A),shard:v100:0(0/2,0/2,0/2,0/2)", 0, 8, []bridge.GPUShards{use(0, 2), use(0, 2), use(0, 2), use(0, 2)}, ""},
		// GPU 0 whole to one job, GPU 1 shared by two: two GPUs in use,
		// although gres_used counts one under gpu.
		{"whole and shared", "gpu:v100:4,shard:v100:8", "gpu:v100:1(IDX:0),shard:v100:2(0/2,2/2,0/2,0/2)", 2, 8, []bridge.GPUShards{use(0, 2), use(2, 2), use(0, 2), use(0, 2)}, ""},
		// Slurm 26.05 marks the GPU held whole with "-".
		{"whole and shared on 26.05", "gpu:v100:4,shard:v100:8", "gpu:v100:1(IDX:1),shard:v100:1(1/2,-/2,0/2,0/2)", 2, 8,
			[]bridge.GPUShards{use(1, 2), {Total: 2, HeldWhole: true}, use(0, 2), use(0, 2)}, ""},
		{"half shared", "gpu:v100:4,shard:v100:8", "gpu:v100:2(IDX:2-3),shard:v100:1(0/2,1/2,0/2,0/2)", 3, 8, []bridge.GPUShards{use(0, 2), use(1, 2), use(0, 2), use(0, 2)}, ""},
		{"more GPUs in use than the node has", "gpu:v100:2,shard:v100:4", "shard:v100:3(1/2,1/2,1/2)", 0, 0, nil, "shards of 3 GPUs on a node of 2"},
		{"bad detail", "gpu:v100:4,shard:v100:8", "shard:v100:2(IDX:0)", 0, 0, nil, "want used/total"},
		{"too many shards", "gpu:v100:4,shard:v100:99999999999", "", 0, 0, nil, "more than the"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, err := convertNode(rawNode{Name: "v100-1", Gres: tc.gres, GresUsed: tc.used})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n.GPUs != 4 || n.GPUsUsed != tc.wantUsed || n.Shards != tc.wantShards || !reflect.DeepEqual(n.ShardUse, tc.wantUse) {
				t.Fatalf("node %+v; want 4 GPUs, %d used, %d shards, use %v", n, tc.wantUsed, tc.wantShards, tc.wantUse)
			}
		})
	}
}

func TestConvertJobReadsShards(t *testing.T) {
	nodes := map[string]bridge.Node{"v100-1": {Name: "v100-1", GPUType: "v100", GPUs: 4}}
	tests := []struct {
		name           string
		raw            rawJob
		wantGPUs       int
		wantShards     int
		wantSharedGPUs []int
		wantType       string
	}{
		{"pending shard request", rawJob{ID: 5, States: []string{"PENDING"}, TresPerNode: "gres/shard:1", RequiredNodes: "v100-1"}, 1, 1, nil, ""},
		{"running on GPU 1", rawJob{ID: 6, States: []string{"RUNNING"}, TresPerNode: "gres/shard:1", AllocNodes: []string{"v100-1"},
			GresDetail: []string{"shard:1(0/2,1/2,0/2,0/2)"}}, 1, 1, []int{1}, "v100"},
		{"whole GPU", rawJob{ID: 7, States: []string{"RUNNING"}, TresPerNode: "gres/gpu:2", AllocNodes: []string{"v100-1"},
			GresDetail: []string{"gpu:v100:2(IDX:0-1)"}}, 2, 0, nil, "v100"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j, err := convertJob(tc.raw, nodes)
			if err != nil || j.Unreadable != nil {
				t.Fatalf("convertJob: %v, unreadable %v", err, j.Unreadable)
			}
			if j.GPUs != tc.wantGPUs || j.Shards != tc.wantShards || !reflect.DeepEqual(j.SharedGPUs, tc.wantSharedGPUs) ||
				j.RunningGPUType != tc.wantType || j.RequiredNodes != tc.raw.RequiredNodes {
				t.Fatalf("job %+v; want %d GPUs, %d shards on GPUs %v of type %q", j, tc.wantGPUs, tc.wantShards, tc.wantSharedGPUs, tc.wantType)
			}
		})
	}
	bad := rawJob{ID: 8, States: []string{"RUNNING"}, TresPerNode: "gres/shard:1", AllocNodes: []string{"v100-1"}, GresDetail: []string{"shard:1(IDX:1)"}}
	j, err := convertJob(bad, nodes)
	if err != nil || j.Unreadable == nil || !strings.Contains(j.Unreadable.Error(), "gres_detail") {
		t.Fatalf("a shard detail without per-GPU use: job %+v, %v; want it kept as unreadable", j, err)
	}
}

func TestApplySetShareSendsOneUpdate(t *testing.T) {
	tests := []struct {
		name   string
		action bridge.Action
		want   map[string]any
	}{
		{"share", bridge.Action{Kind: bridge.ActSetShare, Job: 9, Shards: 1, Node: "v100-1", Constraints: "v100"}, map[string]any{
			"tres_per_node": "gres/shard:1", "tres_per_job": "", "required_nodes": []any{"v100-1"},
			"minimum_nodes": 1.0, "maximum_nodes": 1.0, "constraints": "v100",
		}},
		// Back to a whole GPU: Slurm ignores an empty node list, so the
		// list is cleared with one empty name.
		{"unshare", bridge.Action{Kind: bridge.ActSetShare, Job: 9, Constraints: "k80"}, map[string]any{
			"tres_per_node": "gres/gpu:1", "tres_per_job": "", "required_nodes": []any{""},
			"minimum_nodes": 1.0, "maximum_nodes": 1.0, "constraints": "k80",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeRestd{t: t}
			c, _ := newTestClient(t, f)
			if err := c.Apply(context.Background(), tc.action); err != nil {
				t.Fatal(err)
			}
			last := len(f.requests) - 1
			if f.requests[last] != "POST /slurm/v0.0.42/job/9" {
				t.Fatalf("request %q", f.requests[last])
			}
			var body map[string]any
			if err := json.Unmarshal([]byte(f.bodies[last]), &body); err != nil {
				t.Fatalf("body %s: %v", f.bodies[last], err)
			}
			if !reflect.DeepEqual(body, tc.want) {
				t.Fatalf("body %v, want %v", body, tc.want)
			}
		})
	}
}
