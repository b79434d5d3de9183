package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// slurmError is one entry of a reply's errors[].
type slurmError struct {
	Number      int
	Error       string
	Description string
	Source      string
}

// ReplyError is a slurmrestd reply that reports a failure, by HTTP status,
// by its errors[] list, or both.
type ReplyError struct {
	Status int
	Errors []slurmError
	// Body is a short excerpt of a reply that was not JSON.
	Body string
}

func (e *ReplyError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "slurmrestd replied %d %s", e.Status, http.StatusText(e.Status))
	for _, m := range e.Errors {
		b.WriteString(": ")
		text := m.Description
		if text == "" {
			text = m.Error
		} else if m.Error != "" && m.Error != text {
			text = m.Error + " (" + text + ")"
		}
		b.WriteString(text)
		if m.Number != 0 {
			fmt.Fprintf(&b, " [slurm error %d]", m.Number)
		}
	}
	if e.Body != "" {
		fmt.Fprintf(&b, ": %q", e.Body)
	}
	return b.String()
}

// NotFound reports whether the server does not serve the path at all (the
// API version is not offered).
func (e *ReplyError) NotFound() bool { return e.Status == http.StatusNotFound && len(e.Errors) == 0 }

// replyError explains a reply that did not decode as the success type: the
// decoded error body when there is one, else the status and a body excerpt.
func replyError(status int, body []byte, hasDefault bool, decoded func() error) error {
	if hasDefault {
		if err := decoded(); err != nil {
			return err
		}
	}
	return statusError(status, body)
}

func statusError(status int, body []byte) error {
	const excerpt = 200
	text := strings.TrimSpace(string(body))
	if len(text) > excerpt {
		text = text[:excerpt] + "..."
	}
	if status == http.StatusOK {
		return fmt.Errorf("slurmrestd replied 200 without a JSON body: %q", text)
	}
	return &ReplyError{Status: status, Body: text}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
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
