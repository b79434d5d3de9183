package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func stillOpen(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	buf := make([]byte, 4096)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue // drain what the server sent
		}
		var ne net.Error
		return errors.As(err, &ne) && ne.Timeout()
	}
}

// shortTimeouts makes the server's timeouts short for a test.
func shortTimeouts(t *testing.T) {
	saved := serverTimeouts
	serverTimeouts.header, serverTimeouts.read, serverTimeouts.write, serverTimeouts.idle = time.Second, time.Second, time.Second, time.Second
	serverTimeouts.shutdown = 500 * time.Millisecond
	t.Cleanup(func() { serverTimeouts = saved })
}

// A hostile or broken client does not keep server connections (and their
// goroutines and file descriptors) for ever: an idle keep-alive connection
// and a request body that never comes are closed, so such clients cannot
// exhaust the daemon's file descriptors (then slurmrestd could no longer
// be reached either).
func TestServeDropsStalledConnections(t *testing.T) {
	shortTimeouts(t)
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go Serve(ctx, ln, Handler(&Board{}, prometheus.NewRegistry()))
	addr := ln.Addr().String()

	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	fmt.Fprint(idle, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")

	body, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	fmt.Fprint(body, "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\nx")

	time.Sleep(3 * time.Second) // the timeouts and more
	if stillOpen(idle) {
		t.Error("an idle keep-alive connection is still held after 3 s (no IdleTimeout)")
	}
	if stillOpen(body) {
		t.Error("a connection whose request body never comes is still held after 3 s (no ReadTimeout)")
	}
}

// A client that asks for /v1/status and never reads the answer does not
// turn a SIGTERM into a failed stop: once the shutdown's wait is over, the
// connections left are closed and Serve returns cleanly.
func TestShutdownWithAStalledReader(t *testing.T) {
	shortTimeouts(t)
	serverTimeouts.write = time.Minute // the stalled write outlives the shutdown's wait
	board := &Board{}
	st := Status{}
	reason := strings.Repeat("r", 200)
	for i := range 50000 {
		st.Jobs = append(st.Jobs, JobStatus{JobID: fmt.Sprint(i), Reason: reason, State: "PENDING"})
	}
	board.Publish(st, Allocation{})
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, Handler(board, prometheus.NewRegistry())) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetReadBuffer(4096)
	}
	fmt.Fprint(c, "GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\n")
	time.Sleep(500 * time.Millisecond)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve at shutdown with one client not reading: %v", err)
	}
}

// A value JSON cannot carry (NaN, ±Inf) is answered with a 500 that says
// so, never with "200 OK" and a cut body that `gavel-slurm status` cannot
// read.
func TestStatusWithANonFiniteValue(t *testing.T) {
	board := &Board{}
	inf := math.Inf(1)
	board.Publish(Status{Round: Round{Number: 1}, Jobs: []JobStatus{{JobID: "1",
		Throughputs: map[string]Throughput{"v100": {StepsPerS: inf}}}}}, Allocation{Objective: &inf})
	srv := httptest.NewServer(Handler(board, prometheus.NewRegistry()))
	defer srv.Close()
	for _, path := range []string{"/v1/status", "/v1/allocation"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), "unsupported value") {
			t.Errorf("%s: HTTP %d %q, want a 500 that names the value", path, resp.StatusCode, body)
		}
	}
}
