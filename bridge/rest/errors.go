package rest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
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

// tolerableOverflow reports whether err is only a number too large for its
// generated field in one of Slurm's "no value" structs ({"set", "number"}).
// The generated types hold Slurm's unsigned 32-bit numbers in int32, so a
// job priority above 2^31-1 (possible with priority/basic, or set by an
// admin) would otherwise make every job reply undecodable and stop the
// daemon. encoding/json skips such a field and decodes the rest; the field
// then reads as unset, and for a priority that is the right reading: only
// a priority of 0 means held.
func tolerableOverflow(err error) bool {
	var typeErr *json.UnmarshalTypeError
	return errors.As(err, &typeErr) && strings.HasPrefix(typeErr.Value, "number") &&
		strings.HasSuffix(typeErr.Field, ".number")
}
