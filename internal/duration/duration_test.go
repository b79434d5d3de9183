package duration

import (
	"encoding"
	"flag"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	day := 24 * time.Hour
	tests := map[string]struct {
		in   string
		want time.Duration
	}{
		"bare seconds":               {"360", 6 * time.Minute},
		"bare fraction":              {"0.5", 500 * time.Millisecond},
		"leading point":              {".25", 250 * time.Millisecond},
		"zero":                       {"0", 0},
		"seconds unit":               {"90s", 90 * time.Second},
		"minutes":                    {"6m", 6 * time.Minute},
		"hours":                      {"12h", 12 * time.Hour},
		"days":                       {"2d", 2 * day},
		"weeks":                      {"1w", 7 * day},
		"compound":                   {"1h30m", 90 * time.Minute},
		"compound with seconds":      {"1m30s", 90 * time.Second},
		"fractional unit":            {"1.5h", 90 * time.Minute},
		"upper-case unit":            {"2H", 2 * time.Hour},
		"go milliseconds":            {"500ms", 500 * time.Millisecond},
		"go micro sign":              {"3µs", 3 * time.Microsecond},
		"go nanoseconds":             {"7ns", 7},
		"go String form":             {"1h0m0.5s", time.Hour + 500*time.Millisecond},
		"surrounding spaces":         {"  6m ", 6 * time.Minute},
		"slurm MM:SS":                {"05:30", 5*time.Minute + 30*time.Second},
		"slurm MM:SS large minutes":  {"90:00", 90 * time.Minute},
		"slurm HH:MM:SS":             {"01:02:03", time.Hour + 2*time.Minute + 3*time.Second},
		"slurm HH:MM:SS large hours": {"36:00:00", 36 * time.Hour},
		"slurm D-HH":                 {"2-12", 2*day + 12*time.Hour},
		"slurm D-HH:MM":              {"1-00:30", day + 30*time.Minute},
		"slurm D-HH:MM:SS":           {"0-00:00:45", 45 * time.Second},
		"exactly the maximum":        {"3650d", Max},
		"fraction rounds to nearest": {"0.0000000004", 0},
		"fraction rounds half up":    {"0.0000000005", 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Parse(tc.in)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.in, err)
			}
			if got != tc.want {
				t.Fatalf("Parse(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := map[string]struct {
		in      string
		wantErr string
	}{
		"empty":                      {"", "is empty"},
		"blank":                      {"   ", "is empty"},
		"negative seconds":           {"-5", `is negative: "-5"`},
		"negative unit":              {"-1h", "is negative"},
		"negative slurm":             {"-1-00", "is negative"},
		"nan":                        {"NaN", "is not a finite duration"},
		"inf":                        {"inf", "is not a finite duration"},
		"plus infinity":              {"+Infinity", "is not a finite duration"},
		"slurm unlimited":            {"UNLIMITED", "is not a finite duration"},
		"too long":                   {"11y", "is not a duration"},
		"over the maximum":           {"3651d", "is longer than 3650 days"},
		"huge number":                {"99999999999999999999999w", "is longer than 3650 days"},
		"hostile length":             {strings.Repeat("1", 65), "is too long to be a duration"},
		"unknown unit":               {"3y", "is not a duration"},
		"unit without number":        {"h", "is not a duration"},
		"bare number after unit":     {"1h30", "is not a duration"},
		"two points":                 {"1.2.3s", "is not a duration"},
		"lone point":                 {".s", "is not a duration"},
		"exponent":                   {"1e3", "is not a duration"},
		"plus sign":                  {"+5s", "is not a duration"},
		"inner space":                {"1h 30m", "is not a duration"},
		"slurm seconds out of range": {"1:60", "is not a duration"},
		"slurm minutes out of range": {"1:60:00", "is not a duration"},
		"slurm hours after days":     {"1-24", "is not a duration"},
		"slurm four fields":          {"1:2:3:4", "is not a duration"},
		"slurm empty field":          {"1::3", "is not a duration"},
		"slurm missing hours":        {"1-", "is not a duration"},
		"slurm two dashes":           {"1-2-3", "is not a duration"},
		"slurm fraction":             {"1:30.5", "is not a duration"},
		"slurm day fraction":         {"1.5-00", "is not a duration"},
		"control character":          {"5\x1bm", `"5\x1bm"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Parse(tc.in)
			if err == nil {
				t.Fatalf("Parse(%q) = %v, want an error containing %q", tc.in, got, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Parse(%q) error %q, want it to contain %q", tc.in, err, tc.wantErr)
			}
		})
	}
}

func TestFlag(t *testing.T) {
	var _ flag.Value = (*Flag)(nil)
	var _ encoding.TextUnmarshaler = (*Flag)(nil)
	var _ encoding.TextMarshaler = Flag(0)

	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(new(strings.Builder))
	round := Flag(6 * time.Minute)
	fs.Var(&round, "round", "round length")
	if err := fs.Parse([]string{"--round", "360"}); err != nil {
		t.Fatalf("--round 360: %v", err)
	}
	if round.Duration() != 6*time.Minute {
		t.Errorf("--round 360 gave %v", round.Duration())
	}
	if err := fs.Parse([]string{"--round", "0-01"}); err != nil || round.Duration() != time.Hour {
		t.Errorf("--round 0-01: %v, %v", err, round.Duration())
	}
	if err := fs.Parse([]string{"--round", "-1s"}); err == nil || !strings.Contains(err.Error(), "is negative") {
		t.Errorf("--round -1s: err = %v", err)
	}
	if round.Duration() != time.Hour {
		t.Errorf("a rejected value changed the flag to %v", round.Duration())
	}

	var f Flag
	if err := f.UnmarshalText([]byte("1h30m")); err != nil || f.Duration() != 90*time.Minute {
		t.Errorf("UnmarshalText: %v, %v", err, f.Duration())
	}
	text, _ := f.MarshalText()
	var back Flag
	if err := back.UnmarshalText(text); err != nil || back != f {
		t.Errorf("MarshalText %q read back as %v (%v)", text, back, err)
	}
}

// FuzzParse checks that Parse never panics, never returns a value outside
// [0, Max], and reads back Go's rendering of what it returned.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{"360", "0.5", "1h30m", "2d", "1-12:30:00", "05:30", "-5", "NaN", "1e3", "3650d", "µs"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := Parse(s)
		if err != nil {
			return
		}
		if d < 0 || d > Max {
			t.Fatalf("Parse(%q) = %v, outside [0, %v]", s, d, Max)
		}
		again, err := Parse(d.String())
		if err != nil || again != d {
			t.Fatalf("Parse(%q) = %v, whose String %q reads back as %v (%v)", s, d, d.String(), again, err)
		}
	})
}
