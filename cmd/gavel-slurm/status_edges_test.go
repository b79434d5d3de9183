package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gavel-slurm/gavel-slurm/internal/api"
	"github.com/gavel-slurm/gavel-slurm/internal/config"
)

// A 200 answer that is not the daemon's JSON (another service on the
// port, a proxy's HTML page) fails `status --json` as it fails the table,
// instead of being copied to stdout with exit status 0.
func TestStatusJSONRefusesAnAnswerThatIsNotJSON(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<html><body>It works!</body></html>\n"))
	}))
	t.Cleanup(srv.Close)
	for _, args := range [][]string{{"--server", srv.URL}, {"--json", "--server", srv.URL}} {
		var out, errOut bytes.Buffer
		rc := runStatus(args, &out, &errOut)
		if rc != 1 || !strings.Contains(errOut.String(), "decode the daemon's answer") {
			t.Errorf("status %v: rc=%d stdout=%q stderr=%q, want rc 1 and a decode error", args, rc, out.String(), errOut.String())
		}
	}
}

// `status --json` keeps "jobs" a list when no job matches the filters, so
// that `jq '.jobs[]'` prints nothing rather than failing on null.
func TestStatusJSONJobsIsAListWhenNoneMatch(t *testing.T) {
	srv := serveStatus(t, statusFixture(), http.StatusOK)
	var out, errOut bytes.Buffer
	if rc := runStatus([]string{"--json", "--server", srv.URL, "--user", "nobody"}, &out, &errOut); rc != 0 {
		t.Fatalf("rc=%d stderr=%s", rc, errOut.String())
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(doc["jobs"])); got != "[]" {
		t.Errorf(`"jobs" is %s, want []`, got)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// `status --watch` prints "until interrupted": one failed fetch (the
// daemon restarting) is reported and the next interval tries again,
// as watch(1) and squeue --iterate do, instead of ending the watch.
func TestStatusWatchSurvivesOneFailedFetch(t *testing.T) {
	var calls atomic.Int32
	st := statusFixture()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			http.Error(w, "restarting", http.StatusServiceUnavailable)
			return
		}
		json.NewEncoder(w).Encode(st)
	}))
	t.Cleanup(srv.Close)
	var out, errOut lockedBuffer
	done := make(chan int, 1)
	go func() { done <- runStatus([]string{"--server", srv.URL, "--watch", "20ms"}, &out, &errOut) }()
	select {
	case rc := <-done:
		t.Fatalf("--watch ended after one failed fetch: rc=%d stderr=%q", rc, errOut.String())
	case <-time.After(500 * time.Millisecond):
	}
	if !strings.Contains(out.String(), "lease extended on v100") {
		t.Errorf("--watch printed no table after the daemon came back:\nstdout=%q\nstderr=%q", out.String(), errOut.String())
	}
}

// Between a daemon's start and the end of its first round (a first read of
// a large queue takes up to slurm.read_timeout), /v1/status already says
// the configured policy and round length, as it does after a standby
// takes over, not "policy -, every 0s" with "jobs": null.
func TestStatusBeforeTheFirstRoundSaysTheConfiguration(t *testing.T) {
	cfg := config.Default()
	p := &shellParts{board: &api.Board{}, metrics: api.NewMetrics(prometheus.NewRegistry())}
	p.becomeActive(&cfg)
	st := p.board.Status()
	if st.Round.Policy != cfg.Scheduler.Policy || st.Round.LengthSeconds != cfg.Scheduler.Round.Seconds() || st.Jobs == nil {
		t.Errorf("status before the first round: %+v, want policy %s, length %v s and an empty job list",
			st, cfg.Scheduler.Policy, cfg.Scheduler.Round.Seconds())
	}
	var out bytes.Buffer
	renderStatus(&out, st)
	if strings.Contains(out.String(), "every 0s") {
		t.Errorf("table before the first round:\n%s", out.String())
	}
}
