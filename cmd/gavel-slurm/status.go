package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/gavel-slurm/gavel-slurm/internal/api"
)

// defaultServer is where the daemon listens unless configured otherwise.
const defaultServer = "127.0.0.1:8390"

func init() {
	register("status", subcommand{
		summary: "show the daemon's jobs, allocation and decisions (squeue-like)",
		run: func(args []string) int {
			return runStatus(args, os.Stdout, os.Stderr)
		},
	})
}

func runStatus(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", defaultServer, "daemon API address: host:port, http(s)://host:port or unix:/path")
	asJSON := fs.Bool("json", false, "print the API's JSON instead of the table (filters apply to its jobs)")
	var f statusFilter
	fs.StringVar(&f.users, "user", "", "only these users' jobs (comma-separated), like squeue -u")
	fs.StringVar(&f.states, "state", "", "only jobs in these Slurm states (comma-separated, e.g. RUNNING,PENDING), like squeue -t")
	fs.StringVar(&f.types, "type", "", "only jobs running on, or allocated time on, these GPU types (comma-separated)")
	watch := fs.Duration("watch", 0, "print again every interval (e.g. 10s) until interrupted")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "status: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *watch < 0 {
		fmt.Fprintf(stderr, "status: --watch %v: must be positive\n", *watch)
		return 2
	}
	for {
		// While watching, a failed fetch (a daemon restarting, one 503)
		// is said on stderr and the watch goes on.
		if rc := statusOnce(*server, *asJSON, f, stdout, stderr); *watch == 0 {
			return rc
		}
		time.Sleep(*watch)
		fmt.Fprintln(stdout)
	}
}

// statusOnce fetches and prints the status once.
func statusOnce(server string, asJSON bool, f statusFilter, stdout, stderr io.Writer) int {
	body, err := fetchStatus(server)
	if err != nil {
		fmt.Fprintf(stderr, "status: %v\n", err)
		return 1
	}
	if asJSON && f.empty() {
		if !json.Valid(body) {
			// Something else answers on the daemon's address (a proxy's
			// page, another service): not passed on as if it were status.
			fmt.Fprintf(stderr, "status: decode the daemon's answer: the answer from %s is not JSON: %.80q\n", server, body)
			return 1
		}
		stdout.Write(body)
		return 0
	}
	var st api.Status
	if err := json.Unmarshal(body, &st); err != nil {
		fmt.Fprintf(stderr, "status: decode the daemon's answer: %v\n", err)
		return 1
	}
	st.Jobs = f.apply(st.Jobs)
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(st); err != nil {
			fmt.Fprintf(stderr, "status: %v\n", err)
			return 1
		}
		return 0
	}
	renderStatus(stdout, st)
	return 0
}

// statusFilter keeps the jobs squeue's -u and -t would, and those of some
// GPU types; an empty field keeps everything.
type statusFilter struct {
	users, states, types string
}

func (f statusFilter) empty() bool { return f.users == "" && f.states == "" && f.types == "" }

func (f statusFilter) apply(jobs []api.JobStatus) []api.JobStatus {
	users, states, types := splitSet(f.users), splitSet(strings.ToUpper(f.states)), splitSet(strings.ToLower(f.types))
	out := []api.JobStatus{} // a list, empty or not, in --json

	for _, j := range jobs {
		if users != nil && !users[j.User] || states != nil && !states[j.State] {
			continue
		}
		if types != nil && !types[strings.ToLower(j.GPUType)] && !allocatedOn(j, types) {
			continue
		}
		out = append(out, j)
	}
	return out
}

func allocatedOn(j api.JobStatus, types map[string]bool) bool {
	for t, share := range j.Allocation {
		if share > 0 && types[strings.ToLower(t)] {
			return true
		}
	}
	return false
}

func splitSet(list string) map[string]bool {
	if strings.TrimSpace(list) == "" {
		return nil
	}
	out := map[string]bool{}
	for _, v := range strings.Split(list, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out[v] = true
		}
	}
	return out
}

