package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func sampleStatus() Status {
	return Status{
		Round: Round{Number: 3, Policy: "max_min_fairness_perf", LengthSeconds: 20},
		Jobs: []JobStatus{
			{JobID: "11", User: "ana", Model: "ResNet-50", Managed: true, State: "RUNNING", GPUType: "v100", GPUs: 2,
				Decision: "extend", Reason: "keeps its v100 lease", Allocation: map[string]float64{"v100": 0.75, "k80": 0.25},
				Received: map[string]float64{"v100": 300, "k80": 60}, SinceArrival: 600},
			{JobID: "12", User: "bo", Managed: false, State: "PENDING", Reason: "no gavel: tag in --comment", GPUs: 1},
		},
		Types: []TypeSummary{{Type: "k80", GPUs: 4, AllocatedGPUs: 0.5}, {Type: "v100", GPUs: 2, Busy: 2, Running: 1, AllocatedGPUs: 1.5}},
	}
}

func TestHandlerRoutes(t *testing.T) {
	board := &Board{}
	st := sampleStatus()
	board.Publish(st, Allocation{Policy: "max_min_fairness_perf", Types: []string{"k80", "v100"},
		Rows: map[string]map[string]float64{"11": {"k80": 0.25, "v100": 0.75}}})
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.ObserveStatus(st)
	srv := httptest.NewServer(Handler(board, reg))
	defer srv.Close()

	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}

	code, body := get("/v1/status")
	var got Status
	if code != 200 || json.Unmarshal([]byte(body), &got) != nil {
		t.Fatalf("/v1/status: %d %s", code, body)
	}
	if len(got.Jobs) != 2 || got.Jobs[0].Allocation["v100"] != 0.75 || got.Jobs[1].Managed || got.Round.Number != 3 {
		t.Errorf("status round trip lost data: %+v", got)
	}
	for _, field := range []string{`"job_id"`, `"user"`, `"model"`, `"managed"`, `"reason"`, `"state"`, `"gpu_type"`, `"gpus"`, `"allocation"`, `"received"`} {
		if !strings.Contains(body, field) {
			t.Errorf("/v1/status has no %s field", field)
		}
	}

	code, body = get("/v1/allocation")
	if code != 200 || !strings.Contains(body, `"k80": 0.25`) {
		t.Errorf("/v1/allocation: %d %s", code, body)
	}

	code, body = get("/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{
		`gavel_slurm_job_allocation_fraction{gpu_type="v100",job_id="11"} 0.75`,
		`gavel_slurm_job_received_fraction{gpu_type="v100",job_id="11"} 0.5`,
		`gavel_slurm_jobs{gpu_type="v100",managed="true",state="RUNNING"} 1`,
		`gavel_slurm_jobs{gpu_type="",managed="false",state="PENDING"} 1`,
		`gavel_slurm_allocated_gpus{gpu_type="v100"} 1.5`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz = %d while healthy", code)
	}
	board.SetHealth(errors.New("no round for 5m"))
	if code, body := get("/healthz"); code != 503 || !strings.Contains(body, "no round") {
		t.Errorf("/healthz = %d %q while unhealthy", code, body)
	}
	if code, _ := get("/v1/nothing"); code != 404 {
		t.Errorf("unknown path = %d", code)
	}
}

