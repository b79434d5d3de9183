package sched

import (
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
	"github.com/gavel-slurm/gavel-slurm/rounds"
)

var epoch = time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)

func settings() Settings {
	return Settings{
		Policy: "max_min_fairness_perf", Partitions: []string{"gpu"}, Round: 20 * time.Second,
		DefaultGrace: 5 * time.Second, GraceSignal: "USR1", DefaultPreempt: bridge.PreemptCheckpoint,
	}
}

type roundsServer = rounds.Server

func TestRequeuedJobIsMadeEligibleAgainWhenSlurmDelaysIt(t *testing.T) {
	table, err := throughputs.Reference()
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		job         bridge.Job
		wantActions []string
		wantRecheck time.Duration // 0: no further check
	}{
		"delay set after the begin-now": {
			job:         bridge.Job{State: bridge.JobPending, Reason: "BeginTime"},
			wantActions: []string{"begin-now"},
		},
		"still stopping": {
			job:         bridge.Job{State: bridge.JobRunning},
			wantRecheck: 2 * time.Second,
		},
		// Requeued and started again: nothing left to watch.
		"running again": {job: bridge.Job{State: bridge.JobRunning, Restarts: 1}},
		"completing": {
			job:         bridge.Job{State: bridge.JobPending, StateFlags: []string{"COMPLETING"}, Reason: "BeginTime"},
			wantRecheck: 2 * time.Second,
		},
		"held by the plan":   {job: bridge.Job{State: bridge.JobPending, Held: true, Reason: "BeginTime"}},
		"eligible already":   {job: bridge.Job{State: bridge.JobPending, Reason: "Resources"}},
		"finished meanwhile": {job: bridge.Job{State: bridge.JobCompleted}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			core, err := NewCore(settings(), TableEstimator{Table: table})
			if err != nil {
				t.Fatal(err)
			}
			js := &jobState{key: keyOf(5), name: "5", ledger: ledger{recheckAt: epoch}, received: map[string]float64{}}
			core.jobs[keyOf(5)], core.order = js, []jobKey{keyOf(5)}
			tc.job.ID, tc.job.Partition, tc.job.GPUs = 5, "gpu", 1
			snap, err := bridge.NewSnapshot(epoch, "", nil, []bridge.Job{tc.job})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range look(core, snap, epoch) {
				got = append(got, string(a.Kind))
			}
			if strings.Join(got, ",") != strings.Join(tc.wantActions, ",") {
				t.Errorf("actions %v, want %v", got, tc.wantActions)
			}
			js = core.jobs[keyOf(5)] // the committed state's
			want := time.Time{}
			if tc.wantRecheck > 0 {
				want = epoch.Add(tc.wantRecheck)
			}
			if !js.recheckAt.Equal(want) || !core.NextGraceEnd(epoch).Equal(want) {
				t.Errorf("next check %v (next wake %v), want %v", js.recheckAt, core.NextGraceEnd(epoch), want)
			}
		})
	}
}

func TestEstimateSources(t *testing.T) {
	table, _ := throughputs.Reference()
	core, err := NewCore(settings(), TableEstimator{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	if err := core.syncCluster([]roundsServer{{ID: "a", Type: "v100", GPUs: 4}, {ID: "b", Type: "k80", GPUs: 4}, {ID: "c", Type: "a100", GPUs: 4}}, 0); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		model      string
		scale      int
		wantSource string
		wantV100   float64
		wantA100   float64
	}{
		// Values read from etc/gavel-simulation-throughputs.json.
		{"resnet50-bs64", 4, "reference table: ResNet-50 (batch size 64) x4 (types outside", 9.451949566394442, -1},
		{"A3C", 2, "default: equal on every type (A3C has no entry for 2 GPUs)", 1, 1},
		{"my-new-model", 1, "default: equal on every type (model not in the reference table)", 1, 1},
		{"", 1, "default: equal on every type (no model in the tag)", 1, 1},
	}
	for _, tc := range tests {
		_, tput, source := core.estimate(tc.model, tc.scale)
		if !strings.HasPrefix(source, tc.wantSource) {
			t.Errorf("%s x%d: source %q, want %q", tc.model, tc.scale, source, tc.wantSource)
		}
		if tput["v100"] != tc.wantV100 {
			t.Errorf("%s x%d: v100 %v, want %v", tc.model, tc.scale, tput["v100"], tc.wantV100)
		}
		if tc.wantA100 >= 0 && tput["a100"] != tc.wantA100 {
			t.Errorf("%s x%d: a100 %v", tc.model, tc.scale, tput["a100"])
		}
	}
	// A type outside the table is assumed as slow as the model's slowest.
	_, tput, _ := core.estimate("resnet50-bs64", 4)
	if tput["a100"] != min(tput["k80"], tput["v100"]) || tput["a100"] == 0 {
		t.Errorf("a100 estimate %v, k80 %v", tput["a100"], tput["k80"])
	}
}

// Changing a job's type keeps its own features and replaces the type.
func TestRunActionsKeepTheJobsOwnFeatures(t *testing.T) {
	table, _ := throughputs.Reference()
	core, err := NewCore(settings(), TableEstimator{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	core.addTypes("v100", "k80")
	j := bridge.Job{ID: 3, State: bridge.JobPending, GPUs: 1, Constraints: "ib&k80"}
	acts := core.runActions(j, "v100", "test")
	if len(acts) == 0 || acts[0].Kind != bridge.ActSetConstraints || acts[0].Constraints != "ib&v100" {
		t.Errorf("moving to v100 sends %v, want constraints ib&v100 first", acts)
	}
}
