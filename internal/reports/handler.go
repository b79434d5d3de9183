package reports

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// Kinds the handler counts besides the decoding ones.
const (
	KindMethod       = "method"       // not a POST
	KindUnauthorized = "unauthorized" // missing or wrong bearer token
	KindNoToken      = "no_token"     // the daemon's own token file is unreadable or empty
)

// Limits the handler applies.
const (
	// DefaultMaxBytes bounds a report's body: a node with a hundred jobs
	// sends about 20 KiB.
	DefaultMaxBytes = 1 << 20
	// DefaultMaxAge is how old a report may be when it arrives: a
	// collector retries a failed post for a while, and what it measured
	// long ago says little about the jobs now.
	DefaultMaxAge = 5 * time.Minute
	// maxTokenBytes bounds the token file read at each request.
	maxTokenBytes = 4096
)

// Counters counts what the handler does with each request, so that the
// daemon can export the counts (to Prometheus, say).
type Counters interface {
	// Accept counts a report handed to the sink.
	Accept()
	// Reject counts a refused request by kind (the Kind* constants).
	Reject(kind string)
}

type noCounters struct{}

func (noCounters) Accept()       {}
func (noCounters) Reject(string) {}

// Handler receives reports: POST with "Authorization: Bearer TOKEN" and a
// JSON report as the body. It answers 202 when the report went to the
// sink, else one line saying why: 405 (method), 401 (token), 413 (size),
// 400 (anything Decode refuses) or 500 (the daemon's own token file).
type Handler struct {
	tokenFile string
	sink      func(Report)
	counters  Counters
	// MaxBytes and MaxAge are Decode's limits.
	MaxBytes int64
	MaxAge   time.Duration
	// Now is the daemon's clock, which reports' times are checked against.
	Now func() time.Time
}

// NewHandler returns a Handler that checks the bearer token against the
// content of tokenFile (read again at each request, so that a rotated
// secret takes effect at once and no restart is needed) and gives each
// accepted report to sink. sink runs in the request's goroutine and should
// return quickly. counters may be nil. The handler is a *Handler, whose
// limits a caller may change before serving.
func NewHandler(tokenFile string, sink func(Report), counters Counters) http.Handler {
	return newHandler(tokenFile, sink, counters)
}

func newHandler(tokenFile string, sink func(Report), counters Counters) *Handler {
	if counters == nil {
		counters = noCounters{}
	}
	return &Handler{tokenFile: tokenFile, sink: sink, counters: counters,
		MaxBytes: DefaultMaxBytes, MaxAge: DefaultMaxAge, Now: time.Now}
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.refuse(w, KindMethod, http.StatusMethodNotAllowed, "reports are sent with POST")
		return
	}
	want, err := ReadToken(h.tokenFile)
	if err != nil {
		// Fail closed: without its own secret the daemon cannot tell a
		// collector from anyone else.
		h.refuse(w, KindNoToken, http.StatusInternalServerError, "the daemon cannot read its report token")
		return
	}
	if !tokenMatches(r.Header.Get("Authorization"), want) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="gavel-slurm reports"`)
		h.refuse(w, KindUnauthorized, http.StatusUnauthorized, "missing or wrong bearer token")
		return
	}
	if r.ContentLength > h.MaxBytes {
		h.refuse(w, KindTooLarge, http.StatusRequestEntityTooLarge, fmt.Sprintf("report is larger than %d bytes", h.MaxBytes))
		return
	}
	rep, err := Decode(r.Body, h.MaxBytes, h.Now(), h.MaxAge)
	if err != nil {
		kind := KindOf(err)
		code := http.StatusBadRequest
		if kind == KindTooLarge {
			code = http.StatusRequestEntityTooLarge
		}
		h.refuse(w, kind, code, err.Error())
		return
	}
	h.sink(rep)
	h.counters.Accept()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusAccepted)
	io.WriteString(w, "accepted\n")
}

func (h *Handler) refuse(w http.ResponseWriter, kind string, code int, msg string) {
	h.counters.Reject(kind)
	// One line, whatever the message quoted from the request.
	msg = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, msg)
	http.Error(w, kind+": "+msg, code)
}

// ReadToken returns the secret in path, without surrounding white space.
// An empty file is an error: it would let an empty bearer token in.
func ReadToken(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("read the token file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxTokenBytes+1))
	if err != nil {
		return "", fmt.Errorf("read the token file %s: %w", path, err)
	}
	if len(data) > maxTokenBytes {
		return "", fmt.Errorf("token file %s is larger than %d bytes", path, maxTokenBytes)
	}
	tok := strings.TrimSpace(string(data))
	if tok == "" {
		return "", errors.New("token file " + path + " is empty")
	}
	return tok, nil
}

// tokenMatches compares in constant time. Hashing first makes the time
// independent of the lengths too (subtle.ConstantTimeCompare returns at
// once on a length mismatch).
func tokenMatches(header, want string) bool {
	scheme, got, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	got = strings.TrimSpace(got)
	if got == "" {
		return false
	}
	a := sha256.Sum256([]byte(got))
	b := sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}
