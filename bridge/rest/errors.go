package rest

import (
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
