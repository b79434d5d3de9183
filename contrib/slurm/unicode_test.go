package slurmcontrib

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// Blocks where job_submit.lua lowercases exactly as Go does; elsewhere it
// may keep a letter as typed (see lower_rune in the script).
var lowerBlocks = [][2]rune{{0x80, 0x17F}, {0x370, 0x3FF}, {0x400, 0x52F}}

func TestScriptLowercase(t *testing.T) {
	forEachLua(t, func(t *testing.T, lua string) {
		got := map[rune]rune{}
		for _, line := range runHarnessRaw(t, lua, "lower", nil) {
			var r, l rune
			if _, err := fmt.Sscanf(line, "%d %d", &r, &l); err != nil {
				t.Fatalf("harness: %q: %v", line, err)
			}
			got[r] = l
		}
		covered := func(r rune) bool {
			for _, b := range lowerBlocks {
				if r >= b[0] && r <= b[1] {
					return true
				}
			}
			return false
		}
		for r := rune(0x80); r <= unicode.MaxRune; r++ {
			want := unicode.ToLower(r)
			l, mapped := got[r]
			if !mapped {
				l = r
			}
			switch {
			case mapped && l != want:
				t.Errorf("%U lowers to %U in the script, %U in Go", r, l, want)
			case l != want && (covered(r) || want < 0x80 || want == 'μ'):
				// Outside the covered blocks only the mappings that change
				// a decision are required: to ASCII (keys, words) and to
				// the "μ" of "μs".
				t.Errorf("%U: the script keeps it, Go lowers it to %U", r, want)
			}
		}
	})
}

// assigned tells whether Unicode assigns r (Go's unicode.C also holds the
// unassigned code points).
func assigned(r rune) bool {
	for _, table := range []*unicode.RangeTable{unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z,
		unicode.Cc, unicode.Cf, unicode.Co} {
		if unicode.Is(table, r) {
			return true
		}
	}
	return false
}

// The script's NON_PRINT table must match Go's strconv.IsPrint on every
// assigned code point, so that messages quote text as the daemon's do.
func TestScriptNonPrintable(t *testing.T) {
	var want []string
	start := rune(-1)
	for r := rune(0x80); r <= unicode.MaxRune+1; r++ {
		np := r <= unicode.MaxRune && !strconv.IsPrint(r) && assigned(r)
		if np && start < 0 {
			start = r
		}
		if !np && start >= 0 {
			want = append(want, fmt.Sprintf("%d %d", start, r-1))
			start = -1
		}
	}
	forEachLua(t, func(t *testing.T, lua string) {
		got := runHarnessRaw(t, lua, "nonprint", nil)
		if strings.Join(got, ",") == strings.Join(want, ",") {
			return
		}
		// Go's Unicode tables changed (or the script's did): print the
		// table the script needs.
		var b strings.Builder
		for _, w := range want {
			var lo, hi rune
			fmt.Sscanf(w, "%d %d", &lo, &hi)
			fmt.Fprintf(&b, "0x%04X, 0x%04X, ", lo, hi)
		}
		t.Errorf("job_submit.lua's NON_PRINT differs from Go's strconv.IsPrint (Unicode %s); it should read:\n%s",
			unicode.Version, b.String())
	})
}

// Weights are written in the canonical tag as Go's
// strconv.FormatFloat(w, 'g', -1, 64): the shortest digits that read back.
func TestScriptFormatsWeights(t *testing.T) {
	var ws []float64
	// Powers of two are the hard case: the doubles below them are closer
	// together than those above.
	for e := -30; e <= 30; e++ {
		ws = append(ws, math.Ldexp(1, e))
		ws = append(ws, math.Nextafter(math.Ldexp(1, e), 0), math.Nextafter(math.Ldexp(1, e), math.Inf(1)))
	}
	for _, w := range []float64{0.1, 0.2, 0.3, 1e-6, 1e6, 123456, 1234567, 0.0001, 0.00001, 2.5, 1e5, 999999.9999999999} {
		ws = append(ws, w)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for range 3000 {
		// Log-uniform over the weights a tag may hold.
		ws = append(ws, math.Pow(10, -6+12*rng.Float64()))
	}
	for range 500 {
		// Short decimals, as people type them.
		ws = append(ws, float64(rng.IntN(100000))/math.Pow(10, float64(rng.IntN(8))))
	}
	var in strings.Builder
	for _, w := range ws {
		if w == 0 {
			w = 1
		}
		in.WriteString(strconv.FormatFloat(w, 'e', -1, 64) + "\n")
	}
	forEachLua(t, func(t *testing.T, lua string) {
		got := runHarnessRaw(t, lua, "floats", []byte(in.String()))
		if len(got) != len(ws) {
			t.Fatalf("%d answers for %d numbers", len(got), len(ws))
		}
		bad := 0
		for i, w := range ws {
			if w == 0 {
				w = 1
			}
			if want := strconv.FormatFloat(w, 'g', -1, 64); got[i] != want {
				if bad++; bad <= 10 {
					t.Errorf("%v: script writes %s, Go %s", w, got[i], want)
				}
			}
		}
	})
}
