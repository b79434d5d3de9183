package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/bridge/rest"
	"github.com/gavel-slurm/gavel-slurm/internal/api"
	"github.com/gavel-slurm/gavel-slurm/internal/config"
	"github.com/gavel-slurm/gavel-slurm/internal/daemon"
	"github.com/gavel-slurm/gavel-slurm/internal/history"
	"github.com/gavel-slurm/gavel-slurm/internal/whatif"
	"github.com/gavel-slurm/gavel-slurm/policy"
	"github.com/gavel-slurm/gavel-slurm/rounds"
)

func init() {
	register("whatif", subcommand{
		summary: "replay the site's finished jobs from Slurm's accounting under Slurm's order and each policy, and report",
		run: func(args []string) int {
			return runWhatif(args, os.Stdout, os.Stderr)
		},
	})
}

// whatifFlags are the what-if's inputs once read and checked.
type whatifFlags struct {
	cfg                 *config.Config
	sacct               string
	from, to            time.Time
	saveHistory         string
	partitions          []string
	cluster, perServer  map[string]int
	speed               map[string]float64
	throughputsFile     string
	noReference         bool
	measured            string
	typed               whatif.Typed
	entities            string
	set                 whatif.Settings
	asJSON              bool
	htmlOut, jsonOut    string
	textOut             string
	quiet               bool
	submit              bool
	dir, jobDir, binary string
	sbatch, partition   string
	part                int
	partOut, gather     string
	args                []string // the flags as given, passed on to the jobs of --submit
	configPath          string
	explicitConfig      bool
	historyFromSlurm    bool
	clusterFromSlurm    bool
	// notes go into the report: how the cluster was found, what the
	// replays cannot model.
	notes []string
	// nodeTypes maps node names to GPU types, from slurmrestd or
	// --node-types, for records that do not name their GPU type.
	nodeTypes     map[string]string
	nodeTypesFile string
	// sweepID marks the parts of one --submit sweep (--sweep-id).
	sweepID string
}

