package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/bridge/fake"
	"github.com/gavel-slurm/gavel-slurm/internal/config"
	"github.com/gavel-slurm/gavel-slurm/internal/sim"
	"github.com/gavel-slurm/gavel-slurm/internal/sim/report"
	"github.com/gavel-slurm/gavel-slurm/internal/sim/stepsim"
	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
	"github.com/gavel-slurm/gavel-slurm/internal/workload"
	"github.com/gavel-slurm/gavel-slurm/policy"
	"github.com/gavel-slurm/gavel-slurm/rounds"
)

func init() {
	register("simulate", subcommand{
		summary: "replay a trace or a generated workload on a simulated cluster (and sweep rates)",
		run: func(args []string) int {
			return runSimulate(args, os.Stdout, os.Stderr)
		},
	})
}

// simFlags are the parsed flags of `simulate`.
type simFlags struct {
	cluster, gpusPerServer         map[string]int
	prices                         map[string]float64
	policy, throughputsFile, trace string
	generate                       string
	rate                           float64
	jobs                           int
	seed                           int64
	multiGPU, multiPriority        bool
	window                         [2]int
	round, overhead, resetInterval time.Duration
	// mechanism is the round mechanism's variant (improved or gavel).
	mechanism rounds.Variant
	// faithful adds the reference's unintended behaviours to --mechanism
	// gavel (sim.Config.Faithful).
	faithful   bool
	minRunTime time.Duration
	// restartCosts draws each job's restart cost; restartHold and
	// restartHoldMax are the restart mechanism's knobs (0: its defaults).
	restartCosts   sim.RestartCosts
	restartHold    float64
	restartHoldMax time.Duration
	restartHoldMin time.Duration
	keepRoom       float64
	restartFinish  float64
	// daemonStep runs the daemon's scheduling step against a simulated
	// Slurm (internal/sim/stepsim) instead of the round mechanism alone.
	daemonStep  bool
	grace       time.Duration
	refillPoll  time.Duration
	refuseRate  float64
	lostRate    float64
	crashRate   float64
	preemptMode bridge.PreemptMode
	script      fake.SignalResponse
	// estimate hides the true throughputs from the policy, which learns
	// them by measurement; estimateNoise blurs each measurement.
	estimate      bool
	estimateNoise float64
	// estimateNoTable hides the reference table from the estimator too.
	estimateNoTable     bool
	maxActive           int
	asJSON              bool
	jobsCSV, writeTrace string
	sweepRates          []float64
	policies            []string
	seeds               []int64
	out                 string
	parallel            int
	cpuProfile          string
	plotCSV             []string
}

// simGCPercent is the garbage collector's target for simulations unless
// GOGC says otherwise. A simulation is a batch run whose live heap stays
// small (tens of megabytes with a thousand jobs in the system) while it
// allocates a new problem and allocation per re-solve: collecting at 4x
// the live heap instead of 2x took a finish-time fairness run at 5.6
// jobs/h from 18.6 s to 16.0 s for 45 MB more memory.
const simGCPercent = 400

// relaxGC sets simGCPercent when GOGC is not set.
func relaxGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(simGCPercent)
	}
}

func runSimulate(args []string, stdout, stderr io.Writer) int {
	f, err := parseSimFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "simulate: %v\n", err)
		return 2
	}
	if f.plotCSV != nil {
		if err := runReplot(f, stderr); err != nil {
			fmt.Fprintf(stderr, "simulate: %v\n", err)
			return 1
		}
		return 0
	}
	table, err := simLoadTable(f.throughputsFile)
	if err != nil {
		fmt.Fprintf(stderr, "simulate: %v\n", err)
		return 1
	}
	relaxGC()
	if f.cpuProfile != "" {
		stop, err := startCPUProfile(f.cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "simulate: %v\n", err)
			return 1
		}
		defer func() {
			if err := stop(); err != nil {
				fmt.Fprintf(stderr, "simulate: %v\n", err)
			}
		}()
	}
	if f.sweepRates != nil {
		if err := runSweep(f, table, stderr); err != nil {
			fmt.Fprintf(stderr, "simulate: %v\n", err)
			return 1
		}
		return 0
	}
	if err := runSingle(f, table, stdout); err != nil {
		fmt.Fprintf(stderr, "simulate: %v\n", err)
		return 1
	}
	return 0
}

