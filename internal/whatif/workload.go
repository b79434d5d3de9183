// Package whatif replays a site's own finished jobs, read from Slurm's
// accounting (package history), under Slurm's order and under the
// scheduler's policies, and compares them. It is pure: the command reads
// the history, the daemon's state and the cluster, and writes the report.
//
// A job's work is what it really did: its run time on the GPU type it ran
// on. Its speed on the other types comes from the first source that knows
// it (Sources), and the report says how many jobs each source covered.
package whatif

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/history"
	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
)

// Where a job's rates on the types it did not run on came from.
const (
	SourceMeasured  = "measured"
	SourceReference = "reference table"
	SourceSpeed     = "speed ratios"
	SourceEqual     = "equal speed"
)

// Sources are the places a job's rates may come from, tried in this
// order; a job none of them covers runs at the same speed on every type
// (SourceEqual), which the report counts.
type Sources struct {
	// Measured gives the daemon's measured whole-job rates (steps/s) of a
	// model at a GPU count, by type; nil or an empty answer: unknown.
	Measured func(model string, gpus int) map[string]float64
	// Reference is a throughput table (the embedded reference table);
	// nil: none. The tag's model is matched against it.
	Reference *throughputs.Table
	// Speed is a per-type speed ratio the admin gives (any scale: only
	// ratios count); nil: none.
	Speed map[string]float64
}

// Typed says what a replayed policy may do with a job that asked for a
// GPU type.
type Typed string

const (
	// TypedPinned keeps such a job on its type, as the daemon does with a
	// typed request.
	TypedPinned Typed = "pinned"
	// TypedFree lets the policy choose, as when the site turns typed
	// requests into the scheduler's choice (docs/packaging.md).
	TypedFree Typed = "free"
)

// ParseTyped reads a Typed value.
func ParseTyped(s string) (Typed, error) {
	switch t := Typed(s); t {
	case TypedPinned, TypedFree:
		return t, nil
	}
	return "", fmt.Errorf("typed requests: %q, want pinned or free", s)
}

// Cluster is the GPUs of the replayed cluster.
type Cluster struct {
	// GPUs is the number of GPUs of each type.
	GPUs map[string]int
	// PerServer is the GPUs of one node of each type (1 when missing).
	PerServer map[string]int
}

// Types lists the cluster's types in order.
func (c Cluster) Types() []string {
	types := make([]string, 0, len(c.GPUs))
	for t := range c.GPUs {
		types = append(types, t)
	}
	sort.Strings(types)
	return types
}

func (c Cluster) perServer(t string) int { return max(1, c.PerServer[t]) }

// Validate checks that the cluster has GPUs and whole nodes.
func (c Cluster) Validate() error {
	if len(c.GPUs) == 0 {
		return errors.New("cluster: no GPU types")
	}
	for t, n := range c.GPUs {
		if n < 1 {
			return fmt.Errorf("cluster: %d GPUs of %s, need at least 1", n, t)
		}
		if per := c.perServer(t); n%per != 0 {
			return fmt.Errorf("cluster: %d %s GPUs do not make whole nodes of %d", n, t, per)
		}
	}
	for t := range c.PerServer {
		if _, ok := c.GPUs[t]; !ok {
			return fmt.Errorf("cluster: GPUs per node given for %s, which has no GPUs", t)
		}
	}
	return nil
}

// Job is one finished job made ready for replay.
type Job struct {
	ID               string
	User, Account    string
	Entity           string
	Partition        string
	Weight           float64
	Model            string
	GPUs             int
	Priority         int
	JobID, ArrayTask int
	// Submit and Arrival are seconds from the start of the window: when
	// the job was submitted and when it became eligible to run (after its
	// dependencies, holds and begin time).
	Submit, Arrival float64
	// Limit is the time limit (seconds) Slurm plans with; 0: none known.
	Limit float64
	// Ran is the type it ran on; Pinned the type a replayed policy must
	// keep it on ("" when free).
	Ran, Pinned string
	// Rates are its whole-job step rates on every type of the cluster
	// (0: cannot run there); Steps its work.
	Rates  map[string]float64
	Steps  float64
	Source string
	// Preempt is the tag's preemption mode (unset without one).
	Preempt bridge.PreemptMode
	// RealStart and RealEnd are what happened, in seconds from the start
	// of the window.
	RealStart, RealEnd float64
}

// Runtime is how long the job takes alone on type t (+Inf when it cannot
// run there).
func (j *Job) Runtime(t string) float64 {
	r := j.Rates[t]
	if r <= 0 {
		return math.Inf(1)
	}
	return j.Steps / r
}

// Workload is what a replay runs: the usable jobs in order of arrival and
// what became of the others.
type Workload struct {
	Start   time.Time
	Cluster Cluster
	Types   []string
	Jobs    []Job
	Skipped []history.Skip
	// Sources counts the jobs each rate source covered.
	Sources map[string]int
	Typed   Typed
	// Pinned counts the jobs kept on the type they asked for.
	Pinned int
	// Tagged counts the jobs whose comment carried a valid tag.
	Tagged int
}

