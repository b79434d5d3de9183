package whatif

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/gavel-slurm/gavel-slurm/internal/history"
	"github.com/gavel-slurm/gavel-slurm/internal/sim"
)

// Figures sum up one schedule of the workload. Times are seconds. A job's
// JCT runs from its submission to its end; its wait from when it became
// eligible to its first start.
type Figures struct {
	Name    string  `json:"name"`
	Policy  string  `json:"policy,omitempty"`
	Seed    int64   `json:"seed"`
	Jobs    int     `json:"jobs"`
	AvgJCT  float64 `json:"avg_jct_s"`
	P50JCT  float64 `json:"p50_jct_s"`
	P95JCT  float64 `json:"p95_jct_s"`
	AvgWait float64 `json:"avg_wait_s"`
	P95Wait float64 `json:"p95_wait_s"`
	// FTF is finish-time fairness: each job's JCT over its JCT when the
	// same workload runs under the isolated policy (1/n of the cluster
	// each); absent when that replay failed.
	FTF      *sim.Summary `json:"ftf,omitempty"`
	Makespan float64      `json:"makespan_s"`
	Accounts []Account    `json:"accounts"`
}

// Account sums up one entity's jobs in a schedule: the account's, unless
// the what-if counts users (--entities user) or a tag names an entity.
type Account struct {
	Name    string  `json:"name"`
	Jobs    int     `json:"jobs"`
	AvgJCT  float64 `json:"avg_jct_s"`
	AvgWait float64 `json:"avg_wait_s"`
	// GPUSeconds is what the account's jobs received; Share its part of
	// what every account received.
	GPUSeconds float64 `json:"gpu_s"`
	Share      float64 `json:"share"`
}

// Error is how far a replay is from what really happened.
type Error struct {
	// AvgWait and AvgJCT are (replay − real) in seconds; the Rel fields
	// the same over the real value (0 when the real value is 0).
	AvgWait    float64 `json:"avg_wait_s"`
	AvgJCT     float64 `json:"avg_jct_s"`
	RelAvgWait float64 `json:"rel_avg_wait"`
	RelAvgJCT  float64 `json:"rel_avg_jct"`
	// Accounts is the same per account.
	Accounts map[string]Error `json:"accounts,omitempty"`
}

// PolicySummary is a policy's figures over its seeds, against the Slurm
// baseline replay.
type PolicySummary struct {
	Policy  string  `json:"policy"`
	Seeds   int     `json:"seeds"`
	AvgJCT  float64 `json:"avg_jct_s"`
	P95JCT  float64 `json:"p95_jct_s"`
	AvgWait float64 `json:"avg_wait_s"`
	FTFMean float64 `json:"ftf_mean,omitempty"`
	// JCTvsSlurm is AvgJCT over the baseline replay's (below 1: better).
	JCTvsSlurm float64 `json:"avg_jct_vs_slurm"`
}

// Report is a what-if: the history, the baseline and every policy.
type Report struct {
	From     time.Time         `json:"from"`
	To       time.Time         `json:"to"`
	Cluster  map[string]int    `json:"cluster"`
	Typed    Typed             `json:"typed_requests"`
	Pinned   int               `json:"pinned_jobs"`
	Tagged   int               `json:"tagged_jobs"`
	Jobs     int               `json:"jobs"`
	Skipped  map[string]int    `json:"skipped"`
	Skips    []history.Skip    `json:"skipped_jobs"`
	Sources  map[string]int    `json:"rate_sources"`
	Settings map[string]string `json:"settings"`
	Real     Figures           `json:"real"`
	Slurm    Figures           `json:"slurm_replay"`
	Error    Error             `json:"slurm_replay_error"`
	Runs     []Figures         `json:"runs"`
	Policies []PolicySummary   `json:"policies"`
	Failed   map[string]string `json:"failed,omitempty"`
	// Notes are what the reader should know about the inputs (how the
	// cluster was found, ...).
	Notes []string             `json:"notes,omitempty"`
	Sched map[string]*Schedule `json:"-"`
	// Order lists Sched's keys as the report shows them.
	Order []string `json:"-"`

	workload *Workload
}

// Settings are the replays' settings.
type Settings struct {
	Policies []string
	Seeds    []int64
	Sim      SimConfig
	// Workers is how many replays run at once (at least 1).
	Workers int
}

// Progress is told of each finished replay.
type Progress func(done, total int, name string)

// Task is one replay of a what-if: Slurm's order (Policy ""), the
// isolated policy (for finish-time fairness) or a policy and seed.
type Task struct {
	Policy string `json:"policy,omitempty"`
	Seed   int64  `json:"seed"`
}

// Name is how the report calls the task's schedule.
func (t Task) Name() string {
	if t.Policy == "" {
		return "slurm replay"
	}
	return fmt.Sprintf("%s seed %d", t.Policy, t.Seed)
}