// startCPUProfile profiles the process into path until the returned
// function is called.
func startCPUProfile(path string) (stop func() error, err error) {
	out, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		out.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := out.Close(); err != nil {
			return fmt.Errorf("--cpuprofile %s: %w", path, err)
		}
		return nil
	}, nil
}

func parseSimFlags(args []string, stderr io.Writer) (*simFlags, error) {
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cluster := fs.String("cluster", "v100=36,p100=36,k80=36", "GPUs per type: TYPE=N,...")
	perServer := fs.String("gpus-per-server", "", "GPUs per server of each type: TYPE=N,... (default 1)")
	costs := fs.String("costs", "", "price per GPU-hour of each type: TYPE=PRICE,... (reported as cost)")
	pol := fs.String("policy", "max_min_fairness_perf", "scheduling policy (one of: "+strings.Join(policy.Names(), ", ")+")")
	tput := fs.String("throughputs", "", "throughput table JSON (default: the embedded reference table)")
	trace := fs.String("trace", "", "replay this 10-column trace instead of generating jobs")
	generate := fs.String("generate", "continuous", "generated workload: continuous (Poisson arrivals) or static (all jobs at t=0)")
	rate := fs.Float64("rate", 0, "arrival rate of a continuous workload, jobs per hour")
	jobs := fs.Int("jobs", 0, "number of jobs to generate (continuous: 0 = unbounded, needs --window)")
	seed := fs.Int64("seed", 0, "seed of the generated workload, the policy and the mechanism")
	multiGPU := fs.Bool("multi-gpu", false, "draw scale factors 1/2/4/8 (70/10/15/5%)")
	multiPriority := fs.Bool("multi-priority", false, "give 20% of the jobs weight 5")
	window := fs.String("window", "", "measure jobs FIRST:END (ids, END exclusive); the run lasts until they finish")
	round := fs.Duration("round", 360*time.Second, "round length")
	overhead := fs.Duration("preemption-overhead", 0, "time lost each time a job restarts after having run")
	restartCosts := fs.String("restart-cost", "", "each job's own restart cost, added to --preemption-overhead: fixed:D, uniform:A:B "+
		"(drawn per job) or model:NAME=D,...,*=D (a measured table; NAME matches a model name or its first words)")
	restartHold := fs.Float64("restart-hold", 0, "with --mechanism restart: a job keeps its GPUs until it has run this many times "+
		"its restart cost, and runs to its end when less work than that is left (0: the mechanism's default, "+
		strconv.FormatFloat(rounds.DefaultRestartHold, 'g', -1, 64)+")")
	restartHoldMax := fs.Duration("restart-hold-max", 0, "with --mechanism restart: the longest the restart rule keeps a job on its GPUs "+
		"(0: the mechanism's default, "+(time.Duration(rounds.DefaultRestartHoldMax)*time.Second).String()+")")
	restartHoldMin := fs.Duration("restart-hold-min", 0, "with --mechanism restart: the shortest the restart rule keeps a job whose restart "+
		"costs anything on its GPUs (0: the mechanism's default, "+strconv.FormatFloat(rounds.DefaultRestartHoldRounds, 'g', -1, 64)+
		" rounds; 1s in effect turns the floor off)")
	keepRoom := fs.Float64("keep-running-room", 0, "with --mechanism restart and restarts that cost: how far finish_time_fairness_perf's "+
		"choice among its optimal allocations may raise a job's finish-time fairness rho from the solver's answer toward the optimal max, to keep running jobs "+
		"where they run (0: no job worse off; 1: up to the max)")
	restartFinish := fs.Float64("restart-finish", 0, "with --mechanism restart: a job whose remaining work takes at most this many "+
		"times its hold runs to its end (0: the mechanism's default, "+strconv.FormatFloat(rounds.DefaultRestartFinish, 'g', -1, 64)+")")
	minRun := fs.Duration("min-run-time", 0, "least time a job runs after a start before it may be preempted (the daemon's scheduler.min_run_time; 0: any round may move it)")
	daemonStep := fs.Bool("daemon-step", false, "run the daemon's scheduling step against a simulated Slurm: grace periods, holds, Slurm's own starts between rounds")
	grace := fs.Duration("grace", 60*time.Second, "with --daemon-step: grace period between the warning signal and the requeue")
	preemptMode := fs.String("preempt-mode", "checkpoint", "with --daemon-step: every job's preemption mode (checkpoint, requeue, never)")
	script := fs.String("script", "wait", "with --daemon-step: what checkpointing scripts do after saving: wait (for the requeue) or exit")
	refillPoll := fs.Duration("refill-poll", 30*time.Second, "with --daemon-step: the daemon's scheduler.refill_poll, how often it looks between rounds "+
		"for GPUs freed by completions to start waiting jobs on (0: they stay idle until the next round)")
	refuseRate := fs.Float64("refuse-rate", 0, "with --daemon-step: share of the daemon's actions the simulated Slurm refuses (0 to 1), "+
		"to run the paths the daemon takes when sends fail; each refused action is committed as such and tried again later")
	lostRate := fs.Float64("lost-rate", 0, "with --daemon-step: share of the daemon's actions whose answer the simulated Slurm loses, as a timeout does "+
		"(0 to 1; half of them land): the daemon reconciles each against Slurm's next answer")
	crashRate := fs.Float64("crash-rate", 0, "with --daemon-step: share of the daemon's sends at which it stops after journaling the actions "+
		"and before sending them (0 to 1); a new daemon then starts from its state store, kept in a temporary directory")
	estimateOn := fs.Bool("estimate", false, "hide every job's true throughputs from the policy: it sees only what the learning estimator "+
		"has measured of the job's own rounds (every job an unknown model)")
	estimateNoise := fs.Float64("estimate-noise", 0, "with --estimate: spread of each measurement's multiplicative error (0.05: about 5%)")
	estimateRef := fs.String("estimate-reference", "table", "with --estimate: what the estimator knows in advance: table (the reference table, "+
		"against which it matches measured jobs) or none (only the jobs it measured)")
	reset := fs.Duration("min-reset-interval", 1920*time.Second, "least time between allocation recomputations "+
		"(improved mechanism: between resets of the time received; the allocation follows every arrival and completion)")
	mechanism := fs.String("mechanism", string(rounds.VariantRestart), "round mechanism: restart (the default: improved, and weighs each "+
		"preemption and move against the job's restart cost), improved (re-solves on arrivals and completions, "+
		"runs jobs where their allocation puts them) or gavel (the paper's, for reproductions)")
	faithful := fs.Bool("faithful", false, "with --mechanism gavel: also reproduce the reference simulator's behaviours the paper does not intend "+
		"(multi-GPU jobs dropped after five rounds with fewer steps than GPUs, FIFO allocations on types a job cannot run on, "+
		"LAS allocations that give time on such types, the agnostic FIFO's type drawn as its list of types with room shrinks)")
	maxActive := fs.Int("max-active", 0, "stop as saturated beyond this many jobs in the system (0: no limit; sweeps default to 3000)")
	asJSON := fs.Bool("json", false, "print the results as JSON")
	jobsCSV := fs.String("jobs-csv", "", "write one CSV line per job (arrival, start, finish, time per GPU type) to FILE")
	writeTrace := fs.String("write-trace", "", "write the generated workload as a trace to FILE (needs --jobs or a trace)")
	sweepRates := fs.String("sweep-rates", "", "sweep arrival rates FROM:TO:STEP (jobs/hour) over --policies and --seeds")
	policies := fs.String("policies", "", "policies of a sweep, comma-separated (default: --policy)")
	seeds := fs.String("seeds", "0", "seeds of a sweep, comma-separated")
	out := fs.String("out", "", "directory for the sweep's CSV and SVG")
	parallel := fs.Int("parallel", runtime.NumCPU(), "simulations run at once in a sweep")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run to FILE (read it with go tool pprof)")
	plotCSV := fs.String("plot-csv", "", "redraw the plot of sweeps from their sweep.csv files (comma-separated) into --out; "+
		"--cluster, --multi-gpu and --window describe the setup in the subtitle")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	f := &simFlags{
		policy: *pol, throughputsFile: *tput, trace: *trace, generate: *generate,
		rate: *rate, jobs: *jobs, seed: *seed, multiGPU: *multiGPU, multiPriority: *multiPriority,
		round: *round, overhead: *overhead, resetInterval: *reset, maxActive: *maxActive, minRunTime: *minRun,
		asJSON: *asJSON, jobsCSV: *jobsCSV, writeTrace: *writeTrace, out: *out, parallel: *parallel,
		cpuProfile: *cpuProfile,
	}
	var err error
	if f.mechanism, err = rounds.ParseVariant(*mechanism); err != nil {
		return nil, fmt.Errorf("--mechanism: %w", err)
	}
	if *restartCosts != "" {
		if f.restartCosts, err = sim.ParseRestartCosts(*restartCosts); err != nil {
			return nil, fmt.Errorf("--restart-cost: %w", err)
		}
	}
	f.restartHold, f.restartHoldMax, f.restartFinish = *restartHold, *restartHoldMax, *restartFinish
	f.restartHoldMin, f.keepRoom = *restartHoldMin, *keepRoom
	if *faithful && f.mechanism != rounds.VariantGavel {
		return nil, errors.New("--faithful needs --mechanism gavel")
	}
	f.faithful = *faithful
	f.daemonStep, f.grace, f.refillPoll, f.refuseRate = *daemonStep, *grace, *refillPoll, *refuseRate
	f.lostRate, f.crashRate = *lostRate, *crashRate
	f.estimate, f.estimateNoise = *estimateOn, *estimateNoise
	f.estimateNoTable = *estimateRef == "none"
	if f.preemptMode, err = bridge.ParsePreemptMode(*preemptMode); err != nil {
		return nil, fmt.Errorf("--preempt-mode: %w", err)
	}
	if *script == "exit" {
		f.script = fake.SignalExitsOK
	}
	if f.cluster, err = simParseCounts("--cluster", *cluster); err != nil {
		return nil, err
	}
	if len(f.cluster) == 0 {
		return nil, errors.New("--cluster: no GPUs")
	}
	if f.gpusPerServer, err = simParseCounts("--gpus-per-server", *perServer); err != nil {
		return nil, err
	}
	if f.prices, err = simParsePrices(*costs); err != nil {
		return nil, err
	}
	if *window != "" {
		if f.window, err = simParseWindow(*window); err != nil {
			return nil, err
		}
	}
	tunesRestartRule := f.restartHold != 0 || f.restartHoldMax != 0 || f.restartHoldMin != 0 || f.restartFinish != 0
	switch {
	case *round <= 0:
		return nil, fmt.Errorf("--round %v: must be positive", *round)
	case *overhead < 0 || *overhead >= *round:
		return nil, fmt.Errorf("--preemption-overhead %v: must be >= 0 and shorter than --round", *overhead)
	case *grace < 0:
		return nil, fmt.Errorf("--grace %v: must be >= 0", *grace)
	case *refillPoll < 0:
		return nil, fmt.Errorf("--refill-poll %v: must be >= 0", *refillPoll)
	case !(*refuseRate >= 0 && *refuseRate < 1):
		return nil, fmt.Errorf("--refuse-rate %v: must be >= 0 and below 1", *refuseRate)
	case *refuseRate > 0 && !*daemonStep:
		return nil, errors.New("--refuse-rate needs --daemon-step")
	case !(*lostRate >= 0 && *lostRate < 1):
		return nil, fmt.Errorf("--lost-rate %v: must be >= 0 and below 1", *lostRate)
	case *lostRate > 0 && !*daemonStep:
		return nil, errors.New("--lost-rate needs --daemon-step")
	case !(*crashRate >= 0 && *crashRate < 1):
		return nil, fmt.Errorf("--crash-rate %v: must be >= 0 and below 1", *crashRate)
	case *crashRate > 0 && !*daemonStep:
		return nil, errors.New("--crash-rate needs --daemon-step")
	case *script != "wait" && *script != "exit":
		return nil, fmt.Errorf("--script %q: must be wait or exit", *script)
	case f.estimateNoise < 0 || math.IsNaN(f.estimateNoise) || math.IsInf(f.estimateNoise, 0):
		return nil, fmt.Errorf("--estimate-noise %v: must be a finite number >= 0", f.estimateNoise)
	case *estimateRef != "table" && *estimateRef != "none":
		return nil, fmt.Errorf("--estimate-reference %q: must be table or none", *estimateRef)
	case f.estimateNoTable && !f.estimate:
		return nil, errors.New("--estimate-reference needs --estimate")
	case f.estimateNoise > 0 && !f.estimate:
		return nil, errors.New("--estimate-noise needs --estimate")
	case f.estimate && f.daemonStep:
		return nil, errors.New("--estimate runs with the round mechanism; it cannot be combined with --daemon-step")
	case *overhead+time.Duration(f.restartCosts.Max()*float64(time.Second)) >= *round:
		return nil, fmt.Errorf("--preemption-overhead %v with --restart-cost %s: restarts must be shorter than --round", *overhead, f.restartCosts)
	case f.restartHold < 0 || math.IsNaN(f.restartHold) || math.IsInf(f.restartHold, 0):
		return nil, fmt.Errorf("--restart-hold %v: must be a finite number >= 0", f.restartHold)
	case !(f.keepRoom >= 0 && f.keepRoom <= 1):
		return nil, fmt.Errorf("--keep-running-room %v: must be within [0, 1]", f.keepRoom)
	case f.keepRoom != 0 && f.mechanism != rounds.VariantRestart:
		return nil, errors.New("--keep-running-room needs --mechanism restart")
	case f.keepRoom != 0 && f.daemonStep:
		return nil, errors.New("--keep-running-room tunes the round mechanism's policy; the daemon's step runs with the defaults")
	case f.restartHoldMin < 0:
		return nil, fmt.Errorf("--restart-hold-min %v: must be >= 0", f.restartHoldMin)
	case f.restartHoldMax < 0:
		return nil, fmt.Errorf("--restart-hold-max %v: must be >= 0", f.restartHoldMax)
	case f.restartFinish < 0 || math.IsNaN(f.restartFinish) || math.IsInf(f.restartFinish, 0):
		return nil, fmt.Errorf("--restart-finish %v: must be a finite number >= 0", f.restartFinish)
	case tunesRestartRule && f.mechanism != rounds.VariantRestart:
		return nil, errors.New("--restart-hold, --restart-hold-min, --restart-hold-max and --restart-finish need --mechanism restart")
	case f.daemonStep && tunesRestartRule:
		return nil, errors.New("--restart-hold, --restart-hold-min, --restart-hold-max and --restart-finish tune the round mechanism; the daemon's step runs with the defaults")
	case *minRun < 0:
		return nil, fmt.Errorf("--min-run-time %v: must be >= 0", *minRun)
	case *reset < 0:
		return nil, fmt.Errorf("--min-reset-interval %v: must be >= 0", *reset)
	case f.jobs < 0:
		return nil, fmt.Errorf("--jobs %d: must be >= 0", f.jobs)
	case f.maxActive < 0:
		return nil, fmt.Errorf("--max-active %d: must be >= 0", f.maxActive)
	case f.parallel < 1:
		return nil, fmt.Errorf("--parallel %d: must be >= 1", f.parallel)
	case f.rate < 0 || math.IsNaN(f.rate) || math.IsInf(f.rate, 0):
		return nil, fmt.Errorf("--rate %v: must be a finite number >= 0", f.rate)
	}
	if *plotCSV != "" {
		if f.out == "" {
			return nil, errors.New("--plot-csv needs --out DIR")
		}
		f.plotCSV = simSplitList(*plotCSV)
		return f, nil
	}
	if f.trace == "" {
		switch f.generate {
		case "continuous":
			if *sweepRates == "" && f.rate <= 0 {
				return nil, errors.New("--generate continuous needs --rate > 0 (or --sweep-rates)")
			}
			if f.jobs == 0 && f.window[1] == 0 {
				return nil, errors.New("an unbounded continuous workload needs --window FIRST:END (or --jobs N)")
			}
		case "static":
			if f.jobs == 0 {
				return nil, errors.New("--generate static needs --jobs N")
			}
			if *sweepRates != "" {
				return nil, errors.New("--sweep-rates needs a continuous workload")
			}
		default:
			return nil, fmt.Errorf("--generate %q: want continuous or static", f.generate)
		}
	}
	if *sweepRates != "" {
		if f.trace != "" {
			return nil, errors.New("--sweep-rates generates its workloads; it cannot be combined with --trace")
		}
		if f.out == "" {
			return nil, errors.New("--sweep-rates needs --out DIR")
		}
		if f.sweepRates, err = simParseRange(*sweepRates); err != nil {
			return nil, err
		}
		if f.maxActive == 0 {
			f.maxActive = 3000
		}
	}
	f.policies = []string{f.policy}
	if *policies != "" {
		f.policies = simSplitList(*policies)
	}
	for _, p := range f.policies {
		if _, err := policy.New(p, policy.Options{}); err != nil {
			return nil, fmt.Errorf("--policy: %w", err)
		}
	}
	for _, s := range simSplitList(*seeds) {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("--seeds: %q is not an integer", s)
		}
		f.seeds = append(f.seeds, v)
	}
	if len(f.seeds) == 0 {
		return nil, errors.New("--seeds: empty list")
	}
	return f, nil
}

func simSplitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// simParseCounts reads TYPE=N,TYPE=N.
func simParseCounts(flagName, s string) (map[string]int, error) {
	out := map[string]int{}
	for _, part := range simSplitList(s) {
		name, value, ok := strings.Cut(part, "=")
		name = strings.TrimSpace(name)
		n, err := strconv.Atoi(strings.TrimSpace(value))
		if !ok || name == "" || err != nil || n < 1 {
			return nil, fmt.Errorf("%s: %q is not TYPE=N with N >= 1", flagName, part)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s: type %s given twice", flagName, name)
		}
		out[name] = n
	}
	return out, nil
}

// simParsePrices reads TYPE=PRICE,...
func simParsePrices(s string) (map[string]float64, error) {
	if s == "" {
		return nil, nil
	}
	out := map[string]float64{}
	for _, part := range simSplitList(s) {
		name, value, ok := strings.Cut(part, "=")
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if !ok || strings.TrimSpace(name) == "" || err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			return nil, fmt.Errorf("--costs: %q is not TYPE=PRICE with PRICE >= 0", part)
		}
		out[strings.TrimSpace(name)] = v
	}
	return out, nil
}

// simParseWindow reads FIRST:END.
func simParseWindow(s string) ([2]int, error) {
	a, b, ok := strings.Cut(s, ":")
	first, err1 := strconv.Atoi(a)
	end, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || first < 0 || end <= first {
		return [2]int{}, fmt.Errorf("--window %q: want FIRST:END with 0 <= FIRST < END", s)
	}
	return [2]int{first, end}, nil
}

