package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// replyTransport answers every request with body, as slurmrestd does with
// a successful JSON reply.
type replyTransport struct{ body []byte }

func (rt replyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{"Content-Type": {"application/json"}},
		Body:       io.NopCloser(bytes.NewReader(rt.body)),
		Request:    req,
	}, nil
}

func fuzzAdapter(t *testing.T, body []byte) adapter {
	a, err := newAdapterV0042("http://slurmrestd.invalid", &http.Client{Transport: replyTransport{body}},
		func(context.Context, *http.Request) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func mustJSON(f *testing.F, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// FuzzJobsReply feeds arbitrary bytes to the jobs reply parser and the
// conversion to a snapshot. A reply either fails to parse as a whole or
// gives jobs; the snapshot of those jobs then fails only for a record that
// names no usable job id or a job listed twice: every other problem with a
// record ends in that job's Unreadable.
func FuzzJobsReply(f *testing.F) {
	f.Add(mustJSON(f, fixtureJobs()))
	for _, s := range []string{
		`{"jobs":[]}`,
		`{"jobs":[{"job_id":5,"partition":"gpu","job_state":["PENDING"],"priority":{"set":true,"number":4000000000},"tres_per_node":"gres/gpu:1"}]}`,
		`{"jobs":[{"job_id":6,"partition":"gpu","job_state":["RUNNING"],"node_count":{"set":true,"number":2},"tres_per_job":"gres/gpu:v100:1,gres/gpu:k80:1"}]}`,
		`{"jobs":[{"job_id":7,"job_state":["PENDING"],"hold":"yes"},{"job_id":8,"job_state":"PENDING","restart_cnt":4000000000}]}`,
		`{"jobs":[{"job_id":9,"job_state":["RUNNING"],"gres_detail":["gpu:v100:1(IDX:0)"],"job_resources":{"nodes":{"allocation":[{"name":"v100-1"}]}}}]}`,
		`{"jobs":[{"job_id":10,"job_state":["PENDING"],"tres_per_node":"gres/gpu:4611686018427387903","node_count":{"set":true,"number":4}}]}`,
		`{"jobs":[],"errors":[{"error":"Unable to query jobs","error_number":2017}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		reply, err := fuzzAdapter(t, body).jobs(context.Background(), 0)
		raws := reply.jobs
		if err != nil {
			if raws != nil {
				t.Fatalf("jobs returned with error %v", err)
			}
			return
		}
		snap, err := buildSnapshot(testNow, "v0.0.42", nil, nil, raws)
		if err != nil {
			ids := map[int64]bool{}
			for _, r := range raws {
				if r.ID <= 0 || r.ID > math.MaxUint32 || ids[r.ID] {
					return // a snapshot-wide problem, as documented
				}
				ids[r.ID] = true
			}
			t.Fatalf("jobs with usable, distinct ids failed the snapshot: %v", err)
		}
		for _, j := range snap.Jobs {
			checkJob(t, j)
		}
	})
}

func checkJob(t *testing.T, j bridge.Job) {
	t.Helper()
	switch {
	case j.GPUs < 0 || j.GPUs > maxGPUs || j.GPUsPerNode < 0 || j.GPUsPerNode > maxGPUs:
		t.Fatalf("job %d: %d GPUs, %d per node", j.ID, j.GPUs, j.GPUsPerNode)
	case j.Nodes < 1 || j.Restarts < 0:
		t.Fatalf("job %d: %d nodes, %d restarts", j.ID, j.Nodes, j.Restarts)
	case j.State == "":
		t.Fatalf("job %d without a state", j.ID)
	case j.Unreadable != nil && strings.Contains(j.Unreadable.Error(), "\n"):
		t.Fatalf("job %d: reason is not one line: %q", j.ID, j.Unreadable)
	}
	if _, err := json.Marshal(j); err != nil {
		t.Fatalf("job %d does not encode: %v", j.ID, err)
	}
}

// FuzzNodesReply feeds arbitrary bytes to the nodes reply parser and the
// conversion to a snapshot: it must not panic, and the nodes it accepts
// have bounded, consistent GPU counts.
func FuzzNodesReply(f *testing.F) {
	f.Add(mustJSON(f, fixtureNodes()))
	for _, s := range []string{
		`{"nodes":[]}`,
		`{"nodes":[{"name":"n1","gres":"gpu:v100:4(S:0)","gres_used":"gpu:v100:2(IDX:0-1)","state":["MIXED"],"partitions":["gpu"]}]}`,
		`{"nodes":[{"name":"n1","gres":"gpu:v100:2,gpu:k80:2","state":["IDLE"]}]}`,
		`{"nodes":[{"name":"n1","gres":"gpu:v100:4611686018427387903,gpu:v100:4611686018427387903","state":["IDLE"]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		reply, err := fuzzAdapter(t, body).nodes(context.Background(), 0)
		raws := reply.nodes
		if err != nil {
			return
		}
		snap, err := buildSnapshot(testNow, "v0.0.42", nil, raws, nil)
		if err != nil {
			return
		}
		for _, n := range snap.Nodes {
			if n.GPUs < 0 || n.GPUs > maxGPUs || n.GPUsUsed < 0 || n.GPUsUsed > n.GPUs {
				t.Fatalf("node %s: %d of %d GPUs in use", n.Name, n.GPUsUsed, n.GPUs)
			}
		}
	})
}

// FuzzConvertJob reaches the GRES and count paths of convertJob more
// directly than a whole reply does.
func FuzzConvertJob(f *testing.F) {
	f.Add("gres/gpu:v100:2", "", int64(2), "RUNNING", "gpu:v100:2(IDX:0-1)", int64(0))
	f.Add("", "gres/gpu:v100:1,gres/gpu:k80:1", int64(2), "PENDING", "", int64(1<<40))
	f.Add("gres/gpu:4611686018427387903", "", int64(4), "", "", int64(-1))
	f.Fuzz(func(t *testing.T, perNode, perJob string, nodeCount int64, state, detail string, submit int64) {
		r := rawJob{ID: 5, Partition: "gpu", TresPerNode: perNode, TresPerJob: perJob, NodeCount: nodeCount,
			AllocNodes: []string{"n1", "n2"}, GresDetail: []string{detail}, SubmitTime: submit}
		if state != "" {
			r.States = []string{state}
		}
		j, err := convertJob(r, map[string]bridge.Node{"n2": {Name: "n2", GPUType: "k80"}})
		if err != nil {
			t.Fatalf("job with a usable id: %v", err)
		}
		checkJob(t, j)
	})
}