// Reasons for which Build leaves a job of the history out (history's own
// reasons cover records it cannot use at all).
const (
	ReasonTypeUnknown = "GPU type unknown"
	ReasonTypeNotHere = "GPU type not in the cluster"
	ReasonTooBig      = "more GPUs than the cluster has"
	ReasonNoRuntime   = "ran for no time"
	// ReasonRequestedType is a job that asked for a type other than the
	// one it ran on and cannot run on it here: too few GPUs of it, or no
	// rate there.
	ReasonRequestedType = "cannot run on the type it asked for"
)

// Options are Build's choices.
type Options struct {
	Typed Typed
	// Entities: "account" (the default) or "user" (when the tag names no
	// entity).
	Entities string
	// NodeTypes maps node names to their GPU type, for the records that
	// do not say which type a job ran on (slurmdbd names the type only of
	// the typed GPUs AccountingStorageTRES lists).
	NodeTypes map[string]string
}

// Build turns a history into a workload on cluster c.
func Build(h *history.History, c Cluster, src Sources, opt Options) (*Workload, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if opt.Typed == "" {
		opt.Typed = TypedPinned
	}
	if _, err := ParseTyped(string(opt.Typed)); err != nil {
		return nil, err
	}
	switch opt.Entities {
	case "", "account", "user":
	default:
		return nil, fmt.Errorf("entities: %q, want account or user", opt.Entities)
	}
	for t, v := range src.Speed {
		if !(v > 0) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("speed of %s: %v, must be a positive number", t, v)
		}
	}
	w := &Workload{Cluster: c, Types: c.Types(), Skipped: append([]history.Skip(nil), h.Skipped...),
		Sources: map[string]int{}, Typed: opt.Typed}
	if len(h.Jobs) == 0 {
		return w, nil
	}
	start := h.Jobs[0].Submit
	for _, hj := range h.Jobs {
		start = minTime(start, hj.Submit)
	}
	w.Start = start
	at := func(t time.Time) float64 { return t.Sub(start).Seconds() }
	for _, hj := range h.Jobs {
		j, reason := w.job(hj, src, opt, at)
		if reason != "" {
			w.Skipped = append(w.Skipped, history.Skip{ID: hj.ID, Reason: reason})
			continue
		}
		w.Jobs = append(w.Jobs, j)
	}
	// The simulator takes arrivals in order; ties keep Slurm's order.
	slices.SortStableFunc(w.Jobs, func(a, b Job) int {
		return cmp.Or(cmp.Compare(a.Arrival, b.Arrival), cmp.Compare(a.Submit, b.Submit),
			cmp.Compare(a.JobID, b.JobID), cmp.Compare(a.ArrayTask, b.ArrayTask))
	})
	return w, nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// job makes one history job ready, or says why it cannot be.
func (w *Workload) job(hj history.Job, src Sources, opt Options, at func(time.Time) float64) (Job, string) {
	ran := hj.GPUType
	if ran == "" {
		ran = TypeOfNodes(hj.Nodes, opt.NodeTypes)
	}
	if ran == "" {
		if len(w.Types) != 1 {
			return Job{}, ReasonTypeUnknown
		}
		ran = w.Types[0]
	}
	if _, ok := w.Cluster.GPUs[ran]; !ok {
		return Job{}, ReasonTypeNotHere
	}
	if hj.GPUs > w.Cluster.GPUs[ran] {
		return Job{}, ReasonTooBig
	}
	runtime := hj.End.Sub(hj.Start).Seconds()
	if !(runtime > 0) {
		return Job{}, ReasonNoRuntime
	}
	j := Job{
		ID: hj.ID, User: hj.User, Account: hj.Account, Partition: hj.Partition,
		Weight: 1, GPUs: hj.GPUs, Priority: hj.Priority, JobID: hj.JobID, ArrayTask: hj.ArrayTaskID,
		Submit: at(hj.Submit), Arrival: at(hj.Submit), Limit: hj.TimeLimit.Seconds(), Ran: ran,
		RealStart: at(hj.Start), RealEnd: at(hj.End),
	}
	if !hj.Eligible.IsZero() && hj.Eligible.After(hj.Submit) {
		j.Arrival = at(hj.Eligible)
	}
	// A requeued job's record keeps its last start; it cannot have become
	// eligible after it started.
	j.Arrival = math.Min(j.Arrival, j.RealStart)
	j.Entity = j.Account
	if opt.Entities == "user" {
		j.Entity = j.User
	}
	tag, tagErr := bridge.ParseTag(hj.Comment)
	if tagErr == nil {
		j.Model = tag.Model
		j.Preempt = tag.Preempt
		if tag.Weight > 0 {
			j.Weight = tag.Weight
		}
		if tag.Entity != "" {
			j.Entity = tag.Entity
		}
	}
	if j.Entity == "" {
		j.Entity = "(none)"
	}
	if opt.Typed == TypedPinned && hj.RequestedType != "" {
		if _, ok := w.Cluster.GPUs[hj.RequestedType]; ok {
			j.Pinned = hj.RequestedType
		}
	}
	speed, source := w.speeds(j, src)
	j.Source = source
	// The work is what the job did: its run time at its rate on the type
	// it ran on. Rates from a measured source keep their units (steps/s),
	// so a replay of jobs from a trace gives the trace's steps back;
	// ratios are scaled to 1000 steps/s on that type so that a round's
	// whole-step rounding stays negligible.
	scale := 1.0
	if source == SourceSpeed || source == SourceEqual {
		scale = 1000 / speed[ran]
	}
	j.Rates = make(map[string]float64, len(w.Types))
	for _, t := range w.Types {
		if j.Pinned != "" && t != j.Pinned {
			continue
		}
		if hj.GPUs <= w.Cluster.GPUs[t] {
			j.Rates[t] = speed[t] * scale
		}
	}
	j.Steps = runtime * speed[ran] * scale
	if j.Pinned != "" && !(j.Rates[j.Pinned] > 0) {
		return Job{}, ReasonRequestedType
	}
	// Counted once the job is kept.
	w.Sources[source]++
	if tagErr == nil {
		w.Tagged++
	}
	if j.Pinned != "" {
		w.Pinned++
	}
	return j, ""
}