// simParseRange reads FROM:TO:STEP into FROM, FROM+STEP, ... <= TO.
func simParseRange(s string) ([]float64, error) {
	parts := strings.Split(s, ":")
	bad := fmt.Errorf("--sweep-rates %q: want FROM:TO:STEP with 0 < FROM <= TO and STEP > 0", s)
	if len(parts) != 3 {
		return nil, bad
	}
	var v [3]float64
	for i, p := range parts {
		x, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, bad
		}
		v[i] = x
	}
	from, to, step := v[0], v[1], v[2]
	if from <= 0 || to < from || step <= 0 {
		return nil, bad
	}
	n := int(math.Floor((to-from)/step+1e-9)) + 1
	if n > 1000 {
		return nil, fmt.Errorf("--sweep-rates %q: %d rates, at most 1000", s, n)
	}
	rates := make([]float64, n)
	for i := range rates {
		// Rounded so 0.4+k·0.4 prints as 1.2, not 1.2000000000000002.
		rates[i] = math.Round((from+float64(i)*step)*1e9) / 1e9
	}
	return rates, nil
}

func simLoadTable(path string) (*throughputs.Table, error) {
	if path == "" {
		return throughputs.Reference()
	}
	return throughputs.Load(path)
}

// simConfig builds the simulator configuration of one run.
func (f *simFlags) simConfig(table *throughputs.Table, policyName string, seed int64) sim.Config {
	cfg := sim.Config{
		GPUs: f.cluster, GPUsPerServer: f.gpusPerServer, PolicyName: policyName, Table: table,
		Seed: seed, RoundSeconds: f.round.Seconds(), MinResetInterval: f.resetInterval.Seconds(), Mechanism: f.mechanism,
		PreemptionOverhead: f.overhead.Seconds(), MinRunTime: f.minRunTime.Seconds(), FirstMeasured: f.window[0], EndMeasured: f.window[1],
		MaxActive: f.maxActive, Costs: f.prices, Clock: time.Now, Faithful: f.faithful,
		RestartCosts: f.restartCosts, RestartHold: f.restartHold, RestartHoldMax: f.restartHoldMax.Seconds(), RestartHoldMin: f.restartHoldMin.Seconds(), KeepRunningRoom: f.keepRoom,
		RestartFinish: f.restartFinish,
	}
	if f.estimate {
		cfg.Estimate = &sim.Estimation{Noise: f.estimateNoise, NoReference: f.estimateNoTable}
	}
	return cfg
}

