package nvml

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gavel-slurm/gavel-slurm/internal/reports"
)

// node is a fake node: GPUs on go-nvml's mock, a jobs directory, progress
// files and a /proc tree, all under a temporary directory.
type node struct {
	t        *testing.T
	lib      *mock.Interface
	jobsDir  string
	progDir  string
	procRoot string
	clock    time.Time
	c        *Collector
}

func newNode(t *testing.T, spec string, tweak func([]FakeGPU)) *node {
	t.Helper()
	gpus, err := ParseFakeGPUs(spec)
	if err != nil {
		t.Fatal(err)
	}
	if tweak != nil {
		tweak(gpus)
	}
	root := t.TempDir()
	n := &node{t: t, lib: NewFake(gpus).(*mock.Interface),
		jobsDir: filepath.Join(root, "jobs"), progDir: filepath.Join(root, "progress"), procRoot: filepath.Join(root, "proc"),
		clock: time.Unix(1_700_000_000, 0)}
	for _, d := range []string{n.jobsDir, n.progDir, n.procRoot} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n.c, err = Open(n.lib, Config{Node: "gpu01", JobsDir: n.jobsDir, ProgressDir: n.progDir, ProcRoot: n.procRoot,
		Interval: 30 * time.Second, Now: func() time.Time { return n.clock }})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (n *node) write(dir, name, content string) {
	n.t.Helper()
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		n.t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		n.t.Fatal(err)
	}
	defer f.Close()
	f.WriteString(content)
}

// collect advances the clock and returns the report, checked by the
// daemon's decoder after a trip through JSON.
func (n *node) collect(advance time.Duration) map[string]reports.Job {
	n.t.Helper()
	n.clock = n.clock.Add(advance)
	rep, err := n.c.Collect()
	if err != nil {
		n.t.Fatal(err)
	}
	data, err := json.Marshal(rep)
	if err != nil {
		n.t.Fatal(err)
	}
	if _, err := reports.Decode(bytes.NewReader(data), reports.DefaultMaxBytes, n.clock, reports.DefaultMaxAge); err != nil {
		n.t.Fatalf("the daemon would refuse the report: %v\n%s", err, data)
	}
	if rep.Node != "gpu01" || !rep.Time.Equal(n.clock) {
		n.t.Errorf("report node %q time %v", rep.Node, rep.Time)
	}
	out := map[string]reports.Job{}
	for _, j := range rep.Jobs {
		out[j.JobID+"/"+j.GPUType] = j
	}
	return out
}

func (n *node) device(i int) *mock.Device {
	d, _ := n.lib.DeviceGetHandleByIndexFunc(i)
	return d.(*mock.Device)
}

// jobLine summarises a report entry for comparison.
func jobLine(j reports.Job) string {
	s := fmt.Sprintf("gpus=%d util=%.2f mem=%d", j.GPUs, j.SMUtil, j.MemUsedBytes)
	if j.Steps != nil {
		s += fmt.Sprintf(" steps=%d", *j.Steps)
	}
	if j.StepsPerS != nil {
		s += fmt.Sprintf(" rate=%.2f", *j.StepsPerS)
	}
	return s
}

func checkJobs(t *testing.T, got map[string]reports.Job, want map[string]string) {
	t.Helper()
	for key, w := range want {
		j, ok := got[key]
		if !ok {
			t.Errorf("%s missing from the report", key)
			continue
		}
		if g := jobLine(j); g != w {
			t.Errorf("%s: %s\n  want %s", key, g, w)
		}
	}
	for key := range got {
		if _, ok := want[key]; !ok {
			t.Errorf("%s in the report, not expected: %s", key, jobLine(got[key]))
		}
	}
}

