package sim

import (
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/internal/workload"
)

// referenceRun simulates the paper's continuous single-GPU workload on the
// 36/36/36 cluster: jobs arrive at rate jobs/hour. With end > 0 jobs
// [first, end) are measured and the run stops once they finish; with
// end == 0 exactly total jobs are generated and all are run to completion.
func referenceRun(tb testing.TB, policyName string, rate float64, first, end, total int, seed int64) *Result {
	tb.Helper()
	cfg, err := Defaults()
	if err != nil {
		tb.Fatal(err)
	}
	cfg.GPUs = map[string]int{"v100": 36, "p100": 36, "k80": 36}
	cfg.PolicyName = policyName
	cfg.Seed = seed
	cfg.FirstMeasured, cfg.EndMeasured = first, end
	cfg.Clock = time.Now
	gen, err := workload.NewGenerator(cfg.Table, workload.GeneratorOptions{Rate: rate, Jobs: total, Seed: seed})
	if err != nil {
		tb.Fatal(err)
	}
	res, err := Run(cfg, gen)
	if err != nil {
		tb.Fatal(err)
	}
	return res
}

// BenchmarkContinuous9000 is one simulation of a 9,000-job continuous trace
// at 5.6 jobs/hour on 36 GPUs of each type with max_min_fairness_perf, run
// until every job has finished.
func BenchmarkContinuous9000(b *testing.B) {
	for b.Loop() {
		res := referenceRun(b, "max_min_fairness_perf", 5.6, 0, 0, 9000, 0)
		b.ReportMetric(res.AvgJCT/3600, "avg_jct_h")
		b.ReportMetric(res.SolverSeconds, "solver_s")
		b.ReportMetric(float64(res.JobsAdmitted), "jobs")
	}
}

// BenchmarkWindow4000 is one point of the paper's sweep: measure jobs
// 4000-4999 of the unbounded continuous workload at 5.6 jobs/hour.
func BenchmarkWindow4000(b *testing.B) {
	for b.Loop() {
		res := referenceRun(b, "max_min_fairness_perf", 5.6, 4000, 5000, 0, 0)
		b.ReportMetric(res.AvgJCT/3600, "avg_jct_h")
		b.ReportMetric(res.SolverSeconds, "solver_s")
	}
}
