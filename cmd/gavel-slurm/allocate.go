package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
	"github.com/gavel-slurm/gavel-slurm/policy"
)

func init() {
	register("allocate", subcommand{
		summary: "compute a policy's allocation for a problem (JSON) and print it",
		run: func(args []string) int {
			return runAllocate(args, os.Stdin, os.Stdout, os.Stderr)
		},
	})
}

// errUsage marks errors in the command line or the input: exit status 2.
var errUsage = errors.New("usage")

// exitStatus reports a command's error on stderr, prefixed with the
// command's name, and returns its exit status: 0 on success or -h, 2 for
// errors marked errUsage, 1 for the rest.
func exitStatus(command string, err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "gavel-slurm %s: %s\n", command, strings.TrimSuffix(err.Error(), ": "+errUsage.Error()))
		return 2
	default:
		fmt.Fprintf(stderr, "gavel-slurm %s: %v\n", command, err)
		return 1
	}
}

// parseArgs parses a command's flags, which take no positional
// arguments: flag.ErrHelp for -h, errors marked errUsage otherwise.
func parseArgs(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%v: %w", err, errUsage)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: %w", fs.Arg(0), errUsage)
	}
	return nil
}

// runAllocate is the allocate command with its streams passed in, so tests
// can drive it. It returns the exit status: 0 on success, 2 for a bad
// command line or a bad problem, 1 when the policy fails (e.g. an
// infeasible problem).
func runAllocate(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return exitStatus("allocate", allocate(args, stdin, stdout), stderr)
}

func allocate(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("allocate", flag.ContinueOnError)
	fs.SetOutput(stdout)
	name := fs.String("policy", "max_min_fairness_perf", "policy `name` (see --list-policies)")
	input := fs.String("input", "", "problem `file` in JSON, or - for standard input")
	sample := fs.Bool("sample", false, "use a built-in sample problem (reference throughputs, 6 GPUs of each type, 12 jobs)")
	asJSON := fs.Bool("json", false, "print the allocation as JSON")
	list := fs.Bool("list-policies", false, "list the policy names and exit")
	seed := fs.Int64("seed", 0, "seed of the randomized policies (fifo, gandiva)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: gavel-slurm allocate --policy NAME (--input FILE|- | --sample) [--json]")
		fs.PrintDefaults()
	}
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if *list {
		for _, n := range policy.Names() {
			fmt.Fprintln(stdout, n)
		}
		return nil
	}

	var p *policy.Problem
	var err error
	switch {
	case *sample && *input != "":
		return fmt.Errorf("--sample and --input are exclusive: %w", errUsage)
	case *sample:
		if p, err = sampleProblem(); err != nil {
			return err
		}
	case *input == "":
		return fmt.Errorf("no problem given: use --input FILE, --input - or --sample: %w", errUsage)
	default:
		if p, err = readProblem(*input, stdin); err != nil {
			return err
		}
	}

	pol, err := policy.New(*name, policy.Options{Seed: *seed})
	if err != nil {
		return fmt.Errorf("%v: %w", err, errUsage)
	}
	start := time.Now()
	a, err := pol.Allocate(p)
	elapsed := time.Since(start)
	if err != nil {
		return err
	}
	eff, err := policy.JobThroughputs(p, a)
	if err != nil {
		return fmt.Errorf("policy %s returned an inconsistent allocation: %w", *name, err)
	}
	if *asJSON {
		return writeAllocationJSON(stdout, a, elapsed)
	}
	return writeAllocationTable(stdout, p, a, eff, elapsed)
}

// readProblem decodes the problem from a file or, for "-", from stdin.
func readProblem(path string, stdin io.Reader) (*policy.Problem, error) {
	r := stdin
	name := "standard input"
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("%v: %w", err, errUsage)
		}
		defer f.Close()
		r, name = f, path
	}
	p, err := policy.DecodeProblem(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %v: %w", name, err, errUsage)
	}
	return p, nil
}

// allocationJSON is the --json output.
type allocationJSON struct {
	Policy string `json:"policy"`
	// Objective is null when it is not finite (an unreachable makespan).
	Objective    *float64     `json:"objective"`
	Allocation   rowsJSON     `json:"allocation"`
	SolveSeconds float64      `json:"solve_seconds"`
	Stats        policy.Stats `json:"stats"`
	// Notes says, by job id, what the policy could not do for a job (an
	// SLO it dropped); absent when there is nothing to say.
	Notes map[string]string `json:"notes,omitempty"`
}

