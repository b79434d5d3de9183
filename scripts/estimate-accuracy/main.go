// Command estimate-accuracy prints the leave-one-out accuracy of the
// throughput estimator against its baselines, as the Markdown table of
// docs/estimator.md:
//
//	go run ./scripts/estimate-accuracy
//
// -table measures it on another throughput table in the reference format.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/gavel-slurm/gavel-slurm/internal/estimate"
	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
)

func main() {
	path := flag.String("table", "", "throughput table (JSON, reference format); the embedded reference table when empty")
	asJSON := flag.Bool("json", false, "print the rows as JSON instead of Markdown")
	flag.Parse()
	if err := run(*path, *asJSON); err != nil {
		fmt.Fprintln(os.Stderr, "estimate-accuracy:", err)
		os.Exit(1)
	}
}

func run(path string, asJSON bool) error {
	table, err := load(path)
	if err != nil {
		return err
	}
	rows, err := estimate.Accuracy(table, estimate.Options{})
	if err != nil {
		return fmt.Errorf("leave-one-out: %w", err)
	}
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	fmt.Print(estimate.FormatAccuracy(rows))
	fmt.Println()
	fmt.Print(estimate.FormatAccuracyByScale(rows))
	return nil
}

func load(path string) (*throughputs.Table, error) {
	if path == "" {
		return throughputs.Reference()
	}
	return throughputs.Load(path)
}
