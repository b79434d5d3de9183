package slurmcontrib

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

// tagCase is one case of testdata/tags.json (see its "about").
type tagCase struct {
	Name       string   `json:"name"`
	Comment    *string  `json:"comment"`
	CommentHex string   `json:"comment_hex"`
	Tag        *wantTag `json:"tag"`
	Canonical  string   `json:"canonical"`
	Error      string   `json:"error"`
	NoTag      bool     `json:"no_tag"`
	LuaError   string   `json:"lua_error"`
}

type wantTag struct {
	Model   string  `json:"model"`
	Steps   int64   `json:"steps"`
	Weight  float64 `json:"weight"`
	SLO     int64   `json:"slo_s"`
	Entity  string  `json:"entity"`
	Class   string  `json:"class"`
	Grace   int64   `json:"grace_s"`
	Preempt string  `json:"preempt"`
	Mixed   string  `json:"mixed"`
	Restart int64   `json:"restart_s"`
	Share   string  `json:"share"`
}

func (c tagCase) comment(t *testing.T) string {
	if c.Comment != nil {
		return *c.Comment
	}
	b, err := hex.DecodeString(c.CommentHex)
	if err != nil {
		t.Fatalf("case %q: comment_hex: %v", c.Name, err)
	}
	return string(b)
}

// result is what a parser made of one comment, in a form both parsers'
// answers convert to, so that one == compares everything.
type result struct {
	OK        bool
	Canonical string
	Tag       wantTag
	Err       string
	NoTag     bool
}

func (r result) String() string {
	if r.OK {
		return fmt.Sprintf("ok %q %+v", r.Canonical, r.Tag)
	}
	return fmt.Sprintf("error %q (no tag: %v)", r.Err, r.NoTag)
}

func (c tagCase) want(forLua bool) result {
	if c.Tag != nil {
		return result{OK: true, Canonical: c.Canonical, Tag: *c.Tag}
	}
	msg := c.Error
	if forLua && c.LuaError != "" {
		msg = c.LuaError
	}
	return result{Err: msg, NoTag: c.NoTag}
}