func parseWhatifFlags(args []string, stderr io.Writer) (*whatifFlags, error) {
	fs := flag.NewFlagSet("whatif", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", defaultConfigPath, "configuration file (TOML), the daemon's: slurmrestd, partitions and the scheduler settings replayed")
	sacct := fs.String("sacct", "", "read the history from this file (the output of sacct --json, or a reply of slurmrestd's /slurmdb/.../jobs) instead of slurmrestd")
	from := fs.String("from", "-7d", "start of the window of finished jobs read from slurmrestd: RFC 3339 time, or -Nd / -Nh before now")
	to := fs.String("to", "", "end of the window (default: now)")
	saveHistory := fs.String("save-history", "", "write the history read from slurmrestd to FILE (for --sacct later)")
	partitions := fs.String("partitions", "", "comma-separated partitions whose jobs are replayed (default: slurm.partitions; empty: all)")
	cluster := fs.String("cluster", "", "GPUs per type TYPE=N,... (default: the nodes of the partitions, read from slurmrestd; with --sacct, the history's peak use)")
	perServer := fs.String("gpus-per-node", "", "GPUs per node of each type TYPE=N,... (default: read with the nodes, else 1)")
	speed := fs.String("speed", "", "speed ratio of each type TYPE=R,... for jobs no measurement or table covers (e.g. v100=1,a100=2.2)")
	tput := fs.String("throughputs", "", "throughput table matched against the tags' model= (default: the embedded reference table)")
	noRef := fs.Bool("no-reference", false, "use no throughput table")
	measured := fs.String("measured", "", "the daemon's measured rates: a file written by gavel-slurm status --json, or the daemon's address (host:port, unix:/path)")
	typed := fs.String("typed", string(whatif.TypedPinned), "jobs that asked for a GPU type: pinned (kept on it, as the daemon does) or free (the policy chooses)")
	entities := fs.String("entities", "account", "whose share the report counts when a tag names no entity: account or user")
	policies := fs.String("policies", "", "policies replayed, comma-separated (default: scheduler.policy)")
	seeds := fs.String("seeds", "0", "seeds of every policy, comma-separated")
	round := fs.Duration("round", 0, "round length (default: scheduler.round)")
	mechanism := fs.String("mechanism", "", "round mechanism (default: scheduler.mechanism)")
	reset := fs.Duration("min-reset-interval", 0, "least time between allocation recomputations (default: scheduler.min_reset_interval)")
	overhead := fs.Duration("restart-overhead", 0, "time a job loses at each restart (default: scheduler.default_restart_cost)")
	minRun := fs.Duration("min-run-time", 0, "least run after a start before a preemption (default: the scheduler's)")
	parallel := fs.Int("parallel", runtime.NumCPU(), "replays run at once")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	htmlOut := fs.String("html", "", "also write the report as one self-contained HTML page with charts to FILE")
	jsonOut := fs.String("json-out", "", "also write the JSON report to FILE")
	textOut := fs.String("text-out", "", "also write the text report to FILE")
	quiet := fs.Bool("quiet", false, "no progress on standard error")
	submit := fs.Bool("submit", false, "run the replays as a Slurm job array on --partition, and the report as one job after it, instead of here")
	partition := fs.String("partition", "", "with --submit: the partition of the jobs")
	dir := fs.String("dir", "", "with --submit: a directory every node sees, for the history, the parts and the report")
	jobDir := fs.String("job-dir", "", "with --submit: --dir as the jobs see it (default: the same path)")
	binary := fs.String("binary", "", "with --submit: this program as the jobs run it (default: this executable's path)")
	sbatch := fs.String("sbatch", "sbatch", "with --submit: the sbatch command")
	part := fs.Int("part", -1, "run only replay number N and write its schedule to --part-out (the array's tasks)")
	partOut := fs.String("part-out", "", "with --part: where its schedule goes")
	nodeTypes := fs.String("node-types", "", "a JSON object of node name to GPU type, for records that do not name their type (default: the nodes slurmrestd lists)")
	sweepID := fs.String("sweep-id", "", "with --part and --gather: the sweep the parts belong to (set by --submit)")
	notes := fs.String("notes", "", "with --gather: a JSON list of notes for the report (set by --submit)")
	gather := fs.String("gather", "", "make the report from the schedules the array's tasks wrote to this directory")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	// "none": the defaults alone (the jobs of --submit get every setting
	// as a flag and must not depend on a node's own configuration).
	def := config.Default()
	cfg := &def
	if *path != "none" {
		var err error
		if cfg, _, err = loadConfigFile(*path, given["config"]); err != nil {
			return nil, err
		}
	}
	var err error
	f := &whatifFlags{cfg: cfg, sacct: *sacct, saveHistory: *saveHistory, throughputsFile: *tput, noReference: *noRef,
		measured: *measured, entities: *entities, asJSON: *asJSON, htmlOut: *htmlOut, jsonOut: *jsonOut, textOut: *textOut,
		quiet: *quiet, submit: *submit, dir: *dir, jobDir: *jobDir, binary: *binary, sbatch: *sbatch, partition: *partition,
		part: *part, partOut: *partOut, gather: *gather, args: args, configPath: *path, explicitConfig: given["config"],
		nodeTypesFile: *nodeTypes, sweepID: *sweepID}
	if *notes != "" {
		raw, err := os.ReadFile(*notes)
		if err == nil {
			err = json.Unmarshal(raw, &f.notes)
		}
		if err != nil {
			return nil, fmt.Errorf("--notes: %w", err)
		}
	}
	if f.nodeTypesFile != "" {
		raw, err := os.ReadFile(f.nodeTypesFile)
		if err == nil {
			err = json.Unmarshal(raw, &f.nodeTypes)
		}
		if err != nil {
			return nil, fmt.Errorf("--node-types: %w", err)
		}
	}
	now := time.Now()
	if f.from, err = parseWhen(*from, now); err != nil {
		return nil, fmt.Errorf("--from: %w", err)
	}
	f.to = now
	if *to != "" {
		if f.to, err = parseWhen(*to, now); err != nil {
			return nil, fmt.Errorf("--to: %w", err)
		}
	}
	if !f.to.After(f.from) {
		return nil, fmt.Errorf("--from %s is not before --to %s", f.from.Format(time.RFC3339), f.to.Format(time.RFC3339))
	}
	f.partitions = cfg.Slurm.Partitions
	if given["partitions"] {
		f.partitions = simSplitList(*partitions)
	}
	if f.cluster, err = simParseCounts("--cluster", *cluster); err != nil {
		return nil, err
	}
	if f.perServer, err = simParseCounts("--gpus-per-node", *perServer); err != nil {
		return nil, err
	}
	if f.speed, err = parseRatios("--speed", *speed); err != nil {
		return nil, err
	}
	if f.typed, err = whatif.ParseTyped(*typed); err != nil {
		return nil, fmt.Errorf("--typed: %w", err)
	}
	if f.entities != "account" && f.entities != "user" {
		return nil, fmt.Errorf("--entities %q: must be account or user", f.entities)
	}
	f.set.Policies = simSplitList(*policies)
	if len(f.set.Policies) == 0 {
		f.set.Policies = []string{cfg.Scheduler.Policy}
	}
	known := policy.Names()
	for _, p := range f.set.Policies {
		if !slices.Contains(known, p) {
			return nil, fmt.Errorf("--policies: unknown policy %q (one of: %s)", p, strings.Join(known, ", "))
		}
	}
	for _, s := range simSplitList(*seeds) {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("--seeds: %q is not a whole number", s)
		}
		f.set.Seeds = append(f.set.Seeds, n)
	}
	if len(f.set.Seeds) == 0 {
		return nil, errors.New("--seeds: none")
	}
	f.set.Workers = max(1, *parallel)
	sc := &f.set.Sim
	// A flag given wins over the configuration, 0 included.
	pick := func(name string, v, c time.Duration) time.Duration {
		if given[name] {
			return v
		}
		return c
	}
	sc.RoundSeconds = pick("round", *round, cfg.Scheduler.Round).Seconds()
	sc.MinResetInterval = pick("min-reset-interval", *reset, cfg.Scheduler.MinResetInterval).Seconds()
	sc.PreemptionOverhead = pick("restart-overhead", *overhead, cfg.Scheduler.DefaultRestartCost).Seconds()
	sc.MinRunTime = pick("min-run-time", *minRun, cfg.Scheduler.EffectiveMinRunTime()).Seconds()
	mech := cfg.Scheduler.Mechanism
	if *mechanism != "" {
		mech = *mechanism
	}
	if sc.Mechanism, err = rounds.ParseVariant(mech); err != nil {
		return nil, fmt.Errorf("--mechanism: %w", err)
	}
	switch {
	case sc.MinResetInterval < 0 || sc.PreemptionOverhead < 0 || sc.MinRunTime < 0:
		return nil, errors.New("--min-reset-interval, --restart-overhead and --min-run-time must not be negative")
	case sc.RoundSeconds <= 0:
		return nil, fmt.Errorf("--round %v: must be positive", *round)
	case sc.PreemptionOverhead >= sc.RoundSeconds:
		// The simulator needs a restart to fit in a round.
		sc.PreemptionOverhead = sc.RoundSeconds / 2
	}
	if f.part >= 0 && f.partOut == "" {
		return nil, errors.New("--part needs --part-out")
	}
	if f.submit {
		if f.partition == "" || f.dir == "" {
			return nil, errors.New("--submit needs --partition and --dir")
		}
		if f.part >= 0 || f.gather != "" {
			return nil, errors.New("--submit runs --part and --gather itself")
		}
	}
	return f, nil
}

