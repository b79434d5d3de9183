// Package history reads Slurm's job accounting history: the job records
// that `sacct --json` prints and that slurmrestd serves at
// GET /slurmdb/{version}/jobs (both come from Slurm's data_parser, so they
// share one schema). It covers Slurm 24.11 (data_parser v0.0.40-v0.0.42)
// and 26.05 (v0.0.42-v0.0.45), whose numbers come either plain or as
// {"set","infinite","number"} objects.
//
// Parse keeps the GPU jobs that started and ended, the jobs a replay of a
// site's workload needs, and says of every other record why it was left
// out. It does no I/O: bytes in, structs out.
package history

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Job is one finished GPU job, as slurmdbd recorded its last run.
type Job struct {
	// ID is Slurm's display id: "123", "120_4" for an array task, "130+1"
	// for a component of a heterogeneous job.
	ID          string
	JobID       int
	ArrayJobID  int // 0 when not an array task
	ArrayTaskID int // -1 when not an array task
	// HetJobID is the id of a heterogeneous job's first component (0
	// when not one), HetJobOffset this component's offset in it.
	HetJobID     int
	HetJobOffset int

	Name, User, Account, Partition, QOS string

	// Submit is when the job entered the queue, or when it was requeued
	// last: slurmdbd keeps a requeued job's last submission alone (see
	// Requeues). Eligible is when it could start last (a requeued job
	// waits slurmctld's delay before it is eligible again), Start and End
	// bound its last run.
	Submit, Eligible, Start, End time.Time
	TimeLimit                    time.Duration // 0 when none/unknown

	GPUs int // GPUs allocated (gres/gpu of the allocated TRES)
	// GPUType is the GPU type the job ran on: the type of its allocated
	// TRES (gres/gpu:TYPE, which slurmdbd records only for the types
	// AccountingStorageTRES lists), else the one type its request named,
	// since Slurm allocates only that type; "" when neither names one.
	// Types of a job that held several are joined by ",", sorted.
	GPUType string
	// RequestedType is the GPU type the job asked for, "" for any type:
	// the typed gres/gpu of the requested TRES, else the GPU options of
	// the submit line (--gres, --gpus, --gpus-per-node, ...), so a type
	// set in the batch script alone, or changed after submission, is
	// not seen there.
	RequestedType string

	Nodes    string
	Requeues int // restart count
	// State is the final state: COMPLETED, FAILED, CANCELLED, TIMEOUT,
	// PREEMPTED, NODE_FAIL, OUT_OF_MEMORY, ...
	State    string
	ExitCode int
	// Comment is the job's own --comment (where a gavel: tag lives).
	// slurmdbd stores it only with AccountingStoreFlags=job_comment;
	// without, a gavel: tag is recovered from the submit line, which
	// keeps the words but not their quotes (see tagFromSubmitLine).
	Comment  string
	Priority int
	// SubmitLine is the command the job was submitted with, as slurmdbd
	// keeps it (words joined by spaces, quotes lost).
	SubmitLine string
}

// Skip is a record Parse left out, and why.
type Skip struct{ ID, Reason string }

// History is what one accounting document holds.
type History struct {
	// Jobs are the usable GPU jobs that started and ended, sorted by
	// Submit, then JobID (an array task's ArrayJobID), then ArrayTaskID.
	Jobs []Job
	// Skipped are every other record, in the document's order, with its
	// reason.
	Skipped []Skip
}

// Why a record is skipped. ReasonMalformed is a prefix: what is wrong
// follows it.
const (
	ReasonNoGPUs       = "no GPUs"
	ReasonNeverStarted = "never started"
	ReasonNotFinished  = "still running or pending"
	// ReasonEarlierRun is a run of a job that was requeued afterwards
	// (state REQUEUED): sacct lists those with --duplicates or -T,
	// slurmrestd unless asked with disable_truncate_usage_time; the
	// job's last record is the job.
	ReasonEarlierRun = "an earlier run of a requeued job"
	// ReasonDuplicate is a second record of a job id already kept, with
	// fewer restarts or an earlier submission.
	ReasonDuplicate = "duplicate record of the same job"
	ReasonMalformed = "malformed record: "
)

// Counts returns how many records were skipped for each reason; every
// malformed record counts under ReasonMalformed, whatever was wrong.
func (h *History) Counts() map[string]int {
	out := map[string]int{}
	for _, s := range h.Skipped {
		r := s.Reason
		if strings.HasPrefix(r, ReasonMalformed) {
			r = ReasonMalformed
		}
		out[r]++
	}
	return out
}

