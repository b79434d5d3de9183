package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
)

// jobsExtra is what parseJobsReply learns beside the generated reply.
type jobsExtra struct {
	// priorities are the true priorities of the jobs whose priority was
	// clamped to decode (see clampPriority), by job id.
	priorities map[int64]int64
	// unreadable are the jobs whose records the generated types refused,
	// read leniently and marked with the reason.
	unreadable []rawJob
}

// parseJobsReply reads a jobs reply with parse, the generated parser of
// its API version. When that fails on a successful reply, the reply is
// read again job by job, J being the generated job type: a job whose
// record J refuses is left out of the reply and returned in
// jobsExtra.unreadable instead, so that one odd record does not make
// every job unreadable and stop the daemon. The rest of the reply is then
// decoded as strictly as before, so an error outside the job list still
// fails the whole reply.
func parseJobsReply[J, R any](rsp *http.Response, parse func(*http.Response) (R, error)) (R, jobsExtra, error) {
	var none R
	body, err := io.ReadAll(rsp.Body)
	_ = rsp.Body.Close()
	if err != nil {
		return none, jobsExtra{}, err
	}
	decode := func(b []byte) (R, error) {
		rsp.Body = io.NopCloser(bytes.NewReader(b))
		return parse(rsp)
	}
	r, err := decode(body)
	if err == nil || rsp.StatusCode != http.StatusOK {
		return r, jobsExtra{}, err
	}
	rest, extra, splitErr := splitJobs[J](body)
	if splitErr != nil {
		// Not even a list of job records: the reply as a whole is bad.
		return none, jobsExtra{}, err
	}
	r, err = decode(rest)
	if err != nil {
		return none, jobsExtra{}, err
	}
	return r, extra, nil
}

// errNoJobsList is a jobs reply without its "jobs" list, empty or not
// (another shape, a proxy's empty object, null): no answer, since taken
// for an empty queue it would make every managed job vanish. The decoder
// leaves the list nil only then.
var errNoJobsList = errors.New(`slurmrestd's jobs reply has no "jobs" list`)

// splitJobs decodes each record of a jobs reply's "jobs" list as J, and
// returns the reply with only the records that decode (their priority
// clamped where needed) and what it set aside.
func splitJobs[J any](body []byte) ([]byte, jobsExtra, error) {
	var reply map[string]json.RawMessage
	if err := json.Unmarshal(body, &reply); err != nil {
		return nil, jobsExtra{}, err
	}
	var jobs []json.RawMessage
	if err := json.Unmarshal(reply["jobs"], &jobs); err != nil {
		return nil, jobsExtra{}, fmt.Errorf("jobs: %w", err)
	}
	extra := jobsExtra{priorities: map[int64]int64{}}
	kept := make([]json.RawMessage, 0, len(jobs))
	for _, raw := range jobs {
		err := json.Unmarshal(raw, new(J))
		if err != nil && priorityOverflow(err) {
			clamped, id, priority, cerr := clampPriority(raw)
			if cerr == nil {
				if err = json.Unmarshal(clamped, new(J)); err == nil {
					raw = clamped
					extra.priorities[id] = priority
				}
			}
		}
		if err != nil {
			extra.unreadable = append(extra.unreadable, lenientJob(raw, err))
			continue
		}
		kept = append(kept, raw)
	}
	var err error
	if reply["jobs"], err = json.Marshal(kept); err != nil {
		return nil, jobsExtra{}, err
	}
	out, err := json.Marshal(reply)
	return out, extra, err
}

// priorityOverflow reports whether err, from decoding one job record, is
// its priority being too large for the generated field. Slurm's priorities
// are unsigned 32-bit (up to 2^32-2, with priority/basic or set by an
// admin) but the generated types hold them in int32; such a job is
// perfectly readable once its priority is clamped.
func priorityOverflow(err error) bool {
	var typeErr *json.UnmarshalTypeError
	return errors.As(err, &typeErr) && typeErr.Field == "priority.number" &&
		len(typeErr.Value) >= 6 && typeErr.Value[:6] == "number"
}

// clampPriority rewrites one job record so that its priority fits an
// int32, and returns it with the job's id and true priority. Only that
// number changes: the record is then decoded as strictly as any other.
func clampPriority(raw []byte) ([]byte, int64, int64, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var job map[string]any
	if err := dec.Decode(&job); err != nil {
		return nil, 0, 0, err
	}
	prio, _ := job["priority"].(map[string]any)
	num, _ := prio["number"].(json.Number)
	value, err := num.Int64()
	if err != nil || value <= math.MaxInt32 {
		return nil, 0, 0, fmt.Errorf("priority %q is not an integer above 2^31-1", num)
	}
	idNum, _ := job["job_id"].(json.Number)
	id, err := idNum.Int64()
	if err != nil {
		return nil, 0, 0, fmt.Errorf("job with priority %d has no readable job_id", value)
	}
	prio["number"] = json.Number(strconv.Itoa(math.MaxInt32))
	out, err := json.Marshal(job)
	return out, id, value, err
}

// lenientJob reads what it can of a job record that the generated types
// refused (the id, owner, partition and state the daemon needs to list the
// job and leave it alone), with reason as the record's problem.
func lenientJob(raw []byte, reason error) rawJob {
	r := rawJob{Unreadable: fmt.Errorf("record does not decode: %w", reason)}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var job map[string]any
	if err := dec.Decode(&job); err != nil {
		return r
	}
	if n, ok := job["job_id"].(json.Number); ok {
		r.ID, _ = n.Int64()
	}
	text := func(key string) string {
		s, _ := job[key].(string)
		return s
	}
	r.User, r.Account, r.QOS = text("user_name"), text("account"), text("qos")
	r.Name, r.Partition, r.Reason, r.Comment = text("name"), text("partition"), text("state_reason"), text("comment")
	// Whether the record is part of a job array or a heterogeneous job
	// decides how it may be named in a request (see bridge.Job.SlurmName),
	// so those ids are read too.
	number := func(key string) (int64, bool) {
		v, _ := job[key].(map[string]any)
		set, _ := v["set"].(bool)
		n, ok := v["number"].(json.Number)
		if !set || !ok {
			return 0, false
		}
		i, err := n.Int64()
		return i, err == nil
	}
	r.ArrayJobID, _ = number("array_job_id")
	r.ArrayTaskID, r.ArrayTaskSet = number("array_task_id")
	r.ArrayTasks = text("array_task_string")
	r.HetJobID, _ = number("het_job_id")
	r.HetJobOffset, _ = number("het_job_offset")
	switch s := job["job_state"].(type) {
	case string:
		r.States = []string{s}
	case []any:
		for _, v := range s {
			if state, ok := v.(string); ok {
				r.States = append(r.States, state)
			}
		}
	}
	return r
}
