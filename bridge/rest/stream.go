package rest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// errNoJobsList is a jobs reply without its "jobs" list, empty or not
// (another shape, a proxy's empty object, null): no answer, since taken
// for an empty queue it would make every managed job vanish.
var errNoJobsList = errors.New(`slurmrestd's jobs reply has no "jobs" list`)

// streamedJobs is a jobs reply read by streamJobs.
type streamedJobs struct {
	jobs []rawJob
	// listed: the reply had a "jobs" list (possibly empty), not null or
	// nothing (see errNoJobsList).
	listed bool
	// errors and lastUpdate are those fields as sent, for the caller to
	// decode with its API version's types.
	errors, lastUpdate json.RawMessage
}

// streamJobs reads a successful jobs reply from r one job record at a
// time, J being the API version's generated job type and convert what the
// bridge keeps of it: only one record's JSON and decoded form live at
// once. A record J refuses is read as parseJobsReply reads it (its
// priority clamped where that is all, else leniently and marked
// unreadable); anything wrong outside the list fails the whole reply.
func streamJobs[J any](r io.Reader, convert func(*J) rawJob) (streamedJobs, error) {
	var out streamedJobs
	dec := json.NewDecoder(r)
	if err := expectDelim(dec, '{'); err != nil {
		return out, fmt.Errorf("jobs reply: %w", err)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return out, fmt.Errorf("jobs reply: %w", err)
		}
		switch key, _ := tok.(string); key {
		case "jobs":
			tok, err := dec.Token()
			if err != nil {
				return out, fmt.Errorf("jobs reply: jobs: %w", err)
			}
			if tok == nil {
				continue // null: no list
			}
			if d, ok := tok.(json.Delim); !ok || d != '[' {
				return out, fmt.Errorf("jobs reply: jobs is %v, not a list", tok)
			}
			out.listed = true
			for dec.More() {
				var raw json.RawMessage
				if err := dec.Decode(&raw); err != nil {
					return out, fmt.Errorf("jobs reply: job %d: %w", len(out.jobs), err)
				}
				out.jobs = append(out.jobs, decodeJob(raw, convert))
			}
			if err := expectDelim(dec, ']'); err != nil {
				return out, fmt.Errorf("jobs reply: jobs: %w", err)
			}
		case "errors":
			err = dec.Decode(&out.errors)
		case "last_update":
			err = dec.Decode(&out.lastUpdate)
		default:
			var skip json.RawMessage
			err = dec.Decode(&skip)
		}
		if err != nil {
			return out, fmt.Errorf("jobs reply: %v: %w", tok, err)
		}
	}
	if err := expectDelim(dec, '}'); err != nil {
		return out, fmt.Errorf("jobs reply: %w", err)
	}
	return out, nil
}

// decodeJob reads one job record as J and converts it; see streamJobs.
func decodeJob[J any](raw json.RawMessage, convert func(*J) rawJob) rawJob {
	var j J
	err := json.Unmarshal(raw, &j)
	if err == nil {
		return convert(&j)
	}
	if priorityOverflow(err) {
		if clamped, _, priority, cerr := clampPriority(raw); cerr == nil {
			var again J
			if err = json.Unmarshal(clamped, &again); err == nil {
				r := convert(&again)
				r.Priority = priority
				return r
			}
		}
	}
	return lenientJob(raw, err)
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("found %v where %v was expected", tok, want)
	}
	return nil
}

// unmarshalIfSet decodes raw into v unless the field was absent.
func unmarshalIfSet(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		return nil
	}
	return json.Unmarshal(raw, v)
}