// rowsJSON writes an allocation's rows as Allocation.Map would have them,
// {row key: {type: fraction}} in key order, without building the maps:
// with thousands of jobs, building, sorting and walking them by
// reflection took most of the time of writing the output.
type rowsJSON struct{ a *policy.Allocation }

func (r rowsJSON) MarshalJSONTo(enc *jsontext.Encoder) error {
	rows := r.a.Rows
	keys := make([]string, len(rows))
	order := make([]int, len(rows))
	for i := range rows {
		keys[i], order[i] = rows[i].Key(), i
	}
	slices.SortFunc(order, func(x, y int) int { return cmp.Or(strings.Compare(keys[x], keys[y]), x-y) })
	types := make([]int, len(r.a.Types))
	for k := range types {
		types[k] = k
	}
	slices.SortFunc(types, func(x, y int) int { return cmp.Or(strings.Compare(r.a.Types[x], r.a.Types[y]), x-y) })
	if err := enc.WriteToken(jsontext.BeginObject); err != nil {
		return err
	}
	for n, i := range order {
		// Of rows with one key (a job whose id is "a+b" beside the pair
		// a+b), the last one stands, as in a map filled in row order.
		if n+1 < len(order) && keys[order[n+1]] == keys[i] {
			continue
		}
		if err := enc.WriteToken(jsontext.String(keys[i])); err != nil {
			return err
		}
		if err := enc.WriteToken(jsontext.BeginObject); err != nil {
			return err
		}
		for m, k := range types {
			if m+1 < len(types) && r.a.Types[types[m+1]] == r.a.Types[k] {
				continue
			}
			x := rows[i].Fractions[k]
			// jsontext.Float would write these as strings.
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return fmt.Errorf("allocation of %s on %s: %v is not a finite number", keys[i], r.a.Types[k], x)
			}
			if err := enc.WriteToken(jsontext.String(r.a.Types[k])); err != nil {
				return err
			}
			if err := enc.WriteToken(jsontext.Float(x)); err != nil {
				return err
			}
		}
		if err := enc.WriteToken(jsontext.EndObject); err != nil {
			return err
		}
	}
	return enc.WriteToken(jsontext.EndObject)
}