// run runs one simulation: the round mechanism, or with --daemon-step the
// daemon's scheduling step against a simulated Slurm.
func (f *simFlags) run(table *throughputs.Table, policyName string, seed int64, src sim.Source) (*sim.Result, error) {
	if !f.daemonStep {
		return sim.Run(f.simConfig(table, policyName, seed), src)
	}
	start := time.Now()
	var stateDir string
	if f.crashRate > 0 {
		dir, err := os.MkdirTemp("", "gavel-slurm-simulate-")
		if err != nil {
			return nil, fmt.Errorf("state directory for --crash-rate: %w", err)
		}
		defer os.RemoveAll(dir)
		stateDir = dir
	}
	res, err := stepsim.Run(stepsim.Config{
		GPUs: f.cluster, GPUsPerServer: f.gpusPerServer, Policy: policyName, Table: table, Seed: seed,
		Round: f.round, MinResetInterval: f.resetInterval, Preempt: f.preemptMode, Grace: f.grace, Script: f.script,
		MinRunTime: f.minRunTime, RestartOverhead: f.overhead, FirstMeasured: f.window[0], EndMeasured: f.window[1],
		MaxActive: f.maxActive, Mechanism: f.mechanism, RefillPoll: f.refillPoll, Costs: f.prices, RefuseRate: f.refuseRate,
		RestartCosts: f.restartCosts, DefaultRestart: config.Default().Scheduler.DefaultRestartCost,
		LostRate: f.lostRate, CrashRate: f.crashRate, StateDir: stateDir,
	}, src)
	if res != nil {
		res.WallSeconds = time.Since(start).Seconds()
	}
	return res, err
}

