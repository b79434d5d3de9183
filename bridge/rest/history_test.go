package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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

// A window of three days is asked a day at a time, and the pages come
// back as one reply: a job listed by two pages (it ran across midnight)
// once, the others in order, every page's warnings kept.
func TestJobHistoryReadsALongWindowADayAtATime(t *testing.T) {
	version := SupportedVersions()[len(SupportedVersions())-1]
	from := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	to := from.Add(2*HistoryPage + time.Hour)
	job := func(id int) string { return fmt.Sprintf(`{"job_id":%d,"name":"j%d"}`, id, id) }
	pages := map[int64]string{
		from.Unix():                      `{"meta":{"plugin":"first"},"jobs":[` + job(1) + `,` + job(2) + `],"warnings":[{"description":"w1"}],"errors":[]}`,
		from.Add(HistoryPage).Unix():     `{"meta":{"plugin":"second"},"jobs":[` + job(2) + `,` + job(3) + `],"warnings":[],"errors":[]}`,
		from.Add(2 * HistoryPage).Unix(): `{"jobs":[` + job(4) + `],"warnings":[{"description":"w3"}],"errors":[]}`,
	}
	var windows [][2]int64
	f := &fakeRestd{t: t, handler: func(w http.ResponseWriter, r *http.Request) bool {
		switch r.URL.Path {
		case "/slurm/" + version + "/ping":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"pings":[]}`))
		case "/slurmdb/" + version + "/jobs":
			start, _ := strconv.ParseInt(r.URL.Query().Get("start_time"), 10, 64)
			end, _ := strconv.ParseInt(r.URL.Query().Get("end_time"), 10, 64)
			windows = append(windows, [2]int64{start, end})
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(pages[start]))
		default:
			return false
		}
		return true
	}}
	c, _ := newTestClient(t, f, func(cfg *Config) { cfg.Versions = []string{version} })
	got, err := c.JobHistory(context.Background(), from, to)
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]int64{
		{from.Unix(), from.Add(HistoryPage).Unix()},
		{from.Add(HistoryPage).Unix(), from.Add(2 * HistoryPage).Unix()},
		{from.Add(2 * HistoryPage).Unix(), to.Unix()},
	}
	if !slices.Equal(windows, want) {
		t.Errorf("windows asked %v, want %v", windows, want)
	}
	var reply struct {
		Meta struct{ Plugin string }
		Jobs []struct {
			JobID int `json:"job_id"`
		}
		Warnings []struct{ Description string }
	}
	if err := json.Unmarshal(got, &reply); err != nil {
		t.Fatalf("joined reply: %v: %s", err, got)
	}
	var ids []int
	for _, j := range reply.Jobs {
		ids = append(ids, j.JobID)
	}
	if !slices.Equal(ids, []int{1, 2, 3, 4}) || reply.Meta.Plugin != "first" || len(reply.Warnings) != 2 {
		t.Errorf("joined: jobs %v, meta %q, warnings %v", ids, reply.Meta.Plugin, reply.Warnings)
	}

	// A page that fails fails the read, naming its window.
	pages[from.Add(HistoryPage).Unix()] = `{"jobs":[],"errors":[{"error":"Rejecting request","error_number":9000}]}`
	if _, err := c.JobHistory(context.Background(), from, to); err == nil || !strings.Contains(err.Error(), "2026-11-02T00:00:00Z to 2026-11-03T00:00:00Z") {
		t.Errorf("a failing page: %v", err)
	}
}
