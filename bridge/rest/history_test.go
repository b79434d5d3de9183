package rest

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/internal/history"
)

// historyFixture is slurmrestd's answer to GET /slurmdb/VERSION/jobs, as
// scripts/capture-history-fixtures.sh captured it; a version without its
// own gets v0.0.42's under its name (the schema is the same).
func historyFixture(t *testing.T, version string) []byte {
	t.Helper()
	dir := filepath.Join("..", "..", "internal", "history", "testdata")
	data, err := os.ReadFile(filepath.Join(dir, "rest-"+version+".json"))
	if os.IsNotExist(err) {
		data, err = os.ReadFile(filepath.Join(dir, "rest-v0.0.42.json"))
		data = bytes.ReplaceAll(data, []byte("v0.0.42"), []byte(version))
	}
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// historyRestd serves one API version's ping and /slurmdb/ jobs with the
// answer set.
func historyRestd(t *testing.T, version string, a answer) *fakeRestd {
	return &fakeRestd{t: t, handler: func(w http.ResponseWriter, r *http.Request) bool {
		switch r.URL.Path {
		case "/slurm/" + version + "/ping":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"pings":[]}`))
		case "/slurmdb/" + version + "/jobs":
			w.Header().Set("Content-Type", a.contentType)
			w.WriteHeader(a.status)
			_, _ = w.Write([]byte(a.body))
		default:
			return false
		}
		return true
	}}
}

func TestJobHistoryEachVersion(t *testing.T) {
	from, to := time.Unix(1795941000, 0), time.Unix(1795942000, 0)
	for _, version := range SupportedVersions() {
		t.Run(version, func(t *testing.T) {
			want := historyFixture(t, version)
			f := historyRestd(t, version, jsonAnswer(string(want)))
			c, _ := newTestClient(t, f, func(cfg *Config) { cfg.Versions = []string{version} })
			got, err := c.JobHistory(context.Background(), from, to)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("the reply came back changed")
			}
			seen := f.seen()
			wantRequest := "GET /slurmdb/" + version + "/jobs?disable_truncate_usage_time=true&end_time=1795942000&" +
				"skip_steps=true&start_time=1795941000"
			if last := seen[len(seen)-1]; last != wantRequest {
				t.Errorf("request %q, want %q", last, wantRequest)
			}
			if token := f.tokens[len(f.tokens)-1]; token != "first-token" {
				t.Errorf("token %q", token)
			}
			h, err := history.Parse(got)
			if err != nil {
				t.Fatal(err)
			}
			if len(h.Jobs) != 12 {
				t.Errorf("%d jobs in the reply, want 12", len(h.Jobs))
			}
		})
	}
}

func TestJobHistoryFailures(t *testing.T) {
	from, to := time.Unix(1795941000, 0), time.Unix(1795942000, 0)
	for _, tt := range []struct {
		name     string
		answer   answer
		from, to time.Time
		err      string
		reply    bool // a *ReplyError
	}{
		{name: "errors on 500", answer: answer{http.StatusInternalServerError, "application/json",
			`{"jobs": [], "errors": [{"error": "Unable to query", "description": "slurmdbd is down", "error_number": 1003, "source": "x"}]}`},
			err: "job history 2026-11-29T08:30:00Z to 2026-11-29T08:46:40Z: slurmrestd replied 500 Internal Server Error: " +
				"Unable to query (slurmdbd is down) [slurm error 1003]", reply: true},
		{name: "errors on 200", answer: jsonAnswer(`{"jobs": [], "errors": [{"error": "Rejecting request", "error_number": 9000}]}`),
			err: "slurmrestd replied 200 OK: Rejecting request [slurm error 9000]", reply: true},
		{name: "no jobs list", answer: jsonAnswer(`{"errors": []}`), err: `slurmrestd replied 200 without a "jobs" list`},
		{name: "not JSON", answer: answer{http.StatusOK, "text/plain", "hello"},
			err: `slurmrestd replied 200 without a JSON body: "hello"`},
		{name: "bad gateway", answer: answer{http.StatusBadGateway, "text/plain", "upstream"},
			err: `slurmrestd replied 502 Bad Gateway: "upstream"`, reply: true},
		{name: "slurmdbd plugin missing", answer: notServed(t), err: noSlurmdbEndpoints, reply: true},
		{name: "window backwards", answer: jsonAnswer(`{"jobs": []}`), from: to, to: from,
			err: "job history: the window 2026-11-29T08:46:40Z to 2026-11-29T08:30:00Z is not a time range"},
		{name: "no window", answer: jsonAnswer(`{"jobs": []}`), from: time.Time{}, to: to,
			err: "job history: the window (none) to 2026-11-29T08:46:40Z is not a time range"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := historyRestd(t, "v0.0.42", tt.answer)
			c, _ := newTestClient(t, f)
			a, b := from, to
			if tt.from != (time.Time{}) || tt.to != (time.Time{}) {
				a, b = tt.from, tt.to
			}
			body, err := c.JobHistory(context.Background(), a, b)
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("error %v, want one with %q", err, tt.err)
			}
			var re *ReplyError
			if errors.As(err, &re) != tt.reply {
				t.Errorf("error %v: a *ReplyError: %v, want %v", err, !tt.reply, tt.reply)
			}
			if body != nil {
				t.Errorf("body %q with the error", body)
			}
		})
	}
}
