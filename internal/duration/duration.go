// Package duration reads durations the way administrators and users type
// them: a bare number of seconds ("360", "0.5"), numbers with units
// ("90s", "6m", "12h", "2d", "1w", "1h30m", and Go's "500ms"), or Slurm's
// time forms ("MM:SS", "HH:MM:SS", "D-HH", "D-HH:MM", "D-HH:MM:SS").
//
// One difference from Slurm is deliberate: Slurm reads a bare number as
// minutes (--time=30 is half an hour), but here a bare number is seconds,
// as it has always been in the gavel: tag and as Go's flag users expect
// from "--round 360". Write "30m" or "30:00" for half an hour.
package duration

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"
)

// Max is the longest duration accepted. Anything longer is a typo (a
// number of seconds written where minutes were meant, a stray digit), and
// capping it keeps every value far from time.Duration's overflow.
const Max = 10 * 365 * 24 * time.Hour

// maxChars bounds the input so that hostile text (a tag is written by any
// user) stays cheap to reject.
const maxChars = 64

// syntaxHint is the reason given for text that matches no accepted form.
const syntaxHint = "is not a duration (use seconds, units s, m, h, d, w as in 90m, 12h or 1h30m, or Slurm's [D-]HH:MM:SS)"

var units = map[string]time.Duration{
	"ns": time.Nanosecond,
	"us": time.Microsecond, "µs": time.Microsecond, "μs": time.Microsecond,
	"ms": time.Millisecond,
	"s":  time.Second, "m": time.Minute, "h": time.Hour,
	"d": 24 * time.Hour, "w": 7 * 24 * time.Hour,
}

// Parse reads a non-negative duration no longer than Max. Surrounding
// spaces are ignored. Errors read "<reason>: <quoted input>", so that a
// caller can prefix the key it was reading ("slo= is negative: \"-5\"").
func Parse(s string) (time.Duration, error) {
	text := strings.TrimSpace(s)
	fail := func(reason string) (time.Duration, error) {
		return 0, fmt.Errorf("%s: %q", reason, s)
	}
	switch {
	case text == "":
		return fail("is empty")
	case len(text) > maxChars:
		return fail(fmt.Sprintf("is too long to be a duration (over %d characters)", maxChars))
	case strings.HasPrefix(text, "-"):
		return fail("is negative")
	case isInfinite(text):
		return fail("is not a finite duration")
	}
	var total *big.Rat
	var ok bool
	if strings.ContainsAny(text, ":-") {
		total, ok = parseSlurm(text)
	} else {
		total, ok = parseUnits(text)
	}
	if !ok {
		return fail(syntaxHint)
	}
	if total.Cmp(new(big.Rat).SetInt64(int64(Max))) > 0 {
		return fail(fmt.Sprintf("is longer than %d days", int64(Max/(24*time.Hour))))
	}
	return time.Duration(roundRat(total)), nil
}

// isInfinite recognizes the spellings of infinity and NaN that float
// parsers and Slurm accept, so that they get a clearer message than a
// syntax error.
func isInfinite(s string) bool {
	switch strings.ToLower(strings.TrimPrefix(s, "+")) {
	case "inf", "infinity", "nan", "infinite", "unlimited":
		return true
	}
	return false
}

// parseUnits reads either one bare number (seconds) or one or more
// number+unit groups, in nanoseconds.
func parseUnits(s string) (*big.Rat, bool) {
	total := new(big.Rat)
	rest := s
	for rest != "" {
		i := 0
		for i < len(rest) && (isDigit(rest[i]) || rest[i] == '.') {
			i++
		}
		number, ok := parseNumber(rest[:i])
		if !ok {
			return nil, false
		}
		rest = rest[i:]
		j := 0
		for j < len(rest) && !isDigit(rest[j]) && rest[j] != '.' {
			j++
		}
		if j == 0 {
			// A bare number must stand alone: "1h30" is more likely a
			// mistake for 1h30m than a request for 1h and 30 seconds.
			if total.Sign() != 0 || i != len(s) {
				return nil, false
			}
			return number.Mul(number, new(big.Rat).SetInt64(int64(time.Second))), true
		}
		unit, ok := units[strings.ToLower(rest[:j])]
		if !ok {
			return nil, false
		}
		rest = rest[j:]
		total.Add(total, number.Mul(number, new(big.Rat).SetInt64(int64(unit))))
	}
	return total, true
}

