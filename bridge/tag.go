package bridge

import (
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gavel-slurm/gavel-slurm/internal/duration"
)

// TagPrefix opens the scheduling tag inside a job's --comment.
const TagPrefix = "gavel:"

// ErrNoTag means the comment carries no gavel: tag: the job is not managed.
var ErrNoTag = errors.New("no gavel: tag in --comment")

// Class says how a job may be treated when it is preempted.
type Class string

const (
	// ClassUnset leaves the choice to the daemon's configuration.
	ClassUnset Class = ""
	// ClassTrialAndError marks short exploratory jobs (FitGpp's TE jobs):
	// cheap to restart, preferred as preemption victims.
	ClassTrialAndError Class = "te"
	// ClassBestEffort marks ordinary long training jobs.
	ClassBestEffort Class = "be"
)

// PreemptMode says how a running job takes preemption.
type PreemptMode string

const (
	// PreemptUnset leaves the choice to the site's configuration.
	PreemptUnset PreemptMode = ""
	// PreemptCheckpoint: send the warning signal, wait the grace period
	// (the job saves a checkpoint), then requeue.
	PreemptCheckpoint PreemptMode = "checkpoint"
	// PreemptRequeue: restarting from scratch is fine; requeue at once,
	// no signal.
	PreemptRequeue PreemptMode = "requeue"
	// PreemptNever: the job may be placed on a type when it starts but is
	// never stopped once it runs.
	PreemptNever PreemptMode = "never"
)

// MixedTypes says whether a multi-GPU job's GPUs may span GPU types.
type MixedTypes string

const (
	// MixedUnset is the default: one GPU type per job, as mixedNo.
	MixedUnset MixedTypes = ""
	// MixedOK lets the daemon start the job on GPUs of several types at
	// once when no single type has room (docs/hadar.md); every step then
	// runs at the pace of the slowest type.
	MixedOK MixedTypes = "ok"
	// MixedNo keeps the job on one GPU type, as if unset.
	MixedNo MixedTypes = "no"
)

// ParseMixedTypes reads mixed= as the tag writes it: ok or no, in any case.
func ParseMixedTypes(s string) (MixedTypes, error) {
	v, err := parseOKOrNo(s)
	return MixedTypes(v), err
}

// parseOKOrNo reads a yes-or-no key's value: "ok" or "no", in any case.
func parseOKOrNo(s string) (string, error) {
	switch l := strings.ToLower(s); l {
	case "ok", "no":
		return l, nil
	}
	return "", fmt.Errorf("must be ok or no: %q", s)
}

// GPUSharing says whether a job may share its GPU with another job
// (space sharing, docs/space-sharing.md).
type GPUSharing string

const (
	// ShareUnset is the default: the daemon may pair the job where the
	// site shares GPUs and the pair is known to gain.
	ShareUnset GPUSharing = ""
	// ShareOK says the same as unset, explicitly.
	ShareOK GPUSharing = "ok"
	// ShareNo keeps the job on GPUs of its own: it is never paired.
	ShareNo GPUSharing = "no"
)

// ParseGPUSharing reads share= as the tag writes it: ok or no, in any case.
func ParseGPUSharing(s string) (GPUSharing, error) {
	v, err := parseOKOrNo(s)
	return GPUSharing(v), err
}

// ParsePreemptMode reads a preemption mode as the tag and the
// configuration write it.
func ParsePreemptMode(s string) (PreemptMode, error) {
	switch m := PreemptMode(strings.ToLower(s)); m {
	case PreemptCheckpoint, PreemptRequeue, PreemptNever:
		return m, nil
	}
	return PreemptUnset, fmt.Errorf("must be checkpoint, requeue or never: %q", s)
}

