package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/history"
	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
	"github.com/gavel-slurm/gavel-slurm/internal/whatif"
	"github.com/gavel-slurm/gavel-slurm/internal/workload"
)

func init() {
	register("whatif-trace", subcommand{
		summary: "turn a simulator trace into a Slurm accounting history (sacct --json) run in Slurm's order, and the trace whatif will replay from it",
		hidden:  true,
		run: func(args []string) int {
			return runWhatifTrace(args, os.Stdout, os.Stderr)
		},
	})
}

// runWhatifTrace makes a history a site could have had from a trace: each
// job is submitted at its arrival, tagged with its model and weight, and
// runs where and when the Slurm replay (whatif.ReplaySlurm) puts it. It
// writes that history as `sacct --json` does, and the trace that whatif
// reads back from it (the same jobs, their work in whole seconds of run
// time), so that `simulate --trace` and `whatif --sacct` can be compared
// on one workload.
func runWhatifTrace(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("whatif-trace", flag.ContinueOnError)
	fs.SetOutput(stderr)
	trace := fs.String("trace", "", "the trace (10 columns)")
	cluster := fs.String("cluster", "v100=36,p100=36,k80=36", "GPUs per type: TYPE=N,...")
	perServer := fs.String("gpus-per-node", "", "GPUs per node of each type TYPE=N,... (default 1)")
	startAt := fs.String("start", "2026-11-01T00:00:00Z", "when the first job is submitted (RFC 3339)")
	sacctOut := fs.String("sacct-out", "", "write the history here")
	traceOut := fs.String("trace-out", "", "write the trace whatif replays here")
	accounts := fs.Int("accounts", 2, "jobs go round-robin to this many accounts, acct-0, acct-1, ...")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if err := whatifTrace(*trace, *cluster, *perServer, *startAt, *sacctOut, *traceOut, *accounts); err != nil {
		fmt.Fprintf(stderr, "whatif-trace: %v\n", err)
		return 1
	}
	return 0
}

func whatifTrace(tracePath, clusterSpec, perServerSpec, startAt, sacctOut, traceOut string, accounts int) error {
	if tracePath == "" || sacctOut == "" || traceOut == "" {
		return errors.New("--trace, --sacct-out and --trace-out are needed")
	}
	if accounts < 1 {
		return fmt.Errorf("--accounts %d: need at least 1", accounts)
	}
	start, err := time.Parse(time.RFC3339, startAt)
	if err != nil {
		return fmt.Errorf("--start: %w", err)
	}
	gpus, err := simParseCounts("--cluster", clusterSpec)
	if err != nil {
		return err
	}
	per, err := simParseCounts("--gpus-per-node", perServerSpec)
	if err != nil {
		return err
	}
	cl := whatif.Cluster{GPUs: gpus, PerServer: per}
	table, err := throughputs.Reference()
	if err != nil {
		return err
	}
	f, err := os.Open(tracePath)
	if err != nil {
		return err
	}
	jobs, err := workload.ParseTrace(f, table)
	f.Close()
	if err != nil {
		return fmt.Errorf("trace %s: %w", tracePath, err)
	}
	// Submitted at the trace's arrivals (whole seconds, as slurmdbd keeps
	// them), first on the fastest type the job has a rate for, for the
	// time its steps take there.
	at := func(s float64) time.Time { return start.Add(time.Duration(s) * time.Second) }
	hist := &history.History{}
	for i, j := range jobs {
		tag := bridge.Tag{Model: j.Model, Weight: j.Priority}
		if tag.Weight == 1 {
			tag.Weight = 0
		}
		fastest, rate := "", 0.0
		for t := range cl.GPUs {
			if r := table.Isolated(j.Model, j.ScaleFactor, t); r > rate || r == rate && t < fastest {
				fastest, rate = t, r
			}
		}
		if rate <= 0 {
			return fmt.Errorf("trace job %d (%s x%d) runs on no type of the cluster", i, j.Model, j.ScaleFactor)
		}
		arrival := math.Round(j.Arrival)
		hist.Jobs = append(hist.Jobs, history.Job{
			ID: strconv.Itoa(i + 1), JobID: i + 1, ArrayTaskID: -1, Name: "trace-" + strconv.Itoa(i),
			User: fmt.Sprintf("user-%d", i%accounts), Account: fmt.Sprintf("acct-%d", i%accounts), Partition: "gpu",
			Submit: at(arrival), Eligible: at(arrival), Start: at(arrival),
			End: at(arrival + math.Ceil(j.TotalSteps/rate)), GPUs: j.ScaleFactor, GPUType: fastest,
			State: "COMPLETED", Comment: tag.Format(),
		})
	}
	w, err := whatif.Build(hist, cl, whatif.Sources{Reference: table}, whatif.Options{Typed: whatif.TypedFree})
	if err != nil {
		return err
	}
	if len(w.Jobs) != len(hist.Jobs) {
		return fmt.Errorf("%d of %d trace jobs usable: %v", len(w.Jobs), len(hist.Jobs), w.Skipped)
	}
	s, err := whatif.ReplaySlurm(w)
	if err != nil {
		return err
	}
	byID := map[string]int{}
	for k := range w.Jobs {
		byID[w.Jobs[k].ID] = k
	}
	for i := range hist.Jobs {
		k := byID[hist.Jobs[i].ID]
		hj := &hist.Jobs[i]
		hj.Start = w.Start.Add(time.Duration(math.Round(s.Start[k])) * time.Second)
		hj.End = hj.Start.Add(time.Duration(math.Ceil(s.End[k]-s.Start[k])) * time.Second)
		hj.GPUType = s.Type[k]
	}
	raw, err := encodeSacct(hist.Jobs)
	if err != nil {
		return err
	}
	if err := os.WriteFile(sacctOut, raw, 0o644); err != nil {
		return err
	}
	// What whatif reads back: the same jobs, with the work their run
	// times in whole seconds give.
	back, err := history.Parse(raw)
	if err != nil {
		return fmt.Errorf("read the history back: %w", err)
	}
	w, err = whatif.Build(back, cl, whatif.Sources{Reference: table}, whatif.Options{Typed: whatif.TypedFree})
	if err != nil {
		return err
	}
	if w.Sources[whatif.SourceReference] != len(jobs) {
		return fmt.Errorf("read back, %v of the jobs' rates came from the reference table, want all %d", w.Sources, len(jobs))
	}
	out := make([]workload.Job, len(w.Jobs))
	for k, j := range w.Jobs {
		id, _ := strconv.Atoi(j.ID)
		src := jobs[id-1]
		src.Arrival = j.Arrival
		src.TotalSteps = math.Round(j.Steps)
		out[k] = src
	}
	return writeFile(traceOut, "trace", func(wr io.Writer) error { return workload.WriteTrace(wr, out) })
}