// parseWhen reads an RFC 3339 time (or a date), or -Nd / -Nh / -Nm
// before now.
func parseWhen(s string, now time.Time) (time.Time, error) {
	if strings.HasPrefix(s, "-") && len(s) > 2 {
		n, err := strconv.ParseFloat(s[1:len(s)-1], 64)
		unit := map[byte]time.Duration{'d': 24 * time.Hour, 'h': time.Hour, 'm': time.Minute}[s[len(s)-1]]
		if err == nil && unit > 0 && n >= 0 && !math.IsInf(n, 0) {
			return now.Add(-time.Duration(n * float64(unit))), nil
		}
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is neither a time (2026-11-01, 2026-11-01T08:00:00Z) nor -Nd, -Nh or -Nm", s)
}

// parseRatios reads TYPE=R,... with R > 0.
func parseRatios(flagName, s string) (map[string]float64, error) {
	if s == "" {
		return nil, nil
	}
	out := map[string]float64{}
	for _, part := range simSplitList(s) {
		name, value, ok := strings.Cut(part, "=")
		name = strings.TrimSpace(name)
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if !ok || name == "" || err != nil || !(v > 0) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%s: %q is not TYPE=R with R > 0", flagName, part)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s: type %s given twice", flagName, name)
		}
		out[name] = v
	}
	return out, nil
}

