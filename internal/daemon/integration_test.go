//go:build integration

package daemon

import (
	"context"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/bridge/rest"
	"github.com/gavel-slurm/gavel-slurm/internal/api"
	"github.com/gavel-slurm/gavel-slurm/internal/sched"
	"github.com/gavel-slurm/gavel-slurm/internal/store"
	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
)

// This test runs the daemon for a few short rounds against the local Slurm
// that scripts/slurm-up.sh starts:
//
//	set -a; . .local/slurm/env; set +a; go test -tags integration ./internal/daemon/

// ownJobs hides the jobs of other tests sharing the local Slurm, so the
// daemon only schedules (and only touches) the jobs this test submitted.
type ownJobs struct {
	bridge.Slurm
	ids map[bridge.JobID]bool
}

func (o ownJobs) Snapshot(ctx context.Context) (*bridge.Snapshot, error) {
	snap, err := o.Slurm.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	var jobs []bridge.Job
	for _, j := range snap.Jobs {
		if o.ids[j.ID] {
			jobs = append(jobs, j)
		}
	}
	return bridge.NewSnapshot(snap.Taken, snap.APIVersion, snap.Nodes, jobs)
}

// sbatchHeld is sbatch for a job Slurm must not start before the daemon's
// first round: held by an administrator, for the daemon to adopt
// (Settings.AdoptAdminHolds; see submitHeld).
func sbatchHeld(t *testing.T, args ...string) bridge.JobID {
	t.Helper()
	id := sbatch(t, append(args, "--hold")...)
	if out, err := exec.Command(os.Getenv("SCONTROL"), "hold", id.String()).CombinedOutput(); err != nil {
		t.Fatalf("scontrol hold %d: %v: %s", id, err, out)
	}
	return id
}

func sbatch(t *testing.T, args ...string) bridge.JobID {
	t.Helper()
	all := append([]string{"--parsable", "-p", os.Getenv("SLURM_PARTITION"), "-t", "10", "-o", "/dev/null", "--wrap", "sleep 300"}, args...)
	out, err := exec.Command(os.Getenv("SBATCH"), all...).CombinedOutput()
	if err != nil {
		t.Fatalf("sbatch %v: %v: %s", all, err, out)
	}
	id, err := strconv.ParseUint(strings.TrimSpace(strings.Split(string(out), ";")[0]), 10, 32)
	if err != nil {
		t.Fatalf("sbatch output %q: %v", out, err)
	}
	t.Cleanup(func() { _ = exec.Command(os.Getenv("SCANCEL"), strconv.FormatUint(id, 10)).Run() })
	return bridge.JobID(id)
}

func TestDaemonAgainstLocalSlurm(t *testing.T) {
	url := os.Getenv("SLURMRESTD_URL")
	if url == "" {
		t.Skip("SLURMRESTD_URL is not set: no local Slurm (run scripts/slurm-up.sh)")
	}
	client, err := rest.New(rest.Config{URL: url, UserName: os.Getenv("SLURM_USER_NAME"), TokenFile: os.Getenv("SLURM_JWT_FILE"),
		Partitions: []string{os.Getenv("SLURM_PARTITION")}, Scontrol: os.Getenv("SCONTROL")})
	if err != nil {
		t.Fatal(err)
	}
	// Not eligible before the daemon chooses their type (a hold would be
	// the user's own, which the daemon leaves alone).
	own := ownJobs{Slurm: client, ids: map[bridge.JobID]bool{}}
	var managed []bridge.JobID
	for _, model := range []string{"resnet50-bs64", "a3c", "transformer-bs64"} {
		id := sbatchHeld(t, "--gres=gpu:1", "--comment=gavel: model="+model+" steps=10k")
		managed = append(managed, id)
		own.ids[id] = true
	}
	untagged := sbatch(t, "--hold", "--gres=gpu:1", "--comment=plain job")
	own.ids[untagged] = true
	// A typed request is scheduled on its own type, request untouched,
	// although the model runs fastest on a V100.
	typed := sbatchHeld(t, "--gres=gpu:k80:1", "--comment=gavel: model=resnet50-bs64 steps=10k")
	own.ids[typed] = true
	// A feature of the user's own (only the first node of each type has
	// "ib") is kept beside the type the daemon adds.
	withFeature := sbatchHeld(t, "--gres=gpu:1", "--constraint=ib", "--comment=gavel: model=lm-bs20 steps=10k")
	own.ids[withFeature] = true

	table, _ := throughputs.Reference()
	set := Settings{Policy: "max_min_fairness_perf", Partitions: []string{os.Getenv("SLURM_PARTITION")}, AdoptAdminHolds: true,
		Round: 3 * time.Second, DefaultGrace: time.Second, GraceSignal: "USR1"}
	core, err := NewCore(set, sched.TableEstimator{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	board := &api.Board{}
	d, err := New(Deps{Core: core, Slurm: own, Store: st, Board: board, Log: zerolog.New(io.Discard), Clock: SystemClock{}})
	if err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	for round := 0; round < 4; round++ {
		rep := d.RunRound(ctx)
		if rep.Skipped != "" {
			t.Fatalf("round %d skipped: %s", rep.Round, rep.Skipped)
		}
		if rep.Failed > 0 {
			entries, _, _ := st.Recent(0)
			t.Fatalf("round %d: %d actions failed; journal %+v", rep.Round, rep.Failed, entries)
		}
		time.Sleep(set.Round)
	}

	snap, err := own.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range managed {
		j, _ := snap.Job(id)
		if j.State != bridge.JobRunning {
			t.Errorf("job %d is %s (%s), want running on the type the daemon chose", id, j.State, j.Reason)
			continue
		}
		if j.RunningGPUType == "" || j.RunningGPUType != j.Constraints {
			t.Errorf("job %d runs on %q, chosen type %q", id, j.RunningGPUType, j.Constraints)
		}
	}
	if j, _ := snap.Job(typed); j.State != bridge.JobRunning || j.RunningGPUType != "k80" || j.Constraints != "" {
		t.Errorf("typed job: %s (%s) on %q, constraints %q; want running on k80, constraints untouched",
			j.State, j.Reason, j.RunningGPUType, j.Constraints)
	}
	if j, _ := snap.Job(withFeature); j.State != bridge.JobRunning || j.Constraints != "ib&"+j.RunningGPUType ||
		len(j.RunningNodes) != 1 || j.RunningNodes[0] != j.RunningGPUType+"-1" {
		t.Errorf("job with its own feature: %s (%s) on %v (%q), constraints %q; want running on the ib node of its type",
			j.State, j.Reason, j.RunningNodes, j.RunningGPUType, j.Constraints)
	}
	if j, _ := snap.Job(untagged); !j.Held || j.Constraints != "" {
		t.Errorf("untagged job was touched: held=%v constraints=%q", j.Held, j.Constraints)
	}
	if p, _, _ := st.Pending(); len(p) != 0 {
		t.Errorf("journal left pending: %+v", p)
	}
	for _, js := range board.Status().Jobs {
		if js.JobID == untagged.String() && !strings.Contains(js.Reason, "no gavel: tag") {
			t.Errorf("untagged job reason %q", js.Reason)
		}
	}
}