// Tag is the parsed scheduling hints of one job. A zero field means the user
// did not set it and the daemon applies its default.
type Tag struct {
	// Model names the job type, as written by the user (unquoted). Use
	// ResolveModel to match it against the job types of a throughput table.
	Model string `json:"model,omitempty"`
	// Steps is the number of training steps the job will run.
	Steps int64 `json:"steps,omitempty"`
	// Weight is the job's priority weight; 0 means unset (the daemon uses 1).
	Weight float64 `json:"weight,omitempty"`
	// SLO is the time from submission by which the job should finish.
	SLO time.Duration `json:"slo,omitempty"`
	// Entity is the group (user, lab) the job counts against.
	Entity string `json:"entity,omitempty"`
	// Class is trial-and-error or best-effort.
	Class Class `json:"class,omitempty"`
	// Grace is the time between the warning signal and the requeue when the
	// job is preempted; 0 means unset.
	Grace time.Duration `json:"grace,omitempty"`
	// Preempt is how the job takes preemption; PreemptUnset means the
	// site's default.
	Preempt PreemptMode `json:"preempt,omitempty"`
	// Mixed says whether the job's GPUs may span GPU types (MixedOK).
	Mixed MixedTypes `json:"mixed,omitempty"`
	// Restart is what one restart costs the job (saving its checkpoint,
	// the requeue, starting again, loading the model) until the daemon
	// measures it; 0 means unset (the site's default).
	Restart time.Duration `json:"restart,omitempty"`
	// Share says whether the job may share its GPU with another job.
	Share GPUSharing `json:"share,omitempty"`
}

// RefusesSharing reports whether the tag keeps the job off shared GPUs.
func (t Tag) RefusesSharing() bool { return t.Share == ShareNo }

// MixedOK reports whether the tag lets the job run on several GPU types.
func (t Tag) MixedOK() bool { return t.Mixed == MixedOK }

// Limits that keep parsed values meaningful and make Format exact.
const (
	maxSteps       = 1e15
	minWeight      = 1e-6
	maxWeight      = 1e6
	maxDuration    = duration.Max
	maxNumberChars = 40
	maxExponent    = 20
)

// ParseTag finds the gavel: tag in a job's comment and parses it.
//
// Free text may come before the tag; the tag runs to the end of the comment
// or to the first ';' outside quotes, after which free text may follow again.
// Pairs are key=value, separated by spaces and/or commas. Values holding
// spaces, commas, ';' or quotes are written in double quotes (with \" and \\
// escapes) or single quotes (taken literally). Values must be printable
// text: control characters, bidirectional-text controls and invalid UTF-8
// are refused, since values are shown to admins and other users. A comment
// without the tag returns ErrNoTag; any other error names the offending
// key for the user.
func ParseTag(comment string) (Tag, error) {
	start := findTag(comment)
	if start < 0 {
		return Tag{}, ErrNoTag
	}
	body := comment[start+len(TagPrefix):]
	pairs, rest, err := splitPairs(body)
	if err != nil {
		return Tag{}, err
	}
	if findTag(rest) >= 0 {
		return Tag{}, errors.New("more than one gavel: tag in --comment")
	}
	var tag Tag
	seen := map[string]bool{}
	for _, p := range pairs {
		if seen[p.key] {
			return Tag{}, fmt.Errorf("duplicate key %s=", p.key)
		}
		seen[p.key] = true
		if err := tag.set(p.key, p.value); err != nil {
			return Tag{}, err
		}
	}
	return tag, nil
}

// findTag returns the index of the tag prefix when it starts a word (so
// "nogavel:" is not a tag), or -1.
func findTag(s string) int {
	// Compare ASCII bytes only, so that indexes stay valid in s whatever
	// the case mapping of non-ASCII text around the tag.
	for i := 0; i+len(TagPrefix) <= len(s); i++ {
		if asciiEqualFold(s[i:i+len(TagPrefix)], TagPrefix) && (i == 0 || !isWordByte(s[i-1])) {
			return i
		}
	}
	return -1
}

