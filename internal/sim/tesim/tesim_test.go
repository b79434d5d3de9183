package tesim

import (
	"math"
	"slices"
	"testing"

	"github.com/gavel-slurm/gavel-slurm/internal/tepreempt"
)

// oneNode is a single node of 8 GPUs, nothing else tracked.
var oneNode = Cluster{Nodes: 1, Node: tepreempt.Resources{GPUs: 8}}

func gpuJob(id int, te bool, gpus, minutes, grace, arrival int) Job {
	return Job{ID: id, TE: te, Demand: tepreempt.Resources{GPUs: gpus}, Minutes: minutes, Grace: grace, Arrival: arrival}
}

func TestArrivalsKeepTheLoad(t *testing.T) {
	// Jobs of 4 GPUs and 10 minutes on 8 GPUs at load 2: four jobs at 0
	// (16 GPUs in the system); two finish at 10 and two more come in;
	// and so on.
	jobs := make([]Job, 10)
	for i := range jobs {
		jobs[i] = gpuJob(i, false, 4, 10, 0, -1)
	}
	if err := Arrivals(jobs, oneNode, 2); err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, j := range jobs {
		got = append(got, j.Arrival)
	}
	if want := []int{0, 0, 0, 0, 10, 10, 20, 20, 30, 30}; !slices.Equal(got, want) {
		t.Fatalf("arrivals %v, want %v", got, want)
	}
}

func TestHandCheckedRuns(t *testing.T) {
	// One node of 8 GPUs. A BE job takes it all at minute 0 for 10
	// minutes (grace 2). TE job a (2 GPUs, 5 min) arrives at 1, TE job b
	// (same) at 9.
	jobs := []Job{
		gpuJob(0, false, 8, 10, 2, 0),
		gpuJob(1, true, 2, 5, 0, 1),
		gpuJob(2, true, 2, 5, 0, 9),
	}
	cases := []struct {
		name      string
		chooser   tepreempt.Chooser
		slowdown  []float64
		preempted []int
		intervals []float64
	}{
		// FIFO: a and b wait for the BE job and run side by side 10-15.
		{"fifo", nil, []float64{1, 14.0 / 5, 6.0 / 5}, []int{0, 0, 0}, nil},
		// Cap 1: a preempts at 1, starts at 3 after the grace, ends at 8;
		// the BE job (9 min left) restarts at 8 and ends at 17. b cannot
		// preempt it again and waits: 17-22.
		{"fitgpp cap 1", tepreempt.FitGpp{Weight: 1, MaxPreemptions: 1},
			[]float64{17.0 / 10, 7.0 / 5, 13.0 / 5}, []int{1, 0, 0}, []float64{7}},
		// No cap: b preempts it again at 9 (8 min left), runs 11-16; the
		// BE job restarts at 16 and ends at 24.
		{"fitgpp no cap", tepreempt.FitGpp{Weight: 1},
			[]float64{24.0 / 10, 7.0 / 5, 7.0 / 5}, []int{2, 0, 0}, []float64{7, 7}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Run(slices.Clone(jobs), oneNode, tc.chooser)
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range tc.slowdown {
				if math.Abs(out.Slowdown[i]-want) > 1e-12 {
					t.Errorf("job %d: slowdown %v, want %v", i, out.Slowdown[i], want)
				}
			}
			if !slices.Equal(out.Preempted, tc.preempted) || !slices.Equal(out.Intervals, tc.intervals) {
				t.Errorf("preempted %v intervals %v, want %v %v", out.Preempted, out.Intervals, tc.preempted, tc.intervals)
			}
		})
	}
}

func TestZeroGraceStartsTheTEJobAtOnce(t *testing.T) {
	jobs := []Job{gpuJob(0, false, 8, 10, 0, 0), gpuJob(1, true, 8, 5, 0, 3)}
	out, err := Run(jobs, oneNode, tepreempt.FitGpp{Weight: 1, MaxPreemptions: 1})
	if err != nil {
		t.Fatal(err)
	}
	// TE 3-8; the BE job ran 3 minutes, resumes at 8 for 7: ends at 15.
	if out.Slowdown[1] != 1 || out.Slowdown[0] != 1.5 {
		t.Fatalf("slowdowns %v, want BE 1.5 and TE 1", out.Slowdown)
	}
}