// parseNumber reads digits with at most one decimal point and at least one
// digit. No sign, no exponent: neither has a use in a duration.
func parseNumber(s string) (*big.Rat, bool) {
	if s == "" || s == "." || strings.Count(s, ".") > 1 {
		return nil, false
	}
	r, ok := new(big.Rat).SetString(s)
	return r, ok
}

// parseSlurm reads MM:SS, HH:MM:SS, D-HH, D-HH:MM and D-HH:MM:SS in
// nanoseconds. The leading field may be any size; the fields after it must
// be in range (hours below 24 after days, minutes and seconds below 60),
// which catches a field typed in the wrong place.
func parseSlurm(s string) (*big.Rat, bool) {
	clock := s
	days, afterDays, hasDays := strings.Cut(s, "-")
	var d int64
	if hasDays {
		clock = afterDays
		var ok bool
		if d, ok = field(days, -1); !ok {
			return nil, false
		}
	}
	parts := strings.Split(clock, ":")
	var h, m, sec int64
	var ok bool
	switch {
	case hasDays && len(parts) <= 3:
		if h, ok = field(parts[0], 24); !ok {
			return nil, false
		}
		if len(parts) > 1 {
			if m, ok = field(parts[1], 60); !ok {
				return nil, false
			}
		}
		if len(parts) > 2 {
			if sec, ok = field(parts[2], 60); !ok {
				return nil, false
			}
		}
	case !hasDays && len(parts) == 2:
		if m, ok = field(parts[0], -1); !ok {
			return nil, false
		}
		if sec, ok = field(parts[1], 60); !ok {
			return nil, false
		}
	case !hasDays && len(parts) == 3:
		if h, ok = field(parts[0], -1); !ok {
			return nil, false
		}
		if m, ok = field(parts[1], 60); !ok {
			return nil, false
		}
		if sec, ok = field(parts[2], 60); !ok {
			return nil, false
		}
	default:
		return nil, false
	}
	total := new(big.Rat)
	for _, p := range []struct {
		n    int64
		unit time.Duration
	}{{d, 24 * time.Hour}, {h, time.Hour}, {m, time.Minute}, {sec, time.Second}} {
		v := new(big.Rat).SetInt64(p.n)
		total.Add(total, v.Mul(v, new(big.Rat).SetInt64(int64(p.unit))))
	}
	return total, true
}

// field reads one all-digit field of a Slurm time, below limit unless
// limit is negative. Nine digits are plenty for any field within Max and
// keep the value far from int64 overflow.
func field(s string, limit int64) (int64, bool) {
	if s == "" || len(s) > 9 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || (limit >= 0 && n >= limit) {
		return 0, false
	}
	return n, true
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// roundRat rounds a non-negative number of nanoseconds to the nearest
// whole one (halves up). Callers have bounded it by Max.
func roundRat(r *big.Rat) int64 {
	num := new(big.Int).Mul(r.Num(), big.NewInt(2))
	num.Add(num, r.Denom())
	den := new(big.Int).Mul(r.Denom(), big.NewInt(2))
	return num.Quo(num, den).Int64()
}

// Flag is a time.Duration read with Parse. It serves as a command-line
// flag (flag.Value) and as a TOML or other text value
// (encoding.TextUnmarshaler); a TOML number is taken as seconds.
type Flag time.Duration

// Duration returns the value as a time.Duration.
func (f Flag) Duration() time.Duration { return time.Duration(f) }

// String writes the value in Go's form ("6m0s"), which Parse reads back.
func (f Flag) String() string { return time.Duration(f).String() }

// Set parses s; it implements flag.Value.
func (f *Flag) Set(s string) error {
	d, err := Parse(s)
	if err != nil {
		return err
	}
	*f = Flag(d)
	return nil
}

// UnmarshalText parses text; it implements encoding.TextUnmarshaler.
func (f *Flag) UnmarshalText(text []byte) error { return f.Set(string(text)) }

// MarshalText writes the value as String does; it implements
// encoding.TextMarshaler so that a Flag written out reads back.
func (f Flag) MarshalText() ([]byte, error) { return []byte(f.String()), nil }
