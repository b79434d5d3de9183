//go:build integration

package daemon

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/api"
	"github.com/gavel-slurm/gavel-slurm/internal/sched"
	"github.com/gavel-slurm/gavel-slurm/internal/slurmtest"
	"github.com/gavel-slurm/gavel-slurm/internal/store"
	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
)

// Most of the jobs the daemon manages leave Slurm's answer at once, as
// when their owner cancels them right after a round and Slurm forgets
// them (MinJobAge is shorter than the default round). The daemon reads
// again, sees the same jobs gone, and goes on scheduling the others
// instead of skipping every later round.
func TestJobsThatLeaveSlurmDoNotStallTheDaemon(t *testing.T) {
	env := slurmtest.FromEnv(t)
	part := ownPartition(t, env, "k80-1")
	var live []int
	for range 2 {
		live = append(live, submitHeld(t, env, kindScript(env, scriptKinds["trap-wait"]), "--partition="+part,
			"--gres=gpu:1", "--output=/dev/null", "--comment=gavel: model=a3c steps=100000000"))
	}
	// The state of an earlier run that managed five more jobs, which
	// Slurm no longer knows.
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var gone []sched.Record
	for i := range 5 {
		gone = append(gone, sched.Record{JobID: fmt.Sprint(4_000_000 + i), FirstSeen: time.Now().Add(-time.Hour),
			Received: map[string]float64{"k80": 600}, HeldByDaemon: true, UpdatedAt: time.Now().Add(-time.Minute)})
	}
	storeRecords(t, st, gone...)
	table, err := throughputs.Reference()
	if err != nil {
		t.Fatal(err)
	}
	set := Settings{Policy: "max_min_fairness_perf", AdoptAdminHolds: true, Partitions: []string{part}, Round: 4 * time.Second,
		DefaultGrace: time.Second, GraceSignal: "USR1", DefaultPreempt: bridge.PreemptCheckpoint}
	core, err := NewCore(set, sched.TableEstimator{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	board := &api.Board{}
	d, err := New(Deps{Core: core, Slurm: restClient(t, env, env.URL, part), Store: st, Board: board,
		Log: zerolog.New(io.Discard), Clock: SystemClock{}})
	if err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		if rep := d.RunRound(context.Background()); rep.Skipped != "" {
			t.Fatalf("round %d skipped: %s", round+1, rep.Skipped)
		}
		time.Sleep(time.Second)
	}
	records, _, err := st.Jobs()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range gone {
		if _, kept := records[r.JobID]; kept {
			t.Errorf("job %s that Slurm forgot is still tracked", r.JobID)
		}
	}
	for _, id := range live {
		if j := findJob(t, board.Status(), id); !j.Managed {
			t.Errorf("job %d is not scheduled: %s", id, j.Reason)
		}
	}
	if board.Health() != nil {
		t.Errorf("unhealthy: %v", board.Health())
	}
}

// A job whose GRES names two GPU types (possible on a node that has both)
// is one record the daemon cannot read: it is left to Slurm with its
// reason, the node with two types is left out with a warning, and the
// managed jobs beside them are scheduled round after round.
func TestAJobWithSeveralGPUTypesDoesNotStopTheRounds(t *testing.T) {
	env := slurmtest.FromEnv(t)
	if env.MixedPartition == "" {
		t.Skip("the local Slurm has no node with two GPU types")
	}
	part := ownPartition(t, env, "p100-1")
	mixed := submitHeld(t, env, "#!/bin/bash\nsleep 600\n", "--partition="+env.MixedPartition,
		"--gres=gpu:v100:1,gpu:k80:1", "--output=/dev/null", "--comment=gavel: model=a3c steps=1000")
	var managed []int
	for range 3 {
		managed = append(managed, submitHeld(t, env, kindScript(env, scriptKinds["trap-wait"]), "--partition="+part,
			"--gres=gpu:1", "--output=/dev/null", "--comment=gavel: model=a3c steps=100000000"))
	}
	set := Settings{Policy: "max_min_fairness_perf", AdoptAdminHolds: true, Partitions: []string{part, env.MixedPartition}, Round: 3 * time.Second,
		DefaultGrace: time.Second, GraceSignal: "USR1", DefaultPreempt: bridge.PreemptCheckpoint}
	p := newInProcess(t, restClient(t, env, env.URL, part, env.MixedPartition), set)
	for round := range 3 {
		if rep := p.d.RunRound(context.Background()); rep.Skipped != "" {
			t.Fatalf("round %d skipped: %s", round+1, rep.Skipped)
		}
		time.Sleep(2 * time.Second)
	}
	st := p.board.Status()
	if j := findJob(t, st, mixed); j.Managed || !strings.Contains(j.Reason, "several GPU types") {
		t.Errorf("the two-type job: managed %v, reason %q", j.Managed, j.Reason)
	}
	running := 0
	for _, id := range managed {
		j := findJob(t, st, id)
		if !j.Managed {
			t.Errorf("job %d not scheduled: %s", id, j.Reason)
		}
		if env.Job(t, id).HasState("RUNNING") {
			running++
		}
	}
	if running != 3 {
		t.Errorf("%d of the 3 managed jobs run on the 4 free GPUs", running)
	}
	if !slices.ContainsFunc(st.Warnings, func(w string) bool { return strings.Contains(w, "mix-1") }) {
		t.Errorf("status warnings %q do not mention the node with two GPU types", st.Warnings)
	}
}
