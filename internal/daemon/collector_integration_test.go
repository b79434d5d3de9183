//go:build integration

package daemon

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gavel-slurm/gavel-slurm/internal/api"
	"github.com/gavel-slurm/gavel-slurm/internal/estimate"
	"github.com/gavel-slurm/gavel-slurm/internal/slurmtest"
	"github.com/gavel-slurm/gavel-slurm/internal/store"
	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
	"github.com/gavel-slurm/gavel-slurm/nvml"
)

// A job tagged with a model no table knows reports its progress at a rate
// that depends on the GPU type it runs on; collectors on fake GPUs read
// its progress file (the job mapping written as the Prolog would) and the
// daemon learns the rate: status shows it measured, within 10% of the
// true rate, on the type the job runs on.
func TestCollectorsTeachTheDaemonAnUnknownModel(t *testing.T) {
	env := slurmtest.FromEnv(t)
	part := ownPartition(t, env, "v100-2", "k80-2")
	progressDir := filepath.Join(env.SharedDir, fmt.Sprintf("progress-%d", os.Getpid()))
	if err := os.MkdirAll(progressDir, 0o777); err != nil {
		t.Fatal(err)
	}
	trueRate := map[string]float64{"v100": 40, "k80": 10}
	script := fmt.Sprintf(`#!/bin/bash
case $SLURMD_NODENAME in v100*) r=40;; *) r=10;; esac
f=%s/progress-%d/$SLURM_JOB_ID.progress
steps=0
while true; do sleep 1; steps=$((steps + r)); echo "$steps $(date +%%s)" >>"$f"; done
`, env.SharedDirInJob, os.Getpid())
	id := env.Submit(t, script, "--partition="+part, "--gres=gpu:1", "--begin=now+1hour", "--output=/dev/null",
		"--comment=gavel: model=mystery-net steps=100000000 preempt=never")

	table, err := throughputs.Reference()
	if err != nil {
		t.Fatal(err)
	}
	measured, err := NewMeasuredWith(table, estimate.Options{WarmUp: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	set := Settings{Policy: "max_min_fairness_perf", Partitions: []string{part}, Round: 4 * time.Second,
		DefaultGrace: time.Second, GraceSignal: "USR1"}
	core, err := NewCore(set, measured)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	board := &api.Board{}
	d, err := New(Deps{Core: core, Slurm: restClient(t, env, env.URL, part), Store: st, Board: board,
		Log: zerolog.New(io.Discard), Clock: SystemClock{}, Measured: measured})
	if err != nil {
		t.Fatal(err)
	}
	// One collector per node, on fake GPUs of the node's type.
	products := map[string]string{"v100-2": "Tesla V100-SXM2-16GB", "k80-2": "Tesla K80"}
	collectors := map[string]*nvml.Collector{}
	jobsDirs := map[string]string{}
	for node, product := range products {
		jobsDirs[node] = t.TempDir()
		gpus := make([]nvml.FakeGPU, 4)
		for i := range gpus {
			gpus[i] = nvml.FakeGPU{Name: product, MemTotal: 16 << 30}
		}
		c, err := nvml.Open(nvml.NewFake(gpus), nvml.Config{Node: node, JobsDir: jobsDirs[node],
			ProgressDir: progressDir, ProcRoot: t.TempDir(), Log: zerolog.New(io.Discard)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		collectors[node] = c
	}

	var got api.Throughput
	var runType string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(3 * time.Second) {
		d.RunRound(context.Background())
		j := env.Job(t, id)
		if !j.HasState("RUNNING") {
			continue
		}
		runType = map[string]string{"v100-2": "v100", "k80-2": "k80"}[j.Nodes]
		// The Prolog's mapping, written once when the job starts: the
		// job holds GPU 0 of its node.
		mapping := filepath.Join(jobsDirs[j.Nodes], fmt.Sprint(id))
		if _, err := os.Stat(mapping); err != nil {
			if err := os.WriteFile(mapping, []byte("0\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range collectors {
			rep, err := c.Collect()
			if err != nil {
				t.Fatal(err)
			}
			d.Receive(rep)
		}
		js := findJob(t, board.Status(), id)
		got = js.Throughputs[runType]
		if got.Source == "measured" && math.Abs(got.StepsPerS-trueRate[runType]) <= 0.1*trueRate[runType] {
			t.Logf("job %d on %s: %+v; other types %+v", id, runType, got, js.Throughputs)
			return
		}
	}
	t.Fatalf("job %d on %q: throughput %+v, want measured %.0f steps/s within 10%%", id, runType, got, trueRate[runType])
}
