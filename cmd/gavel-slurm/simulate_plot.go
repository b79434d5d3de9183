package main

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/gavel-slurm/gavel-slurm/internal/sim"
)

// runReplot redraws the average-JCT plot from the CSVs of earlier sweeps,
// so a grid run in parts (long points on their own, on a small machine) or
// a restyled figure needs no new simulations.
func runReplot(f *simFlags, stderr io.Writer) error {
	var outcomes []sim.Outcome
	for _, path := range f.plotCSV {
		got, err := simReadSweepCSV(path)
		if err != nil {
			return err
		}
		outcomes = append(outcomes, got...)
	}
	var policies []string
	var rates []float64
	var seeds []int64
	for _, o := range outcomes {
		if !slices.Contains(policies, o.Policy) {
			policies = append(policies, o.Policy)
		}
		if !slices.Contains(rates, o.Rate) {
			rates = append(rates, o.Rate)
		}
		if !slices.Contains(seeds, o.Seed) {
			seeds = append(seeds, o.Seed)
		}
	}
	slices.Sort(seeds)
	f.seeds = seeds
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		return fmt.Errorf("plot output: %w", err)
	}
	svgPath := filepath.Join(f.out, "avg_jct.svg")
	if err := simWriteSweepSVG(svgPath, f.sweepSubtitle(), policies, rates, outcomes); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "wrote %s from %d runs\n", svgPath, len(outcomes))
	return nil
}

// simReadSweepCSV reads the runs of a sweep.csv that simWriteSweepCSV
// wrote: each row's policy, rate, seed and average JCT, or its error.
func simReadSweepCSV(path string) ([]sim.Outcome, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("sweep CSV: %w", err)
	}
	defer file.Close()
	rows, err := csv.NewReader(file).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("sweep CSV %s: %w", path, err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("sweep CSV %s: empty", path)
	}
	col := map[string]int{}
	for i, name := range rows[0] {
		col[name] = i
	}
	for _, name := range []string{"policy", "rate_jobs_per_h", "seed", "saturated", "avg_jct_h", "error"} {
		if _, ok := col[name]; !ok {
			return nil, fmt.Errorf("sweep CSV %s: no %q column", path, name)
		}
	}
	var out []sim.Outcome
	for n, row := range rows[1:] {
		line := n + 2
		if len(row) != len(rows[0]) {
			return nil, fmt.Errorf("sweep CSV %s line %d: %d fields, header has %d", path, line, len(row), len(rows[0]))
		}
		o := sim.Outcome{Point: sim.Point{Policy: row[col["policy"]]}}
		if o.Rate, err = strconv.ParseFloat(row[col["rate_jobs_per_h"]], 64); err != nil {
			return nil, fmt.Errorf("sweep CSV %s line %d: rate: %w", path, line, err)
		}
		if o.Seed, err = strconv.ParseInt(row[col["seed"]], 10, 64); err != nil {
			return nil, fmt.Errorf("sweep CSV %s line %d: seed: %w", path, line, err)
		}
		switch {
		case row[col["saturated"]] == "true":
			o.Err = sim.ErrSaturated
		case row[col["avg_jct_h"]] == "":
			o.Err = errors.New(row[col["error"]])
		default:
			avg, err := strconv.ParseFloat(row[col["avg_jct_h"]], 64)
			if err != nil {
				return nil, fmt.Errorf("sweep CSV %s line %d: average JCT: %w", path, line, err)
			}
			o.Result = &sim.Result{Policy: o.Policy, AvgJCT: avg * 3600}
		}
		out = append(out, o)
	}
	return out, nil
}
