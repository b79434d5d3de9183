package rest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"

	"github.com/gavel-slurm/gavel-slurm/bridge"
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

// unanswered marks err as bridge.ErrNoReply when it says that a request
// may have reached slurmctld without its answer coming back, so that the
// daemon checks the job in Slurm rather than taking the action for
// refused.
func unanswered(err error) error {
	if err != nil && sentWithoutReply(err) {
		return bridge.NoReply(err)
	}
	return err
}

// sentWithoutReply reports whether err leaves an action's outcome
// unknown: a deadline or cancellation while the call was out, a
// connection that broke after the request was written, or scontrol's own
// timeout waiting for slurmctld. A reply that reports a failure, a
// connection that was never made and a command that could not start are
// definite: Slurm did not carry the action out.
func sentWithoutReply(err error) bool {
	var re *ReplyError
	if errors.As(err, &re) || commandMissing(err) {
		return false
	}
	var op *net.OpError
	if errors.As(err, &op) {
		// A connection never made carried nothing; one that broke while
		// writing or reading may have carried the request.
		return op.Op != "dial"
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	// scontrol prints "Socket timed out on send/recv operation" when
	// slurmctld took the request and did not answer in time.
	return strings.Contains(err.Error(), "timed out")
}