// source returns the run's workload.
func (f *simFlags) source(table *throughputs.Table, rate float64, seed int64) (sim.Source, error) {
	if f.trace != "" {
		jobs, err := workload.ReadTraceFile(f.trace, table)
		if err != nil {
			return nil, err
		}
		return sim.Jobs(jobs).Source(), nil
	}
	opts := workload.GeneratorOptions{Rate: rate, Jobs: f.jobs, Seed: seed, MultiGPU: f.multiGPU, MultiPriority: f.multiPriority}
	if f.generate == "static" {
		opts.Rate = 0
	}
	return workload.NewGenerator(table, opts)
}

func runSingle(f *simFlags, table *throughputs.Table, stdout io.Writer) error {
	src, err := f.source(table, f.rate, f.seed)
	if err != nil {
		return err
	}
	if f.writeTrace != "" {
		if src, err = simWriteTrace(f.writeTrace, src, f.trace == "" && f.jobs == 0); err != nil {
			return err
		}
	}
	res, err := f.run(table, f.policy, f.seed, src)
	if err != nil {
		return err
	}
	if f.jobsCSV != "" {
		if err := writeFile(f.jobsCSV, "jobs CSV", func(w io.Writer) error { return report.WriteJobs(w, res) }); err != nil {
			return err
		}
	}
	if f.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	report.WriteSummary(stdout, res)
	if res.Estimated {
		known := "reference table"
		if f.estimateNoTable {
			known = "no reference table"
		}
		fmt.Fprintf(stdout, "throughputs: learned by measurement (unknown models, %s, noise %g)\n", known, f.estimateNoise)
	}
	return nil
}

