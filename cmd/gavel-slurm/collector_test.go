package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/bridge/fake"
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

// serverCert writes a self-signed certificate for 127.0.0.1 and its key.
func serverCert(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gavel-slurm daemon"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	return certFile, keyFile
}

// The daemon's collector endpoint as a site sets it up with node tokens,
// TLS and small limits: a node's report goes in with its own token only,
// and the node's share of the queue bounds what it can send before the
// round.
func TestDaemonCollectorEndpoint(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "nodes")
	os.Mkdir(tokens, 0o700)
	os.WriteFile(filepath.Join(tokens, "g1"), []byte("secret-of-g1\n"), 0o600)
	os.WriteFile(filepath.Join(tokens, "g2"), []byte("secret-of-g2\n"), 0o600)
	certFile, keyFile := serverCert(t, dir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	path := writeConfig(t, `
[slurm]
partitions = ["gpu"]
[scheduler]
round = "1h"
[daemon]
state_dir = "`+dir+`"
listen = "unix:`+filepath.Join(dir, "api.sock")+`"
collector_listen = "`+addr+`"
collector_token_dir = "`+tokens+`"
collector_tls_cert = "`+certFile+`"
collector_tls_key = "`+keyFile+`"
collector_queue_bytes = "1MiB"
collector_node_bytes = 4096
`)
	slurm := fake.New(time.Now)
	slurm.AddNode(bridge.Node{Name: "g1", GPUType: "v100", GPUs: 1, Partitions: []string{"gpu"}})
	ctx, cancel := context.WithCancel(context.Background())
	var logs syncBuffer
	done := make(chan int)
	go func() { done <- runDaemon(ctx, []string{"--config", path}, &logs, slurm) }()
	defer func() {
		cancel()
		if rc := <-done; rc != 0 {
			t.Errorf("daemon rc=%d logs:\n%s", rc, logs.String())
		}
	}()

	pool := x509.NewCertPool()
	certPEM, _ := os.ReadFile(certFile)
	pool.AppendCertsFromPEM(certPEM)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	post := func(node, token string, firstJob, jobs int) (int, string) {
		t.Helper()
		rep := reports.Report{Node: node, Time: time.Now().UTC(), IntervalS: 30, Jobs: []reports.Job{}}
		rate := 2.5
		for k := range jobs {
			rep.Jobs = append(rep.Jobs, reports.Job{JobID: strconv.Itoa(firstJob + k), GPUType: "v100", GPUs: 1, StepsPerS: &rate})
		}
		body, _ := json.Marshal(rep)
		req, _ := http.NewRequest("POST", "https://"+addr+reports.Path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set(reports.NodeHeader, node)
		resp, err := client.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		msg, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(msg)
	}
	// Until the daemon is up, active, and past its first round (the next
	// one, an hour later, would drain what the checks fill).
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), `"message":"round"`) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	code, msg := 0, ""
	for ; time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if code, msg = post("g1", "secret-of-g1", 1, 1); code == http.StatusAccepted {
			break
		}
	}
	if code != http.StatusAccepted {
		t.Fatalf("g1's report with its token: %d %s\nlogs:\n%s", code, msg, logs.String())
	}
	checks := []struct {
		name, node, token string
		first, jobs       int
		code              int
		kind              string
	}{
		{"g1 in g2's name, with g1's token", "g2", "secret-of-g1", 1, 1, http.StatusUnauthorized, reports.KindUnauthorized},
		{"g2 with its own token", "g2", "secret-of-g2", 1, 1, http.StatusAccepted, ""},
		{"more jobs than a node's share holds", "g1", "secret-of-g1", 100, 10, http.StatusRequestEntityTooLarge, reports.KindTooLarge},
		{"g1's share filling up", "g1", "secret-of-g1", 2, 5, http.StatusTooManyRequests, reports.KindNodeFull},
		{"g1's update of the job it holds", "g1", "secret-of-g1", 1, 1, http.StatusAccepted, ""},
	}
	for _, c := range checks {
		code, msg := post(c.node, c.token, c.first, c.jobs)
		if code != c.code || !strings.HasPrefix(msg, c.kind) {
			t.Errorf("%s: %d %q, want %d %s", c.name, code, msg, c.code, c.kind)
		}
	}
	if !strings.Contains(logs.String(), `"tls":true`) || !strings.Contains(logs.String(), `"node_tokens":true`) {
		t.Errorf("the log does not say how reports are received:\n%s", logs.String())
	}
}
