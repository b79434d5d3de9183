package reports

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Kinds the handler counts besides the decoding ones.
const (
	KindMethod       = "method"       // not a POST
	KindUnauthorized = "unauthorized" // missing or wrong bearer token
	KindNoToken      = "no_token"     // the daemon's own token file is unreadable or empty
	KindWrongNode    = "wrong_node"   // the report is for another node than the one its request names
	// The sink's refusals: the daemon holds as much as it may until its
	// next round, for all nodes (KindQueueFull) or for this one
	// (KindNodeFull). A report too large for a node's share on its own is
	// KindTooLarge.
	KindQueueFull = "queue_full"
	KindNodeFull  = "node_full"
	KindNotTaken  = "not_taken" // the sink refused for another reason
)

// NodeHeader is the request header in which a collector names the node it
// reports for. With per-node tokens (Options.TokenDir) the daemon finds the
// token to check by it; in every mode, a report whose node differs from it
// is refused (403).
const NodeHeader = "Gavel-Node"

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
	// maxInFlight bounds the bodies read and decoded at once: each holds
	// up to MaxBytes, and a few times that while it is decoded. Requests
	// beyond it wait their turn (the server's read timeout bounds the
	// wait).
	maxInFlight = 8
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

// Options configure a Handler.
type Options struct {
	// TokenFile holds the secret every collector shares: any holder may
	// report in any node's name. Used when TokenDir is empty.
	TokenFile string
	// TokenDir holds one file per node, named by its Slurm node name,
	// with that node's secret: a request must name its node (NodeHeader),
	// carry that node's token, and hold a report for that node only.
	TokenDir string
	// Sink takes each accepted report. It runs in the request's goroutine
	// and should return quickly. An *Error it returns refuses the report
	// with its kind's status: 429 for KindQueueFull and KindNodeFull, 413
	// for KindTooLarge; any other error is 503.
	Sink func(Report) error
	// Counters may be nil.
	Counters Counters
}

// Handler receives reports: POST with "Authorization: Bearer TOKEN" and a
// JSON report as the body. It answers 202 when the sink took the report,
// else one line saying why: 405 (method), 401 (token), 403 (the report is
// for another node than the request names), 413 (size), 400 (anything
// Decode refuses), 429 (the sink holds as much as it may), 500 (the
// daemon's own token files) or 503 (another refusal of the sink).
type Handler struct {
	tokenFile string
	tokenDir  string
	sink      func(Report) error
	counters  Counters
	slots     chan struct{}
	// MaxBytes and MaxAge are Decode's limits.
	MaxBytes int64
	MaxAge   time.Duration
	// Now is the daemon's clock, which reports' times are checked against.
	Now func() time.Time
}

// NewHandler returns a Handler with a shared token (Options.TokenFile)
// whose sink takes every report.
func NewHandler(tokenFile string, sink func(Report), counters Counters) http.Handler {
	return New(Options{TokenFile: tokenFile, Sink: func(r Report) error { sink(r); return nil }, Counters: counters})
}

// New returns a Handler that checks each request's bearer token (the
// token files are read again at each request, so that a rotated secret
// takes effect at once and no restart is needed) and gives each accepted
// report to o.Sink. A caller may change its limits before serving.
func New(o Options) *Handler {
	counters := o.Counters
	if counters == nil {
		counters = noCounters{}
	}
	return &Handler{tokenFile: o.TokenFile, tokenDir: o.TokenDir, sink: o.Sink, counters: counters,
		slots: make(chan struct{}, maxInFlight), MaxBytes: DefaultMaxBytes, MaxAge: DefaultMaxAge, Now: time.Now}
}

func newHandler(tokenFile string, sink func(Report), counters Counters) *Handler {
	return NewHandler(tokenFile, sink, counters).(*Handler)
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.refuse(w, KindMethod, http.StatusMethodNotAllowed, "reports are sent with POST")
		return
	}
	node := r.Header.Get(NodeHeader)
	if !h.authorized(w, r, node) {
		return
	}
	if r.ContentLength > h.MaxBytes {
		h.refuse(w, KindTooLarge, http.StatusRequestEntityTooLarge, fmt.Sprintf("report is larger than %d bytes", h.MaxBytes))
		return
	}
	select {
	case h.slots <- struct{}{}:
	case <-r.Context().Done():
		return
	}
	rep, err := Decode(r.Body, h.MaxBytes, h.Now(), h.MaxAge)
	<-h.slots
	if err != nil {
		kind := KindOf(err)
		code := http.StatusBadRequest
		if kind == KindTooLarge {
			code = http.StatusRequestEntityTooLarge
		}
		h.refuse(w, kind, code, err.Error())
		return
	}
	if node != "" && rep.Node != node {
		h.refuse(w, KindWrongNode, http.StatusForbidden,
			fmt.Sprintf("the report is for node %q, the request (%s) for node %q", rep.Node, NodeHeader, node))
		return
	}
	if err := h.sink(rep); err != nil {
		var e *Error
		kind, code := KindNotTaken, http.StatusServiceUnavailable
		if errors.As(err, &e) {
			switch e.Kind {
			case KindQueueFull, KindNodeFull:
				kind, code = e.Kind, http.StatusTooManyRequests
			case KindTooLarge:
				kind, code = e.Kind, http.StatusRequestEntityTooLarge
			}
		}
		h.refuse(w, kind, code, err.Error())
		return
	}
	h.counters.Accept()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusAccepted)
	io.WriteString(w, "accepted\n")
}

// authorized checks the request's token, and answers it when the token is
// refused. With per-node tokens, node (the request's NodeHeader) says
// whose token it must be.
func (h *Handler) authorized(w http.ResponseWriter, r *http.Request, node string) bool {
	path, whose := h.tokenFile, ""
	if h.tokenDir != "" {
		if node == "" {
			h.unauthorized(w, "tokens are per node here: the request must name its node in the "+NodeHeader+" header")
			return false
		}
		if !ValidNodeFileName(node) {
			h.unauthorized(w, fmt.Sprintf("node name %q in %s cannot name a token file", node, NodeHeader))
			return false
		}
		path, whose = filepath.Join(h.tokenDir, node), fmt.Sprintf(" for node %q", node)
	}
	want, err := ReadToken(path)
	switch {
	case err != nil && h.tokenDir != "" && errors.Is(err, fs.ErrNotExist):
		// A node without a token file is no node of this site's.
		h.unauthorized(w, "no token"+whose)
		return false
	case err != nil:
		// Fail closed: without its own secret the daemon cannot tell a
		// collector from anyone else.
		h.refuse(w, KindNoToken, http.StatusInternalServerError, "the daemon cannot read its report token"+whose)
		return false
	}
	if !tokenMatches(r.Header.Get("Authorization"), want) {
		h.unauthorized(w, "missing or wrong bearer token"+whose)
		return false
	}
	return true
}

func (h *Handler) unauthorized(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="gavel-slurm reports"`)
	h.refuse(w, KindUnauthorized, http.StatusUnauthorized, msg)
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

// ValidNodeFileName tells whether node can name a file in a directory of
// per-node tokens: letters, digits, '_', '-' and '.', not first, as
// Slurm node names are, and nothing that could lead out of the directory.
func ValidNodeFileName(node string) bool {
	if node == "" || len(node) > MaxNameLen || node[0] == '.' {
		return false
	}
	for i := 0; i < len(node); i++ {
		if !ValidTypeByte(node[i]) {
			return false
		}
	}
	return true
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
