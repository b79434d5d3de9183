package reports

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type countLog struct {
	accepted int
	rejected map[string]int
}

func (c *countLog) Accept()            { c.accepted++ }
func (c *countLog) Reject(kind string) { c.rejected[kind]++ }

func writeToken(t *testing.T, path, tok string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(tok), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestHandler(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	writeToken(t, tokenFile, "s3cret\n")
	cases := []struct {
		name   string
		method string
		auth   string
		body   string
		code   int
		kind   string // counted rejection; "" for an accepted report
	}{
		{"accepted", "POST", "Bearer s3cret", good, http.StatusAccepted, ""},
		{"scheme in lower case", "POST", "bearer s3cret", good, http.StatusAccepted, ""},
		{"GET", "GET", "Bearer s3cret", "", http.StatusMethodNotAllowed, KindMethod},
		{"no header", "POST", "", good, http.StatusUnauthorized, KindUnauthorized},
		{"wrong token", "POST", "Bearer s3cret2", good, http.StatusUnauthorized, KindUnauthorized},
		{"prefix of the token", "POST", "Bearer s3c", good, http.StatusUnauthorized, KindUnauthorized},
		{"empty token", "POST", "Bearer ", good, http.StatusUnauthorized, KindUnauthorized},
		{"basic auth", "POST", "Basic czNjcmV0", good, http.StatusUnauthorized, KindUnauthorized},
		{"malformed", "POST", "Bearer s3cret", "{", http.StatusBadRequest, KindMalformed},
		{"duplicate", "POST", "Bearer s3cret", edit(`"gpus":4`, `"gpus":4,"gpus":4`), http.StatusBadRequest, KindDuplicateField},
		{"stale", "POST", "Bearer s3cret", edit(`11:59:30`, `10:00:00`), http.StatusBadRequest, KindStale},
		{"too large", "POST", "Bearer s3cret", good + strings.Repeat(" ", 2048), http.StatusRequestEntityTooLarge, KindTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			counts := &countLog{rejected: map[string]int{}}
			var got []Report
			h := newHandler(tokenFile, func(r Report) { got = append(got, r) }, counts)
			h.MaxBytes = 2048
			h.Now = func() time.Time { return now }
			req := httptest.NewRequest(c.method, Path, strings.NewReader(c.body))
			if c.auth != "" {
				req.Header.Set("Authorization", c.auth)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != c.code {
				t.Errorf("status %d, want %d (%s)", rec.Code, c.code, rec.Body)
			}
			body := rec.Body.String()
			if strings.Count(body, "\n") != 1 || !strings.HasSuffix(body, "\n") {
				t.Errorf("answer is not one line: %q", body)
			}
			if c.kind == "" {
				if len(got) != 1 || counts.accepted != 1 || len(counts.rejected) != 0 {
					t.Errorf("sink got %d reports, counted %d accepted, %v rejected", len(got), counts.accepted, counts.rejected)
				}
				return
			}
			if len(got) != 0 || counts.accepted != 0 {
				t.Errorf("a refused request reached the sink")
			}
			if counts.rejected[c.kind] != 1 || len(counts.rejected) != 1 {
				t.Errorf("counted %v, want one %s", counts.rejected, c.kind)
			}
			if !strings.HasPrefix(body, c.kind+": ") {
				t.Errorf("answer %q does not start with the kind", body)
			}
		})
	}
}

// TestHandlerTokenRotation checks that a new secret takes effect with no
// restart, and that an unreadable or empty token file lets nobody in.
func TestHandlerTokenRotation(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	writeToken(t, tokenFile, "old")
	counts := &countLog{rejected: map[string]int{}}
	h := newHandler(tokenFile, func(Report) {}, counts)
	h.Now = func() time.Time { return now }
	post := func(tok string) int {
		req := httptest.NewRequest("POST", Path, strings.NewReader(good))
		req.Header.Set("Authorization", "Bearer "+tok)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	steps := []struct {
		file string // new content; "-" removes the file
		tok  string
		want int
	}{
		{"", "old", http.StatusAccepted},
		{"new", "old", http.StatusUnauthorized},
		{"", "new", http.StatusAccepted},
		{"  \n", "", http.StatusInternalServerError},
		{"-", "new", http.StatusInternalServerError},
	}
	for i, s := range steps {
		switch s.file {
		case "":
		case "-":
			os.Remove(tokenFile)
		default:
			writeToken(t, tokenFile, s.file)
		}
		if got := post(s.tok); got != s.want {
			t.Errorf("step %d: status %d, want %d", i, got, s.want)
		}
	}
	if counts.rejected[KindNoToken] != 2 {
		t.Errorf("counted %v, want two %s", counts.rejected, KindNoToken)
	}
}

func TestNewHandlerNilCounters(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	writeToken(t, tokenFile, "t")
	h := NewHandler(tokenFile, func(Report) {}, nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", Path, strings.NewReader("{")))
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("status %d, want 401", rec.Code)
	}
}

// nodeTokens writes a directory of per-node tokens.
func nodeTokens(t *testing.T, tokens map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for node, tok := range tokens {
		writeToken(t, filepath.Join(dir, node), tok)
	}
	return dir
}

// With per-node tokens a report is taken only with its own node's token:
// a node's token does not let it report for another node.
func TestHandlerNodeTokens(t *testing.T) {
	dir := nodeTokens(t, map[string]string{"gpu01": "tok-1", "gpu02": "tok-2", "gpu03": ""})
	if err := os.Mkdir(filepath.Join(dir, "gpu04"), 0o700); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, node, tok, body string
		code                  int
		kind                  string
	}{
		{"own token", "gpu01", "tok-1", good, http.StatusAccepted, ""},
		{"another node's token", "gpu01", "tok-2", good, http.StatusUnauthorized, KindUnauthorized},
		{"the node's token, another node's report", "gpu02", "tok-2", good, http.StatusForbidden, KindWrongNode},
		{"no node named", "", "tok-1", good, http.StatusUnauthorized, KindUnauthorized},
		{"node without a token", "gpu09", "tok-1", edit(`"gpu01"`, `"gpu09"`), http.StatusUnauthorized, KindUnauthorized},
		{"path out of the directory", "../gpu01", "tok-1", good, http.StatusUnauthorized, KindUnauthorized},
		{"hidden file", ".gpu01", "tok-1", good, http.StatusUnauthorized, KindUnauthorized},
		{"the parent directory", "..", "tok-1", good, http.StatusUnauthorized, KindUnauthorized},
		{"the directory itself", ".", "tok-1", good, http.StatusUnauthorized, KindUnauthorized},
		{"name too long", strings.Repeat("g", MaxNameLen+1), "tok-1", good, http.StatusUnauthorized, KindUnauthorized},
		{"empty token file", "gpu03", "", edit(`"gpu01"`, `"gpu03"`), http.StatusInternalServerError, KindNoToken},
		{"a directory for a token", "gpu04", "x", edit(`"gpu01"`, `"gpu04"`), http.StatusInternalServerError, KindNoToken},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			counts := &countLog{rejected: map[string]int{}}
			var got []Report
			h := New(Options{TokenDir: dir, Counters: counts, Sink: func(r Report) error { got = append(got, r); return nil }})
			h.Now = func() time.Time { return now }
			req := httptest.NewRequest("POST", Path, strings.NewReader(c.body))
			req.Header.Set("Authorization", "Bearer "+c.tok)
			if c.node != "" {
				req.Header.Set(NodeHeader, c.node)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != c.code {
				t.Errorf("status %d, want %d (%s)", rec.Code, c.code, rec.Body)
			}
			if c.kind == "" {
				if len(got) != 1 || counts.accepted != 1 {
					t.Errorf("sink got %d reports", len(got))
				}
				return
			}
			if len(got) != 0 || counts.rejected[c.kind] != 1 {
				t.Errorf("sink got %d reports, counted %v, want one %s", len(got), counts.rejected, c.kind)
			}
			if !strings.HasPrefix(rec.Body.String(), c.kind+": ") {
				t.Errorf("answer %q does not start with the kind", rec.Body)
			}
		})
	}
}

// With the shared token the node a request names must still be the
// report's; a request that names none is taken (older collectors).
func TestHandlerSharedTokenNodeHeader(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	writeToken(t, tokenFile, "s3cret")
	for _, c := range []struct {
		node string
		code int
	}{{"", http.StatusAccepted}, {"gpu01", http.StatusAccepted}, {"gpu02", http.StatusForbidden}} {
		h := newHandler(tokenFile, func(Report) {}, nil)
		h.Now = func() time.Time { return now }
		req := httptest.NewRequest("POST", Path, strings.NewReader(good))
		req.Header.Set("Authorization", "Bearer s3cret")
		if c.node != "" {
			req.Header.Set(NodeHeader, c.node)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.code {
			t.Errorf("node %q: status %d, want %d (%s)", c.node, rec.Code, c.code, rec.Body)
		}
	}
}

// The sink's refusals reach the collector as a status it can act on, with
// the sink's reason.
func TestHandlerSinkRefusals(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	writeToken(t, tokenFile, "s3cret")
	cases := []struct {
		err  error
		code int
		kind string
	}{
		{&Error{Kind: KindQueueFull, Err: errors.New("the daemon holds 64 MiB")}, http.StatusTooManyRequests, KindQueueFull},
		{&Error{Kind: KindNodeFull, Err: errors.New("node gpu01 holds 1 MiB")}, http.StatusTooManyRequests, KindNodeFull},
		{&Error{Kind: KindTooLarge, Err: errors.New("more than one node may hold")}, http.StatusRequestEntityTooLarge, KindTooLarge},
		{errors.New("something else"), http.StatusServiceUnavailable, KindNotTaken},
	}
	for _, c := range cases {
		counts := &countLog{rejected: map[string]int{}}
		h := New(Options{TokenFile: tokenFile, Counters: counts, Sink: func(Report) error { return c.err }})
		h.Now = func() time.Time { return now }
		req := httptest.NewRequest("POST", Path, strings.NewReader(good))
		req.Header.Set("Authorization", "Bearer s3cret")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.code || !strings.HasPrefix(rec.Body.String(), c.kind+": "+c.err.Error()) {
			t.Errorf("%v: %d %q, want %d with the reason", c.err, rec.Code, rec.Body, c.code)
		}
		if counts.accepted != 0 || counts.rejected[c.kind] != 1 {
			t.Errorf("%v: counted %d accepted, %v rejected", c.err, counts.accepted, counts.rejected)
		}
	}
}

// At most maxInFlight bodies are read and decoded at once; the others
// wait.
func TestHandlerBoundsBodiesInFlight(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	writeToken(t, tokenFile, "s3cret")
	h := newHandler(tokenFile, func(Report) {}, nil)
	h.Now = func() time.Time { return now }
	// Every slot is taken, as by slow bodies.
	for range cap(h.slots) {
		h.slots <- struct{}{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	req := httptest.NewRequest("POST", Path, strings.NewReader(good)).WithContext(ctx)
	req.Header.Set("Authorization", "Bearer s3cret")
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() { h.ServeHTTP(rec, req); close(done) }()
	select {
	case <-done:
		t.Fatalf("a body was read with every slot taken: %d %s", rec.Code, rec.Body)
	case <-time.After(50 * time.Millisecond):
	}
	<-h.slots // one frees up
	<-done
	if rec.Code != http.StatusAccepted {
		t.Errorf("status %d once a slot was free", rec.Code)
	}
	cancel()
	if cap(h.slots) != maxInFlight {
		t.Errorf("%d slots, want %d", cap(h.slots), maxInFlight)
	}
	// Each request gives its slot back, refused or not.
	h = newHandler(tokenFile, func(Report) {}, nil)
	h.Now = func() time.Time { return now }
	for i := range 3 * maxInFlight {
		body := good
		if i%2 == 1 {
			body = "{"
		}
		req := httptest.NewRequest("POST", Path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer s3cret")
		done := make(chan int)
		go func() { rec := httptest.NewRecorder(); h.ServeHTTP(rec, req); done <- rec.Code }()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			t.Fatalf("request %d waits for a slot no one holds", i)
		}
	}
}