func TestPreemptedJobsGoBackToTheHead(t *testing.T) {
	// BE 0 (6 GPUs) and BE 1 (2 GPUs) fill the node; BE 2 (6 GPUs)
	// queues. TE 3 (8 GPUs) arrives at 2: no single job frees enough, so
	// both go (grace 1), and on their return they are ahead of BE 2.
	jobs := []Job{
		gpuJob(0, false, 6, 10, 1, 0),
		gpuJob(1, false, 2, 10, 1, 0),
		gpuJob(2, false, 6, 10, 1, 0),
		gpuJob(3, true, 8, 4, 0, 2),
	}
	out, err := Run(jobs, oneNode, tepreempt.FitGpp{Weight: 1})
	if err != nil {
		t.Fatal(err)
	}
	// TE 3-7. Then BE 0 and BE 1 (8 minutes left each) 7-15; BE 2 15-25.
	want := []float64{1.5, 1.5, 2.5, 5.0 / 4}
	if !slices.Equal(out.Slowdown, want) || out.Rules[tepreempt.RuleCombined] != 1 {
		t.Fatalf("slowdowns %v rules %v, want %v and one combined choice", out.Slowdown, out.Rules, want)
	}
}

func TestRunsAreRepeatable(t *testing.T) {
	x := Experiment{Cluster: Cluster{Nodes: 6, Node: PaperCluster().Node}, Workload: PaperWorkload(), Load: 2, Jobs: 600, Workloads: 2, Seed: 5, Repeats: 2}
	for _, m := range Methods {
		a, err := x.Run(m, Settings{Weight: 4, Cap: 1})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := x.Run(m, Settings{Weight: 4, Cap: 1})
		if a.TE != b.TE || a.BE != b.BE || a.PreemptedJobs != b.PreemptedJobs {
			t.Errorf("%s: %+v then %+v", m, a, b)
		}
	}
}

// At a small scale the experiment keeps the paper's direction: TE jobs
// wait far less under any preemptive method than under FIFO, and FitGpp
// preempts fewer jobs than the baselines.
func TestPreemptionHelpsTEJobs(t *testing.T) {
	x := Experiment{Cluster: Cluster{Nodes: 12, Node: PaperCluster().Node}, Workload: PaperWorkload(), Load: 2, Jobs: 3000, Workloads: 1, Seed: 1, Repeats: 1}
	res := map[string]Result{}
	for _, m := range Methods {
		s := Settings{Weight: 4}
		if m == "fitgpp" {
			s.Cap = 1
		}
		r, err := x.Run(m, s)
		if err != nil {
			t.Fatal(err)
		}
		res[m] = r
	}
	for _, m := range []string{"lrtp", "random", "fitgpp"} {
		if res[m].TE.P95 > res["fifo"].TE.P95/4 {
			t.Errorf("%s: TE 95th %.2f, FIFO %.2f", m, res[m].TE.P95, res["fifo"].TE.P95)
		}
	}
	if res["fifo"].PreemptedJobs != 0 {
		t.Errorf("FIFO preempted %v of the jobs", res["fifo"].PreemptedJobs)
	}
	if f := res["fitgpp"]; f.PreemptedJobs >= res["lrtp"].PreemptedJobs || f.PreemptedJobs >= res["random"].PreemptedJobs || f.PreemptedTimes[1] != 0 {
		t.Errorf("preempted: fitgpp %v (%v), lrtp %v, random %v", f.PreemptedJobs, f.PreemptedTimes, res["lrtp"].PreemptedJobs, res["random"].PreemptedJobs)
	}
}

func TestBadInput(t *testing.T) {
	if _, err := Run([]Job{gpuJob(0, false, 9, 1, 0, 0)}, oneNode, nil); err == nil {
		t.Error("a job larger than a node ran")
	}
	if _, err := Run([]Job{gpuJob(1, false, 1, 1, 0, 0)}, oneNode, nil); err == nil {
		t.Error("IDs out of order accepted")
	}
	if _, err := Generate(Workload{TEFraction: 2}, 1, 1); err == nil {
		t.Error("TE fraction 2 accepted")
	}
	if _, err := NewChooser("sjf", Settings{}, 0); err == nil {
		t.Error("unknown method accepted")
	}
}

func TestPercentiles(t *testing.T) {
	v := make([]float64, 101)
	for i := range v {
		v[len(v)-1-i] = float64(i) // reversed: the function sorts
	}
	if p := percentiles(v); p != (Percentiles{50, 95, 99}) {
		t.Errorf("got %+v", p)
	}
	if p := percentiles(nil); p != (Percentiles{}) {
		t.Errorf("no values: got %+v", p)
	}
	if p := percentiles([]float64{1, 2}); p.P50 != 1.5 {
		t.Errorf("got %+v", p)
	}
}
