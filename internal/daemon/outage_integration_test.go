//go:build integration

package daemon

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/api"
	"github.com/gavel-slurm/gavel-slurm/internal/slurmtest"
)

// switchableProxy forwards to slurmrestd while up; while down it drops
// every connection, as a stopped slurmrestd would.
type switchableProxy struct {
	up    atomic.Bool
	proxy *httputil.ReverseProxy
}

func (s *switchableProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.up.Load() {
		s.proxy.ServeHTTP(w, r)
		return
	}
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			conn.Close()
			return
		}
	}
	http.Error(w, "down", http.StatusBadGateway)
}

func healthz(t *testing.T, base string) (int, string) {
	t.Helper()
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// While slurmrestd is unreachable the daemon keeps running, sends nothing,
// and /healthz and the status say why; when it comes back, rounds resume.
func TestSlurmrestdOutageStopsActionsNotTheDaemon(t *testing.T) {
	env := slurmtest.FromEnv(t)
	part := ownPartition(t, env, "p100-2")
	for _, model := range []string{"resnet50-bs64", "a3c"} {
		submitHeld(t, env, checkpointScript(env, "outage", 1_000_000),
			"--partition="+part, "--gres=gpu:4", "--comment=gavel: model="+model)
	}
	target, err := url.Parse(env.URL)
	if err != nil {
		t.Fatal(err)
	}
	sp := &switchableProxy{proxy: httputil.NewSingleHostReverseProxy(target)}
	sp.up.Store(true)
	proxy := httptest.NewServer(sp)
	defer proxy.Close()

	const round = 2 * time.Second
	set := Settings{Policy: "max_min_fairness_perf", AdoptAdminHolds: true, Partitions: []string{part}, Round: round, DefaultPreempt: bridge.PreemptCheckpoint,
		DefaultGrace: time.Second, GraceSignal: "USR1"}
	p := newInProcess(t, restClient(t, env, proxy.URL, part), set)
	apiServer := httptest.NewServer(api.Handler(p.board, prometheus.NewRegistry()))
	defer apiServer.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.d.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()

	time.Sleep(2 * round)
	if p.slurm.count() == 0 {
		t.Fatal("no action sent while slurmrestd was up")
	}
	if code, body := healthz(t, apiServer.URL); code != http.StatusOK {
		t.Fatalf("healthz %d %q while slurmrestd is up", code, body)
	}

	sp.up.Store(false)
	time.Sleep(round) // let a round that was sending finish
	sent := p.slurm.count()
	time.Sleep(2*round + unhealthyAfter*round)
	select {
	case err := <-done:
		t.Fatalf("daemon stopped during the outage: %v", err)
	default:
	}
	if n := p.slurm.count(); n != sent {
		t.Errorf("%d actions sent while slurmrestd was unreachable", n-sent)
	}
	code, body := healthz(t, apiServer.URL)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "snapshot failed") {
		t.Errorf("healthz during the outage: %d %q, want 503 saying the snapshot failed", code, body)
	}
	if st := p.board.Status(); !strings.Contains(st.Round.Skipped, "snapshot failed") {
		t.Errorf("status during the outage says skipped=%q", st.Round.Skipped)
	}
	if len(p.board.Allocation().Rows) == 0 {
		t.Error("the last allocation is no longer served during the outage")
	}

	sp.up.Store(true)
	time.Sleep(2 * round)
	if code, body := healthz(t, apiServer.URL); code != http.StatusOK {
		t.Errorf("healthz after slurmrestd came back: %d %q", code, body)
	}
	if st := p.board.Status(); st.Round.Skipped != "" {
		t.Errorf("rounds still skipped after slurmrestd came back: %s", st.Round.Skipped)
	}
}