// simWriteTrace saves a bounded workload as a trace and returns a source
// replaying it.
func simWriteTrace(path string, src sim.Source, unbounded bool) (sim.Source, error) {
	if unbounded {
		return nil, errors.New("--write-trace needs a bounded workload (--jobs N)")
	}
	var jobs []workload.Job
	for j, ok := src.Next(); ok; j, ok = src.Next() {
		jobs = append(jobs, j)
	}
	if err := writeFile(path, "write trace", func(w io.Writer) error { return workload.WriteTrace(w, jobs) }); err != nil {
		return nil, err
	}
	return sim.Jobs(jobs).Source(), nil
}

// writeFile creates path and fills it with write. what names the file in
// errors; write wraps its own.
func writeFile(path, what string, write func(io.Writer) error) (err error) {
	file, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer func() {
		if cerr := file.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("%s: %w", what, cerr)
		}
	}()
	return write(file)
}

func runSweep(f *simFlags, table *throughputs.Table, stderr io.Writer) error {
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		return fmt.Errorf("sweep output: %w", err)
	}
	var points []sim.Point
	for _, p := range f.policies {
		for _, r := range f.sweepRates {
			for _, s := range f.seeds {
				points = append(points, sim.Point{Policy: p, Rate: r, Seed: s})
			}
		}
	}
	started := time.Now()
	progress := func(done, total int) {
		const width = 30
		filled := width * done / total
		elapsed := time.Since(started)
		eta := time.Duration(float64(elapsed) / float64(done) * float64(total-done))
		fmt.Fprintf(stderr, "\r[%s%s] %d/%d runs  %s elapsed, ~%s left ",
			strings.Repeat("=", filled), strings.Repeat(" ", width-filled), done, total,
			elapsed.Round(time.Second), eta.Round(time.Second))
		if done == total {
			fmt.Fprintln(stderr)
		}
	}
	// Finish-time fairness is measured against the isolated policy's run
	// of each rate and seed, made once and shared by the policies; those
	// runs go first and into their own CSV, so the chart and sweep.csv
	// show only the policies asked for.
	baselines := sim.IsolatedPoints(points)
	outcomes := sim.Sweep(append(baselines, points...), f.parallel, func(p sim.Point) (*sim.Result, error) {
		src, err := f.source(table, p.Rate, p.Seed)
		if err != nil {
			return nil, err
		}
		return f.run(table, p.Policy, p.Seed, src)
	}, progress)
	isolated, outcomes := outcomes[:len(baselines)], outcomes[len(baselines):]
	if err := sim.SetFTFIsolated(outcomes, isolated); err != nil {
		return err
	}
	// Results are written even when some runs failed, so a long sweep is
	// not lost to one bad point; the failures are reported afterwards.
	csvPath := filepath.Join(f.out, "sweep.csv")
	if err := writeFile(csvPath, "sweep CSV", func(w io.Writer) error { return report.WriteSweep(w, outcomes) }); err != nil {
		return err
	}
	if len(isolated) > 0 {
		isoPath := filepath.Join(f.out, "isolated.csv")
		if err := writeFile(isoPath, "isolated runs CSV", func(w io.Writer) error { return report.WriteSweep(w, isolated) }); err != nil {
			return err
		}
	}
	svgPath := filepath.Join(f.out, "avg_jct.svg")
	if err := simWriteSweepSVG(svgPath, f.sweepSetup(), f.policies, f.sweepRates, outcomes); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "wrote %s and %s\n", csvPath, svgPath)
	var failed []string
	for _, o := range append(isolated, outcomes...) {
		if o.Err != nil && !o.Saturated() {
			failed = append(failed, fmt.Sprintf("%s at %v jobs/h, seed %d: %v", o.Policy, o.Rate, o.Seed, o.Err))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d runs failed:\n  %s", len(failed), len(isolated)+len(outcomes), strings.Join(failed, "\n  "))
	}
	return nil
}

// sweepSetup describes the sweep's runs for its chart.
func (f *simFlags) sweepSetup() report.Setup {
	return report.Setup{Cluster: f.cluster, MultiGPU: f.multiGPU, Window: f.window, Seeds: f.seeds}
}

// simWriteSweepSVG plots the average JCT (hours, mean over seeds) against
// the rate, one line per policy.
func simWriteSweepSVG(path string, setup report.Setup, policies []string, rates []float64, outcomes []sim.Outcome) error {
	chart := report.AvgJCTChart(setup.Subtitle(), policies, rates, outcomes)
	return writeFile(path, "sweep plot", func(w io.Writer) error {
		if err := chart.WriteSVG(w); err != nil {
			return fmt.Errorf("sweep plot: %w", err)
		}
		return nil
	})
}
