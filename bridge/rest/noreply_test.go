package rest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// What a failed call says of its action: refused (Slurm answered, or the
// request never left) or unknown (it went out and no answer came back).
func TestSentWithoutReplyTellsRefusalsFromLostAnswers(t *testing.T) {
	tests := map[string]struct {
		err     error
		unknown bool
	}{
		"slurmrestd's refusal": {&ReplyError{Status: 500, Errors: []slurmError{{Number: 2017, Error: "Job is no longer pending"}}}, false},
		"deadline while out":   {fmt.Errorf("post: %w", &url.Error{Op: "Post", URL: "http://x", Err: context.DeadlineExceeded}), true},
		"connection reset":     {&url.Error{Op: "Post", URL: "http://x", Err: &net.OpError{Op: "read", Err: errors.New("connection reset by peer")}}, true},
		"connection closed":    {&url.Error{Op: "Post", URL: "http://x", Err: io.EOF}, true},
		"never connected":      {&url.Error{Op: "Post", URL: "http://x", Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}, false},
		"scontrol missing":     {fmt.Errorf("scontrol: %w", exec.ErrNotFound), false},
		"scontrol timed out":   {errors.New("scontrol requeuehold 7: exit status 1: slurm_requeue error: Socket timed out on send/recv operation"), true},
		"scontrol refusal":     {errors.New("scontrol requeuehold 7: exit status 1: Job is pending execution"), false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := bridge.OutcomeUnknown(unanswered(tc.err)); got != tc.unknown {
				t.Errorf("outcome unknown: %t, want %t (%v)", got, tc.unknown, tc.err)
			}
		})
	}
}

// Against a slurmrestd that takes the request and never answers, and one
// that drops the connection after reading it, Apply reports the outcome
// unknown; one that answers with a refusal reports the refusal.
func TestApplyMarksActionsWithoutAnAnswer(t *testing.T) {
	tests := map[string]struct {
		handler func(w http.ResponseWriter, r *http.Request) bool
		unknown bool
	}{
		"stalls": {func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method != http.MethodPost {
				return false
			}
			<-r.Context().Done()
			return true
		}, true},
		"drops the connection": {func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method != http.MethodPost {
				return false
			}
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return true
		}, true},
		"refuses": {func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method != http.MethodPost {
				return false
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"errors":[{"error":"Job is no longer pending execution","error_number":2017}]}`)
			return true
		}, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, _ := newTestClient(t, &fakeRestd{t: t, handler: tc.handler}, func(cfg *Config) { cfg.Timeout = 200 * time.Millisecond })
			err := c.Apply(context.Background(), bridge.Action{Kind: bridge.ActHold, Job: 3})
			if err == nil {
				t.Fatal("Apply succeeded against a slurmrestd that did not carry the action out")
			}
			if got := bridge.OutcomeUnknown(err); got != tc.unknown {
				t.Errorf("outcome unknown: %t, want %t (%v)", got, tc.unknown, err)
			}
		})
	}
}