// A standby answers /healthz with 503 and says so, whatever its health;
// once active, its health decides again. gavel_slurm_active follows.
func TestStandbyHealthAndMetric(t *testing.T) {
	tests := map[string]struct {
		standby    string
		health     error
		wantCode   int
		wantBody   string
		wantActive float64
	}{
		"standby":                 {standby: "another daemon holds /s/state.db", wantCode: 503, wantBody: "standby: another daemon holds /s/state.db", wantActive: 0},
		"standby beats unhealthy": {standby: "waiting", health: errors.New("no round"), wantCode: 503, wantBody: "standby: waiting", wantActive: 0},
		"active and healthy":      {wantCode: 200, wantBody: "ok", wantActive: 1},
		"active and unhealthy":    {health: errors.New("no round for 5m"), wantCode: 503, wantBody: "unhealthy: no round for 5m", wantActive: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			board := &Board{}
			reg := prometheus.NewRegistry()
			m := NewMetrics(reg)
			board.SetHealth(tc.health)
			board.SetStandby(tc.standby)
			m.SetActive(tc.standby == "")
			srv := httptest.NewServer(Handler(board, reg))
			defer srv.Close()
			resp, err := http.Get(srv.URL + "/healthz")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.wantCode || strings.TrimSpace(string(body)) != tc.wantBody {
				t.Errorf("/healthz = %d %q, want %d %q", resp.StatusCode, body, tc.wantCode, tc.wantBody)
			}
			if got := testutil.ToFloat64(m.active); got != tc.wantActive {
				t.Errorf("gavel_slurm_active = %v, want %v", got, tc.wantActive)
			}
		})
	}
}

func TestMetricsDropFinishedJobs(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.ObserveStatus(sampleStatus())
	m.ObserveStatus(Status{})
	if n := testutil.CollectAndCount(reg, "gavel_slurm_job_allocation_fraction"); n != 0 {
		t.Errorf("%d allocation series left after the jobs finished", n)
	}
}

func TestMetricsCounters(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.ObserveRound(120*time.Millisecond, 0)
	m.ObserveRound(80*time.Millisecond, 30*time.Millisecond)
	m.CountSkip("no_nodes")
	m.CountAction("hold", "sent")
	m.CountAction("hold", "sent")
	m.CountAction("requeue", "failed")
	m.CountPreemption()
	want := `
# HELP gavel_slurm_actions_total Slurm actions by kind and result (sent, failed, unanswered: sent without an answer and checked against Slurm at the next read, dry_run).
# TYPE gavel_slurm_actions_total counter
gavel_slurm_actions_total{kind="hold",result="sent"} 2
gavel_slurm_actions_total{kind="requeue",result="failed"} 1
# HELP gavel_slurm_rounds_total Rounds run, skipped ones included.
# TYPE gavel_slurm_rounds_total counter
gavel_slurm_rounds_total 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "gavel_slurm_actions_total", "gavel_slurm_rounds_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg, "gavel_slurm_solve_duration_seconds"); n != 1 {
		t.Errorf("solve histogram series = %d", n)
	}
}

func TestServeOnUnixSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "api.sock")
	ln, err := Listen("unix:" + sock)
	if err != nil {
		t.Fatal(err)
	}
	board := &Board{}
	board.Publish(sampleStatus(), Allocation{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, Handler(board, prometheus.NewRegistry())) }()

	client, base := Client("unix:" + sock)
	resp, err := client.Get(base + "/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	var st Status
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil || st.Round.Number != 3 {
		t.Errorf("status over unix socket: %+v, %v", st.Round, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve after shutdown: %v", err)
	}
	// A stale socket file left by a crash must not block the next start.
	ln2, err := Listen("unix:" + sock)
	if err != nil {
		t.Fatalf("relisten over stale socket: %v", err)
	}
	ln2.Close()
}

func TestClientBase(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:8390":    "http://127.0.0.1:8390",
		"http://host:1/":    "http://host:1",
		"https://h.example": "https://h.example",
		"unix:/run/gs.sock": "http://unix",
	} {
		if _, got := Client(in); got != want {
			t.Errorf("Client(%q) base = %q, want %q", in, got, want)
		}
	}
}

// gavel_slurm_allocation_fallback is 1 exactly while status says the
// stand-in's allocation is in use.
func TestAllocationFallbackMetric(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	for _, tc := range []struct {
		why  string
		want float64
	}{{"policy failed", 1}, {"", 0}, {"again", 1}} {
		st := sampleStatus()
		st.Round.AllocationFallback = tc.why
		m.ObserveStatus(st)
		if got := testutil.ToFloat64(m.fallback); got != tc.want {
			t.Errorf("fallback %q: gavel_slurm_allocation_fallback = %v, want %v", tc.why, got, tc.want)
		}
	}
}