func writeAllocationJSON(w io.Writer, a *policy.Allocation, elapsed time.Duration) error {
	out := allocationJSON{
		Policy:       a.Policy,
		Allocation:   rowsJSON{a},
		SolveSeconds: elapsed.Seconds(),
		Stats:        a.Stats,
		Notes:        a.Notes,
	}
	if !math.IsInf(a.Objective, 0) && !math.IsNaN(a.Objective) {
		out.Objective = &a.Objective
	}
	b, err := json.Marshal(out, allocationJSONOptions)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// allocationJSONOptions keep the --json output as encoding/json's
// indenting Encoder wrote it, byte for byte: map keys sorted, two-space
// indents, <, >, & and U+2028/U+2029 escaped in strings, invalid UTF-8 as
// U+FFFD, nil maps and slices as null, and omitempty leaving out false and
// 0 too (Stats relies on it). Names are unique by construction (struct
// fields, map keys, rows deduplicated), so the encoder's check for
// duplicates, a quarter of the time, is left out.
var allocationJSONOptions = json.JoinOptions(
	jsontext.AllowDuplicateNames(true),
	json.Deterministic(true),
	jsontext.WithIndent("  "),
	jsontext.EscapeForHTML(true),
	jsontext.EscapeForJS(true),
	jsontext.AllowInvalidUTF8(true),
	json.FormatNilMapAsNull(true),
	json.FormatNilSliceAsNull(true),
	jsonv1.OmitEmptyWithLegacySemantics(true),
)

// writeAllocationTable prints one aligned line per job or pair: its time
// fraction on each type and the effective throughput of each member.
func writeAllocationTable(w io.Writer, p *policy.Problem, a *policy.Allocation, eff []float64, elapsed time.Duration) error {
	index := make(map[string]int, len(p.Jobs))
	for i := range p.Jobs {
		index[p.Jobs[i].ID] = i
	}
	fmt.Fprintf(w, "policy %s: objective %s (%s), %d LP(s), solved in %.1f ms\n\n",
		a.Policy, formatObjective(a.Objective), objectiveUnit(a.Policy), a.Stats.LPs, float64(elapsed.Microseconds())/1000)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "job\t")
	for _, t := range a.Types {
		fmt.Fprintf(tw, "%s\t", t)
	}
	fmt.Fprint(tw, "steps/s\t\n")
	for _, r := range a.Rows {
		fmt.Fprintf(tw, "%s\t", r.Key())
		for _, x := range r.Fractions {
			fmt.Fprintf(tw, "%.3f\t", x)
		}
		if len(r.Jobs) == 1 {
			fmt.Fprintf(tw, "%.3f\t\n", eff[index[r.Jobs[0]]])
		} else {
			fmt.Fprint(tw, "(pair)\t\n")
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return writeNotes(w, a.Notes)
}

// writeNotes prints the policy's notes after the table, one line per job
// in job id order.
func writeNotes(w io.Writer, notes map[string]string) error {
	if len(notes) == 0 {
		return nil
	}
	ids := make([]string, 0, len(notes))
	for id := range notes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	if _, err := fmt.Fprintln(w, "\nnotes:"); err != nil {
		return err
	}
	for _, id := range ids {
		if _, err := fmt.Fprintf(w, "  job %s: %s\n", id, notes[id]); err != nil {
			return err
		}
	}
	return nil
}

func formatObjective(v float64) string {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return fmt.Sprint(v)
	}
	return fmt.Sprintf("%.6g", v)
}

// objectiveUnit says what Allocation.Objective means for the named policy.
func objectiveUnit(name string) string {
	t, err := policy.TraitsOf(name)
	if err != nil {
		return "objective"
	}
	return t.Objective.Unit()
}

// sampleProblem builds a small problem from the reference throughput table:
// 6 GPUs of each type and 12 jobs of different models, some distributed,
// with histories, SLOs, cloud-like prices and co-location pairs, so every
// policy has something to work with.
func sampleProblem() (*policy.Problem, error) {
	table, err := throughputs.Reference()
	if err != nil {
		return nil, err
	}
	p := &policy.Problem{
		GPUs: map[string]int{"v100": 6, "p100": 6, "k80": 6},
		// Approximate on-demand cloud prices, $ per GPU-hour.
		Costs: map[string]float64{"v100": 3.06, "p100": 1.46, "k80": 0.90},
	}
	jobs := []struct {
		model string
		sf    int
		hours float64 // run time alone on a v100 at this scale factor
	}{
		{"ResNet-50 (batch size 64)", 1, 8},
		{"ResNet-18 (batch size 128)", 1, 3},
		{"Transformer (batch size 64)", 1, 12},
		{"LM (batch size 20)", 1, 2},
		{"Recommendation (batch size 2048)", 1, 5},
		{"A3C", 1, 10},
		{"CycleGAN", 1, 6},
		{"ResNet-18 (batch size 32)", 1, 1.5},
		{"Transformer (batch size 128)", 2, 9},
		{"ResNet-50 (batch size 32)", 2, 14},
		{"LM (batch size 80)", 4, 4},
		{"Recommendation (batch size 512)", 1, 20},
	}
	for i, js := range jobs {
		if !table.Has(js.model, js.sf) {
			return nil, fmt.Errorf("sample problem: reference table lacks %s at scale factor %d", js.model, js.sf)
		}
		tp := map[string]float64{}
		for gpu := range p.GPUs {
			if r := table.Isolated(js.model, js.sf, gpu); r > 0 {
				tp[gpu] = r
			}
		}
		since := float64(i%4) * 1800
		job := policy.Job{
			ID:             fmt.Sprint(i),
			Throughputs:    tp,
			ScaleFactor:    js.sf,
			Weight:         1,
			StepsRemaining: js.hours * 3600 * tp["v100"],
			TimeSinceStart: since,
			IsolatedTime:   since / 2,
			Arrival:        float64(i),
		}
		if i%3 == 0 {
			job.SLO = 4 * js.hours * 3600
		}
		p.Jobs = append(p.Jobs, job)
	}
	// Pairs of consecutive single-GPU jobs where the table can co-locate them.
	for i := 0; i+1 < len(jobs); i += 2 {
		a, b := jobs[i], jobs[i+1]
		if a.sf != 1 || b.sf != 1 {
			continue
		}
		pt := map[string][2]float64{}
		for gpu := range p.GPUs {
			if ra, rb, ok := table.Pair(a.model, b.model, 1, gpu); ok && ra > 0 && rb > 0 {
				pt[gpu] = [2]float64{ra, rb}
			}
		}
		if len(pt) > 0 {
			p.Pairs = append(p.Pairs, policy.Pair{Jobs: [2]string{p.Jobs[i].ID, p.Jobs[i+1].ID}, Throughputs: pt})
		}
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("sample problem: %w", err)
	}
	return p, nil
}
