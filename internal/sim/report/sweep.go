package report

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/gavel-slurm/gavel-slurm/internal/sim"
)

// sweepHeader names the columns of a sweep CSV. Times are in hours except
// the wall and solver times; error is empty for runs with a result.
// ftf_online_rho_mean is the mean of the online ρ (sim.Result.FTF) and
// ftf_isolated the finish-time fairness against the isolated policy's run
// (sim.Result.FTFIsolated, empty when that run did not finish): two
// different metrics, named apart so that neither is read as the other.
var sweepHeader = []string{"policy", "rate_jobs_per_h", "seed", "saturated", "avg_jct_h", "p50_jct_h", "p95_jct_h",
	"makespan_h", "utilization", "jobs_measured", "ftf_online_rho_mean", "ftf_isolated", "preemptions", "wall_s", "solver_s", "allocations", "lps", "peak_active", "error"}

// sweepNeeded are the columns ReadSweep needs; the others are for people
// and other tools.
var sweepNeeded = []string{"policy", "rate_jobs_per_h", "seed", "saturated", "avg_jct_h", "error"}

// WriteSweep writes one CSV line per outcome, in the given order. A run
// without a result (failed or saturated) has empty measurement columns and
// its error in the last one, so a long sweep keeps the runs that worked.
func WriteSweep(w io.Writer, outcomes []sim.Outcome) error {
	cw := csv.NewWriter(w)
	cw.Write(sweepHeader)
	for _, o := range outcomes {
		row := []string{o.Policy, num(o.Rate), strconv.FormatInt(o.Seed, 10), strconv.FormatBool(o.Saturated())}
		if r := o.Result; r != nil {
			row = append(row, num(r.AvgJCT/3600), num(r.P50JCT/3600), num(r.P95JCT/3600), num(r.Makespan/3600),
				num(r.Utilization["all"]), strconv.Itoa(r.JobsMeasured), num(r.FTF.Mean), ftfIsolated(r),
				strconv.Itoa(r.Preemptions), num(r.WallSeconds), num(r.SolverSeconds),
				strconv.Itoa(r.Allocations), strconv.Itoa(r.LPs), strconv.Itoa(r.PeakActive), "")
		} else {
			// Empty measurement columns, then the error.
			for len(row) < len(sweepHeader)-1 {
				row = append(row, "")
			}
			row = append(row, o.Err.Error())
		}
		cw.Write(row)
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("sweep CSV: %w", err)
	}
	return nil
}

// ftfIsolated renders Result.FTFIsolated, empty when it was not measured.
func ftfIsolated(r *sim.Result) string {
	if r.FTFIsolated == 0 {
		return ""
	}
	return num(r.FTFIsolated)
}

// ReadSweep reads the runs of a CSV that WriteSweep wrote: each row's
// policy, rate, seed and average JCT, and its finish-time fairness
// against the isolated run where the CSV has it, or its error (wrapping
// sim.ErrSaturated for a saturated run). Columns are found by name, so
// extra or reordered columns are fine, and CSVs written before a column
// existed still read. name identifies the input in error
// messages, typically its path.
func ReadSweep(r io.Reader, name string) ([]sim.Outcome, error) {
	rows, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("sweep CSV %s: %w", name, err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("sweep CSV %s: empty", name)
	}
	col := map[string]int{}
	for i, c := range rows[0] {
		col[c] = i
	}
	for _, c := range sweepNeeded {
		if _, ok := col[c]; !ok {
			return nil, fmt.Errorf("sweep CSV %s: no %q column", name, c)
		}
	}
	var out []sim.Outcome
	for n, row := range rows[1:] {
		line := n + 2
		if len(row) != len(rows[0]) {
			return nil, fmt.Errorf("sweep CSV %s line %d: %d fields, header has %d", name, line, len(row), len(rows[0]))
		}
		o := sim.Outcome{Point: sim.Point{Policy: row[col["policy"]]}}
		if o.Rate, err = strconv.ParseFloat(row[col["rate_jobs_per_h"]], 64); err != nil {
			return nil, fmt.Errorf("sweep CSV %s line %d: rate: %w", name, line, err)
		}
		if o.Seed, err = strconv.ParseInt(row[col["seed"]], 10, 64); err != nil {
			return nil, fmt.Errorf("sweep CSV %s line %d: seed: %w", name, line, err)
		}
		switch {
		case row[col["saturated"]] == "true":
			o.Err = sim.ErrSaturated
		case row[col["avg_jct_h"]] == "":
			o.Err = errors.New(row[col["error"]])
		default:
			avg, err := strconv.ParseFloat(row[col["avg_jct_h"]], 64)
			if err != nil {
				return nil, fmt.Errorf("sweep CSV %s line %d: average JCT: %w", name, line, err)
			}
			o.Result = &sim.Result{Policy: o.Policy, AvgJCT: avg * 3600}
			if c, ok := col["ftf_isolated"]; ok && row[c] != "" {
				if o.Result.FTFIsolated, err = strconv.ParseFloat(row[c], 64); err != nil {
					return nil, fmt.Errorf("sweep CSV %s line %d: ftf_isolated: %w", name, line, err)
				}
			}
		}
		out = append(out, o)
	}
	return out, nil
}
