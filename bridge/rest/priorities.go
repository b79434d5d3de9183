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
	"strings"
)

// parseJobsReply reads a jobs reply with parse, the generated parser of
// its API version, with one exception: job priorities above the generated
// int32 (see clampPriorities) are clamped for decoding, the reply is
// decoded again strictly, and the true values are returned by job id.
func parseJobsReply[R any](rsp *http.Response, parse func(*http.Response) (R, error)) (R, map[int64]int64, error) {
	var none R
	body, err := io.ReadAll(rsp.Body)
	_ = rsp.Body.Close()
	if err != nil {
		return none, nil, err
	}
	decode := func(b []byte) (R, error) {
		rsp.Body = io.NopCloser(bytes.NewReader(b))
		return parse(rsp)
	}
	r, err := decode(body)
	if err == nil || !priorityOverflow(err) {
		return r, nil, err
	}
	clamped, priorities, cerr := clampPriorities(body)
	if cerr != nil {
		return none, nil, fmt.Errorf("%w (and clamping priorities: %v)", err, cerr)
	}
	r, err = decode(clamped)
	return r, priorities, err
}

// priorityOverflow reports whether err is a job priority too large for
// its generated field. Slurm's priorities are unsigned 32-bit (up to
// 2^32-2, with priority/basic or set by an admin) but the generated types
// hold them in int32, so one such job would make every job reply
// undecodable and stop the daemon.
func priorityOverflow(err error) bool {
	var typeErr *json.UnmarshalTypeError
	return errors.As(err, &typeErr) && typeErr.Field == "jobs.priority.number" &&
		strings.HasPrefix(typeErr.Value, "number")
}

// clampPriorities rewrites a jobs reply so that every job's priority fits
// an int32, and returns the true priorities of the jobs it changed, by job
// id. Only those numbers change: the rewritten reply is then decoded as
// strictly as any other, so every other bad value still fails it.
func clampPriorities(body []byte) ([]byte, map[int64]int64, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var reply map[string]any
	if err := dec.Decode(&reply); err != nil {
		return nil, nil, err
	}
	jobs, _ := reply["jobs"].([]any)
	changed := map[int64]int64{}
	for _, item := range jobs {
		job, _ := item.(map[string]any)
		prio, _ := job["priority"].(map[string]any)
		num, _ := prio["number"].(json.Number)
		value, err := num.Int64()
		if err != nil || value <= math.MaxInt32 {
			continue
		}
		idNum, _ := job["job_id"].(json.Number)
		id, err := idNum.Int64()
		if err != nil {
			return nil, nil, fmt.Errorf("job with priority %d has no readable job_id", value)
		}
		prio["number"] = json.Number(strconv.Itoa(math.MaxInt32))
		changed[id] = value
	}
	out, err := json.Marshal(reply)
	return out, changed, err
}