// speeds finds the job's rates on every type of the cluster (steps/s, or
// ratios) and their source. A source covers a job only when it knows
// every type, so that no job mixes two sources' units.
func (w *Workload) speeds(j Job, src Sources) (map[string]float64, string) {
	complete := func(rates map[string]float64) bool {
		for _, t := range w.Types {
			if !(rates[t] >= 0) || math.IsInf(rates[t], 0) {
				return false
			}
			if _, ok := rates[t]; !ok {
				return false
			}
		}
		return rates[j.Ran] > 0
	}
	if src.Measured != nil && j.Model != "" {
		if m := src.Measured(j.Model, j.GPUs); complete(m) {
			return m, SourceMeasured
		}
	}
	if src.Reference != nil && j.Model != "" {
		if model, ok := resolveModel(src.Reference, j.Model, j.GPUs); ok {
			rates := map[string]float64{}
			known := src.Reference.Types()
			for _, t := range w.Types {
				if slices.Contains(known, t) {
					rates[t] = src.Reference.Isolated(model, j.GPUs, t)
				}
			}
			if complete(rates) {
				return rates, SourceReference
			}
		}
	}
	if complete(src.Speed) {
		return src.Speed, SourceSpeed
	}
	equal := make(map[string]float64, len(w.Types))
	for _, t := range w.Types {
		equal[t] = 1
	}
	return equal, SourceEqual
}

// resolveModel matches a tag's model against the table's models as the
// daemon does (bridge.ResolveModel), at the job's GPU count.
func resolveModel(t *throughputs.Table, model string, gpus int) (string, bool) {
	m, ok := bridge.ResolveModel(model, t.Models())
	return m, ok && t.Has(m, gpus)
}

// TypeOfNodes is the one GPU type of the nodes of a Slurm host list
// ("gpu-[1-3,7],v100-2"); "" when a node is unknown or they differ.
func TypeOfNodes(list string, types map[string]string) string {
	if list == "" || len(types) == 0 {
		return ""
	}
	found := ""
	for _, n := range expandHostlist(list) {
		t := types[n]
		if t == "" || found != "" && t != found {
			return ""
		}
		found = t
	}
	return found
}

// expandHostlist expands a Slurm host list: names separated by commas
// outside brackets, each with at most one bracketed range list
// ("node[01-03,7]" keeps the digits' width).
func expandHostlist(list string) []string {
	var out []string
	depth, from := 0, 0
	var items []string
	for i, r := range list {
		switch r {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				items = append(items, list[from:i])
				from = i + 1
			}
		}
	}
	items = append(items, list[from:])
	for _, item := range items {
		open := strings.IndexByte(item, '[')
		close := strings.LastIndexByte(item, ']')
		if open < 0 || close < open {
			if item != "" {
				out = append(out, item)
			}
			continue
		}
		prefix, suffix := item[:open], item[close+1:]
		for _, part := range strings.Split(item[open+1:close], ",") {
			lo, hi, isRange := strings.Cut(part, "-")
			a, errA := strconv.Atoi(lo)
			b, errB := strconv.Atoi(hi)
			if !isRange {
				b, errB = a, errA
			}
			if errA != nil || errB != nil || b < a || b-a > 100000 {
				out = append(out, prefix+part+suffix)
				continue
			}
			for n := a; n <= b; n++ {
				out = append(out, fmt.Sprintf("%s%0*d%s", prefix, len(lo), n, suffix))
			}
		}
	}
	return out
}