// encodeSacct writes jobs as `sacct --json` prints them (the fields
// history.Parse reads, in the shape of data_parser v0.0.42 and later).
func encodeSacct(jobs []history.Job) ([]byte, error) {
	type number struct {
		Set      bool  `json:"set"`
		Infinite bool  `json:"infinite"`
		Number   int64 `json:"number"`
	}
	type tres struct {
		Type  string `json:"type"`
		Name  string `json:"name"`
		Count int    `json:"count"`
	}
	type record struct {
		JobID     int               `json:"job_id"`
		Name      string            `json:"name"`
		User      string            `json:"user"`
		Account   string            `json:"account"`
		Partition string            `json:"partition"`
		QOS       string            `json:"qos"`
		Nodes     string            `json:"nodes"`
		Priority  number            `json:"priority"`
		Comment   map[string]string `json:"comment"`
		Array     map[string]any    `json:"array"`
		Het       map[string]any    `json:"het"`
		Restarts  int               `json:"restart_cnt"`
		State     map[string]any    `json:"state"`
		ExitCode  map[string]any    `json:"exit_code"`
		Time      map[string]any    `json:"time"`
		TRES      map[string][]tres `json:"tres"`
		Steps     []any             `json:"steps"`
	}
	out := struct {
		Jobs     []record `json:"jobs"`
		Errors   []any    `json:"errors"`
		Warnings []any    `json:"warnings"`
	}{Errors: []any{}, Warnings: []any{}}
	for _, j := range jobs {
		gpus := []tres{{"gres", "gpu", j.GPUs}}
		if j.GPUType != "" {
			gpus = append(gpus, tres{"gres", "gpu:" + j.GPUType, j.GPUs})
		}
		out.Jobs = append(out.Jobs, record{
			JobID: j.JobID, Name: j.Name, User: j.User, Account: j.Account, Partition: j.Partition, QOS: "normal",
			Priority: number{Set: true, Number: int64(j.Priority)},
			Comment:  map[string]string{"job": j.Comment, "administrator": "", "system": ""},
			Array:    map[string]any{"job_id": 0, "task_id": number{}},
			Het:      map[string]any{"job_id": 0, "job_offset": number{}},
			State:    map[string]any{"current": []string{j.State}, "reason": "None"},
			ExitCode: map[string]any{"status": []string{"SUCCESS"}, "return_code": number{Set: true}},
			Time: map[string]any{"submission": j.Submit.Unix(), "eligible": j.Eligible.Unix(), "start": j.Start.Unix(),
				"end": j.End.Unix(), "elapsed": int64(j.End.Sub(j.Start).Seconds()), "limit": number{Set: false, Infinite: true}},
			TRES:  map[string][]tres{"allocated": gpus, "requested": []tres{{"gres", "gpu", j.GPUs}}},
			Steps: []any{},
		})
	}
	return json.MarshalIndent(out, "", " ")
}