// Parse reads an accounting document: a JSON object whose "jobs" is a list
// of job records. It fails only when the document is not that; a record it
// cannot use becomes a Skip.
func Parse(data []byte) (*History, error) {
	var doc struct {
		Jobs *[]json.RawMessage `json:"jobs"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("not a Slurm job list: %w", err)
	}
	if doc.Jobs == nil {
		return nil, errors.New(`not a Slurm job list: no "jobs" list`)
	}
	h := &History{}
	kept := map[string]int{} // ID to index in h.Jobs
	for i, raw := range *doc.Jobs {
		j, reason := convert(raw)
		if j.ID == "" {
			j.ID = "record " + strconv.Itoa(i+1)
		}
		if reason != "" {
			h.Skipped = append(h.Skipped, Skip{ID: j.ID, Reason: reason})
			continue
		}
		if k, ok := kept[j.ID]; ok {
			// Keep the later record: the one with more restarts, or
			// submitted later.
			old := h.Jobs[k]
			if cmp.Or(cmp.Compare(j.Requeues, old.Requeues), j.Submit.Compare(old.Submit)) > 0 {
				h.Jobs[k], j = j, old
			}
			h.Skipped = append(h.Skipped, Skip{ID: j.ID, Reason: ReasonDuplicate})
			continue
		}
		kept[j.ID] = len(h.Jobs)
		h.Jobs = append(h.Jobs, j)
	}
	// An array's tasks have ids of their own (the last task keeps the
	// array's), so tasks submitted together sort by the array's id, then
	// by task.
	slices.SortStableFunc(h.Jobs, func(a, b Job) int {
		return cmp.Or(a.Submit.Compare(b.Submit), cmp.Compare(cmp.Or(a.ArrayJobID, a.JobID), cmp.Or(b.ArrayJobID, b.JobID)),
			cmp.Compare(a.ArrayTaskID, b.ArrayTaskID), cmp.Compare(a.JobID, b.JobID))
	})
	return h, nil
}

// Slurm's base job states (JOB_STATE_BASE), and the flags a record's state
// list may add that mean the record is not the job's last run.
var (
	finished = []string{"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
		"BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY"}
	unfinished   = []string{"PENDING", "RUNNING", "SUSPENDED"}
	requeueFlags = []string{"REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "REQUEUE_CRON"}
)

// convert reads one record. The job it returns carries at least the ID it
// could read; reason is "" when the job is usable.
func convert(raw json.RawMessage) (Job, string) {
	var r record
	j := Job{ArrayTaskID: -1}
	if err := json.Unmarshal(raw, &r); err != nil {
		// Name the record by its id when at least that reads.
		var id struct {
			JobID number `json:"job_id"`
		}
		if json.Unmarshal(raw, &id) == nil && id.JobID.ok() && id.JobID.n > 0 {
			j.ID = strconv.FormatInt(id.JobID.n, 10)
		}
		return j, malformed(describe(err))
	}
	if !r.JobID.ok() || r.JobID.n <= 0 || r.JobID.n > maxID {
		return j, malformed("no job id")
	}
	j.JobID = int(r.JobID.n)
	j.ID = strconv.Itoa(j.JobID)
	if a := r.Array; a != nil && a.JobID.ok() && a.JobID.n > 0 && a.JobID.n <= maxID {
		j.ArrayJobID = int(a.JobID.n)
		if a.TaskID.ok() && a.TaskID.n >= 0 && a.TaskID.n <= maxID {
			j.ArrayTaskID = int(a.TaskID.n)
			j.ID = fmt.Sprintf("%d_%d", j.ArrayJobID, j.ArrayTaskID)
		} else {
			// The record of an array's tasks not started yet.
			j.ArrayJobID = 0
			j.ID = fmt.Sprintf("%d_[%s]", a.JobID.n, cmp.Or(a.Task, "?"))
		}
	}
	if h := r.Het; h != nil && h.JobID.ok() && h.JobID.n > 0 && h.JobID.n <= maxID {
		j.HetJobID = int(h.JobID.n)
		if h.JobOffset.ok() && h.JobOffset.n >= 0 && h.JobOffset.n <= maxID {
			j.HetJobOffset = int(h.JobOffset.n)
		}
		j.ID = fmt.Sprintf("%d+%d", j.HetJobID, j.HetJobOffset)
	}
	j.Name, j.User, j.Account, j.Partition, j.QOS = r.Name, r.User, r.Account, r.Partition, r.QOS
	j.Nodes, j.SubmitLine = r.Nodes, r.SubmitLine
	if r.RestartCnt.ok() && r.RestartCnt.n > 0 && r.RestartCnt.n <= maxID {
		j.Requeues = int(r.RestartCnt.n)
	}
	if r.Priority.ok() && r.Priority.n > 0 && r.Priority.n < noVal32 {
		j.Priority = int(r.Priority.n)
	}

	states := r.State.Current
	if len(states) == 0 || states[0] == "" {
		return j, malformed("no state")
	}
	j.State = states[0]
	for _, s := range states[1:] {
		if slices.Contains(requeueFlags, s) {
			return j, ReasonEarlierRun
		}
	}
	switch {
	case slices.Contains(unfinished, j.State):
		return j, ReasonNotFinished
	case !slices.Contains(finished, j.State):
		return j, malformed(fmt.Sprintf("unknown state %q", j.State))
	}

	t := r.Time
	if t == nil {
		return j, malformed("no time block")
	}
	j.Submit, j.Eligible, j.Start, j.End = t.Submission.time(), t.Eligible.time(), t.Start.time(), t.End.time()
	if t.Limit.ok() && !t.Limit.infinite && t.Limit.n > 0 && t.Limit.n < noVal32 {
		j.TimeLimit = time.Duration(t.Limit.n) * time.Minute
	}
	switch {
	case j.Start.IsZero():
		return j, ReasonNeverStarted
	case j.End.IsZero():
		return j, malformed("no end time")
	case j.Start.After(j.End):
		return j, malformed("start after end")
	case j.Submit.IsZero():
		return j, malformed("no submission time")
	case j.Submit.After(j.Start):
		return j, malformed("submitted after it started")
	}

	gpus, types, err := gpuTRES(r.TRES.Allocated)
	if err != nil {
		return j, malformed("allocated TRES: " + err.Error())
	}
	asked, askedTypes, err := gpuTRES(r.TRES.Requested)
	if err != nil {
		return j, malformed("requested TRES: " + err.Error())
	}
	if gpus == 0 {
		if asked > 0 && r.TRES.Allocated == nil {
			return j, malformed("GPUs requested but no allocated TRES")
		}
		return j, ReasonNoGPUs
	}
	j.GPUs = gpus
	line := submitComponent(r.SubmitLine, j.HetJobID != 0, j.HetJobOffset)
	if len(askedTypes) == 0 {
		askedTypes = requestedTypes(line)
	}
	if len(askedTypes) == 1 {
		j.RequestedType = askedTypes[0]
	}
	j.GPUType = strings.Join(types, ",")
	if j.GPUType == "" {
		j.GPUType = j.RequestedType
	}

	if r.ExitCode != nil {
		j.ExitCode = r.ExitCode.code()
	}
	j.Comment = r.Comment.Job
	if j.Comment == "" {
		j.Comment = tagFromSubmitLine(line)
	}
	return j, ""
}

func malformed(what string) string { return ReasonMalformed + what }

// describe shortens a decoding error for a Skip reason.
func describe(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return "not a JSON object"
		}
		return fmt.Sprintf("%s is a JSON %s, not %s", te.Field, te.Value, jsonKind(te.Type.String()))
	}
	return err.Error()
}

func jsonKind(goType string) string {
	switch {
	case strings.HasPrefix(goType, "[]") || strings.HasSuffix(goType, "strings"):
		return "a list"
	case goType == "string":
		return "a string"
	case strings.Contains(goType, "history."):
		return "an object"
	}
	return goType
}

// gpuTRES reads the GPUs of a TRES list: the count of gres/gpu, or the
// sum of the typed gres/gpu:TYPE counts where the untyped one is missing,
// and the types with a count, sorted.
func gpuTRES(list []tres) (int, []string, error) {
	total, typed := -1, 0
	var types []string
	for _, t := range list {
		if !strings.EqualFold(t.Type, "gres") {
			continue
		}
		name, typ, _ := strings.Cut(t.Name, ":")
		if !strings.EqualFold(name, "gpu") {
			continue
		}
		if !t.Count.ok() {
			return 0, nil, fmt.Errorf("gres/%s has no count", t.Name)
		}
		if t.Count.n < 0 || t.Count.n > maxID {
			return 0, nil, fmt.Errorf("gres/%s count %d", t.Name, t.Count.n)
		}
		if typ == "" {
			total = int(t.Count.n)
			continue
		}
		typed += int(t.Count.n)
		if t.Count.n > 0 && !slices.Contains(types, typ) {
			types = append(types, typ)
		}
	}
	slices.Sort(types)
	if total < 0 {
		total = typed
	}
	return total, types, nil
}

// submitComponent returns the part of a submit line that describes one
// component of a heterogeneous job: sbatch separates them with ":" words.
func submitComponent(line string, het bool, offset int) string {
	if !het {
		return line
	}
	parts := strings.Split(" "+line+" ", " : ")
	if offset < len(parts) {
		return parts[offset]
	}
	return ""
}

// requestedTypes reads the GPU types that the GPU options of a submit line
// name: --gres=gpu:TYPE:N, --gpus=TYPE:N (-G), --gpus-per-node,
// --gpus-per-task, --gpus-per-socket, and --tres-per-task=gres/gpu:TYPE:N.
func requestedTypes(line string) []string {
	words := strings.Fields(line)
	var types []string
	add := func(t string) {
		if t != "" && !slices.Contains(types, t) {
			types = append(types, t)
		}
	}
	for i, w := range words {
		opt, value, hasValue := strings.Cut(w, "=")
		if !hasValue {
			if i+1 >= len(words) {
				continue
			}
			value = words[i+1]
		}
		if !hasValue && strings.HasPrefix(w, "-G") && len(w) > 2 {
			opt, value = "-G", w[2:]
		}
		switch opt {
		case "--gres", "--tres-per-task", "--tres-per-node":
			for _, spec := range strings.Split(value, ",") {
				spec = strings.TrimPrefix(spec, "gres/")
				fields := strings.Split(spec, ":")
				// gpu:TYPE:N or gpu:TYPE; gpu:N has no type.
				if fields[0] == "gpu" && len(fields) >= 2 && !isCount(fields[1]) {
					add(fields[1])
				}
			}
		case "--gpus", "-G", "--gpus-per-node", "--gpus-per-task", "--gpus-per-socket":
			for _, spec := range strings.Split(value, ",") {
				// TYPE:N or N.
				if typ, _, ok := strings.Cut(spec, ":"); ok && !isCount(typ) {
					add(typ)
				}
			}
		}
	}
	slices.Sort(types)
	return types
}

// isCount reports whether a GRES field is a count (2, 2k), not a type.
func isCount(s string) bool {
	return s != "" && s[0] >= '0' && s[0] <= '9'
}

// tagFromSubmitLine recovers the gavel: tag of a --comment from the submit
// line, where slurmdbd did not store the comment. The line keeps the words
// of the command but not their quotes, so the tag is taken as the words
// from "gavel:" on that hold key=value pairs: a value that held spaces is
// cut at the first one.
func tagFromSubmitLine(line string) string {
	words := strings.Fields(line)
	for i, w := range words {
		opt, value, hasValue := strings.Cut(w, "=")
		if opt != "--comment" {
			continue
		}
		var rest []string
		if hasValue {
			rest = append([]string{value}, words[i+1:]...)
		} else {
			rest = words[i+1:]
		}
		for k, v := range rest {
			if !strings.HasPrefix(strings.ToLower(v), "gavel:") {
				if strings.HasPrefix(v, "-") {
					break
				}
				continue
			}
			tag := []string{v}
			for _, p := range rest[k+1:] {
				if strings.HasPrefix(p, "-") || !strings.Contains(p, "=") {
					break
				}
				tag = append(tag, p)
			}
			return strings.Join(tag, " ")
		}
		return ""
	}
	return ""
}

// Bounds of the numbers read: job ids and counts fit a uint32 in Slurm,
// whose NO_VAL (0xfffffffe) and INFINITE (0xffffffff) mark unset values in
// the plain-number forms.
const (
	maxID   = 1<<31 - 1
	noVal32 = 0xfffffffe
	// maxUnix bounds the times read (the year 9999): beyond it a time
	// is a marker, not a date.
	maxUnix = 253402300799
)

// record is one job record, as both releases' data parsers write it; only
// the fields read are declared.
type record struct {
	JobID      number    `json:"job_id"`
	Name       string    `json:"name"`
	User       string    `json:"user"`
	Account    string    `json:"account"`
	Partition  string    `json:"partition"`
	QOS        string    `json:"qos"`
	Nodes      string    `json:"nodes"`
	SubmitLine string    `json:"submit_line"`
	Priority   number    `json:"priority"`
	RestartCnt number    `json:"restart_cnt"`
	Array      *array    `json:"array"`
	Het        *het      `json:"het"`
	Time       *times    `json:"time"`
	TRES       tresLists `json:"tres"`
	State      state     `json:"state"`
	ExitCode   *exitCode `json:"exit_code"`
	Comment    comment   `json:"comment"`
}

type array struct {
	JobID  number `json:"job_id"`
	TaskID number `json:"task_id"`
	// Task is the task range of a record that stands for tasks not
	// started yet, "3-5" or "3-5%2".
	Task string `json:"task"`
}

type het struct {
	JobID     number `json:"job_id"`
	JobOffset number `json:"job_offset"`
}

type times struct {
	Submission number `json:"submission"`
	Eligible   number `json:"eligible"`
	Start      number `json:"start"`
	End        number `json:"end"`
	// Limit is in minutes.
	Limit number `json:"limit"`
}

type tresLists struct {
	Allocated []tres `json:"allocated"`
	Requested []tres `json:"requested"`
}

type tres struct {
	Type  string `json:"type"`
	Name  string `json:"name"`
	Count number `json:"count"`
}

// state reads {"current": ["COMPLETED", flags...]}; older data parsers
// wrote the current state as one string.
type state struct {
	Current stringList `json:"current"`
}

// stringList is a list of strings that also reads a single string.
type stringList []string

func (s *stringList) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var one string
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*s = stringList{one}
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return err
	}
	*s = list
	return nil
}

// exitCode reads {"status": [...], "return_code": N, "signal": {...}}, or
// a plain number (the wait status).
type exitCode struct {
	plain      number
	ReturnCode number `json:"return_code"`
	Signal     struct {
		ID number `json:"id"`
	} `json:"signal"`
}

func (e *exitCode) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] != '{' {
		return e.plain.UnmarshalJSON(b)
	}
	type plain exitCode
	return json.Unmarshal(b, (*plain)(e))
}

// code is the job's exit code: its return code, else 128 plus the signal
// that ended it, as shells report it.
func (e *exitCode) code() int {
	switch {
	case e.plain.ok():
		// A wait status: the code in the high byte, the signal low.
		if sig := e.plain.n & 0x7f; sig != 0 {
			return 128 + int(sig)
		}
		return int(e.plain.n>>8) & 0xff
	case e.ReturnCode.ok() && e.ReturnCode.n != 0 && e.ReturnCode.n < noVal32:
		return int(e.ReturnCode.n)
	case e.Signal.ID.ok() && e.Signal.ID.n > 0 && e.Signal.ID.n < 128:
		return 128 + int(e.Signal.ID.n)
	}
	return 0
}

// comment reads {"job": ..., "administrator": ..., "system": ...}, or
// one string (older data parsers: the job's comment).
type comment struct {
	Job string `json:"job"`
}

func (c *comment) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &c.Job)
	}
	type plain comment
	return json.Unmarshal(b, (*plain)(c))
}

// number reads Slurm's numbers in both forms: plain, or
// {"set": bool, "infinite": bool, "number": N}. null, or an object with
// set false, is unset.
type number struct {
	n             int64
	set, infinite bool
}

func (v *number) ok() bool { return v.set && !v.infinite }

func (v *number) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		return nil
	}
	if len(b) > 0 && b[0] == '{' {
		var o struct {
			Set      *bool       `json:"set"`
			Infinite bool        `json:"infinite"`
			Number   json.Number `json:"number"`
		}
		if err := json.Unmarshal(b, &o); err != nil {
			return err
		}
		// An object without "set" is taken as set when it has a number.
		set := o.Number != "" && (o.Set == nil || *o.Set)
		n, err := integer(o.Number)
		if set && err != nil {
			return err
		}
		*v = number{n: n, set: set, infinite: o.Infinite}
		return nil
	}
	var raw json.Number
	if err := json.Unmarshal(b, &raw); err != nil {
		const excerpt = 20
		if len(b) > excerpt {
			b = append(b[:excerpt:excerpt], "..."...)
		}
		return fmt.Errorf("%s is not a number", b)
	}
	n, err := integer(raw)
	if err != nil {
		return err
	}
	*v = number{n: n, set: true}
	return nil
}

// integer reads a JSON number as an integer; a fraction is cut, a number
// beyond int64 refused.
func integer(s json.Number) (int64, error) {
	if s == "" {
		return 0, nil
	}
	if n, err := s.Int64(); err == nil {
		return n, nil
	}
	f, err := s.Float64()
	if err != nil || f >= 1<<63 || f < -(1<<63) {
		return 0, fmt.Errorf("number %s is out of range", s)
	}
	return int64(f), nil
}

// time reads seconds since the epoch; 0, negative, NO_VAL and the like
// (and anything past the year 9999) are unset: the zero time.
func (v number) time() time.Time {
	if !v.ok() || v.n <= 0 || v.n >= noVal32 && v.n <= 0xffffffff || v.n > maxUnix {
		return time.Time{}
	}
	return time.Unix(v.n, 0).UTC()
}