func TestCollect(t *testing.T) {
	n := newNode(t, "v100:4,k80:4", func(g []FakeGPU) {
		g[0].Util, g[0].MemUsed = 80, 1000
		g[1].Util, g[1].MemUsed = 60, 2000
		g[2].PIDs, g[2].Util = []uint32{500}, 100 // a job without the Prolog: cgroup v2
		g[3].PIDs = []uint32{600, 601}            // cgroup v1, and a process outside any job
		g[4].PIDs = []uint32{700}                 // claimed by job 102's file: its process is not looked up
	})
	n.write(n.jobsDir, "101", "0,1\n")
	n.write(n.jobsDir, "102", "4,5,6,7\n")
	n.write(n.procRoot, "500/cgroup", cgroupV2)
	n.write(n.procRoot, "600/cgroup", cgroupV1)
	n.write(n.procRoot, "601/cgroup", cgroupOther)
	n.write(n.procRoot, "700/cgroup", cgroupV2)

	// First interval: job 101's first counts are its baseline.
	n.write(n.progDir, "101.progress", "0 1699999990\n100 1700000020\n")
	got := n.collect(30 * time.Second)
	checkJobs(t, got, map[string]string{
		"101/v100":  "gpus=2 util=0.70 mem=3000 steps=100",
		"102/k80":   "gpus=4 util=0.00 mem=0", // never reports progress
		"9001/v100": "gpus=1 util=1.00 mem=0",
		"4242/v100": "gpus=1 util=0.00 mem=0",
	})

	// Second interval: a rate for 101, and GPU 1 falls off the bus.
	n.write(n.progDir, "101.progress", "400 1700000050\n")
	n.device(1).GetUUIDFunc = func() (string, gonvml.Return) { return "", gonvml.ERROR_GPU_IS_LOST }
	got = n.collect(30 * time.Second)
	checkJobs(t, got, map[string]string{
		"101/v100":  "gpus=1 util=0.80 mem=1000 steps=400 rate=10.00",
		"102/k80":   "gpus=4 util=0.00 mem=0",
		"9001/v100": "gpus=1 util=1.00 mem=0",
		"4242/v100": "gpus=1 util=0.00 mem=0",
	})

	// Third: GPU 0 goes too, so job 101 has no GPU left to report on;
	// the 9001 process ended.
	n.device(0).GetNameFunc = func() (string, gonvml.Return) { return "", gonvml.ERROR_GPU_IS_LOST }
	os.RemoveAll(filepath.Join(n.procRoot, "500"))
	got = n.collect(30 * time.Second)
	checkJobs(t, got, map[string]string{
		"102/k80":   "gpus=4 util=0.00 mem=0",
		"4242/v100": "gpus=1 util=0.00 mem=0",
	})
	if _, kept := n.c.progress.jobs["101"]; kept {
		t.Error("the progress state of a job no longer on the node is kept")
	}
}

// TestCollectMixedTypes: a job on two types gets an entry per type, and
// its progress, which is the whole job's, goes on neither.
func TestCollectMixedTypes(t *testing.T) {
	n := newNode(t, "v100:2,k80:2", nil)
	n.write(n.jobsDir, "55", "1,2,3\n")
	n.write(n.progDir, "55.progress", "10\n")
	got := n.collect(30 * time.Second)
	checkJobs(t, got, map[string]string{
		"55/v100": "gpus=1 util=0.00 mem=0",
		"55/k80":  "gpus=2 util=0.00 mem=0",
	})
}

// TestCollectUUIDs: a mapping file may name GPUs by UUID (as
// CUDA_VISIBLE_DEVICES does on some sites) and name GPUs that are not
// there.
func TestCollectUUIDs(t *testing.T) {
	n := newNode(t, "h100:2", nil)
	n.write(n.jobsDir, "9", "GPU-fa4e0000-0000-0000-0000-000000000001,7,junk\n")
	n.write(n.jobsDir, "10", "12\n")
	got := n.collect(30 * time.Second)
	checkJobs(t, got, map[string]string{"9/h100": "gpus=1 util=0.00 mem=0"})
}

// TestCollectRequeue: the Prolog writing a job's file again (the job was
// requeued and started over on this node) restarts its warm-up, even
// though its progress file kept growing.
func TestCollectRequeue(t *testing.T) {
	n := newNode(t, "a100:1", nil)
	path := filepath.Join(n.jobsDir, "8")
	writeJob := func() {
		os.WriteFile(path+".tmp", []byte("0\n"), 0o644)
		os.Rename(path+".tmp", path)
	}
	writeJob()
	n.write(n.progDir, "8.progress", "100\n")
	n.collect(30 * time.Second)
	n.write(n.progDir, "8.progress", "400\n")
	got := n.collect(30 * time.Second)
	checkJobs(t, got, map[string]string{"8/a100": "gpus=1 util=0.00 mem=0 steps=400 rate=10.00"})
	os.Remove(path)
	writeJob()
	n.write(n.progDir, "8.progress", "700\n")
	got = n.collect(30 * time.Second)
	checkJobs(t, got, map[string]string{"8/a100": "gpus=1 util=0.00 mem=0 steps=700"})
}

func TestCollectEmptyNode(t *testing.T) {
	n := newNode(t, "t4:1", nil)
	os.RemoveAll(n.jobsDir) // no Prolog installed
	got := n.collect(30 * time.Second)
	if len(got) != 0 {
		t.Errorf("jobs on an idle node: %v", got)
	}
	rep, err := n.c.Collect()
	if err != nil || rep.Jobs == nil {
		t.Errorf("an idle node's report must carry an empty list, not null: %+v %v", rep, err)
	}
}

func TestCollectInterval(t *testing.T) {
	n := newNode(t, "t4:1", nil)
	for _, c := range []struct {
		advance time.Duration
		want    float64
	}{{5 * time.Second, 30}, {45 * time.Second, 45}, {0, 30}, {100 * time.Microsecond, 30}, {1500 * time.Microsecond, 0.002}} {
		n.clock = n.clock.Add(c.advance)
		rep, err := n.c.Collect()
		if err != nil {
			t.Fatal(err)
		}
		if rep.IntervalS != c.want {
			t.Errorf("after %v: interval %v, want %v", c.advance, rep.IntervalS, c.want)
		}
	}
}