func asciiEqualFold(a, b string) bool {
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

func isWordByte(b byte) bool {
	return b == '_' || b == '-' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

type pair struct{ key, value string }

// splitPairs tokenizes the tag body up to its end and returns the text after
// a terminating ';'.
func splitPairs(body string) (pairs []pair, rest string, err error) {
	i := 0
	for {
		for i < len(body) && isSeparator(body[i]) {
			i++
		}
		if i >= len(body) {
			return pairs, "", nil
		}
		if body[i] == ';' {
			return pairs, body[i+1:], nil
		}
		keyStart := i
		for i < len(body) && body[i] != '=' && !isSeparator(body[i]) && body[i] != ';' {
			i++
		}
		key := strings.ToLower(body[keyStart:i])
		if i >= len(body) || body[i] != '=' {
			return nil, "", fmt.Errorf("expected key=value in gavel: tag, got %q", body[keyStart:i])
		}
		if key == "" {
			return nil, "", errors.New("missing key before = in gavel: tag")
		}
		if !isKey(key) {
			// Quoted: the key goes into messages that status prints.
			return nil, "", fmt.Errorf("key %q is not a word of letters, digits, '_' and '-'", key)
		}
		i++ // '='
		value, next, err := readValue(body, i)
		if err != nil {
			return nil, "", fmt.Errorf("%s= %w", key, err)
		}
		pairs = append(pairs, pair{key, value})
		i = next
		if i < len(body) && !isSeparator(body[i]) && body[i] != ';' {
			return nil, "", fmt.Errorf("%s= value must be followed by a space, comma or ';'", key)
		}
	}
}

func isKey(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isWordByte(s[i]) {
			return false
		}
	}
	return true
}

func isSeparator(b byte) bool {
	return b == ' ' || b == ',' || b == '\t' || b == '\n' || b == '\r'
}

// readValue reads a bare or quoted value starting at i and returns it with
// the index just past it.
func readValue(s string, i int) (string, int, error) {
	if i < len(s) && s[i] == '\'' {
		end := strings.IndexByte(s[i+1:], '\'')
		if end < 0 {
			return "", 0, errors.New("has an unterminated ' quote")
		}
		return s[i+1 : i+1+end], i + 2 + end, nil
	}
	if i < len(s) && s[i] == '"' {
		var b strings.Builder
		for j := i + 1; j < len(s); j++ {
			switch s[j] {
			case '\\':
				if j+1 < len(s) && (s[j+1] == '"' || s[j+1] == '\\') {
					j++
				}
				b.WriteByte(s[j])
			case '"':
				return b.String(), j + 1, nil
			default:
				b.WriteByte(s[j])
			}
		}
		return "", 0, errors.New("has an unterminated \" quote")
	}
	j := i
	for j < len(s) && !isSeparator(s[j]) && s[j] != ';' {
		if s[j] == '"' || s[j] == '\'' {
			return "", 0, errors.New("has a quote inside an unquoted value")
		}
		j++
	}
	return s[i:j], j, nil
}

// set stores one key's value after checking it.
func (t *Tag) set(key, value string) error {
	if value == "" {
		return fmt.Errorf("%s= is empty", key)
	}
	if err := checkText(value); err != nil {
		return fmt.Errorf("%s= %w", key, err)
	}
	var err error
	switch key {
	case "model":
		t.Model, err = value, checkVisible(value)
	case "entity":
		t.Entity, err = value, checkVisible(value)
	case "steps":
		t.Steps, err = parseSteps(value)
	case "weight":
		t.Weight, err = parseWeight(value)
	case "slo":
		t.SLO, err = parseDuration(value)
		if err == nil && t.SLO == 0 {
			err = errors.New("must be longer than 0")
		}
	case "grace":
		t.Grace, err = parseDuration(value)
	case "class":
		t.Class, err = ParseClass(value)
	case "preempt":
		t.Preempt, err = ParsePreemptMode(value)
	case "mixed":
		t.Mixed, err = ParseMixedTypes(value)
	case "restart":
		t.Restart, err = parseDuration(value)
	case "share":
		t.Share, err = ParseGPUSharing(value)
	default:
		return fmt.Errorf("unknown key %s= (known: model, steps, weight, slo, entity, class, grace, preempt, mixed, restart, share)", key)
	}
	if err != nil {
		return fmt.Errorf("%s= %w", key, err)
	}
	return nil
}

// checkText rejects values that could change how the line that shows them
// looks: control characters (a newline or an escape sequence in a model
// name would forge lines in status, logs and terminals), bidirectional-text
// controls (U+202E shows text reversed, so a name reads as another), the
// Unicode line and paragraph separators, and invalid UTF-8.
func checkText(s string) error {
	if !utf8.ValidString(s) {
		return errors.New("is not valid UTF-8")
	}
	for _, r := range s {
		switch {
		case unicode.IsControl(r):
			return fmt.Errorf("contains the control character %U; values must be printable text", r)
		case unicode.Is(unicode.Bidi_Control, r):
			return fmt.Errorf("contains the bidirectional-text control %U; values must be printable text", r)
		case r == '\u2028' || r == '\u2029':
			return fmt.Errorf("contains the line separator %U; values must be printable text", r)
		}
	}
	return nil
}

// checkVisible refuses, in a name, characters that do not show: format
// characters such as U+200B, private use, and spaces other than U+0020.
// entity=lab<U+200B> would show as entity=lab, and be taken for it by
// whoever reads status. Numbers and durations trim such spaces instead.
// Unassigned code points are left alone: job_submit.lua, which must agree,
// has no table of them.
func checkVisible(s string) error {
	for _, r := range s {
		if !unicode.IsPrint(r) && r != ' ' && assigned(r) {
			return fmt.Errorf("contains the invisible character %U; names must be printable text", r)
		}
	}
	return nil
}

// assigned reports whether Unicode assigns code point r a character.
func assigned(r rune) bool {
	return unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z, unicode.Cc, unicode.Cf, unicode.Co)
}