func fetchStatus(server string) ([]byte, error) {
	client, base := api.Client(server)
	resp, err := client.Get(base + "/v1/status")
	if err != nil {
		return nil, fmt.Errorf("reach the daemon at %s: %w", server, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read the daemon's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("daemon at %s answered %s: %s", server, resp.Status, strings.TrimSpace(string(body)))
	}
	return body, nil
}

// renderStatus prints the job table, then one summary line per GPU type
// and one for the round.
func renderStatus(w io.Writer, st api.Status) {
	renderPreemption(w, st)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOBID\tUSER\tMODEL\tGPUS\tTYPE\tALLOC\tRECEIVED\tSTATE\tPREEMPT\tREASON")
	for _, j := range st.Jobs {
		model := j.Model
		if !j.Managed {
			model = "(unmanaged)"
		}
		reason := j.Reason
		if j.Grace != "" {
			reason = j.Grace + "; " + reason
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n",
			orDash(j.JobID), orDash(j.User), orDash(model), j.GPUs, orDash(j.GPUType),
			formatAllocation(j), formatReceived(j.Received), orDash(j.State), orDash(j.Preempt), orDash(reason))
	}
	tw.Flush()
	fmt.Fprintln(w)
	renderRates(w, st.Jobs)
	for _, t := range st.Types {
		line := fmt.Sprintf("%s: %d GPUs, %d busy, %d running, %d pending, allocation keeps %.2f busy",
			printable(t.Type), t.GPUs, t.Busy, t.Running, t.Pending, t.AllocatedGPUs)
		if t.CostPerHour > 0 {
			line += fmt.Sprintf(", $%.2f/GPU-hour", t.CostPerHour)
		}
		fmt.Fprintln(w, line)
	}
	for _, warning := range st.Warnings {
		fmt.Fprintln(w, "warning: "+printable(warning))
	}
	r := st.Round
	line := fmt.Sprintf("round %d, policy %s, every %s", r.Number, orDash(r.Policy), time.Duration(r.LengthSeconds*float64(time.Second)))
	if r.Number > 0 {
		line += fmt.Sprintf(", took %s, %d actions sent, %d failed", roundDuration(r.DurationSeconds), r.ActionsSent, r.ActionsFailed)
	}
	if r.DryRun {
		line += ", dry run"
	}
	if r.Skipped != "" {
		line += ", sent nothing: " + printable(r.Skipped)
	}
	fmt.Fprintln(w, line)
	if r.AllocationFallback != "" {
		fmt.Fprintln(w, "allocation: equal shares stand in for the policy, which failed: "+printable(r.AllocationFallback))
	}
	renderLease(w, st)
	if st.Accounting != "" {
		fmt.Fprintln(w, "accounting: "+printable(st.Accounting))
	}
	renderEntities(w, st)
}

// renderEntities prints one line per entity when there are several: the
// share the policy gives it and the share of the service it received,
// both in effective GPUs (each job's fastest type's speed).
func renderEntities(w io.Writer, st api.Status) {
	if len(st.Entities) < 2 {
		return
	}
	var alloc, got float64
	for _, e := range st.Entities {
		alloc += e.EffectiveGPUs
		got += e.EffectiveGPUSeconds
	}
	share := func(v, total float64) string {
		if total <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.0f%%", 100*v/total)
	}
	fmt.Fprintln(w, "entities (weight, jobs, allocated effective GPUs and share, received share of effective GPU time):")
	for _, e := range st.Entities {
		fmt.Fprintf(w, "  %-16s weight %.3g, %d jobs, %.2f GPUs (%s), received %s\n", printable(e.Name), e.Weight, e.Jobs,
			e.EffectiveGPUs, share(e.EffectiveGPUs, alloc), share(e.EffectiveGPUSeconds, got))
	}
}

// renderLease prints when the jobs the daemon keeps waiting would become
// Slurm's if it stopped, and the JWT's warning when it has one.
func renderLease(w io.Writer, st api.Status) {
	if l := st.Lease; l != nil {
		switch {
		case l.Job == 0:
			fmt.Fprintln(w, "lease: none yet: no job is kept waiting until the first renewal")
		default:
			fmt.Fprintf(w, "lease: job %d, runs out at %s unless renewed (each round renews it for %s); then Slurm schedules the jobs kept waiting on its own\n",
				l.Job, l.Expires.Format(time.RFC3339), time.Duration(l.LengthSeconds*float64(time.Second)))
		}
		if l.Error != "" {
			fmt.Fprintln(w, "lease: last renewal failed: "+printable(l.Error))
		}
	}
	if t := st.Token; t != nil && t.Warning != "" {
		fmt.Fprintln(w, "warning: "+printable(t.Warning))
	}
}

// renderPreemption prints a banner while the daemon preempts nothing
// because it cannot prove that requeues work, with the jobs whose requeue
// failed; nothing while preemption is on or the daemon is a standby.
func renderPreemption(w io.Writer, st api.Status) {
	p := st.Preemption
	if p.Enabled || st.Round.Standby {
		return
	}
	reason := p.Reason
	if reason == "" {
		reason = "the requeue path is checked in the first round"
	}
	fmt.Fprintln(w, "PREEMPTION OFF: "+printable(reason))
	fmt.Fprintln(w, "  running jobs are treated as preempt=never until requeues are proven to work")
	for _, j := range p.Waiting {
		fmt.Fprintf(w, "  job %s: signalled, requeue failing since %s: %s\n",
			printable(j.JobID), j.Since.Format(time.RFC3339), printable(j.Error))
	}
	fmt.Fprintln(w)
}

// renderRates prints, for the managed jobs, their progress and the step
// rate the policy uses on each GPU type with where it comes from
// (measured by the collectors, estimated from other jobs, the reference
// table, or the default), followed by a blank line; nothing when no job
// has rates.
func renderRates(w io.Writer, jobs []api.JobStatus) {
	typeSet := map[string]float64{}
	for _, j := range jobs {
		for t := range j.Throughputs {
			typeSet[t] = 0
		}
	}
	if len(typeSet) == 0 {
		return
	}
	types := sortedTypes(typeSet)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := "JOBID\tSTEPS DONE/TOTAL\tRESTART"
	for _, t := range types {
		header += "\t" + strings.ToUpper(printable(t)) + " STEPS/S"
	}
	fmt.Fprintln(tw, header)
	for _, j := range jobs {
		if len(j.Throughputs) == 0 {
			continue
		}
		row := orDash(j.JobID) + "\t" + formatProgress(j) + "\t" + formatRestart(j)
		for _, t := range types {
			r, ok := j.Throughputs[t]
			if !ok {
				row += "\t-"
				continue
			}
			row += fmt.Sprintf("\t%.4g %s", r.StepsPerS, orDash(r.Source))
		}
		fmt.Fprintln(tw, row)
	}
	tw.Flush()
	fmt.Fprintln(w)
}

// formatProgress prints "done/total" steps, "-" for what is unknown.
func formatProgress(j api.JobStatus) string {
	done, total := "-", "-"
	if j.StepsDone != nil {
		done = strconv.FormatInt(*j.StepsDone, 10)
	}
	switch {
	case j.StepsTotal > 0:
		total = strconv.FormatInt(j.StepsTotal, 10)
	case j.StepsRemaining > 0 && j.StepsDone != nil:
		total = strconv.FormatInt(*j.StepsDone+j.StepsRemaining, 10)
	case j.StepsRemaining > 0:
		total = strconv.FormatInt(j.StepsRemaining, 10)
	}
	return done + "/" + total
}

// formatRestart prints what a restart is taken to cost the job and where
// the figure comes from ("45s measured"), "-" when unknown.
func formatRestart(j api.JobStatus) string {
	if j.RestartSource == "" {
		return "-"
	}
	return time.Duration(j.RestartCostS*float64(time.Second)).Round(time.Second).String() + " " + printable(j.RestartSource)
}

// orDash prints a field made safe by printable, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return printable(s)
}

