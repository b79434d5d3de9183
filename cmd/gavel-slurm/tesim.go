package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/gavel-slurm/gavel-slurm/internal/sim/tesim"
	"github.com/gavel-slurm/gavel-slurm/internal/tepreempt"
)

func init() {
	register("simulate-te", subcommand{
		summary: "simulate trial-and-error jobs preempting best-effort ones (FitGpp's synthetic experiment)",
		run: func(args []string) int {
			return runSimulateTE(args, os.Stdout, os.Stderr)
		},
	})
}

func runSimulateTE(args []string, stdout, stderr io.Writer) int {
	return exitStatus("simulate-te", simulateTE(args, stdout), stderr)
}

func simulateTE(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("simulate-te", flag.ContinueOnError)
	fs.SetOutput(stdout)
	paper := tesim.PaperCluster()
	methods := fs.String("policy", "all", "fifo, fitgpp, lrtp, random, or all (comma-separated list allowed)")
	nodes := fs.Int("nodes", paper.Nodes, "nodes")
	gpus := fs.Int("gpus-per-node", paper.Node.GPUs, "GPUs per node")
	cpus := fs.Int("cpus-per-node", paper.Node.CPUs, "CPUs per node")
	memGB := fs.Int("mem-per-node", int(paper.Node.MemMB>>10), "memory per node in GB")
	teFraction := fs.Float64("te-fraction", 0.3, "share of trial-and-error jobs")
	load := fs.Float64("load", 2.0, "demand in the system over capacity, kept by FIFO while jobs arrive")
	jobs := fs.Int("jobs", 20000, "jobs per workload")
	workloads := fs.Int("workloads", 8, "workloads (seeds seed, seed+1, ...); jobs are pooled")
	seed := fs.Uint64("seed", 1, "first workload's seed")
	repeats := fs.Int("repeats", 4, "runs of the random method per workload")
	weight := fs.Float64("weight", 4, "FitGpp's weight s of the grace period against the demand")
	capFlag := fs.Int("cap", -1, "most preemptions per job, 0 for none (default: 1 for fitgpp, none for the baselines, as in the paper)")
	grace := fs.Int("grace", -1, "give every job this grace period in minutes (default: drawn from the workload's distribution)")
	graceScale := fs.Float64("grace-scale", 1, "multiply the grace distribution's mean, spread and bound")
	asJSON := fs.Bool("json", false, "print the results as JSON")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: gavel-slurm simulate-te [--policy fifo|fitgpp|lrtp|random|all] [--nodes N --gpus-per-node G] [--te-fraction F --load L --jobs N --workloads W --seed S] [--weight W --cap C --grace MIN] [--json]")
		fs.PrintDefaults()
	}
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	list := tesim.Methods
	if *methods != "all" {
		list = strings.Split(*methods, ",")
		for _, m := range list {
			if !slices.Contains(tesim.Methods, m) {
				return fmt.Errorf("unknown policy %q (want %s or all): %w", m, strings.Join(tesim.Methods, ", "), errUsage)
			}
		}
	}
	if *nodes <= 0 || *gpus <= 0 || *cpus < 0 || *memGB < 0 || *jobs <= 0 || *workloads <= 0 || *load <= 0 || *repeats <= 0 || *capFlag < -1 || *graceScale < 0 {
		return fmt.Errorf("nodes, GPUs, jobs, workloads, load and repeats must be positive, the rest not negative: %w", errUsage)
	}
	w := tesim.PaperWorkload().ScaleGrace(*graceScale)
	w.TEFraction = *teFraction
	if *grace >= 0 {
		w = w.FixedGrace(*grace)
	}
	// A node smaller than the workload's largest job would leave jobs
	// that never run; cap the draws at the node instead.
	for _, c := range []*tesim.Class{&w.TE, &w.BE} {
		c.GPUs.Max = min(c.GPUs.Max, float64(*gpus))
		if *cpus > 0 {
			c.CPUs.Max = min(c.CPUs.Max, float64(*cpus))
		}
		if *memGB > 0 {
			c.MemGB.Max = min(c.MemGB.Max, float64(*memGB))
		}
	}
	x := tesim.Experiment{
		Cluster:  tesim.Cluster{Nodes: *nodes, Node: tepreempt.Resources{GPUs: *gpus, CPUs: *cpus, MemMB: int64(*memGB) << 10}},
		Workload: w, Load: *load, Jobs: *jobs, Workloads: *workloads, Seed: *seed, Repeats: *repeats,
	}
	var results []tesim.Result
	for _, m := range list {
		s := tesim.Settings{Weight: *weight, Cap: *capFlag}
		if *capFlag < 0 {
			s.Cap = 0
			if m == "fitgpp" {
				s.Cap = 1
			}
		}
		r, err := x.Run(m, s)
		if err != nil {
			return fmt.Errorf("%s: %w", m, err)
		}
		results = append(results, r)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(results)
	}
	return printTEResults(stdout, x, results)
}

func printTEResults(out io.Writer, x tesim.Experiment, results []tesim.Result) error {
	fmt.Fprintf(out, "%d nodes x %d GPUs, %.0f%% TE, load %.1f, %d workloads x %d jobs from seed %d\n\n",
		x.Cluster.Nodes, x.Cluster.Node.GPUs, 100*x.Workload.TEFraction, x.Load, x.Workloads, x.Jobs, x.Seed)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "method\truns\tTE p50\tTE p95\tTE p99\tBE p50\tBE p95\tBE p99\tpreempted\tinterval p50/p95 (min)\t")
	for _, r := range results {
		name := r.Method
		if r.Method == "fitgpp" {
			name = fmt.Sprintf("fitgpp (s=%g)", r.Settings.Weight)
		}
		interval := "-"
		if r.PreemptedJobs > 0 {
			interval = fmt.Sprintf("%.0f/%.0f", r.Interval.P50, r.Interval.P95)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f%%\t%s\t\n", name, r.Runs,
			r.TE.P50, r.TE.P95, r.TE.P99, r.BE.P50, r.BE.P95, r.BE.P99, 100*r.PreemptedJobs, interval)
	}
	return tw.Flush()
}
