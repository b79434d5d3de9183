package daemon

import (
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/estimate"
	"github.com/gavel-slurm/gavel-slurm/internal/sched"
	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
)

// Rates reported while two jobs share a GPU are the pair's: as fractions
// of each job's rate alone, they replace the table's once both members
// were measured, and they never become either job's rate alone, while
// the progress they carry counts.
func TestPairRatesAreMeasuredApartFromRatesAlone(t *testing.T) {
	m, _ := referenceMeasured(t)
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	a := sched.JobQuery{ID: "7", Model: "a3c", Scale: 1}
	b := sched.JobQuery{ID: "8", Model: "ResNet-18 (batch size 32)", Scale: 1}
	before := m.PairRates(a, b, []string{"v100"}, now)["v100"]
	if before[0].Source != "table" || !(before[0].StepsPerSecond > 0) {
		t.Fatalf("table pair rate: %+v", before)
	}
	_, alone := m.Rates(a, []string{"v100"}, now)

	for i, rate := range []float64{3, 5} {
		at := now.Add(time.Duration(i+1) * 30 * time.Second)
		if err := m.Observe(estimate.Measurement{JobID: "7", Model: "a3c", Scale: 1, Type: "v100", StepsPerSecond: rate,
			At: at, SinceStart: time.Hour, Steps: int64(100 * (i + 1)), Shared: true}); err != nil {
			t.Fatal(err)
		}
		m.observePair("7", "8", "v100", rate)
	}
	if got := m.PairRates(a, b, []string{"v100"}, now)["v100"]; got[0].Source != "table" {
		t.Fatalf("one member measured: %+v, want the table's until both are", got)
	}
	m.observePair("8", "7", "v100", 11)
	got := m.PairRates(b, a, []string{"v100"}, now)["v100"]
	_, aloneB := m.Rates(b, []string{"v100"}, now)
	// Each member's mean rate while sharing over its rate alone.
	if got[0].Source != "measured" || got[0].StepsPerSecond != 11/aloneB["v100"].StepsPerSecond ||
		got[1].StepsPerSecond != 4/alone["v100"].StepsPerSecond {
		t.Fatalf("measured pair rates (8 then 7): %+v; alone %v and %v", got, aloneB["v100"], alone["v100"])
	}
	if _, after := m.Rates(a, []string{"v100"}, now); after["v100"] != alone["v100"] {
		t.Fatalf("rates while sharing changed the rate alone: %+v, was %+v", after["v100"], alone["v100"])
	}
	if done, ok := m.StepsDone(7); !ok || done != 200 {
		t.Fatalf("progress while sharing: %d, %v", done, ok)
	}
	m.Forget("8")
	if got := m.PairRates(a, b, []string{"v100"}, now)["v100"]; got[0].Source != "table" {
		t.Fatalf("a forgotten job's pair rates remain: %+v", got)
	}
}

func TestSharesWithNeedsOneGPU(t *testing.T) {
	run := func(id bridge.JobID, node string, gpu int) bridge.Job {
		return bridge.Job{ID: id, State: bridge.JobRunning, GPUs: 1, Shards: 2, RunningNodes: []string{node}, SharedGPUs: []int{gpu}}
	}
	snap := &bridge.Snapshot{Jobs: []bridge.Job{run(1, "v1", 0), run(2, "v1", 0), run(3, "v1", 1), run(4, "v2", 1)}}
	for _, tc := range []struct {
		job  bridge.Job
		want string
	}{{snap.Jobs[0], "2"}, {snap.Jobs[1], "1"}, {snap.Jobs[2], ""}, {snap.Jobs[3], ""}} {
		if got, _ := sharesWith(snap, tc.job); got != tc.want {
			t.Errorf("job %d shares with %q, want %q", tc.job.ID, got, tc.want)
		}
	}
}

// A pair of models the table does not know is estimated from the
// reference models the two jobs compute like, once they were measured.
func TestUnseenPairsAreEstimatedFromNearestModels(t *testing.T) {
	m, table := referenceMeasured(t)
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	a := sched.JobQuery{ID: "7", Model: "a3c-custom", Scale: 1}
	b := sched.JobQuery{ID: "8", Model: "resnet18-mine", Scale: 1}
	if got := m.PairRates(a, b, []string{"v100"}, now); len(got) != 0 {
		t.Fatalf("unmeasured unknown models got pair rates: %+v", got)
	}
	// Each measured on every type at the table's rates of A3C and
	// ResNet-18 (batch size 32), twice as fast.
	for _, j := range []struct {
		q     sched.JobQuery
		model string
	}{{a, "A3C"}, {b, "ResNet-18 (batch size 32)"}} {
		rates, _ := table.IsolatedRates(j.model, 1)
		for i, typ := range table.Types() {
			for k := range 4 {
				at := now.Add(time.Duration(k) * time.Minute)
				if err := m.Observe(estimate.Measurement{JobID: j.q.ID, Model: j.q.Model, Scale: 1, Type: typ,
					StepsPerSecond: 2 * rates[i], At: at, SinceStart: time.Hour}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	got := m.PairRates(a, b, []string{"v100"}, now)["v100"]
	want := m.table.PairRates(sched.JobQuery{Model: "a3c", Scale: 1}, sched.JobQuery{Model: "ResNet-18 (batch size 32)", Scale: 1}, []string{"v100"}, now)["v100"]
	t.Logf("estimated: %+v", got)
	if got[0].Source != "estimated" || got[0].StepsPerSecond != want[0].StepsPerSecond || got[1].StepsPerSecond != want[1].StepsPerSecond ||
		!strings.Contains(got[0].Detail, "A3C") {
		t.Fatalf("unseen pair %+v, want the table's A3C with ResNet-18 (batch size 32): %+v", got, want)
	}
}

// referenceMeasured is a measured estimator over the reference table.
func referenceMeasured(t *testing.T) (*Measured, *throughputs.Table) {
	t.Helper()
	table, err := throughputs.Reference()
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMeasured(table)
	if err != nil {
		t.Fatal(err)
	}
	return m, table
}