func loadTagCases(t *testing.T) []tagCase {
	t.Helper()
	data, err := os.ReadFile("testdata/tags.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		About []string  `json:"about"`
		Cases []tagCase `json:"cases"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("testdata/tags.json: %v", err)
	}
	names := map[string]bool{}
	for _, c := range doc.Cases {
		switch {
		case names[c.Name]:
			t.Errorf("testdata/tags.json: two cases named %q", c.Name)
		case (c.Comment == nil) == (c.CommentHex == ""):
			t.Errorf("case %q: needs exactly one of comment and comment_hex", c.Name)
		case (c.Tag == nil) == (c.Error == ""):
			t.Errorf("case %q: needs exactly one of tag and error", c.Name)
		case c.Tag != nil && c.Canonical == "":
			t.Errorf("case %q: a valid tag needs its canonical form", c.Name)
		}
		names[c.Name] = true
	}
	if len(doc.Cases) < 100 {
		t.Fatalf("testdata/tags.json holds %d cases; was it cut short?", len(doc.Cases))
	}
	return doc.Cases
}

// daemonResult parses a comment with the daemon's parser.
func daemonResult(comment string) result {
	tag, err := bridge.ParseTag(comment)
	if err != nil {
		return result{Err: err.Error(), NoTag: errors.Is(err, bridge.ErrNoTag)}
	}
	return result{OK: true, Canonical: tag.Format(), Tag: wantTag{
		Model: tag.Model, Steps: tag.Steps, Weight: tag.Weight, SLO: int64(tag.SLO / time.Second),
		Entity: tag.Entity, Class: string(tag.Class), Grace: int64(tag.Grace / time.Second), Preempt: string(tag.Preempt),
		Mixed: string(tag.Mixed), Restart: int64(tag.Restart / time.Second), Share: string(tag.Share),
	}}
}

// scriptResults parses comments with job_submit.lua.
func scriptResults(t *testing.T, lua string, comments []string) []result {
	t.Helper()
	lines := runHarness(t, lua, "tags", comments)
	if len(lines) != len(comments) {
		t.Fatalf("%d answers for %d comments", len(lines), len(comments))
	}
	out := make([]result, len(lines))
	for i, line := range lines {
		f := strings.Split(line, "\t")
		switch {
		case f[0] == "err" && len(f) == 3:
			out[i] = result{Err: unhex(t, f[1]), NoTag: f[2] == "1"}
		case f[0] == "ok" && len(f) == 13:
			num := func(s string) int64 {
				n, err := strconv.ParseInt(s, 10, 64)
				if err != nil {
					t.Fatalf("harness: %q is not an integer in %q", s, line)
				}
				return n
			}
			w, err := strconv.ParseFloat(f[4], 64)
			if err != nil {
				t.Fatalf("harness: weight %q: %v", f[4], err)
			}
			out[i] = result{OK: true, Canonical: unhex(t, f[1]), Tag: wantTag{
				Model: unhex(t, f[2]), Steps: num(f[3]), Weight: w, SLO: num(f[5]),
				Entity: unhex(t, f[6]), Class: f[7], Grace: num(f[8]), Preempt: f[9], Mixed: f[10], Restart: num(f[11]), Share: f[12],
			}}
		default:
			t.Fatalf("harness: unexpected line %q", line)
		}
	}
	return out
}

// The table is checked against the daemon's parser first: a case that
// does not hold for the daemon is a mistake in the table.
func TestTagTableDaemon(t *testing.T) {
	for _, c := range loadTagCases(t) {
		if got, want := daemonResult(c.comment(t)), c.want(false); got != want {
			t.Errorf("%s: %q\n got: %v\nwant: %v", c.Name, c.comment(t), got, want)
		}
	}
}

func TestTagTableScript(t *testing.T) {
	cases := loadTagCases(t)
	comments := make([]string, len(cases))
	for i, c := range cases {
		comments[i] = c.comment(t)
	}
	forEachLua(t, func(t *testing.T, lua string) {
		for i, got := range scriptResults(t, lua, comments) {
			if want := cases[i].want(true); got != want {
				t.Errorf("%s: %q\n got: %v\nwant: %v", cases[i].Name, comments[i], got, want)
			}
		}
	})
}

// TestScriptAgreesWithDaemon runs generated comments, most of them
// malformed in some way, through both parsers: every decision, message
// and field must agree. The pieces hold no unassigned code points, the one
// place where the messages differ on purpose.
func TestScriptAgreesWithDaemon(t *testing.T) {
	rng := rand.New(rand.NewPCG(2024, 11))
	comments := make([]string, 10000)
	for i := range comments {
		comments[i] = randomComment(rng)
	}
	forEachLua(t, func(t *testing.T, lua string) {
		accepted, refused, failed := 0, 0, 0
		for i, got := range scriptResults(t, lua, comments) {
			want := daemonResult(comments[i])
			if want.OK {
				accepted++
			} else if !want.NoTag {
				refused++
			}
			if got != want {
				failed++
				if failed <= 20 {
					t.Errorf("%q\nscript: %v\ndaemon: %v", comments[i], got, want)
				}
			}
		}
		// A generator that produces only errors, or none, would test little.
		if accepted < len(comments)/5 || refused < len(comments)/5 {
			t.Errorf("%d of %d generated comments are valid tags and %d invalid ones: want a fifth of each",
				accepted, len(comments), refused)
		}
		t.Logf("%d comments: %d valid tags, %d invalid ones, %d disagreements", len(comments), accepted, refused, failed)
	})
}

var (
	commentPrefixes = []string{"", "gavel:", "GAVEL: ", "run 3 gavel: ", "nogavel: ", "(gavel:", "x;gavel:", "gavel:gavel: "}
	commentSuffixes = []string{"", ";", "; notes", "; gavel: steps=1", ";nogavel:", " ;x"}
	separators      = []string{" ", ",", ", ", "\t", "  ", "\n"}
	keys            = []string{"model", "steps", "weight", "slo", "entity", "class", "grace", "preempt", "mixed", "restart",
		"STEPS", "MIXED", "Slo", "weİght", "foo", "", "mo.del", "ÉTAPES", "gRACE"}
	// Pieces of values: numbers, units, words the parser knows, and the
	// characters that trip parsers up.
	valuePieces = []string{"0", "1", "5", "9", "10", "250", ".", "e", "E", "+", "-", "_", "k", "M", "b", "G",
		"s", "m", "h", "d", "w", "ms", "us", "µs", "μs", "ΜS", "ns", "S", ":", "inf", "İ", "\u212a",
		"te", "be", "trial-and-error", "best-effort", "checkpoint", "requeue", "never", "NEVER", "ok", "no",
		"é", "模", "\u00a0", "\u00ad", "\u202e", "\u2028", "\x01", "\x7f", "\xff", "\xc3", "\U0001f600",
		" ", ",", ";", "\"", "'", "\\", "="}
	// Values that are valid for each key, so that many tags parse.
	goodValues = map[string][]string{
		"model":   {"resnet50", "ResNet-50", "big model", "a\\b", "模型", "x=y"},
		"entity":  {"lab-1", "nlp", "Vision Lab"},
		"steps":   {"1000", "250_000", "1.5M", "1e6", "2.5k", "7", "1e15", "0.001e3", "1__0"},
		"weight":  {"0.5", "3", "1e-6", "1e6", "0.1", ".25", "123456.5", "0.30000000000000004", "7e-5"},
		"slo":     {"90m", "1h30m", "1-00", "1-12:00:00", "05:00", "01:00:00", "3600", "0.5", "2w", "1500ms", "10000000µs", "3650d"},
		"grace":   {"0", "45s", "2m", "0.4999999995", " 30s ", "1:00"},
		"class":   {"te", "be", "Trial-And-Error", "best-effort", "TRİAL-AND-ERROR"},
		"preempt": {"checkpoint", "requeue", "never", "NEVER", "chec\u212apoint"},
		"mixed":   {"ok", "no", "OK", "o\u212a"},
		"restart": {"0", "30s", "3m", "1:30", " 2m ", "0.4999999995"},
	}
)

func pick(rng *rand.Rand, list []string) string { return list[rng.IntN(len(list))] }

// randomValue returns, most of the time, a valid value for key, else
// something built from the pieces.
func randomValue(rng *rand.Rand, key string) string {
	if good := goodValues[strings.ToLower(key)]; len(good) > 0 && rng.IntN(3) != 0 {
		return pick(rng, good)
	}
	var b strings.Builder
	for n := rng.IntN(5); n >= 0; n-- {
		b.WriteString(pick(rng, valuePieces))
	}
	return b.String()
}

// quoteValue writes v bare, in double quotes (escaping as a user would,
// or not) or in single quotes.
func quoteValue(rng *rand.Rand, v string) string {
	switch rng.IntN(5) {
	case 0:
		return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"`
	case 1:
		return `"` + v + `"`
	case 2:
		return "'" + v + "'"
	}
	return v
}

func randomComment(rng *rand.Rand) string {
	var b strings.Builder
	b.WriteString(pick(rng, commentPrefixes))
	used := map[string]bool{}
	for n := rng.IntN(5); n > 0; n-- {
		key := pick(rng, keys)
		// Mostly distinct keys, so that more tags get past the duplicate
		// check to their values.
		if used[key] && rng.IntN(4) != 0 {
			continue
		}
		used[key] = true
		b.WriteString(key)
		if rng.IntN(20) != 0 {
			b.WriteByte('=')
		}
		b.WriteString(quoteValue(rng, randomValue(rng, key)))
		b.WriteString(pick(rng, separators))
	}
	b.WriteString(pick(rng, commentSuffixes))
	return b.String()
}