var stepSuffixes = map[byte]int64{'k': 1e3, 'K': 1e3, 'm': 1e6, 'M': 1e6, 'g': 1e9, 'G': 1e9, 'b': 1e9, 'B': 1e9}

// parseSteps reads 250000, 250_000, 250k, 1.5M or 1e6 exactly (no float
// rounding), and requires a whole number of steps.
func parseSteps(s string) (int64, error) {
	num := strings.ReplaceAll(s, "_", "")
	scale := int64(1)
	if n := len(num); n > 0 {
		if f, ok := stepSuffixes[num[n-1]]; ok {
			scale, num = f, num[:n-1]
		}
	}
	r, err := parseDecimal(num)
	if err != nil {
		return 0, fmt.Errorf("is not a number: %q", s)
	}
	r.Mul(r, new(big.Rat).SetInt64(scale))
	if !r.IsInt() {
		return 0, fmt.Errorf("is not a whole number of steps: %q", s)
	}
	if r.Sign() <= 0 || r.Cmp(new(big.Rat).SetFloat64(maxSteps)) > 0 {
		return 0, fmt.Errorf("must be between 1 and %g: %q", float64(maxSteps), s)
	}
	return r.Num().Int64(), nil
}

// parseDecimal parses a plain decimal number with an optional exponent,
// bounding its size so that hostile input stays cheap.
func parseDecimal(s string) (*big.Rat, error) {
	if s == "" || len(s) > maxNumberChars {
		return nil, errors.New("bad length")
	}
	mantissa, exponent, hasExp := strings.Cut(strings.ToLower(s), "e")
	if hasExp {
		e, err := strconv.Atoi(exponent)
		if err != nil || e > maxExponent || e < -maxExponent {
			return nil, errors.New("bad exponent")
		}
	}
	digits := 0
	for i, c := range mantissa {
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c == '.':
		case (c == '+' || c == '-') && i == 0:
		default:
			return nil, errors.New("bad character")
		}
	}
	if digits == 0 {
		return nil, errors.New("no digits")
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil, errors.New("not a decimal")
	}
	return r, nil
}