func runWhatif(args []string, stdout, stderr io.Writer) int {
	f, err := parseWhatifFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "whatif: %v\n", err)
		return 2
	}
	if err := f.run(context.Background(), stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "whatif: %v\n", err)
		return 1
	}
	return 0
}

func (f *whatifFlags) run(ctx context.Context, stdout, stderr io.Writer) error {
	var client *rest.Client
	if f.sacct == "" {
		c, err := f.restClient()
		if err != nil {
			return err
		}
		client = c
	}
	raw, err := f.readHistory(ctx, client)
	if err != nil {
		return err
	}
	h, err := history.Parse(raw)
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	h = inPartitions(h, f.partitions)
	if f.sacct == "" {
		h = endedBy(h, f.to)
	}
	cluster, err := f.clusterOf(ctx, client, h)
	if err != nil {
		return err
	}
	src, err := f.sources()
	if err != nil {
		return err
	}
	w, err := whatif.Build(h, cluster, src, whatif.Options{Typed: f.typed, Entities: f.entities, NodeTypes: f.nodeTypes})
	if err != nil {
		return err
	}
	if len(w.Jobs) == 0 {
		where := "the history of " + f.from.Format(time.RFC3339) + " to " + f.to.Format(time.RFC3339)
		if f.sacct != "" {
			where = f.sacct
		}
		return fmt.Errorf("no usable job in %s (%d left out: %s)", where, len(w.Skipped), skippedSummary(w.Skipped))
	}
	if n := f.neverPreempted(w); n > 0 {
		f.notes = append(f.notes, fmt.Sprintf("%d jobs take no preemption (preempt=never, by their tag or scheduler.default_preempt): "+
			"the daemon would not stop them once started, but the policy replays may, which can overstate what a policy gains", n))
	}
	if f.submit {
		return f.submitSweep(ctx, raw, cluster, stdout)
	}
	tasks := f.set.Tasks()
	if f.part >= 0 {
		if f.part >= len(tasks) {
			return fmt.Errorf("--part %d: there are %d replays", f.part, len(tasks))
		}
		s, err := whatif.RunTask(w, f.set, tasks[f.part])
		return writePart(f.partOut, f.sweepID, tasks[f.part], s, err)
	}
	var r *whatif.Report
	if f.gather != "" {
		if r, err = gatherParts(w, f.set, tasks, f.gather, f.sweepID); err != nil {
			return err
		}
	} else {
		progress := func(done, total int, name string) {
			if !f.quiet {
				fmt.Fprintf(stderr, "whatif: %d/%d replays done (%s)\n", done, total, name)
			}
		}
		if !f.quiet {
			fmt.Fprintf(stderr, "whatif: %d jobs, %d replays, %d at once\n", len(w.Jobs), len(tasks), f.set.Workers)
		}
		if r, err = whatif.Run(w, f.set, progress); err != nil {
			return err
		}
	}
	r.Notes = append(r.Notes, f.notes...)
	return f.output(r, stdout)
}

func skippedSummary(skips []history.Skip) string {
	by := map[string]int{}
	for _, s := range skips {
		by[s.Reason]++
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(by)) {
		parts = append(parts, fmt.Sprintf("%s: %d", k, by[k]))
	}
	return strings.Join(parts, ", ")
}

