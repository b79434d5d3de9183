package nvml

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/gavel-slurm/gavel-slurm/internal/reports"
)

// ReportURL turns --daemon-url into the URL reports are posted to: a bare
// daemon address gets reports.Path; a URL with a path is taken as it is
// (a proxy in front of the daemon, say).
func ReportURL(daemon string) (string, error) {
	u, err := url.Parse(daemon)
	if err != nil {
		return "", fmt.Errorf("daemon URL %q: %w", daemon, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", fmt.Errorf("daemon URL %q: want http://HOST:PORT or https://HOST:PORT", daemon)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = reports.Path
	}
	return u.String(), nil
}

// SenderStats counts what became of the reports given to a Sender.
type SenderStats struct {
	Sent    int // accepted by the daemon
	Dropped int // pushed out of a full queue, or too old to send
	Refused int // refused by the daemon as malformed: never retried
	Failed  int // attempts that failed and were retried
}

type queued struct {
	seq uint64
	rep reports.Report
}

// Sender posts reports to the daemon. Reports wait in a bounded queue, so
// that a daemon down for a while costs the node a fixed amount of memory:
// when the queue is full the oldest report goes, since the newest says
// most about the jobs now. Failed posts are retried with exponential
// backoff and jitter (a restarted daemon is not met by every node at once).
type Sender struct {
	URL       string
	TokenFile string
	Client    *http.Client
	// QueueLen is how many reports may wait.
	QueueLen int
	// BaseDelay is the first retry's delay; each next one doubles, up to
	// MaxDelay.
	BaseDelay, MaxDelay time.Duration
	// MaxAge drops reports older than this instead of sending them: the
	// daemon would refuse them as stale.
	MaxAge time.Duration
	Log    zerolog.Logger
	Now    func() time.Time
	// Jitter returns a number in [0, 1).
	Jitter func() float64

	mu    sync.Mutex
	queue []queued
	seq   uint64
	stats SenderStats
	wake  chan struct{}
}

// NewSender posts to url (see ReportURL) with the bearer token in
// tokenFile, read again before each post so that a rotated token is used
// at once.
func NewSender(url, tokenFile string, log zerolog.Logger) *Sender {
	return &Sender{
		URL: url, TokenFile: tokenFile,
		Client:   &http.Client{Timeout: 10 * time.Second},
		QueueLen: 16, BaseDelay: time.Second, MaxDelay: time.Minute,
		MaxAge: reports.DefaultMaxAge, Log: log, Now: time.Now, Jitter: rand.Float64,
		wake: make(chan struct{}, 1),
	}
}

// Enqueue adds a report to the queue, dropping the oldest when it is full.
func (s *Sender) Enqueue(rep reports.Report) {
	s.mu.Lock()
	if len(s.queue) >= max(s.QueueLen, 1) {
		s.queue = s.queue[1:]
		s.stats.Dropped++
		s.Log.Warn().Int("queue", s.QueueLen).Msg("report queue full: dropped the oldest report")
	}
	s.seq++
	s.queue = append(s.queue, queued{seq: s.seq, rep: rep})
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Stats returns the counts so far.
func (s *Sender) Stats() SenderStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Pending returns how many reports wait.
func (s *Sender) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

func (s *Sender) head() (queued, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) == 0 {
		return queued{}, false
	}
	return s.queue[0], true
}

// done removes the report seq, if Enqueue has not pushed it out already,
// and counts the outcome.
func (s *Sender) done(seq uint64, count *int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) > 0 && s.queue[0].seq == seq {
		s.queue = s.queue[1:]
	}
	*count++
}