// Tasks lists the replays of a what-if: the Slurm baseline first, then
// the isolated policy, then every policy and seed.
func (set Settings) Tasks() []Task {
	tasks := []Task{{}, {Policy: "isolated"}}
	for _, p := range set.Policies {
		for _, s := range set.Seeds {
			tasks = append(tasks, Task{p, s})
		}
	}
	return tasks
}

// RunTask runs one replay.
func RunTask(w *Workload, set Settings, t Task) (*Schedule, error) {
	if t.Policy == "" {
		return ReplaySlurm(w)
	}
	return ReplayPolicy(w, set.Sim, t.Policy, t.Seed)
}

// Run replays the workload under every task of set, Workers at a time,
// and reports.
func Run(w *Workload, set Settings, progress Progress) (*Report, error) {
	if len(w.Jobs) == 0 {
		return nil, fmt.Errorf("no usable job in the history (%d left out: %v)", len(w.Skipped), skipCounts(w.Skipped))
	}
	tasks := set.Tasks()
	out := make([]*Schedule, len(tasks))
	errs := make([]error, len(tasks))
	var mu sync.Mutex
	done := 0
	sem := make(chan struct{}, max(1, set.Workers))
	var wg sync.WaitGroup
	for k, t := range tasks {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[k], errs[k] = RunTask(w, set, t)
			mu.Lock()
			done++
			if progress != nil {
				progress(done, len(tasks), t.Name())
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return Gather(w, set, tasks, out, errs)
}

// Gather makes the report from the tasks' schedules (or errors), in the
// order of set.Tasks(), however they were run.
func Gather(w *Workload, set Settings, tasks []Task, out []*Schedule, errs []error) (*Report, error) {
	if len(tasks) < 2 || len(out) != len(tasks) || len(errs) != len(tasks) || tasks[0].Policy != "" || tasks[1].Policy != "isolated" {
		return nil, fmt.Errorf("gather: %d tasks, %d schedules, %d errors: want the Slurm replay, the isolated policy, then the policies", len(tasks), len(out), len(errs))
	}
	if errs[0] != nil {
		return nil, fmt.Errorf("Slurm baseline replay: %w", errs[0])
	}
	failed := map[string]string{}
	var runs []*Schedule
	for k := 2; k < len(tasks); k++ {
		if errs[k] != nil {
			failed[tasks[k].Name()] = errs[k].Error()
			continue
		}
		runs = append(runs, out[k])
	}
	isolated := out[1]
	if errs[1] != nil {
		failed[tasks[1].Name()] = errs[1].Error()
		isolated = nil
	}
	for k, s := range out {
		if errs[k] == nil && (s == nil || len(s.End) != len(w.Jobs)) {
			return nil, fmt.Errorf("gather: the schedule of %s does not match the workload's %d jobs", tasks[k].Name(), len(w.Jobs))
		}
	}
	r := Assemble(w, out[0], isolated, runs)
	maps.Copy(r.Failed, failed)
	r.Settings = map[string]string{
		"round":              time.Duration(set.Sim.RoundSeconds * float64(time.Second)).String(),
		"mechanism":          string(cmp.Or(set.Sim.Mechanism, "gavel")),
		"min_reset_interval": time.Duration(set.Sim.MinResetInterval * float64(time.Second)).String(),
		"restart_overhead":   time.Duration(set.Sim.PreemptionOverhead * float64(time.Second)).String(),
		"min_run_time":       time.Duration(set.Sim.MinRunTime * float64(time.Second)).String(),
		"backfill_depth":     fmt.Sprint(BackfillDepth),
	}
	return r, nil
}

func skipCounts(skips []history.Skip) map[string]int {
	out := map[string]int{}
	for _, s := range skips {
		out[s.Reason]++
	}
	return out
}

// Assemble makes the report from the schedules: slurm is the baseline
// replay, isolated the isolated policy's (nil: no finish-time fairness),
// runs the policies'.
func Assemble(w *Workload, slurm, isolated *Schedule, runs []*Schedule) *Report {
	real := w.Real()
	r := &Report{Cluster: w.Cluster.GPUs, Typed: w.Typed, Pinned: w.Pinned, Tagged: w.Tagged, Jobs: len(w.Jobs),
		Skipped: skipCounts(w.Skipped), Skips: w.Skipped, Sources: w.Sources, Failed: map[string]string{},
		Sched: map[string]*Schedule{}, workload: w}
	r.Real = figures(w, real, isolated)
	r.Slurm = figures(w, slurm, isolated)
	r.Error = replayError(r.Slurm, r.Real)
	r.Sched[real.Name], r.Sched[slurm.Name] = real, slurm
	r.Order = []string{real.Name, slurm.Name}
	byPolicy := map[string][]Figures{}
	var policies []string
	for _, s := range runs {
		f := figures(w, s, isolated)
		r.Runs = append(r.Runs, f)
		r.Sched[s.Name] = s
		r.Order = append(r.Order, s.Name)
		if _, ok := byPolicy[s.Policy]; !ok {
			policies = append(policies, s.Policy)
		}
		byPolicy[s.Policy] = append(byPolicy[s.Policy], f)
	}
	for _, p := range policies {
		fs := byPolicy[p]
		ps := PolicySummary{Policy: p, Seeds: len(fs)}
		for _, f := range fs {
			ps.AvgJCT += f.AvgJCT / float64(len(fs))
			ps.P95JCT += f.P95JCT / float64(len(fs))
			ps.AvgWait += f.AvgWait / float64(len(fs))
			if f.FTF != nil {
				ps.FTFMean += f.FTF.Mean / float64(len(fs))
			}
		}
		if r.Slurm.AvgJCT > 0 {
			ps.JCTvsSlurm = ps.AvgJCT / r.Slurm.AvgJCT
		}
		r.Policies = append(r.Policies, ps)
	}
	if len(w.Jobs) > 0 {
		r.From = w.Start
		last := 0.0
		for i := range w.Jobs {
			last = math.Max(last, w.Jobs[i].RealEnd)
		}
		r.To = w.Start.Add(time.Duration(last * float64(time.Second)))
	}
	return r
}

// figures sums up schedule s; jobs that did not finish in it count in no
// average.
func figures(w *Workload, s *Schedule, isolated *Schedule) Figures {
	f := Figures{Name: s.Name, Policy: s.Policy, Seed: s.Seed}
	var jcts, waits, rhos []float64
	type acc struct {
		jobs       int
		jct, wait  float64
		gpuSeconds float64
	}
	accounts := map[string]*acc{}
	total := 0.0
	for i := range w.Jobs {
		j := &w.Jobs[i]
		a := accounts[j.Entity]
		if a == nil {
			a = &acc{}
			accounts[j.Entity] = a
		}
		for _, v := range s.GPUSeconds[i] {
			a.gpuSeconds += v
			total += v
		}
		if s.End[i] < 0 {
			continue
		}
		jct, wait := s.End[i]-j.Submit, math.Max(0, s.Start[i]-j.Arrival)
		jcts, waits = append(jcts, jct), append(waits, wait)
		a.jobs++
		a.jct += jct
		a.wait += wait
		f.Makespan = math.Max(f.Makespan, s.End[i])
		if isolated != nil && isolated.End[i] > 0 {
			if iso := isolated.End[i] - j.Submit; iso > 0 {
				rhos = append(rhos, jct/iso)
			}
		}
	}
	f.Jobs = len(jcts)
	f.AvgJCT, f.P50JCT, f.P95JCT = sim.Mean(jcts), sim.Percentile(jcts, 50), sim.Percentile(jcts, 95)
	f.AvgWait, f.P95Wait = sim.Mean(waits), sim.Percentile(waits, 95)
	if len(rhos) > 0 {
		ftf := sim.Summarize(rhos)
		f.FTF = &ftf
	}
	names := slices.Sorted(maps.Keys(accounts))
	for _, n := range names {
		a := accounts[n]
		out := Account{Name: n, Jobs: a.jobs, GPUSeconds: a.gpuSeconds}
		if a.jobs > 0 {
			out.AvgJCT, out.AvgWait = a.jct/float64(a.jobs), a.wait/float64(a.jobs)
		}
		if total > 0 {
			out.Share = a.gpuSeconds / total
		}
		f.Accounts = append(f.Accounts, out)
	}
	return f
}

// replayError compares a replay's figures with the real ones.
func replayError(replay, real Figures) Error {
	rel := func(got, want float64) float64 {
		if want == 0 {
			return 0
		}
		return (got - want) / want
	}
	e := Error{AvgWait: replay.AvgWait - real.AvgWait, AvgJCT: replay.AvgJCT - real.AvgJCT,
		RelAvgWait: rel(replay.AvgWait, real.AvgWait), RelAvgJCT: rel(replay.AvgJCT, real.AvgJCT),
		Accounts: map[string]Error{}}
	realBy := map[string]Account{}
	for _, a := range real.Accounts {
		realBy[a.Name] = a
	}
	for _, a := range replay.Accounts {
		ra := realBy[a.Name]
		e.Accounts[a.Name] = Error{AvgWait: a.AvgWait - ra.AvgWait, AvgJCT: a.AvgJCT - ra.AvgJCT,
			RelAvgWait: rel(a.AvgWait, ra.AvgWait), RelAvgJCT: rel(a.AvgJCT, ra.AvgJCT)}
	}
	return e
}

// JCTs returns schedule name's finished jobs' JCTs, sorted (for a CDF).
func (r *Report) JCTs(name string) []float64 {
	w := r.workload
	s := r.Sched[name]
	if s == nil {
		return nil
	}
	var out []float64
	for i := range w.Jobs {
		if s.End[i] >= 0 {
			out = append(out, s.End[i]-w.Jobs[i].Submit)
		}
	}
	sort.Float64s(out)
	return out
}
