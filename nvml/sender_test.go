package nvml

import (
	"context"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gavel-slurm/gavel-slurm/internal/reports"
)

func TestReportURL(t *testing.T) {
	cases := []struct{ in, want string }{
		{"http://ctl:8390", "http://ctl:8390/v1/reports"},
		{"http://ctl:8390/", "http://ctl:8390/v1/reports"},
		{"https://proxy/gavel/reports", "https://proxy/gavel/reports"},
		{"ctl:8390", ""},
		{"ftp://ctl", ""},
		{"http://", ""},
	}
	for _, c := range cases {
		got, err := ReportURL(c.in)
		if c.want == "" {
			if err == nil {
				t.Errorf("ReportURL(%q) = %q, want an error", c.in, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ReportURL(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

// daemon is a test daemon: the real handler behind a switch that can make
// it fail first.
type daemon struct {
	mu       sync.Mutex
	failures int // answer 503 to this many requests first
	got      []reports.Report
	requests int
	handler  http.Handler
}

func (d *daemon) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	d.requests++
	fail := d.failures > 0
	if fail {
		d.failures--
	}
	d.mu.Unlock()
	if fail {
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	d.handler.ServeHTTP(w, r)
}

func newDaemon(t *testing.T, token string) (*daemon, *httptest.Server, string) {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := &daemon{}
	d.handler = reports.NewHandler(tokenFile, func(r reports.Report) {
		d.mu.Lock()
		d.got = append(d.got, r)
		d.mu.Unlock()
	}, nil)
	srv := httptest.NewServer(d)
	t.Cleanup(srv.Close)
	return d, srv, tokenFile
}

func testSender(t *testing.T, srv *httptest.Server, tokenFile string) *Sender {
	u, err := ReportURL(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	s := NewSender(u, tokenFile, zerolog.Nop())
	s.BaseDelay, s.MaxDelay = time.Millisecond, 4*time.Millisecond
	return s
}

func report(node string, at time.Time) reports.Report {
	return reports.Report{Node: node, Time: at.UTC().Truncate(time.Second), IntervalS: 30, Jobs: []reports.Job{}}
}

// runUntil runs s until cond holds (or a second passes).
func runUntil(t *testing.T, s *Sender, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run returned %v, want context.Canceled", err)
	}
}

func TestSenderRetries(t *testing.T) {
	d, srv, tokenFile := newDaemon(t, "tok")
	d.failures = 2
	s := testSender(t, srv, tokenFile)
	s.Enqueue(report("n1", time.Now()))
	runUntil(t, s, func() bool { return s.Stats().Sent == 1 })
	st := s.Stats()
	if st.Sent != 1 || st.Failed != 2 || st.Dropped != 0 || st.Refused != 0 {
		t.Errorf("stats %+v, want 1 sent after 2 failures", st)
	}
	if len(d.got) != 1 || d.got[0].Node != "n1" || d.requests != 3 {
		t.Errorf("daemon got %d reports in %d requests", len(d.got), d.requests)
	}
}

func TestSenderRefusedNotRetried(t *testing.T) {
	d, srv, tokenFile := newDaemon(t, "tok")
	s := testSender(t, srv, tokenFile)
	s.Enqueue(report("n1", time.Now().Add(-time.Hour))) // stale: refused
	s.MaxAge = 0                                        // let it go out anyway
	s.Enqueue(report("n2", time.Now()))
	runUntil(t, s, func() bool { return s.Pending() == 0 })
	st := s.Stats()
	if st.Refused != 1 || st.Sent != 1 || st.Failed != 0 || d.requests != 2 {
		t.Errorf("stats %+v after %d requests, want 1 refused and 1 sent in 2", st, d.requests)
	}
}

func TestSenderDropsStale(t *testing.T) {
	d, srv, tokenFile := newDaemon(t, "tok")
	s := testSender(t, srv, tokenFile)
	s.Enqueue(report("old", time.Now().Add(-time.Hour)))
	s.Enqueue(report("new", time.Now()))
	runUntil(t, s, func() bool { return s.Pending() == 0 })
	if st := s.Stats(); st.Dropped != 1 || st.Sent != 1 || d.requests != 1 {
		t.Errorf("stats %+v after %d requests, want the old one dropped unsent", st, d.requests)
	}
}

func TestSenderQueueBound(t *testing.T) {
	d, srv, tokenFile := newDaemon(t, "tok")
	s := testSender(t, srv, tokenFile)
	s.QueueLen = 3
	now := time.Now()
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		s.Enqueue(report(n, now))
	}
	if s.Pending() != 3 || s.Stats().Dropped != 2 {
		t.Fatalf("pending %d, dropped %d; want 3 and 2", s.Pending(), s.Stats().Dropped)
	}
	runUntil(t, s, func() bool { return s.Pending() == 0 })
	var nodes string
	for _, r := range d.got {
		nodes += r.Node
	}
	if nodes != "cde" {
		t.Errorf("daemon got %q, want the newest three in order (cde)", nodes)
	}
}

func TestSenderWrongToken(t *testing.T) {
	_, srv, _ := newDaemon(t, "right")
	wrong := filepath.Join(t.TempDir(), "token")
	os.WriteFile(wrong, []byte("wrong"), 0o600)
	s := testSender(t, srv, wrong)
	err := s.Post(context.Background(), report("n", time.Now()))
	var refused *RefusedError
	if err == nil || errors.As(err, &refused) {
		t.Errorf("wrong token: %v; want an error that is retried", err)
	}
	os.WriteFile(wrong, []byte("right"), 0o600) // rotated: used at the next post
	if err := s.Post(context.Background(), report("n", time.Now())); err != nil {
		t.Errorf("after the token was fixed: %v", err)
	}
	if err := s.Post(context.Background(), report("n", time.Now())); err != nil {
		t.Error(err)
	}
	missing := testSender(t, srv, filepath.Join(t.TempDir(), "none"))
	if err := missing.Post(context.Background(), report("n", time.Now())); err == nil {
		t.Error("posted without a token file")
	}
}

func TestSenderCancel(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("t"), 0o600)
	s := testSender(t, srv, tokenFile)
	s.Enqueue(report("n", time.Now()))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Run did not stop when its context was cancelled")
	}
}

func TestBackoff(t *testing.T) {
	s := &Sender{BaseDelay: time.Second, MaxDelay: time.Minute}
	cases := []struct {
		attempt  int
		jitter   float64
		min, max time.Duration
	}{
		{1, 0, 500 * time.Millisecond, 500 * time.Millisecond},
		{1, 0.999, 500 * time.Millisecond, time.Second},
		{2, 0, time.Second, time.Second},
		{4, 0.5, 6 * time.Second, 6 * time.Second},
		{7, 0, 30 * time.Second, 30 * time.Second}, // 64 s capped to 60
		{50, 0.999, 30 * time.Second, time.Minute},
	}
	for _, c := range cases {
		s.Jitter = func() float64 { return c.jitter }
		if got := s.backoff(c.attempt); got < c.min || got > c.max {
			t.Errorf("backoff(%d) with jitter %v = %v, want in [%v, %v]", c.attempt, c.jitter, got, c.min, c.max)
		}
	}
}

func TestSend(t *testing.T) {
	d, srv, tokenFile := newDaemon(t, "tok")
	d.failures = 1
	s := testSender(t, srv, tokenFile)
	if err := s.Send(context.Background(), report("n", time.Now()), 3); err != nil {
		t.Errorf("Send: %v", err)
	}
	d.failures = 5
	if err := s.Send(context.Background(), report("n", time.Now()), 2); err == nil {
		t.Error("Send succeeded against a daemon that kept failing")
	}
}

// With per-node tokens the sender names its node, so that the daemon
// checks the node's own token; a token does not carry another node's
// report.
func TestSenderNodeTokens(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "n1"), []byte("tok-1\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "n2"), []byte("tok-2\n"), 0o600)
	var got []reports.Report
	h := reports.New(reports.Options{TokenDir: dir, Sink: func(r reports.Report) error { got = append(got, r); return nil }})
	srv := httptest.NewServer(h)
	defer srv.Close()
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("tok-1\n"), 0o600)
	s := testSender(t, srv, tokenFile)
	if err := s.Post(context.Background(), report("n1", time.Now())); err != nil {
		t.Fatalf("n1 with its own token: %v", err)
	}
	err := s.Post(context.Background(), report("n2", time.Now()))
	var refused *RefusedError
	if err == nil || errors.As(err, &refused) || !strings.Contains(err.Error(), `for node "n2"`) {
		t.Errorf("n2's report with n1's token: %v; want a refused token, retried", err)
	}
	if len(got) != 1 || got[0].Node != "n1" {
		t.Errorf("daemon took %+v", got)
	}
}

// A daemon that holds all it may until its round answers 429: the report
// is retried, and the error says why.
func TestSenderRetriesFullQueue(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("tok"), 0o600)
	full := 2
	var got []reports.Report
	h := reports.New(reports.Options{TokenFile: tokenFile, Sink: func(r reports.Report) error {
		if full > 0 {
			full--
			return &reports.Error{Kind: reports.KindNodeFull, Err: errors.New("node n1 holds 1048576 bytes")}
		}
		got = append(got, r)
		return nil
	}})
	srv := httptest.NewServer(h)
	defer srv.Close()
	s := testSender(t, srv, tokenFile)
	err := s.Post(context.Background(), report("n1", time.Now()))
	var refused *RefusedError
	if err == nil || errors.As(err, &refused) || !strings.Contains(err.Error(), "until its next round") ||
		!strings.Contains(err.Error(), "node_full: node n1 holds") {
		t.Errorf("full queue: %v; want an error that is retried, with the daemon's reason", err)
	}
	s.Enqueue(report("n1", time.Now()))
	runUntil(t, s, func() bool { return s.Stats().Sent == 1 })
	if st := s.Stats(); st.Sent != 1 || st.Failed != 1 || len(got) != 1 {
		t.Errorf("stats %+v, daemon got %d; want sent after one more 429", st, len(got))
	}
}

// writeCA writes srv's certificate as a PEM file.
func writeCA(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.pem")
	data := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// An https daemon whose certificate a site CA signed: the sender trusts
// that CA when told to, and nothing it does not know otherwise.
func TestSenderTrustCAFile(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("tok"), 0o600)
	n := 0
	srv := httptest.NewUnstartedServer(reports.NewHandler(tokenFile, func(reports.Report) { n++ }, nil))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake
	srv.StartTLS()
	defer srv.Close()
	s := testSender(t, srv, tokenFile)
	if err := s.Post(context.Background(), report("n", time.Now())); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a certificate the system does not trust: %v", err)
	}
	if err := s.TrustCAFile(writeCA(t, srv)); err != nil {
		t.Fatal(err)
	}
	if err := s.Post(context.Background(), report("n", time.Now())); err != nil || n != 1 {
		t.Errorf("with the CA: %v, %d reports", err, n)
	}
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(notPEM, []byte("not a certificate"), 0o644)
	if err := s.TrustCAFile(notPEM); err == nil {
		t.Error("a CA file without a certificate was taken")
	}
	if err := s.TrustCAFile(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("a missing CA file was taken")
	}
}