func parseWeight(s string) (float64, error) {
	r, err := parseDecimal(s)
	if err != nil {
		return 0, fmt.Errorf("is not a number: %q", s)
	}
	w, _ := r.Float64()
	if !(w >= minWeight && w <= maxWeight) {
		return 0, fmt.Errorf("must be between %g and %g: %q", minWeight, maxWeight, s)
	}
	return w, nil
}

// parseDuration reads a duration in any form internal/duration accepts
// (plain seconds, number+unit groups such as 90m or 1h30m, Slurm's
// [D-]HH:MM:SS), rounded to whole seconds: Slurm's own times are in
// seconds, and the canonical form writes whole seconds.
func parseDuration(s string) (time.Duration, error) {
	d, err := duration.Parse(s)
	if err != nil {
		return 0, err
	}
	d = d.Round(time.Second)
	if d > maxDuration {
		return 0, fmt.Errorf("is longer than %d days: %q", int(maxDuration.Hours()/24), s)
	}
	return d, nil
}

// ParseClass reads a class as the tag and the configuration write it:
// te or trial-and-error, be or best-effort, in any case.
func ParseClass(s string) (Class, error) {
	switch strings.ToLower(s) {
	case "te", "trial-and-error":
		return ClassTrialAndError, nil
	case "be", "best-effort":
		return ClassBestEffort, nil
	}
	return "", fmt.Errorf("must be te (trial-and-error) or be (best-effort): %q", s)
}

// Format writes the tag in its canonical form: ParseTag(t.Format()) == t for
// every tag ParseTag returns. Unset fields are left out.
func (t Tag) Format() string {
	var b strings.Builder
	b.WriteString(TagPrefix)
	add := func(key, value string) {
		b.WriteByte(' ')
		b.WriteString(key)
		b.WriteByte('=')
		b.WriteString(value)
	}
	if t.Model != "" {
		add("model", quoteIfNeeded(t.Model))
	}
	if t.Steps != 0 {
		add("steps", strconv.FormatInt(t.Steps, 10))
	}
	if t.Weight != 0 {
		add("weight", strconv.FormatFloat(t.Weight, 'g', -1, 64))
	}
	if t.SLO != 0 {
		add("slo", formatDuration(t.SLO))
	}
	if t.Entity != "" {
		add("entity", quoteIfNeeded(t.Entity))
	}
	if t.Class != ClassUnset {
		add("class", string(t.Class))
	}
	if t.Grace != 0 {
		add("grace", formatDuration(t.Grace))
	}
	if t.Preempt != PreemptUnset {
		add("preempt", string(t.Preempt))
	}
	if t.Mixed != MixedUnset {
		add("mixed", string(t.Mixed))
	}
	if t.Restart != 0 {
		add("restart", formatDuration(t.Restart))
	}
	if t.Share != ShareUnset {
		add("share", string(t.Share))
	}
	return b.String()
}

func quoteIfNeeded(v string) string {
	if !strings.ContainsAny(v, " ,;\"'\\=\t\n\r") {
		return v
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(v) + `"`
}

// formatDuration writes whole seconds in the largest unit that divides them.
func formatDuration(d time.Duration) string {
	s := int64(d / time.Second)
	for _, u := range []struct {
		name string
		secs int64
	}{{"w", 7 * 86400}, {"d", 86400}, {"h", 3600}, {"m", 60}} {
		if s%u.secs == 0 {
			return strconv.FormatInt(s/u.secs, 10) + u.name
		}
	}
	return strconv.FormatInt(s, 10) + "s"
}
