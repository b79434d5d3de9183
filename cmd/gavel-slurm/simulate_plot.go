package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/gavel-slurm/gavel-slurm/internal/sim"
	"github.com/gavel-slurm/gavel-slurm/internal/sim/report"
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
	policies, rates, seeds := report.Axes(outcomes)
	f.seeds = seeds
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		return fmt.Errorf("plot output: %w", err)
	}
	svgPath := filepath.Join(f.out, "avg_jct.svg")
	if err := simWriteSweepSVG(svgPath, f.sweepSetup(), policies, rates, outcomes); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "wrote %s from %d runs\n", svgPath, len(outcomes))
	return nil
}

// simReadSweepCSV reads the runs of a sweep.csv file.
func simReadSweepCSV(path string) ([]sim.Outcome, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("sweep CSV: %w", err)
	}
	defer file.Close()
	return report.ReadSweep(file, path)
}
