package whatif

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/internal/history"
	"github.com/gavel-slurm/gavel-slurm/internal/sim"
	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
	"github.com/gavel-slurm/gavel-slurm/rounds"
)

var t0 = time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// hjob is a finished history job: submitted at submit, run from start to
// end on gpus GPUs of typ.
func hjob(id int, account, typ string, gpus int, submit, start, end float64) history.Job {
	return history.Job{ID: strconv.Itoa(id), JobID: id, ArrayTaskID: -1, User: account + "-user", Account: account,
		Partition: "gpu", Submit: at(submit), Eligible: at(submit), Start: at(start), End: at(end),
		GPUs: gpus, GPUType: typ, State: "COMPLETED"}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

func TestBuildTakesRatesFromTheFirstSourceThatKnowsTheJob(t *testing.T) {
	ref, err := throughputs.Reference()
	if err != nil {
		t.Fatal(err)
	}
	cluster := Cluster{GPUs: map[string]int{"v100": 4, "k80": 4, "p100": 4}}
	measured := func(model string, gpus int) map[string]float64 {
		if model == "measured-model" && gpus == 1 {
			return map[string]float64{"v100": 4, "p100": 2, "k80": 1}
		}
		return nil
	}
	jobs := []history.Job{
		hjob(1, "physics", "v100", 1, 0, 0, 100),
		hjob(2, "physics", "k80", 1, 0, 0, 100),
		hjob(3, "biology", "p100", 1, 0, 0, 100),
		hjob(4, "biology", "v100", 1, 0, 0, 100),
	}
	jobs[0].Comment = "gavel: model=measured-model"
	jobs[1].Comment = "gavel: model=resnet50-bs64" // an alias of the reference table
	jobs[2].Comment = "gavel: model=unknown-model"
	w, err := Build(&history.History{Jobs: jobs}, cluster, Sources{Measured: measured, Reference: ref,
		Speed: map[string]float64{"v100": 3, "p100": 2, "k80": 1}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"1": SourceMeasured, "2": SourceReference, "3": SourceSpeed, "4": SourceSpeed}
	for _, j := range w.Jobs {
		if j.Source != want[j.ID] {
			t.Errorf("job %s: source %q, want %q", j.ID, j.Source, want[j.ID])
		}
		// The work is 100 s on the type it ran on, whatever the source.
		if got := j.Runtime(j.Ran); !near(got, 100) {
			t.Errorf("job %s: %v s on %s, ran 100 s there", j.ID, got, j.Ran)
		}
	}
	if got := w.Jobs[0].Runtime("k80"); !near(got, 400) {
		t.Errorf("measured job on k80: %v s, want 400 (4x slower)", got)
	}
	r50 := ref.Isolated("ResNet-50 (batch size 64)", 1, "v100") / ref.Isolated("ResNet-50 (batch size 64)", 1, "k80")
	if got := w.Jobs[1].Runtime("v100"); !near(got, 100/r50) {
		t.Errorf("reference job on v100: %v s, want %v", got, 100/r50)
	}
	if got := w.Jobs[2].Runtime("v100"); !near(got, 100*2.0/3) {
		t.Errorf("speed-ratio job on v100: %v s, want 66.7", got)
	}
	if w.Sources[SourceSpeed] != 2 || w.Sources[SourceMeasured] != 1 || w.Sources[SourceReference] != 1 {
		t.Errorf("sources %v", w.Sources)
	}
	if w.Tagged != 3 {
		t.Errorf("%d tagged jobs, want 3", w.Tagged)
	}

	// Without speed ratios the untagged jobs run at one speed everywhere,
	// and the report says so.
	w, err = Build(&history.History{Jobs: jobs}, cluster, Sources{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if w.Sources[SourceEqual] != 4 {
		t.Errorf("sources %v, want 4 at equal speed", w.Sources)
	}
	if got := w.Jobs[0].Runtime("k80"); !near(got, 100) {
		t.Errorf("equal-speed job on k80: %v s, want 100", got)
	}
}

func TestBuildLeavesOutWhatItCannotReplayAndSaysWhy(t *testing.T) {
	cluster := Cluster{GPUs: map[string]int{"v100": 2, "k80": 4}, PerServer: map[string]int{"v100": 2, "k80": 2}}
	jobs := []history.Job{
		hjob(1, "a", "v100", 1, 0, 0, 10),
		hjob(2, "a", "", 1, 0, 0, 10),     // type unknown in a two-type cluster
		hjob(3, "a", "a100", 1, 0, 0, 10), // not in the cluster
		hjob(4, "a", "v100", 4, 0, 0, 10), // more than the cluster's v100s
		hjob(5, "a", "v100", 1, 0, 5, 5),  // no run time
	}
	h := &history.History{Jobs: jobs, Skipped: []history.Skip{{ID: "9", Reason: "no GPUs"}}}
	w, err := Build(h, cluster, Sources{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Jobs) != 1 || w.Jobs[0].ID != "1" {
		t.Fatalf("kept %v", w.Jobs)
	}
	want := map[string]string{"9": "no GPUs", "2": ReasonTypeUnknown, "3": ReasonTypeNotHere, "4": ReasonTooBig, "5": ReasonNoRuntime}
	if len(w.Skipped) != len(want) {
		t.Fatalf("skipped %v", w.Skipped)
	}
	for _, s := range w.Skipped {
		if want[s.ID] != s.Reason {
			t.Errorf("job %s left out for %q, want %q", s.ID, s.Reason, want[s.ID])
		}
	}
	if _, err := Build(h, Cluster{GPUs: map[string]int{"v100": 3}, PerServer: map[string]int{"v100": 2}}, Sources{}, Options{}); err == nil {
		t.Error("a cluster of 3 GPUs in nodes of 2 was accepted")
	}
}

func TestBuildPinsTypedRequestsOnlyWhenAsked(t *testing.T) {
	cluster := Cluster{GPUs: map[string]int{"v100": 1, "k80": 1}}
	j := hjob(1, "a", "v100", 1, 0, 20, 30)
	j.RequestedType = "v100"
	j.Eligible = at(15)
	for _, tc := range []struct {
		typed  Typed
		pinned string
		k80    bool
	}{{TypedPinned, "v100", false}, {TypedFree, "", true}} {
		w, err := Build(&history.History{Jobs: []history.Job{j}}, cluster, Sources{}, Options{Typed: tc.typed})
		if err != nil {
			t.Fatal(err)
		}
		got := w.Jobs[0]
		if got.Pinned != tc.pinned || (got.Rates["k80"] > 0) != tc.k80 {
			t.Errorf("%s: pinned %q, k80 rate %v", tc.typed, got.Pinned, got.Rates["k80"])
		}
		if got.Arrival != 15 || got.Submit != 0 {
			t.Errorf("arrival %v submit %v, want the eligible time 15 and 0", got.Arrival, got.Submit)
		}
	}
}

// workloadOf builds a one-type workload where each job's work is its
// length there.
func workloadOf(t *testing.T, gpus, perNode int, jobs ...history.Job) *Workload {
	t.Helper()
	w, err := Build(&history.History{Jobs: jobs}, Cluster{GPUs: map[string]int{"v100": gpus}, PerServer: map[string]int{"v100": perNode}},
		Sources{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestSlurmReplayBackfillsOnlyWhatDelaysNoReservation(t *testing.T) {
	a := hjob(1, "a", "v100", 1, 0, 0, 100)
	a.Priority = 40
	b := hjob(2, "a", "v100", 2, 1, 100, 150) // needs both GPUs: reserved at 100
	b.Priority = 30
	c := hjob(3, "a", "v100", 1, 2, 2, 52) // fits before the reservation
	c.Priority = 20
	d := hjob(4, "a", "v100", 1, 3, 150, 350) // would delay b
	d.Priority = 10
	for _, j := range []*history.Job{&a, &b, &c, &d} {
		j.TimeLimit = j.End.Sub(j.Start)
	}
	w := workloadOf(t, 2, 2, a, b, c, d)
	s, err := ReplaySlurm(w)
	if err != nil {
		t.Fatal(err)
	}
	starts := map[string]float64{}
	for i, j := range w.Jobs {
		starts[j.ID] = s.Start[i]
		if !near(s.End[i]-s.Start[i], j.RealEnd-j.RealStart) {
			t.Errorf("job %s ran %v s, really %v", j.ID, s.End[i]-s.Start[i], j.RealEnd-j.RealStart)
		}
	}
	want := map[string]float64{"1": 0, "2": 100, "3": 2, "4": 150}
	for id, w := range want {
		if !near(starts[id], w) {
			t.Errorf("job %s started at %v, want %v", id, starts[id], w)
		}
	}
	// The history was exactly this schedule: no error.
	r := Assemble(w, s, nil, nil)
	if !near(r.Error.AvgJCT, 0) || !near(r.Error.AvgWait, 0) {
		t.Errorf("replay of its own schedule off by %v s JCT, %v s wait", r.Error.AvgJCT, r.Error.AvgWait)
	}
}

func TestSlurmReplayStartsByPriorityThenSubmission(t *testing.T) {
	// One GPU: the job with the higher recorded priority goes first even
	// though it came later; equal priorities go by submission.
	a := hjob(1, "a", "v100", 1, 0, 0, 10)
	b := hjob(2, "a", "v100", 1, 1, 20, 30)
	c := hjob(3, "b", "v100", 1, 2, 30, 40)
	d := hjob(4, "b", "v100", 1, 3, 10, 20)
	a.Priority, b.Priority, c.Priority, d.Priority = 5, 5, 1, 9
	w := workloadOf(t, 1, 1, a, b, c, d)
	s, err := ReplaySlurm(w)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for i, j := range w.Jobs {
		got[j.ID] = s.Start[i]
	}
	// a starts at 0 alone; at 10 d (priority 9), then b, then c.
	want := map[string]float64{"1": 0, "4": 10, "2": 20, "3": 30}
	for id, v := range want {
		if got[id] != v {
			t.Errorf("job %s started at %v, want %v (all %v)", id, got[id], v, got)
		}
	}
}

func TestSlurmReplayMovesUntypedJobsToAnyFreeType(t *testing.T) {
	cluster := Cluster{GPUs: map[string]int{"v100": 1, "k80": 1}}
	a := hjob(1, "a", "v100", 1, 0, 0, 100)
	b := hjob(2, "a", "v100", 1, 0, 100, 200)
	b.RequestedType = "v100"
	c := hjob(3, "a", "v100", 1, 0, 200, 300)
	w, err := Build(&history.History{Jobs: []history.Job{a, b, c}}, cluster, Sources{Speed: map[string]float64{"v100": 2, "k80": 1}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := ReplaySlurm(w)
	if err != nil {
		t.Fatal(err)
	}
	// a takes the v100; b asked for a v100 and waits for it; c takes the
	// k80 at once and runs twice as long there.
	if s.Type[0] != "v100" || s.Type[1] != "v100" || s.Type[2] != "k80" {
		t.Fatalf("types %v", s.Type)
	}
	if !near(s.Start[1], 100) || !near(s.Start[2], 0) || !near(s.End[2], 200) {
		t.Errorf("starts %v ends %v", s.Start, s.End)
	}
}

func TestPolicyReplayUsesTheFasterTypeAndReports(t *testing.T) {
	cluster := Cluster{GPUs: map[string]int{"v100": 1, "k80": 1}}
	var jobs []history.Job
	for i := 1; i <= 4; i++ {
		account := "physics"
		if i%2 == 0 {
			account = "biology"
		}
		jobs = append(jobs, hjob(i, account, "k80", 1, float64(10*i), float64(400*i), float64(400*i+1800)))
	}
	w, err := Build(&history.History{Jobs: jobs}, cluster, Sources{Speed: map[string]float64{"v100": 3, "k80": 1}}, Options{Typed: TypedFree})
	if err != nil {
		t.Fatal(err)
	}
	base, err := sim.Defaults()
	if err != nil {
		t.Fatal(err)
	}
	base.RoundSeconds = 60
	base.MinResetInterval = 0
	base.Mechanism = rounds.VariantRestart
	var progressed []string
	r, err := Run(w, Settings{Policies: []string{"max_min_fairness_perf", "fifo"}, Seeds: []int64{0, 1}, Sim: base, Workers: 2},
		func(done, total int, name string) { progressed = append(progressed, name) })
	if err != nil {
		t.Fatal(err)
	}
	if len(progressed) != 6 {
		t.Errorf("progress told of %v, want 6 replays", progressed)
	}
	if len(r.Runs) != 4 || len(r.Policies) != 2 || len(r.Failed) != 0 {
		t.Fatalf("runs %d policies %d failed %v", len(r.Runs), len(r.Policies), r.Failed)
	}
	// Every job ran 1800 s on a k80 in the history; a replay that uses
	// the v100 (3x) as well must finish the same work sooner.
	for _, f := range r.Runs {
		if f.Jobs != 4 || !(f.AvgJCT < r.Real.AvgJCT) {
			t.Errorf("%s: %d jobs, avg JCT %v, history %v", f.Name, f.Jobs, f.AvgJCT, r.Real.AvgJCT)
		}
		if f.FTF == nil || !(f.FTF.Mean > 0) {
			t.Errorf("%s: no finish-time fairness", f.Name)
		}
		share := 0.0
		for _, a := range f.Accounts {
			share += a.Share
		}
		if !near(share, 1) {
			t.Errorf("%s: shares add up to %v", f.Name, share)
		}
	}
	// Work is conserved in k80-equivalent terms: the history's GPU time
	// was all on k80s.
	if r.Real.Accounts[0].GPUSeconds != 3600 || r.Real.Accounts[1].GPUSeconds != 3600 {
		t.Errorf("history GPU time %v", r.Real.Accounts)
	}
	var out bytes.Buffer
	if err := r.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"slurm replay", "max_min_fairness_perf seed 1", "speed ratios: 4", "biology", "physics"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, out.String())
		}
	}
	if jcts := r.JCTs("fifo seed 0"); len(jcts) != 4 || jcts[0] > jcts[3] {
		t.Errorf("JCTs %v", jcts)
	}
}

func TestTypeOfNodesReadsSlurmHostLists(t *testing.T) {
	types := map[string]string{"v100-1": "v100", "v100-2": "v100", "gpu07": "k80", "gpu08": "k80", "k80-1": "k80"}
	for list, want := range map[string]string{
		"v100-1":           "v100",
		"v100-[1-2]":       "v100",
		"gpu[07-08]":       "k80",
		"gpu[07-08],k80-1": "k80",
		"v100-1,k80-1":     "", // two types
		"v100-[1-3]":       "", // v100-3 unknown
		"":                 "",
	} {
		if got := TypeOfNodes(list, types); got != want {
			t.Errorf("%q: %q, want %q", list, got, want)
		}
	}
	if got := expandHostlist("a[1-2,5],b,c[09-10]x"); strings.Join(got, " ") != "a1 a2 a5 b c09x c10x" {
		t.Errorf("expanded %v", got)
	}
}

// A job past its time limit still holds its GPUs: the job ahead that waits
// for them keeps its reservation, and a long job behind it does not take
// its place (it was planned as free "now" and starved the job ahead).
func TestSlurmReplayKeepsTheReservationBehindAJobPastItsLimit(t *testing.T) {
	x := hjob(1, "a", "v100", 1, 0, 0, 630) // ran past its 600 s limit (TIMEOUT)
	x.Priority, x.TimeLimit = 100, 600*time.Second
	h := hjob(2, "a", "v100", 2, 1, 630, 730)
	h.Priority, h.TimeLimit = 50, 600*time.Second
	l := hjob(3, "a", "v100", 1, 2, 730, 5730)
	l.Priority, l.TimeLimit = 10, 60000*time.Second
	m := hjob(4, "a", "v100", 1, 610, 5730, 5740)
	m.Priority, m.TimeLimit = 1, 600*time.Second
	w := workloadOf(t, 2, 2, x, h, l, m)
	s, err := ReplaySlurm(w)
	if err != nil {
		t.Fatal(err)
	}
	starts := map[string]float64{}
	for i, j := range w.Jobs {
		starts[j.ID] = s.Start[i]
	}
	if starts["2"] != 630 {
		t.Errorf("the 2-GPU job started at %v, want 630 when the job past its limit ends (starts %v)", starts["2"], starts)
	}
	if starts["3"] < 630 {
		t.Errorf("the long job behind it started at %v, before it", starts["3"])
	}
}

func TestBuildLeavesOutAJobThatCannotRunOnTheTypeItAskedFor(t *testing.T) {
	cluster := Cluster{GPUs: map[string]int{"v100": 4, "a100": 2}}
	measured := func(string, int) map[string]float64 { return map[string]float64{"v100": 2, "a100": 0} }
	noRate := hjob(1, "a", "v100", 1, 0, 0, 10)
	noRate.RequestedType, noRate.Comment = "a100", "gavel: model=m"
	tooBig := hjob(2, "a", "v100", 4, 0, 0, 10)
	tooBig.RequestedType = "a100"
	ok := hjob(3, "a", "v100", 1, 0, 0, 10)
	w, err := Build(&history.History{Jobs: []history.Job{noRate, tooBig, ok}}, cluster, Sources{Measured: measured}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Jobs) != 1 || w.Jobs[0].ID != "3" {
		t.Fatalf("kept %v", w.Jobs)
	}
	for _, s := range w.Skipped {
		if s.Reason != ReasonRequestedType {
			t.Errorf("job %s left out for %q", s.ID, s.Reason)
		}
	}
	// Counted only for the job kept.
	if w.Pinned != 0 || w.Tagged != 0 || w.Sources[SourceEqual] != 1 || len(w.Sources) != 1 {
		t.Errorf("pinned %d tagged %d sources %v", w.Pinned, w.Tagged, w.Sources)
	}
	if _, err := ReplaySlurm(w); err != nil {
		t.Error(err)
	}
}

// The share is counted per entity: the account, the user with
// Entities "user", or the tag's entity=.
func TestSharesArePerEntity(t *testing.T) {
	cluster := Cluster{GPUs: map[string]int{"v100": 2}}
	a := hjob(1, "physics", "v100", 1, 0, 0, 100)
	b := hjob(2, "physics", "v100", 1, 0, 0, 300)
	b.Comment = "gavel: entity=teamx"
	for _, tc := range []struct {
		entities string
		want     map[string]float64
	}{
		{"account", map[string]float64{"physics": 0.25, "teamx": 0.75}},
		{"user", map[string]float64{"physics-user": 0.25, "teamx": 0.75}},
	} {
		w, err := Build(&history.History{Jobs: []history.Job{a, b}}, cluster, Sources{}, Options{Entities: tc.entities})
		if err != nil {
			t.Fatal(err)
		}
		r := Assemble(w, w.Real(), nil, nil)
		got := map[string]float64{}
		for _, acc := range r.Real.Accounts {
			got[acc.Name] = acc.Share
		}
		if len(got) != len(tc.want) {
			t.Errorf("%s: shares %v, want %v", tc.entities, got, tc.want)
		}
		for k, v := range tc.want {
			if !near(got[k], v) {
				t.Errorf("%s: shares %v, want %v", tc.entities, got, tc.want)
			}
		}
	}
}
