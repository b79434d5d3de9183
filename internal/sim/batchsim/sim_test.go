package batchsim

import (
	"math"
	"strings"
	"testing"
)

func defaults(t *testing.T) Config {
	t.Helper()
	cfg, err := Defaults()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestGenerate(t *testing.T) {
	cfg := defaults(t)
	jobs, err := Generate(cfg.Table, WorkloadOptions{Jobs: 400, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	again, err := Generate(cfg.Table, WorkloadOptions{Jobs: 400, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	other, err := Generate(cfg.Table, WorkloadOptions{Jobs: 400, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	same := 0
	perClass := map[SizeClass]int{}
	perScale := map[int]int{}
	for i, j := range jobs {
		if j != again[i] {
			t.Fatalf("job %d differs under the same seed: %+v vs %+v", i, j, again[i])
		}
		if j == other[i] {
			same++
		}
		lo, hi := j.Class.GPUHours()
		if j.GPUHours < lo || j.GPUHours > hi {
			t.Errorf("job %s: %v GPU-hours outside class %s [%v, %v]", j.ID, j.GPUHours, j.Class, lo, hi)
		}
		fam := false
		for _, f := range families[j.Class] {
			fam = fam || strings.HasPrefix(j.Model, f)
		}
		if !fam {
			t.Errorf("job %s: model %s is not of class %s", j.ID, j.Model, j.Class)
		}
		// The work is the GPU-hours at the V100 rate.
		wantSteps := j.GPUHours * 3600 / float64(j.Scale) * cfg.Table.Isolated(j.Model, j.Scale, "v100")
		if math.Abs(j.Steps-wantSteps) > 1e-9*wantSteps {
			t.Errorf("job %s: %v steps, want %v", j.ID, j.Steps, wantSteps)
		}
		perClass[j.Class]++
		perScale[j.Scale]++
	}
	if same > 0 {
		t.Errorf("%d jobs identical under another seed", same)
	}
	for _, c := range Classes {
		if perClass[c] < 60 || perClass[c] > 140 {
			t.Errorf("class %s drawn %d times of 400, expected about 100", c, perClass[c])
		}
	}
	if perScale[1] < 240 || perScale[8] == 0 || perScale[8] > 50 {
		t.Errorf("scales %v far from the Philly mix", perScale)
	}

	only, err := Generate(cfg.Table, WorkloadOptions{Jobs: 50, Seed: 1, Weights: [4]float64{1, 0, 0, 0}, ScaleWeights: [4]float64{0, 0, 0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range only {
		if j.Class != Small || j.Scale != 8 || !strings.HasPrefix(j.Model, "ResNet-18") {
			t.Fatalf("weights ignored: %+v", j)
		}
	}
	if _, err := Generate(cfg.Table, WorkloadOptions{Jobs: 5, Weights: [4]float64{-1, 1, 1, 1}}); err == nil {
		t.Error("negative weight accepted")
	}
}

// The paper's motivating case: an 8-GPU job on a cluster with four V100
// and four K80 (one server each) never fits one type. Without mixed types
// the batch cannot run; with them the job runs on both servers at its K80
// rate, times the span factor, and finishes when that work is done.
func TestMixedRunsWhatGavelCannot(t *testing.T) {
	cfg := defaults(t)
	cfg.GPUs = map[string]int{"v100": 4, "k80": 4}
	model := "ResNet-50 (batch size 64)"
	k80 := cfg.Table.Isolated(model, 8, "k80")
	steps := k80 * cfg.SpanFactor * 3000 // 3000 s of work on the mix
	batch := []Job{{ID: "0", Model: model, Scale: 8, Steps: steps}}

	if _, err := Run(cfg, batch); err == nil || !strings.Contains(err.Error(), "no job can run") {
		t.Fatalf("without mixed types: %v, want the batch refused", err)
	}
	cfg.MixedTypes = true
	res, err := Run(cfg, batch)
	if err != nil {
		t.Fatal(err)
	}
	// One restart overhead at the start, then uninterrupted (same GPUs).
	want := cfg.RestartOverhead + 3000
	if math.Abs(res.Makespan-want) > 1e-6 {
		t.Errorf("makespan %v s, want %v", res.Makespan, want)
	}
	if res.FluidBound != 0 {
		t.Errorf("fluid bound %v for a job no single type fits, want 0 (none)", res.FluidBound)
	}
	if res.MixedGPUShare != 1 || res.Restarts != 0 {
		t.Errorf("mixed share %v, restarts %d: want all on the mix, no restart", res.MixedGPUShare, res.Restarts)
	}
	if math.Abs(res.Utilization-1) > 1e-9 {
		t.Errorf("utilization %v, want 1 (all 8 GPUs held throughout)", res.Utilization)
	}
}

// Forking: one single-GPU job on two servers runs a copy on the other
// server and finishes in about half the time, less the averaging cost.
func TestForkSplitsAJob(t *testing.T) {
	cfg := defaults(t)
	cfg.GPUs = map[string]int{"v100": 8}
	model := "ResNet-18 (batch size 64)"
	rate := cfg.Table.Isolated(model, 1, "v100")
	batch := []Job{{ID: "0", Model: model, Scale: 1, Steps: rate * 20 * 3600}}
	alone, err := Run(cfg, batch)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ForkCopies = 1
	forked, err := Run(cfg, batch)
	if err != nil {
		t.Fatal(err)
	}
	if want := cfg.RestartOverhead + 20*3600; math.Abs(alone.Makespan-want) > 1e-6 {
		t.Errorf("alone: makespan %v, want %v", alone.Makespan, want)
	}
	// Two copies at the same rate; every round loses ForkSync, the first
	// also the restart.
	perRound := 2 * rate * (cfg.RoundSeconds - cfg.ForkSync)
	work := rate * 20 * 3600
	first := 2 * rate * (cfg.RoundSeconds - cfg.ForkSync - cfg.RestartOverhead)
	full := math.Floor((work - first) / perRound)
	left := work - first - full*perRound
	want := cfg.RoundSeconds*(1+full) + cfg.ForkSync + left/(2*rate)
	if math.Abs(forked.Makespan-want) > 1e-6 {
		t.Errorf("forked: makespan %v, want %v", forked.Makespan, want)
	}
	if forked.ForkedCopyRounds == 0 || forked.Makespan > 0.55*alone.Makespan {
		t.Errorf("forked %v s vs alone %v s with %d copy rounds", forked.Makespan, alone.Makespan, forked.ForkedCopyRounds)
	}
}

// On Hadar's cluster, a batch of mostly multi-GPU jobs: every job
// finishes, utilization is a share, and mixed types never leave more GPU
// time idle than the per-type walk alone (they only use GPUs it leaves).
func TestBatchAccounting(t *testing.T) {
	cfg := defaults(t)
	jobs, err := Generate(cfg.Table, WorkloadOptions{Jobs: 60, Seed: 7, ScaleWeights: [4]float64{1, 2, 3, 2}})
	if err != nil {
		t.Fatal(err)
	}
	var results []*Result
	for _, mixed := range []bool{false, true} {
		c := cfg
		c.MixedTypes = mixed
		res, err := Run(c, jobs)
		if err != nil {
			t.Fatal(err)
		}
		if res.Jobs != len(jobs) || res.Makespan <= 0 || res.AverageJCT > res.Makespan || res.MedianJCT > res.Makespan {
			t.Errorf("mixed=%v: %+v", mixed, res)
		}
		if res.Utilization <= 0 || res.Utilization > 1+1e-9 {
			t.Errorf("mixed=%v: utilization %v", mixed, res.Utilization)
		}
		for typ, u := range res.UtilizationByType {
			if u < 0 || u > 1+1e-9 {
				t.Errorf("mixed=%v: %s utilization %v", mixed, typ, u)
			}
		}
		if !mixed && res.MixedJobRounds != 0 {
			t.Errorf("mixes without mixed types: %d", res.MixedJobRounds)
		}
		results = append(results, res)
	}
	if results[1].MixedJobRounds == 0 {
		t.Error("no job ever ran on a mix in a batch of multi-GPU jobs")
	}
}

func TestRunRefuses(t *testing.T) {
	batch := []Job{{ID: "0", Model: "ResNet-18 (batch size 64)", Scale: 1, Steps: 10}}
	tests := []struct {
		name   string
		change func(*Config)
	}{
		{"servers that do not divide a type", func(c *Config) { c.GPUs = map[string]int{"v100": 6} }},
		{"span factor 0", func(c *Config) { c.SpanFactor = 0 }},
		{"overheads longer than a round", func(c *Config) { c.RestartOverhead = 300; c.ForkSync = 60 }},
		{"negative copies", func(c *Config) { c.ForkCopies = -1 }},
		{"unknown policy", func(c *Config) { c.Policy = "nope" }},
		{"a packing policy", func(c *Config) { c.Policy = "max_min_fairness_packed" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := defaults(t)
			tt.change(&cfg)
			if _, err := Run(cfg, batch); err == nil {
				t.Error("accepted")
			}
		})
	}
}
