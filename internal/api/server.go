package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Board holds the latest published Status and Allocation. The daemon
// publishes after every round; handlers read concurrently.
type Board struct {
	mu         sync.RWMutex
	status     Status
	allocation Allocation
	// healthErr is why the daemon is unhealthy, nil when it is fine.
	healthErr error
	// standby says why the daemon waits instead of running rounds
	// (another one holds the state); empty when it is the active one.
	standby string
}

// Publish replaces the documents served.
func (b *Board) Publish(s Status, a Allocation) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.status, b.allocation = s, a
}

// SetHealth records the daemon's health: nil when rounds run normally.
func (b *Board) SetHealth(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.healthErr = err
}

// SetStandby marks the daemon as a standby waiting for the state, with
// why; an empty why marks it active. A standby's /healthz answers 503, so
// that a load balancer or a virtual IP's health check picks the active
// daemon.
func (b *Board) SetStandby(why string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.standby = why
}

// Standby returns why the daemon is a standby, "" when it is active.
func (b *Board) Standby() string {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.standby
}

// Status returns the latest status.
func (b *Board) Status() Status {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.status
}

// Allocation returns the latest allocation.
func (b *Board) Allocation() Allocation {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.allocation
}

// Health returns nil when healthy.
func (b *Board) Health() error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.healthErr
}

// Handler returns the API's routes over board, with /metrics served from
// gatherer.
func Handler(board *Board, gatherer prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, board.Status())
	})
	mux.HandleFunc("GET /v1/allocation", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, board.Allocation())
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if why := board.Standby(); why != "" {
			http.Error(w, "standby: "+why, http.StatusServiceUnavailable)
			return
		}
		if err := board.Health(); err != nil {
			http.Error(w, "unhealthy: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	return mux
}

// writeJSON answers with v as JSON, or with a 500 that says why v cannot
// be written (a value JSON cannot carry): encoded first, so that a client
// never gets a 200 with a cut body.
func writeJSON(w http.ResponseWriter, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		http.Error(w, "cannot encode the answer: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(buf.Bytes()) //nolint:errcheck // a client that went away
}

// Listen opens addr: "host:port" for TCP or "unix:/path" for a unix
// socket. A socket file left by an earlier run is removed first; anything
// else at the path is an error, so that a mistyped path (the state
// database, a configuration file) is never deleted.
func Listen(addr string) (net.Listener, error) {
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		fi, err := os.Lstat(path)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("check socket path %s: %w", path, err)
		case fi.Mode()&os.ModeSocket == 0:
			return nil, fmt.Errorf("%s exists and is not a socket; not removing it", path)
		default:
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
			}
		}
		ln, err := net.Listen("unix", path)
		if err != nil {
			return nil, fmt.Errorf("listen on %s: %w", addr, err)
		}
		return ln, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, nil
}

// serverTimeouts bound what one connection may hold: headers, the whole
// request, the answer, and an idle keep-alive. Without them a client that
// stalls keeps a goroutine and a file descriptor for ever, and enough of
// them leave the daemon none to reach slurmrestd with.
var serverTimeouts = struct{ header, read, write, idle, shutdown time.Duration }{
	header: 5 * time.Second, read: 10 * time.Second, write: 30 * time.Second, idle: 60 * time.Second,
	shutdown: 5 * time.Second,
}

// Serve serves h on ln until ctx is done, then shuts down gracefully:
// requests in flight get serverTimeouts.shutdown to finish, after which
// the connections left (a client that does not read its answer) are
// closed, which is still a clean stop.
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	t := serverTimeouts
	srv := &http.Server{Handler: h, ReadHeaderTimeout: t.header, ReadTimeout: t.read, WriteTimeout: t.write, IdleTimeout: t.idle}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("api server: %w", err)
	case <-ctx.Done():
		shutdownCtx, cancel := context.WithTimeout(context.Background(), t.shutdown)
		defer cancel()
		err := srv.Shutdown(shutdownCtx)
		if errors.Is(err, context.DeadlineExceeded) {
			err = srv.Close()
		}
		if err != nil {
			return fmt.Errorf("api shutdown: %w", err)
		}
		return nil
	}
}

// Client returns an HTTP client and base URL for addr as Listen accepts
// it, so the status command reaches a unix socket the same way.
func Client(addr string) (*http.Client, string) {
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}}
		return &http.Client{Transport: tr, Timeout: 10 * time.Second}, "http://unix"
	}
	base := addr
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		base = "http://" + base
	}
	return &http.Client{Timeout: 10 * time.Second}, strings.TrimRight(base, "/")
}