// printable returns s unchanged when every rune of it is printable, and
// otherwise s quoted with Go's escapes (a newline as \n, U+202E as
// \u202e). Fields come from users (tags, job names) through the daemon:
// a newline, an escape sequence or a right-to-left override printed raw
// could forge rows or recolour the terminal. Tabs are escaped too, since
// they would shift the table's columns.
func printable(s string) string {
	if !utf8.ValidString(s) {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if r != ' ' && !strconv.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// formatShares prints {type: fraction} as "k80:0.25,v100:0.75", leaving
// out zero shares.
func formatShares(m map[string]float64) string {
	var parts []string
	for _, t := range sortedTypes(m) {
		if m[t] > 0.005 {
			parts = append(parts, fmt.Sprintf("%s:%.2f", printable(t), m[t]))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}

// formatAllocation prints a job's share of time alone and, under a
// packing policy, in pairs: "v100:0.44 pair v100:0.56".
func formatAllocation(j api.JobStatus) string {
	alone, pair := formatShares(j.Allocation), formatShares(j.PairAllocation)
	switch {
	case pair == "-":
		return alone
	case alone == "-":
		return "pair " + pair
	}
	return alone + " pair " + pair
}

// formatReceived prints {type: seconds} as "k80:1m0s,v100:5m0s".
func formatReceived(m map[string]float64) string {
	var parts []string
	for _, t := range sortedTypes(m) {
		if m[t] >= 1 {
			parts = append(parts, printable(t)+":"+time.Duration(m[t]*float64(time.Second)).Round(time.Second).String())
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}

func roundDuration(seconds float64) time.Duration {
	return time.Duration(seconds * float64(time.Second)).Round(time.Millisecond)
}

func sortedTypes(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
