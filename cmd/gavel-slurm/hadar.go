package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/gavel-slurm/gavel-slurm/internal/sim/batchsim"
)

func init() {
	register("simulate-batch", subcommand{
		summary: "schedule a batch of jobs all present at 0 (Hadar's comparison), with or without mixed GPU types",
		run: func(args []string) int {
			return runSimulateBatch(args, os.Stdout, os.Stderr)
		},
	})
}

// runSimulateBatch is the simulate-batch command with its streams passed
// in: 0 on success, 2 for a bad command line, 1 when a run fails.
func runSimulateBatch(args []string, stdout, stderr io.Writer) int {
	return exitStatus("simulate-batch", simulateBatch(args, stdout), stderr)
}

// batchRun is one line of the output: a seed, a mode and what it measured.
type batchRun struct {
	Seed   int64            `json:"seed"`
	Mode   string           `json:"mode"`
	Result *batchsim.Result `json:"result"`
}

func simulateBatch(args []string, stdout io.Writer) error {
	cfg, err := batchsim.Defaults()
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("simulate-batch", flag.ContinueOnError)
	fs.SetOutput(stdout)
	jobs := fs.Int("jobs", 480, "number of jobs in the batch")
	cluster := fs.String("cluster", "v100=20,p100=20,k80=20", "GPUs per type, `TYPE=N,...`")
	fs.IntVar(&cfg.GPUsPerServer, "gpus-per-server", cfg.GPUsPerServer, "GPUs per server (each server holds one type)")
	fs.StringVar(&cfg.Policy, "policy", cfg.Policy, "allocation policy `name` (see gavel-slurm allocate --list-policies)")
	mixed := fs.Bool("mixed-types", false, "let a multi-GPU job that fits no single type run on idle GPUs of several types")
	compare := fs.Bool("compare", false, "run every seed with and without mixed types and print the makespan ratio")
	fs.IntVar(&cfg.ForkCopies, "fork", 0, "most extra copies of a running job on otherwise idle GPUs (HadarE); 0: none")
	fs.Float64Var(&cfg.ForkSync, "fork-sync", cfg.ForkSync, "seconds per round a forked job loses to averaging its copies")
	fs.Float64Var(&cfg.SpanFactor, "span-factor", cfg.SpanFactor, "rate factor of a job spread over more than one server, in (0,1]")
	fs.Float64Var(&cfg.RestartOverhead, "restart-overhead", cfg.RestartOverhead, "seconds a job loses when it starts on new GPUs")
	fs.Float64Var(&cfg.RoundSeconds, "round", cfg.RoundSeconds, "round length in seconds")
	sizes := fs.String("sizes", "1:1:1:1", "relative frequencies of the S:M:L:XL size classes")
	scales := fs.String("scales", "70:10:15:5", "relative frequencies of jobs on 1:2:4:8 GPUs")
	seed := fs.Int64("seed", 0, "seed of the workload and the policy")
	seedList := fs.String("seeds", "", "comma-separated seeds to run instead of --seed")
	asJSON := fs.Bool("json", false, "print the results as JSON")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: gavel-slurm simulate-batch [--mixed-types | --compare] [--jobs N] [--cluster TYPE=N,...] [--seed S | --seeds S,...] [--json]")
		fs.PrintDefaults()
	}
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if *mixed && *compare {
		return fmt.Errorf("--mixed-types and --compare exclude each other: %w", errUsage)
	}
	if cfg.GPUs, err = parseBatchCluster(*cluster); err != nil {
		return fmt.Errorf("--cluster: %v: %w", err, errUsage)
	}
	opts := batchsim.WorkloadOptions{Jobs: *jobs}
	if opts.Weights, err = parseWeights(*sizes); err != nil {
		return fmt.Errorf("--sizes: %v: %w", err, errUsage)
	}
	if opts.ScaleWeights, err = parseWeights(*scales); err != nil {
		return fmt.Errorf("--scales: %v: %w", err, errUsage)
	}
	seeds := []int64{*seed}
	if *seedList != "" {
		if seeds, err = parseSeeds(*seedList); err != nil {
			return fmt.Errorf("--seeds: %v: %w", err, errUsage)
		}
	}
	modes := []bool{*mixed}
	if *compare {
		modes = []bool{false, true}
	}
	var runs []batchRun
	for _, s := range seeds {
		opts.Seed = s
		batch, err := batchsim.Generate(cfg.Table, opts)
		if err != nil {
			return fmt.Errorf("%v: %w", err, errUsage)
		}
		for _, m := range modes {
			c := cfg
			c.Seed = s
			c.MixedTypes = m
			res, err := batchsim.Run(c, batch)
			if err != nil {
				return fmt.Errorf("seed %d, %s: %w", s, modeName(m, cfg.ForkCopies), err)
			}
			runs = append(runs, batchRun{Seed: s, Mode: modeName(m, cfg.ForkCopies), Result: res})
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(runs)
	}
	fmt.Fprintf(stdout, "%s, %d jobs at 0, cluster %s (servers of %d), span factor %g, %g s rounds, fork copies %d\n",
		cfg.Policy, *jobs, formatBatchCluster(cfg.GPUs), cfg.GPUsPerServer, cfg.SpanFactor, cfg.RoundSeconds, cfg.ForkCopies)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "seed\tmode\tmakespan h\tbound h\tutilization\tavg JCT h\tmedian JCT h\ton mixes\tcopy rounds\trestarts\t")
	for _, r := range runs {
		res := r.Result
		fmt.Fprintf(tw, "%d\t%s\t%.1f\t%.1f\t%.1f%%\t%.1f\t%.1f\t%.2f%%\t%d\t%d\t\n", r.Seed, r.Mode, res.Makespan/3600,
			res.FluidBound/3600, 100*res.Utilization, res.AverageJCT/3600, res.MedianJCT/3600, 100*res.MixedGPUShare, res.ForkedCopyRounds, res.Restarts)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if *compare {
		for i := 0; i+1 < len(runs); i += 2 {
			single, mix := runs[i].Result, runs[i+1].Result
			fmt.Fprintf(stdout, "seed %d: makespan single-type / mixed-types = %.3f, utilization %+.1f points\n",
				runs[i].Seed, single.Makespan/mix.Makespan, 100*(mix.Utilization-single.Utilization))
		}
	}
	return nil
}

