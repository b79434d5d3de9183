package main

import (
	"bytes"
	"context"
	"encoding/pem"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gavel-slurm/gavel-slurm/internal/reports"
	"github.com/gavel-slurm/gavel-slurm/nvml"
)

// noDriver is NVML on a host without the NVIDIA driver.
func noDriver() nvml.Library {
	return &mock.Interface{InitFunc: func() gonvml.Return { return gonvml.ERROR_LIBRARY_NOT_FOUND }}
}

func TestCollectorFlags(t *testing.T) {
	cases := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"nowhere to send", []string{"--fake-gpus", "v100:1"}, 2, "--daemon-url and --token-file"},
		{"no token", []string{"--daemon-url", "http://ctl:8390"}, 2, "--daemon-url and --token-file"},
		{"interval too short", []string{"--print", "--interval", "100ms"}, 2, "--interval"},
		{"interval not a duration", []string{"--print", "--interval", "soon"}, 2, "soon"},
		{"stray argument", []string{"--print", "now"}, 2, `unexpected argument "now"`},
		{"bad log level", []string{"--print", "--log-level", "loud"}, 2, "--log-level"},
		{"bad fake GPUs", []string{"--print", "--once", "--fake-gpus", "v100"}, 1, "NAME:COUNT"},
		{"no driver", []string{"--print", "--once"}, 1, "is the NVIDIA driver installed"},
		{"bad daemon URL", []string{"--daemon-url", "ctl:8390", "--token-file", "/nonexistent"}, 1, "want http://HOST:PORT"},
		{"unreadable token", []string{"--daemon-url", "http://ctl:8390", "--token-file", "/nonexistent/token"}, 1, "token file"},
		{"missing type map", []string{"--print", "--once", "--fake-gpus", "v100:1", "--type-map", "/nonexistent"}, 1, "type map"},
		{"help", []string{"-h"}, 0, "-fake-gpus string"},
		{"CA file for plain http", []string{"--daemon-url", "http://ctl:8390", "--token-file", "/t", "--ca-file", "/ca.pem"}, 2, "https://"},
		{"missing CA file", []string{"--daemon-url", "https://ctl:8390", "--token-file", "/dev/null", "--ca-file", "/nonexistent/ca.pem"}, 1, "CA file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runCollector(context.Background(), c.args, &stdout, &stderr, noDriver)
			if code != c.code || !strings.Contains(stderr.String(), c.msg) {
				t.Errorf("exit %d, want %d; stderr:\n%s\nwant it to mention %q", code, c.code, stderr.String(), c.msg)
			}
		})
	}
}

// TestCollectorOncePrint is the node check: one report on standard output,
// in the format the daemon accepts.
func TestCollectorOncePrint(t *testing.T) {
	dir := t.TempDir()
	jobs := filepath.Join(dir, "jobs")
	os.MkdirAll(jobs, 0o755)
	os.WriteFile(filepath.Join(jobs, "31"), []byte("0,1\n"), 0o644)
	os.WriteFile(filepath.Join(jobs, "32"), []byte("2\n"), 0o644)
	typeMap := filepath.Join(dir, "types")
	os.WriteFile(typeMap, []byte("k80x  K80\n"), 0o644)
	var stdout, stderr bytes.Buffer
	code := runCollector(context.Background(), []string{"--once", "--print", "--fake-gpus", "v100:2,k80:2",
		"--node", "gpu07", "--jobs-dir", jobs, "--progress-dir", filepath.Join(dir, "progress"),
		"--proc-root", filepath.Join(dir, "proc"), "--type-map", typeMap}, &stdout, &stderr, noDriver)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	rep, err := reports.Decode(&stdout, reports.DefaultMaxBytes, time.Now(), reports.DefaultMaxAge)
	if err != nil {
		t.Fatalf("printed report refused: %v", err)
	}
	if rep.Node != "gpu07" || len(rep.Jobs) != 2 {
		t.Fatalf("report %+v", rep)
	}
	if j := rep.Jobs[0]; j.JobID != "31" || j.GPUType != "v100" || j.GPUs != 2 {
		t.Errorf("job 31: %+v", j)
	}
	if j := rep.Jobs[1]; j.JobID != "32" || j.GPUType != "k80x" || j.GPUs != 1 {
		t.Errorf("job 32: %+v (the site's type map comes first)", j)
	}
	if !strings.Contains(stderr.String(), `"product":"Tesla K80","type":"k80x"`) {
		t.Errorf("the log does not list the GPUs found:\n%s", stderr.String())
	}
}