// Run sends queued reports until ctx is done.
func (s *Sender) Run(ctx context.Context) error {
	attempt := 0
	for {
		item, ok := s.head()
		if !ok {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-s.wake:
			}
			continue
		}
		if s.MaxAge > 0 && s.Now().Sub(item.rep.Time) > s.MaxAge {
			s.Log.Warn().Time("report_time", item.rep.Time).Msg("dropped a report too old to send")
			s.done(item.seq, &s.stats.Dropped)
			attempt = 0
			continue
		}
		err := s.Post(ctx, item.rep)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var refused *RefusedError
		switch {
		case err == nil:
			s.done(item.seq, &s.stats.Sent)
			attempt = 0
			continue
		case errors.As(err, &refused):
			s.Log.Error().Err(err).Msg("the daemon refused a report: dropped, not retried")
			s.done(item.seq, &s.stats.Refused)
			attempt = 0
			continue
		}
		attempt++
		s.mu.Lock()
		s.stats.Failed++
		s.mu.Unlock()
		delay := s.backoff(attempt)
		s.Log.Warn().Err(err).Int("attempt", attempt).Dur("retry_in", delay).Msg("report not delivered")
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
	}
}

// backoff is BaseDelay doubled for each failed attempt, capped at MaxDelay,
// of which a random half is taken away ("equal jitter": never less than
// half the delay, so the daemon still gets a breather).
func (s *Sender) backoff(attempt int) time.Duration {
	d := s.BaseDelay
	for i := 1; i < attempt && d < s.MaxDelay; i++ {
		d *= 2
	}
	d = min(d, s.MaxDelay)
	return d/2 + time.Duration(s.Jitter()*float64(d/2))
}

// RefusedError is a report the daemon answered 400 or 413 to: sending it
// again cannot help.
type RefusedError struct {
	Status int
	Msg    string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("daemon refused the report (%d): %s", e.Status, e.Msg)
}

// TrustCAFile makes the sender trust only the certificate authorities in
// file (PEM) for an https daemon URL, instead of the system's: a site CA
// that signed the daemon's certificate (daemon.collector_tls_cert).
func (s *Sender) TrustCAFile(file string) error {
	pem, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("CA file %s holds no PEM certificate", file)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	client := *s.Client
	client.Transport = tr
	s.Client = &client
	return nil
}

// Post makes one attempt to deliver rep.
func (s *Sender) Post(ctx context.Context, rep reports.Report) error {
	tok, err := reports.ReadToken(s.TokenFile)
	if err != nil {
		return err
	}
	body, err := json.Marshal(rep)
	if err != nil {
		return fmt.Errorf("encode the report: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("report request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	// With per-node tokens the daemon finds this node's token by it.
	req.Header.Set(reports.NodeHeader, rep.Node)
	resp, err := s.Client.Do(req)
	if err != nil {
		return fmt.Errorf("post the report: %w", err)
	}
	defer resp.Body.Close()
	// The daemon answers one line; more would be someone else.
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	text := strings.TrimSpace(string(msg))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusBadRequest || resp.StatusCode == http.StatusRequestEntityTooLarge:
		return &RefusedError{Status: resp.StatusCode, Msg: text}
	case resp.StatusCode == http.StatusUnauthorized:
		// Retried: the token may be fixed or rotated meanwhile.
		return fmt.Errorf("daemon refused the token in %s (%s): %s", s.TokenFile, resp.Status, text)
	case resp.StatusCode == http.StatusTooManyRequests:
		// Retried: the daemon makes room at its next round.
		return fmt.Errorf("daemon holds all the reports it keeps until its next round (%s): %s", resp.Status, text)
	default:
		return fmt.Errorf("daemon answered %s: %s", resp.Status, text)
	}
}

// Send delivers one report now, retrying up to attempts times with the
// same backoff as Run; for --once.
func (s *Sender) Send(ctx context.Context, rep reports.Report, attempts int) error {
	var err error
	for a := 1; a <= attempts; a++ {
		if err = s.Post(ctx, rep); err == nil {
			return nil
		}
		var refused *RefusedError
		if errors.As(err, &refused) || a == attempts {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(s.backoff(a)):
		}
	}
	return err
}
