package reports

import (
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