// modeName says how jobs were placed: "single-type" or "mixed-types",
// with "+fork N" when forked copies were allowed.
func modeName(mixed bool, copies int) string {
	name := "single-type"
	if mixed {
		name = "mixed-types"
	}
	if copies > 0 {
		name += fmt.Sprintf("+fork%d", copies)
	}
	return name
}

// parseBatchCluster reads "v100=20,p100=20".
func parseBatchCluster(s string) (map[string]int, error) {
	out := map[string]int{}
	for _, item := range strings.Split(s, ",") {
		name, count, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("%q is not TYPE=N", item)
		}
		n, err := strconv.Atoi(count)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q: need a positive GPU count", item)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("type %s given twice", name)
		}
		out[name] = n
	}
	return out, nil
}

func formatBatchCluster(gpus map[string]int) string {
	names := make([]string, 0, len(gpus))
	for t := range gpus {
		names = append(names, t)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, t := range names {
		parts[i] = fmt.Sprintf("%s=%d", t, gpus[t])
	}
	return strings.Join(parts, ",")
}

// parseWeights reads four colon-separated relative frequencies.
func parseWeights(s string) ([4]float64, error) {
	var w [4]float64
	fields := strings.Split(s, ":")
	if len(fields) != 4 {
		return w, fmt.Errorf("%q: need four numbers separated by ':'", s)
	}
	for i, f := range fields {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v < 0 {
			return w, fmt.Errorf("%q: need numbers >= 0", s)
		}
		w[i] = v
	}
	return w, nil
}

func parseSeeds(s string) ([]int64, error) {
	var out []int64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a seed", f)
		}
		out = append(out, v)
	}
	return out, nil
}