func TestCollectCountFails(t *testing.T) {
	n := newNode(t, "t4:1", nil)
	n.lib.DeviceGetCountFunc = func() (int, gonvml.Return) { return 0, gonvml.ERROR_UNKNOWN }
	if _, err := n.c.Collect(); err == nil || !strings.Contains(err.Error(), "count the GPUs") {
		t.Errorf("err %v", err)
	}
}

// TestCollectFirstProgress: each report of a run carries the time of the
// run's first progress line, the warm-up's too; a requeued run (the
// Prolog's fresh mapping and progress files) starts over. A line time
// ahead of the report (truncated to the second) is sent as the report's
// time; one too far back for the daemon is left out.
func TestCollectFirstProgress(t *testing.T) {
	// The node's clock starts at 1,700,000,000 and each step advances it
	// by 30 s before collecting.
	type cstep struct {
		requeue bool   // the Prolog writes the job's files again
		lines   string // appended to the progress file
		want    string // first_progress, RFC 3339; "": absent
	}
	cases := map[string][]cstep{
		"the first line's time, from the warm-up on": {
			{},
			{lines: "5000 1700000041.250\n5100 1700000055\n", want: "2023-11-14T22:14:01.25Z"},
			{lines: "5400 1700000085\n", want: "2023-11-14T22:14:01.25Z"},
			{want: "2023-11-14T22:14:01.25Z"},
		},
		"a requeued run starts over": {
			{lines: "5000 1700000012\n", want: "2023-11-14T22:13:32Z"},
			{requeue: true},
			{lines: "5000 1700000079\n", want: "2023-11-14T22:14:39Z"},
		},
		"a line ahead of the report": {
			{lines: "5000 1700000030.7\n", want: "2023-11-14T22:13:50Z"},
		},
		"a line time long gone": {
			{lines: "5000 5\n5100 1700000029\n"},
		},
	}
	for name, steps := range cases {
		t.Run(name, func(t *testing.T) {
			n := newNode(t, "a100:1", nil)
			writeJob := func() {
				path := filepath.Join(n.jobsDir, "8")
				os.WriteFile(path+".tmp", []byte("0\n"), 0o644)
				os.Rename(path+".tmp", path)
				os.Remove(filepath.Join(n.progDir, "8.progress"))
				n.write(n.progDir, "8.progress", "")
			}
			writeJob()
			for i, s := range steps {
				if s.requeue {
					writeJob()
				}
				n.write(n.progDir, "8.progress", s.lines)
				got := n.collect(30 * time.Second)["8/a100"]
				var fp string
				if got.FirstProgress != nil {
					fp = got.FirstProgress.Format(time.RFC3339Nano)
				}
				if fp != s.want {
					t.Errorf("step %d: first_progress %q, want %q", i, fp, s.want)
				}
			}
		})
	}
}

// TestCollectSamplesFirstProgress: between collections, the collector
// dates a run's first line without a time of its own to when it first saw
// the line written, not to the end of the interval.
func TestCollectSamplesFirstProgress(t *testing.T) {
	n := newNode(t, "a100:1", nil)
	n.write(n.jobsDir, "8", "0\n")
	n.write(n.progDir, "8.progress", "")
	progress := filepath.Join(n.progDir, "8.progress")
	if got := n.collect(30 * time.Second)["8/a100"]; got.FirstProgress != nil {
		t.Fatalf("first progress %v before any line", *got.FirstProgress)
	}
	// A line every 10 s from 4 s into the interval, each seen by the
	// sample a second later.
	intervalStart := n.clock
	for _, w := range []struct {
		after time.Duration
		line  string
	}{{4 * time.Second, "5000\n"}, {14 * time.Second, "5100\n"}, {24 * time.Second, "5200\n"}} {
		n.write(n.progDir, "8.progress", w.line)
		written := intervalStart.Add(w.after)
		if err := os.Chtimes(progress, written, written); err != nil {
			t.Fatal(err)
		}
		n.clock = written.Add(time.Second)
		n.c.SampleProgress()
	}
	n.clock = intervalStart
	want := intervalStart.Add(4 * time.Second).UTC()
	got := n.collect(30 * time.Second)["8/a100"]
	if got.FirstProgress == nil || !got.FirstProgress.Equal(want) {
		t.Errorf("first progress %v, want %v (the sample after the first line)", got.FirstProgress, want)
	}
}

// TestRunSamplesProgress: Run samples the progress files between its
// collections.
func TestRunSamplesProgress(t *testing.T) {
	n := newNode(t, "a100:1", nil)
	n.c.cfg.Interval, n.c.cfg.ProgressSample = time.Hour, 5*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- n.c.Run(ctx, func(reports.Report) {}) }()
	// After the first collection: a job that has just started writes.
	time.Sleep(20 * time.Millisecond)
	n.write(n.progDir, "8.progress", "5000\n")
	time.Sleep(100 * time.Millisecond)
	cancel()
	<-done
	if _, ok := n.c.progress.firstWrites["8"]; !ok {
		t.Error("Run did not sample the progress files between collections")
	}
}