// output writes the report where asked.
func (f *whatifFlags) output(r *whatif.Report, stdout io.Writer) error {
	if f.jsonOut != "" {
		if err := writeFile(f.jsonOut, "JSON report", func(w io.Writer) error { return writeReportJSON(w, r) }); err != nil {
			return err
		}
	}
	if f.textOut != "" {
		if err := writeFile(f.textOut, "text report", r.WriteText); err != nil {
			return err
		}
	}
	if f.htmlOut != "" {
		if err := writeFile(f.htmlOut, "HTML report", r.WriteHTML); err != nil {
			return err
		}
	}
	if f.asJSON {
		return writeReportJSON(stdout, r)
	}
	return r.WriteText(stdout)
}

func writeReportJSON(w io.Writer, r *whatif.Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// restClient connects to slurmrestd as the daemon's configuration says.
func (f *whatifFlags) restClient() (*rest.Client, error) {
	cfg := f.cfg
	rc := rest.Config{URL: cfg.Slurm.RestURL, UserName: cfg.Slurm.User, TokenFile: cfg.Slurm.TokenFile,
		Partitions: f.partitions, HTTPClient: daemon.SlurmHTTPClient(), Timeout: 2 * time.Minute, ReadTimeout: cfg.Slurm.ReadTimeout,
		SkipAccounting: true}
	if cfg.Slurm.APIVersion != "" {
		rc.Versions = []string{cfg.Slurm.APIVersion}
	}
	c, err := rest.New(rc)
	if err != nil {
		return nil, fmt.Errorf("slurm: %w", err)
	}
	return c, nil
}

// readHistory reads the file, or asks slurmrestd for the window (and
// saves it when asked).
func (f *whatifFlags) readHistory(ctx context.Context, c *rest.Client) ([]byte, error) {
	if f.sacct != "" {
		raw, err := os.ReadFile(f.sacct)
		if err != nil {
			return nil, fmt.Errorf("history: %w", err)
		}
		return raw, nil
	}
	raw, err := c.JobHistory(ctx, f.from, f.to)
	if err != nil {
		return nil, fmt.Errorf("read the history of %s to %s from slurmrestd: %w", f.from.Format(time.RFC3339), f.to.Format(time.RFC3339), err)
	}
	if f.saveHistory != "" {
		if err := os.WriteFile(f.saveHistory, raw, 0o644); err != nil {
			return nil, fmt.Errorf("--save-history: %w", err)
		}
	}
	return raw, nil
}

// endedBy keeps the jobs that ended by to: slurmdbd answers with the jobs
// eligible or running within the window, some of which ended after it.
func endedBy(h *history.History, to time.Time) *history.History {
	out := &history.History{Skipped: h.Skipped}
	for _, j := range h.Jobs {
		if j.End.After(to) {
			out.Skipped = append(out.Skipped, history.Skip{ID: j.ID, Reason: "ended after the window"})
			continue
		}
		out.Jobs = append(out.Jobs, j)
	}
	return out
}

// neverPreempted counts the jobs the daemon would never stop: tagged
// preempt=never, or untagged for it with the site's default never.
func (f *whatifFlags) neverPreempted(w *whatif.Workload) int {
	def := f.cfg.Scheduler.DefaultPreempt
	n := 0
	for _, j := range w.Jobs {
		if cmp.Or(j.Preempt, def) == bridge.PreemptNever {
			n++
		}
	}
	return n
}

// inPartitions keeps the jobs of the partitions (all when none is named);
// the others are left out with their reason.
func inPartitions(h *history.History, partitions []string) *history.History {
	if len(partitions) == 0 {
		return h
	}
	out := &history.History{Skipped: h.Skipped}
	for _, j := range h.Jobs {
		if slices.Contains(partitions, j.Partition) {
			out.Jobs = append(out.Jobs, j)
			continue
		}
		out.Skipped = append(out.Skipped, history.Skip{ID: j.ID, Reason: "other partition"})
	}
	return out
}

// clusterOf is --cluster, else the partitions' nodes as slurmrestd gives
// them, else (offline) the history's peak use of each type.
func (f *whatifFlags) clusterOf(ctx context.Context, c *rest.Client, h *history.History) (whatif.Cluster, error) {
	cl := whatif.Cluster{GPUs: f.cluster, PerServer: f.perServer}
	if c != nil && (len(cl.GPUs) == 0 || f.nodeTypes == nil) {
		// The nodes give the cluster, and the type of the records that
		// name none, even when --cluster is given.
		snap, err := c.Snapshot(ctx)
		if err != nil {
			return cl, fmt.Errorf("read the cluster's nodes from slurmrestd (or give --cluster and --node-types): %w", err)
		}
		if f.nodeTypes == nil {
			f.nodeTypes = map[string]string{}
			for _, n := range snap.Nodes {
				if n.GPUType != "" {
					f.nodeTypes[n.Name] = n.GPUType
				}
			}
		}
		if len(cl.GPUs) == 0 {
			cl = clusterOfNodes(snap.Nodes)
			if len(cl.GPUs) == 0 {
				return cl, fmt.Errorf("the partitions %v have no typed GPUs; give --cluster", f.partitions)
			}
			maps.Copy(cl.PerServer, f.perServer)
			f.notes = append(f.notes, "cluster read from slurmrestd's nodes")
		}
	}
	if len(cl.GPUs) > 0 {
		return cl, cl.Validate()
	}
	cl = peakUse(h, f.nodeTypes, f.perServer)
	if len(cl.GPUs) == 0 {
		return cl, errors.New("the history names no GPU type; give --cluster")
	}
	f.notes = append(f.notes,
		"cluster not given: taken as the history's peak use of each type, which may be less than the site has (give --cluster)")
	return cl, cl.Validate()
}

// clusterOfNodes counts the GPUs of each type; a type whose nodes all have
// the same number of GPUs gets that node size.
func clusterOfNodes(nodes []bridge.Node) whatif.Cluster {
	cl := whatif.Cluster{GPUs: map[string]int{}, PerServer: map[string]int{}}
	sizes := map[string]map[int]bool{}
	for _, n := range nodes {
		if n.GPUType == "" || n.GPUs == 0 || n.Unreadable != nil {
			continue
		}
		cl.GPUs[n.GPUType] += n.GPUs
		if sizes[n.GPUType] == nil {
			sizes[n.GPUType] = map[int]bool{}
		}
		sizes[n.GPUType][n.GPUs] = true
	}
	for t, s := range sizes {
		if len(s) == 1 {
			for size := range s {
				cl.PerServer[t] = size
			}
		}
	}
	return cl
}

// peakUse is the most GPUs of each type the history's jobs held at once
// (a job's type from its record, else from its nodes), rounded up to
// whole nodes of perNode. Jobs that held several types are left out, as
// the replay leaves them.
func peakUse(h *history.History, nodeTypes map[string]string, perNode map[string]int) whatif.Cluster {
	type edge struct {
		at   time.Time
		typ  string
		gpus int
	}
	var edges []edge
	for _, j := range h.Jobs {
		typ := j.GPUType
		if typ == "" {
			typ = whatif.TypeOfNodes(j.Nodes, nodeTypes)
		}
		if typ != "" && !strings.Contains(typ, ",") && j.GPUs > 0 {
			edges = append(edges, edge{j.Start, typ, j.GPUs}, edge{j.End, typ, -j.GPUs})
		}
	}
	// Ends before starts at the same time: a GPU freed and taken at once
	// is held once.
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.gpus - b.gpus
	})
	cl := whatif.Cluster{GPUs: map[string]int{}, PerServer: map[string]int{}}
	now := map[string]int{}
	for _, e := range edges {
		now[e.typ] += e.gpus
		cl.GPUs[e.typ] = max(cl.GPUs[e.typ], now[e.typ])
	}
	for t, per := range perNode {
		if n, ok := cl.GPUs[t]; ok && per > 0 {
			cl.GPUs[t] = (n + per - 1) / per * per
			cl.PerServer[t] = per
		}
	}
	return cl
}

