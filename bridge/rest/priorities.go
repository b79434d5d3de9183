package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
)

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
