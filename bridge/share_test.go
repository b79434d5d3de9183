package bridge

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseShardDetail(t *testing.T) {
	tests := []struct {
		in      string
		want    []GPUShards
		wantErr string
	}{
		{"", nil, ""},
		{"2/2,0/2,0/2,0/2", []GPUShards{{Used: 2, Total: 2}, {Used: 0, Total: 2}, {Used: 0, Total: 2}, {Used: 0, Total: 2}}, ""},
		{"0/8, 3/8", []GPUShards{{Used: 0, Total: 8}, {Used: 3, Total: 8}}, ""},
		// Slurm 26.05: GPU 1 is held whole.
		{"1/2,-/2,0/2", []GPUShards{{Used: 1, Total: 2}, {Total: 2, HeldWhole: true}, {Used: 0, Total: 2}}, ""},
		{"-/x", nil, "is not used/total"},
		{"IDX:0-1", nil, "want used/total"},
		{"3/2", nil, "is not used/total"},
		{"1/x", nil, "is not used/total"},
		{"-1/2", nil, "is not used/total"},
	}
	for _, tc := range tests {
		got, err := ParseShardDetail(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseShardDetail(%q) error %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseShardDetail(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestShardsOfGRESLists(t *testing.T) {
	tests := []struct {
		in         string
		wantCount  int64
		wantPerGPU []GPUShards
		wantShared []int
	}{
		// What Slurm 24.11 and 26.05 print: a node, its use, a job's detail.
		{"gpu:v100:4,shard:v100:8", 8, nil, nil},
		{"gpu:v100:0(IDX:N/A),shard:v100:2(2/2,0/2,0/2,0/2)", 2, []GPUShards{{Used: 2, Total: 2}, {Used: 0, Total: 2}, {Used: 0, Total: 2}, {Used: 0, Total: 2}}, []int{0}},
		{"shard:1(0/2,1/2,0/2,0/2)", 1, []GPUShards{{Used: 0, Total: 2}, {Used: 1, Total: 2}, {Used: 0, Total: 2}, {Used: 0, Total: 2}}, []int{1}},
		{"gres/shard:1", 1, nil, nil},
		{"gpu:v100:2(IDX:0-1)", 0, nil, nil},
		// A node of two types: one shard entry per type, GPUs in order.
		{"shard:v100:1(1/2),shard:k80:1(0/2,1/2)", 2, []GPUShards{{Used: 1, Total: 2}, {Used: 0, Total: 2}, {Used: 1, Total: 2}}, []int{0, 2}},
	}
	for _, tc := range tests {
		list, err := ParseGRESList(tc.in)
		if err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		count, perGPU, err := Shards(list)
		if err != nil || count != tc.wantCount || !reflect.DeepEqual(perGPU, tc.wantPerGPU) {
			t.Errorf("Shards(%q) = %d, %v, %v; want %d, %v", tc.in, count, perGPU, err, tc.wantCount, tc.wantPerGPU)
		}
		if got := SharedGPUs(perGPU); !reflect.DeepEqual(got, tc.wantShared) {
			t.Errorf("SharedGPUs(%q) = %v, want %v", tc.in, got, tc.wantShared)
		}
	}
	list, _ := ParseGRESList("shard:2(IDX:0)")
	if _, _, err := Shards(list); err == nil {
		t.Error("Shards accepted a shard entry whose detail is not per-GPU use")
	}
}

func TestValidateSetShare(t *testing.T) {
	tests := []struct {
		name    string
		action  Action
		wantErr string
	}{
		{"share", Action{Kind: ActSetShare, Job: 4, Shards: 1, Node: "v100-1", Constraints: "v100"}, ""},
		{"unshare", Action{Kind: ActSetShare, Job: 4, Constraints: "v100"}, ""},
		{"no node", Action{Kind: ActSetShare, Job: 4, Shards: 1}, "want one node name"},
		{"node list", Action{Kind: ActSetShare, Job: 4, Shards: 1, Node: "v100-1,v100-2"}, "want one node name"},
		{"node range", Action{Kind: ActSetShare, Job: 4, Shards: 1, Node: "v100-[1-2]"}, "want one node name"},
		{"unshare with node", Action{Kind: ActSetShare, Job: 4, Node: "v100-1"}, "names no node"},
		{"negative", Action{Kind: ActSetShare, Job: 4, Shards: -1}, "out of range"},
		{"huge", Action{Kind: ActSetShare, Job: 4, Shards: 1 << 20, Node: "a"}, "out of range"},
		{"control character", Action{Kind: ActSetShare, Job: 4, Shards: 1, Node: "a", Constraints: "v100\n"}, "control character"},
		{"no job", Action{Kind: ActSetShare, Shards: 1, Node: "a"}, "no job id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.action.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Validate error %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestSetShareString(t *testing.T) {
	share := Action{Kind: ActSetShare, Job: 4, Shards: 1, Node: "v100-1", Constraints: "v100"}
	if got, want := share.String(), `set-share job 4 (shards=1 node=v100-1 constraints="v100")`; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	unshare := Action{Kind: ActSetShare, Job: 4, Constraints: "k80"}
	if got, want := unshare.String(), `set-share job 4 (whole GPU constraints="k80")`; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestSharesGPUWith(t *testing.T) {
	run := func(node string, gpus ...int) Job {
		return Job{State: JobRunning, RunningNodes: []string{node}, Shards: 1, SharedGPUs: gpus}
	}
	tests := []struct {
		name string
		a, b Job
		want bool
	}{
		{"same GPU", run("v100-1", 1), run("v100-1", 1), true},
		{"other GPU", run("v100-1", 0), run("v100-1", 1), false},
		{"other node", run("v100-1", 1), run("v100-2", 1), false},
		{"unknown GPU", run("v100-1"), run("v100-1", 1), false},
		{"pending", Job{State: JobPending}, run("v100-1", 1), false},
	}
	for _, tc := range tests {
		if got := SharesGPUWith(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: SharesGPUWith = %v, want %v", tc.name, got, tc.want)
		}
		if got := SharesGPUWith(tc.b, tc.a); got != tc.want {
			t.Errorf("%s (swapped): SharesGPUWith = %v, want %v", tc.name, got, tc.want)
		}
	}
}