// sources gathers the rate sources the flags name.
func (f *whatifFlags) sources() (whatif.Sources, error) {
	src := whatif.Sources{Speed: f.speed}
	if !f.noReference {
		t, err := simLoadTable(f.throughputsFile)
		if err != nil {
			return src, err
		}
		src.Reference = t
	}
	if f.measured != "" {
		m, err := measuredRates(f.measured)
		if err != nil {
			return src, fmt.Errorf("--measured: %w", err)
		}
		src.Measured = m
	}
	return src, nil
}

// measuredRates reads the daemon's status (a file, or the daemon itself)
// and keeps, per model and GPU count, the rates the daemon holds from
// measurements: each type's mean over the jobs that report one.
func measuredRates(where string) (func(string, int) map[string]float64, error) {
	raw, err := os.ReadFile(where)
	if errors.Is(err, os.ErrNotExist) && !strings.Contains(where, "/") || strings.HasPrefix(where, "unix:") {
		raw, err = fetchStatus(where)
	}
	if err != nil {
		return nil, err
	}
	var st api.Status
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, fmt.Errorf("the daemon's status: %w", err)
	}
	type key struct {
		model string
		gpus  int
	}
	sum := map[key]map[string][2]float64{}
	for _, j := range st.Jobs {
		if j.Model == "" {
			continue
		}
		k := key{bridge.ModelKey(j.Model), j.GPUs}
		for typ, tp := range j.Throughputs {
			if tp.Source != "measured" && tp.Source != "estimated" || !(tp.StepsPerS > 0) {
				continue
			}
			if sum[k] == nil {
				sum[k] = map[string][2]float64{}
			}
			s := sum[k][typ]
			sum[k][typ] = [2]float64{s[0] + tp.StepsPerS, s[1] + 1}
		}
	}
	return func(model string, gpus int) map[string]float64 {
		s := sum[key{bridge.ModelKey(model), gpus}]
		if s == nil {
			return nil
		}
		out := make(map[string]float64, len(s))
		for typ, v := range s {
			out[typ] = v[0] / v[1]
		}
		return out
	}, nil
}