// TestCollectorSends runs the collector against the daemon's handler until
// two reports arrived.
func TestCollectorSends(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	os.WriteFile(token, []byte("s3cret\n"), 0o644) // too open: warned about
	var mu sync.Mutex
	var got []reports.Report
	srv := httptest.NewServer(reports.NewHandler(token, func(r reports.Report) {
		mu.Lock()
		got = append(got, r)
		mu.Unlock()
	}, nil))
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- runCollector(ctx, []string{"--daemon-url", srv.URL, "--token-file", token, "--fake-gpus", "a100:8",
			"--interval", "1s", "--node", "dgx1", "--jobs-dir", filepath.Join(dir, "none")}, &bytes.Buffer{}, &stderr, noDriver)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= 2 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("exit %d after cancel: %s", code, stderr.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) < 2 || got[0].Node != "dgx1" {
		t.Fatalf("daemon got %d reports: %+v\n%s", len(got), got, stderr.String())
	}
	log := stderr.String()
	for _, want := range []string{"has mode 0644", `"sent":`} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

func TestCollectorOnceSends(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	os.WriteFile(token, []byte("t"), 0o600)
	var n int
	srv := httptest.NewServer(reports.NewHandler(token, func(reports.Report) { n++ }, nil))
	defer srv.Close()
	var stderr bytes.Buffer
	args := []string{"--once", "--daemon-url", srv.URL, "--token-file", token, "--fake-gpus", "t4:1", "--node", "n"}
	if code := runCollector(context.Background(), args, &bytes.Buffer{}, &stderr, noDriver); code != 0 || n != 1 {
		t.Errorf("exit %d, %d reports: %s", code, n, stderr.String())
	}
	os.WriteFile(token, []byte("other"), 0o600)
	wrong := filepath.Join(dir, "wrong")
	os.WriteFile(wrong, []byte("t"), 0o600)
	args[4] = wrong
	if code := runCollector(context.Background(), args, &bytes.Buffer{}, &stderr, noDriver); code != 1 {
		t.Errorf("exit %d with a wrong token, want 1", code)
	}
}

// TestCollectorRealNVMLWithoutDriver runs the real loader: on a host
// without the NVIDIA driver the binary says so and exits 1.
func TestCollectorRealNVMLWithoutDriver(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := runCollector(context.Background(), []string{"--once", "--print", "--node", "n"}, &stdout, &stderr, nvml.NewNVML)
	if code == 0 {
		t.Skip("this host has an NVIDIA driver")
	}
	if code != 1 || !strings.Contains(stderr.String(), "is the NVIDIA driver installed") {
		t.Errorf("exit %d: %s", code, stderr.String())
	}
}

// TestCollectorOnceSendsTLS sends to a daemon serving https with a
// certificate of a site CA, trusted through --ca-file, with this node's
// own token.
func TestCollectorOnceSendsTLS(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	os.WriteFile(token, []byte("node-secret"), 0o600)
	tokens := filepath.Join(dir, "nodes")
	os.Mkdir(tokens, 0o700)
	os.WriteFile(filepath.Join(tokens, "n"), []byte("node-secret"), 0o600)
	var got []reports.Report
	srv := httptest.NewUnstartedServer(reports.New(reports.Options{TokenDir: tokens,
		Sink: func(r reports.Report) error { got = append(got, r); return nil }}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	ca := filepath.Join(dir, "ca.pem")
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644)
	args := []string{"--once", "--daemon-url", srv.URL, "--token-file", token, "--fake-gpus", "t4:1", "--node", "n"}
	var stderr bytes.Buffer
	if code := runCollector(context.Background(), args, &bytes.Buffer{}, &stderr, noDriver); code != 1 || !strings.Contains(stderr.String(), "certificate") {
		t.Errorf("without --ca-file: exit %d: %s", code, stderr.String())
	}
	stderr.Reset()
	if code := runCollector(context.Background(), append(args, "--ca-file", ca), &bytes.Buffer{}, &stderr, noDriver); code != 0 || len(got) != 1 {
		t.Errorf("with --ca-file: exit %d, %d reports: %s", code, len(got), stderr.String())
	}
	if strings.Contains(stderr.String(), "in clear") {
		t.Errorf("https warned about: %s", stderr.String())
	}
}

func TestCleartextWarning(t *testing.T) {
	for url, warn := range map[string]bool{
		"http://ctl:8391/v1/reports":       true,
		"http://10.0.0.1:8391/v1/reports":  true,
		"https://ctl:8391/v1/reports":      false,
		"http://127.0.0.1:8391/v1/reports": false,
		"http://[::1]:8391/v1/reports":     false,
		"http://localhost:8391/v1/reports": false,
	} {
		if got := cleartextWarning(url); (got != "") != warn {
			t.Errorf("%s: %q", url, got)
		}
	}
}
