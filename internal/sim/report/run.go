package report

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gavel-slurm/gavel-slurm/internal/sim"
)

// WriteSummary prints a run's measurements for people, one aligned line per
// quantity, times in hours. Cost and SLO lines appear only when the run
// had prices or deadlines, the isolated FTF only when a run of the
// isolated policy was made to compare with.
func WriteSummary(w io.Writer, r *sim.Result) {
	h := func(s float64) string { return fmt.Sprintf("%.2f h", s/3600) }
	fmt.Fprintf(w, "policy            %s\n", r.Policy)
	fmt.Fprintf(w, "jobs measured     %d (of %d admitted)\n", r.JobsMeasured, r.JobsAdmitted)
	fmt.Fprintf(w, "JCT avg/p50/p95   %s / %s / %s\n", h(r.AvgJCT), h(r.P50JCT), h(r.P95JCT))
	fmt.Fprintf(w, "makespan          %s\n", h(r.Makespan))
	var util []string
	for _, t := range append(append([]string(nil), r.Types...), "all") {
		util = append(util, fmt.Sprintf("%s %.1f%%", t, 100*r.Utilization[t]))
	}
	fmt.Fprintf(w, "utilization       %s\n", strings.Join(util, ", "))
	fmt.Fprintf(w, "online FTF rho    mean %.3f, p95 %.3f (%.1f%% of jobs > 1)\n", r.FTF.Mean, r.FTF.P95, 100*r.FTF.AboveOne)
	if r.FTFIsolated > 0 {
		fmt.Fprintf(w, "FTF vs isolated   %.3f (mean of JCT / JCT under the isolated policy)\n", r.FTFIsolated)
	}
	if r.Cost > 0 {
		fmt.Fprintf(w, "cost              %.2f\n", r.Cost)
	}
	if r.SLOJobs > 0 {
		fmt.Fprintf(w, "SLO violations    %d of %d\n", r.SLOViolations, r.SLOJobs)
	}
	fmt.Fprintf(w, "rounds            %d (%d allocations, %d preemptions, %d lease extensions)\n", r.Rounds, r.Allocations, r.Preemptions, r.LeaseExtensions)
	if r.RestartLost > 0 {
		fmt.Fprintf(w, "restart time lost %s over %d restarts (%.1f GPU-h)\n", h(r.RestartLost), r.Restarts, r.RestartLostGPU/3600)
	}
	fmt.Fprintf(w, "solver            %d LPs (largest %d rows x %d columns), at most %d jobs in the system\n",
		r.LPs, r.LargestLP[0], r.LargestLP[1], r.PeakActive)
	fmt.Fprintf(w, "wall time         %.2f s (solver %.2f s)\n", r.WallSeconds, r.SolverSeconds)
}

// WriteJobs writes one CSV line per admitted job of a run: identity,
// arrival, start and finish (-1 when unfinished), JCT, whether it was
// measured, its online finish-time fairness ρ and its time on each GPU type (one
// time_<type>_s column per type, in the result's type order).
func WriteJobs(w io.Writer, r *sim.Result) error {
	cw := csv.NewWriter(w)
	header := []string{"id", "model", "scale_factor", "priority", "arrival_s", "start_s", "finish_s", "jct_s", "measured", "ftf_online_rho"}
	for _, t := range r.Types {
		header = append(header, "time_"+t+"_s")
	}
	cw.Write(header)
	for _, j := range r.Jobs {
		row := []string{strconv.Itoa(j.ID), j.Model, strconv.Itoa(j.ScaleFactor), num(j.Priority), num(j.Arrival),
			num(j.Start), num(j.Finish), num(j.JCT()), strconv.FormatBool(j.Measured), num(j.FTF)}
		for _, s := range j.TimePerType {
			row = append(row, num(s))
		}
		cw.Write(row)
	}
	// csv.Writer keeps its first error; Flush surfaces it.
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("jobs CSV: %w", err)
	}
	return nil
}