// writePart writes one array task's schedule (or its failure), marked
// with the sweep it belongs to.
func writePart(path, sweep string, t whatif.Task, s *whatif.Schedule, runErr error) error {
	p := partFile{Sweep: sweep, Task: t, Schedule: s}
	if runErr != nil {
		p.Error = runErr.Error()
	}
	return writeFile(path, "replay part", func(w io.Writer) error { return json.NewEncoder(w).Encode(p) })
}

type partFile struct {
	Sweep    string           `json:"sweep"`
	Task     whatif.Task      `json:"task"`
	Schedule *whatif.Schedule `json:"schedule,omitempty"`
	Error    string           `json:"error,omitempty"`
}

// gatherParts reads part-N.json for every task. A part that is missing,
// unreadable, of another sweep or of another workload is that replay's
// failure; the Slurm baseline, which every figure is read against, is
// replayed here when its part is not usable.
func gatherParts(w *whatif.Workload, set whatif.Settings, tasks []whatif.Task, dir, sweep string) (*whatif.Report, error) {
	out := make([]*whatif.Schedule, len(tasks))
	errs := make([]error, len(tasks))
	for k, t := range tasks {
		raw, err := os.ReadFile(filepath.Join(dir, partName(k)))
		if err != nil {
			errs[k] = fmt.Errorf("no schedule: %w", err)
			continue
		}
		var p partFile
		switch err := json.Unmarshal(raw, &p); {
		case err != nil:
			errs[k] = fmt.Errorf("part %d: %w", k, err)
		case p.Sweep != sweep:
			errs[k] = fmt.Errorf("part %d is of sweep %q, not %q: a task of another sweep wrote it", k, p.Sweep, sweep)
		case p.Task != t:
			errs[k] = fmt.Errorf("part %d is %s, want %s: the parts are of another sweep", k, p.Task.Name(), t.Name())
		case p.Error != "":
			errs[k] = errors.New(p.Error)
		case p.Schedule == nil || len(p.Schedule.End) != len(w.Jobs):
			errs[k] = fmt.Errorf("part %d has no schedule of the %d jobs", k, len(w.Jobs))
		default:
			out[k] = p.Schedule
		}
	}
	if errs[0] != nil {
		out[0], errs[0] = whatif.RunTask(w, set, tasks[0])
	}
	return whatif.Gather(w, set, tasks, out, errs)
}

func partName(k int) string { return fmt.Sprintf("part-%d.json", k) }
