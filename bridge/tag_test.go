package bridge

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseTag(t *testing.T) {
	tests := map[string]struct {
		comment string
		want    Tag
	}{
		"empty tag is managed with defaults": {"gavel:", Tag{}},
		"quoted model with spaces": {
			`gavel: model="ResNet-50 (batch size 64)" steps=250000`,
			Tag{Model: "ResNet-50 (batch size 64)", Steps: 250000},
		},
		"single quotes are literal": {
			`gavel: model='a\b "c"'`,
			Tag{Model: `a\b "c"`},
		},
		"escapes in double quotes": {
			`gavel: entity="lab \"x\" \\ y"`,
			Tag{Entity: `lab "x" \ y`},
		},
		"alias and commas": {
			"gavel:model=resnet50-bs64,steps=250k,weight=2",
			Tag{Model: "resnet50-bs64", Steps: 250000, Weight: 2},
		},
		"commas and spaces mixed": {
			"gavel: model=a3c , steps=1.5M,  class=te",
			Tag{Model: "a3c", Steps: 1500000, Class: ClassTrialAndError},
		},
		"exponent steps":             {"gavel: steps=1e6", Tag{Steps: 1000000}},
		"underscores in steps":       {"gavel: steps=250_000", Tag{Steps: 250000}},
		"fractional k that is whole": {"gavel: steps=2.5k", Tag{Steps: 2500}},
		"billion suffix":             {"gavel: steps=2B", Tag{Steps: 2000000000}},
		"text before the tag": {
			"nightly sweep gavel: model=lm-bs20 weight=0.5",
			Tag{Model: "lm-bs20", Weight: 0.5},
		},
		"text after a semicolon": {
			"gavel: steps=10k; owner says hi",
			Tag{Steps: 10000},
		},
		"case-insensitive prefix and keys": {
			"GAVEL: Steps=10 CLASS=BE",
			Tag{Steps: 10, Class: ClassBestEffort},
		},
		"long class names": {"gavel: class=trial-and-error", Tag{Class: ClassTrialAndError}},
		"durations": {
			"gavel: slo=90m grace=30",
			Tag{SLO: 90 * time.Minute, Grace: 30 * time.Second},
		},
		"day and compound durations": {
			"gavel: slo=2d grace=1m30s",
			Tag{SLO: 48 * time.Hour, Grace: 90 * time.Second},
		},
		"fractional hours":                        {"gavel: slo=1.5h", Tag{SLO: 90 * time.Minute}},
		"zero grace means unset":                  {"gavel: grace=0", Tag{}},
		"restart cost":                            {"gavel: restart=3m grace=30s", Tag{Restart: 3 * time.Minute, Grace: 30 * time.Second}},
		"restart slurm form":                      {"gavel: restart=1:30", Tag{Restart: 90 * time.Second}},
		"zero restart means unset":                {"gavel: restart=0", Tag{}},
		"tabs as separators":                      {"gavel:\tsteps=5\tweight=3", Tag{Steps: 5, Weight: 3}},
		"prefix after punctuation":                {"(gavel: steps=7; see wiki)", Tag{Steps: 7}},
		"bare fractional seconds":                 {"gavel: grace=0.4", Tag{}},
		"slurm HH:MM:SS":                          {"gavel: slo=12:00:00 grace=01:30", Tag{SLO: 12 * time.Hour, Grace: 90 * time.Second}},
		"slurm days and hours":                    {"gavel: slo=2-12", Tag{SLO: 60 * time.Hour}},
		"slurm days to seconds":                   {"gavel: slo=1-00:00:30", Tag{SLO: 24*time.Hour + 30*time.Second}},
		"week unit":                               {"gavel: slo=1w", Tag{SLO: 7 * 24 * time.Hour}},
		"go milliseconds round":                   {"gavel: grace=1500ms", Tag{Grace: 2 * time.Second}},
		"preempt modes any case":                  {"gavel: preempt=Checkpoint", Tag{Preempt: PreemptCheckpoint}},
		"preempt never":                           {"gavel: preempt=never", Tag{Preempt: PreemptNever}},
		"share refused":                           {"gavel: share=NO", Tag{Share: ShareNo}},
		"share allowed":                           {"gavel: share=ok", Tag{Share: ShareOK}},
		"non-ASCII text is fine":                  {"gavel: entity=équipe-Zoë model='模型'", Tag{Entity: "équipe-Zoë", Model: "模型"}},
		"newline between pairs":                   {"gavel: steps=5\nweight=3", Tag{Steps: 5, Weight: 3}},
		"control text after the tag is free text": {"gavel: steps=5; \x1b[2J", Tag{Steps: 5}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseTag(tc.comment)
			if err != nil {
				t.Fatalf("ParseTag(%q): %v", tc.comment, err)
			}
			if got != tc.want {
				t.Fatalf("ParseTag(%q) = %+v, want %+v", tc.comment, got, tc.want)
			}
		})
	}
}

func TestParseTagErrors(t *testing.T) {
	tests := map[string]struct {
		comment string
		wantErr string // a fragment of the message shown by status
	}{
		"no tag":                  {"just a comment", "no gavel: tag in --comment"},
		"empty comment":           {"", "no gavel: tag in --comment"},
		"prefix inside a word":    {"nogavel: steps=5", "no gavel: tag"},
		"steps not a number":      {"gavel: steps=lots", "steps= is not a number"},
		"steps fractional":        {"gavel: steps=1.5", "steps= is not a whole number"},
		"steps negative":          {"gavel: steps=-5", "steps= must be between"},
		"steps zero":              {"gavel: steps=0", "steps= must be between"},
		"steps too large":         {"gavel: steps=1e19", "steps= must be between"},
		"steps huge exponent":     {"gavel: steps=1e999999999", "steps= is not a number"},
		"unknown key":             {"gavel: foo=1", "unknown key foo="},
		"share not ok or no":      {"gavel: share=yes", `share= must be ok or no: "yes"`},
		"duplicate key":           {"gavel: weight=1 weight=2", "duplicate key weight="},
		"duplicate key any case":  {"gavel: weight=1 WEIGHT=2", "duplicate key weight="},
		"weight zero":             {"gavel: weight=0", "weight= must be between"},
		"weight negative":         {"gavel: weight=-1", "weight= must be between"},
		"weight not a number":     {"gavel: weight=heavy", "weight= is not a number"},
		"weight infinite":         {"gavel: weight=inf", "weight= is not a number"},
		"slo without number":      {"gavel: slo=h", "slo= is not a duration"},
		"slo unknown unit":        {"gavel: slo=3y", "slo= is not a duration"},
		"slo zero":                {"gavel: slo=0", "slo= must be longer than 0"},
		"slo bare number inside":  {"gavel: slo=1h30", "slo= is not a duration"},
		"grace negative":          {"gavel: grace=-5", `grace= is negative: "-5"`},
		"restart negative":        {"gavel: restart=-1m", `restart= is negative: "-1m"`},
		"restart not a duration":  {"gavel: restart=soon", "restart= is not a duration"},
		"restart twice":           {"gavel: restart=1m restart=2m", "duplicate key restart="},
		"slo too long":            {"gavel: slo=3651d", "slo= is longer than 3650 days"},
		"slo infinite":            {"gavel: slo=UNLIMITED", "slo= is not a finite duration"},
		"slo slurm out of range":  {"gavel: slo=1:75", "slo= is not a duration"},
		"preempt unknown":         {"gavel: preempt=sometimes", "preempt= must be checkpoint, requeue or never"},
		"newline in quoted value": {"gavel: model=\"a\nb\"", "model= contains the control character U+000A"},
		"tab in quoted value":     {"gavel: entity='a\tb'", "entity= contains the control character U+0009"},
		"escape sequence":         {"gavel: model=\"\x1b[31mred\"", "model= contains the control character U+001B"},
		"C1 control":              {"gavel: model=\"a\u0085b\"", "model= contains the control character U+0085"},
		"delete":                  {"gavel: entity=a\x7fb", "entity= contains the control character U+007F"},
		"right-to-left override":  {"gavel: entity=lab\u202eBA", "entity= contains the bidirectional-text control U+202E"},
		"right-to-left isolate":   {"gavel: model=x\u2067y", "model= contains the bidirectional-text control U+2067"},
		"right-to-left mark":      {"gavel: model=x\u200fy", "model= contains the bidirectional-text control U+200F"},
		"line separator":          {"gavel: model=x\u2028y", "model= contains the line separator U+2028"},
		"invalid UTF-8":           {"gavel: model=x\xffy", "model= is not valid UTF-8"},
		"control in a key":        {"gavel: ste\x1bps=5", `key "ste\x1bps" is not a word`},
		"non-word key":            {"gavel: mödel=x", `key "mödel" is not a word`},
		"class unknown":           {"gavel: class=urgent", "class= must be te"},
		"empty value":             {"gavel: model=", "model= is empty"},
		"empty quoted value":      {`gavel: model=""`, "model= is empty"},
		"unterminated quote":      {`gavel: model="ResNet-50`, "unterminated"},
		"missing equals":          {"gavel: steps 5", `expected key=value in gavel: tag, got "steps"`},
		"missing key":             {"gavel: =5", "missing key"},
		"quote in bare value":     {`gavel: model=a"b"`, "quote inside"},
		"junk after quoted value": {`gavel: model="a"b`, "must be followed by"},
		"two tags":                {"gavel: steps=5; gavel: weight=2", "more than one gavel: tag"},
		"glued punctuation":       {"(gavel: steps=7)", "steps= is not a number"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseTag(tc.comment)
			if err == nil {
				t.Fatalf("ParseTag(%q) succeeded, want error containing %q", tc.comment, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("ParseTag(%q) error %q, want it to contain %q", tc.comment, err, tc.wantErr)
			}
		})
	}
}

func TestParseTagNoTagIsSentinel(t *testing.T) {
	_, err := ParseTag("hello")
	if !errors.Is(err, ErrNoTag) {
		t.Fatalf("err = %v, want ErrNoTag", err)
	}
	_, err = ParseTag("gavel: foo=1")
	if errors.Is(err, ErrNoTag) {
		t.Fatalf("a malformed tag must not read as unmanaged: %v", err)
	}
}

func TestFormatTag(t *testing.T) {
	tests := map[string]struct {
		tag  Tag
		want string
	}{
		"zero":   {Tag{}, "gavel:"},
		"simple": {Tag{Model: "a3c", Steps: 5000}, "gavel: model=a3c steps=5000"},
		"quoted model": {
			Tag{Model: "ResNet-50 (batch size 64)", Weight: 0.5},
			`gavel: model="ResNet-50 (batch size 64)" weight=0.5`,
		},
		"escaped quote": {Tag{Entity: `say "hi"`}, `gavel: entity="say \"hi\""`},
		"durations in largest unit": {
			Tag{SLO: 36 * time.Hour, Grace: 90 * time.Second},
			"gavel: slo=36h grace=90s",
		},
		"days and minutes": {Tag{SLO: 48 * time.Hour, Grace: 2 * time.Minute}, "gavel: slo=2d grace=2m"},
		"class":            {Tag{Class: ClassTrialAndError}, "gavel: class=te"},
		"preempt":          {Tag{Preempt: PreemptRequeue, Grace: time.Minute}, "gavel: grace=1m preempt=requeue"},
		"restart last":     {Tag{Mixed: MixedOK, Restart: 150 * time.Second}, "gavel: mixed=ok restart=150s"},
		"share last":       {Tag{Restart: time.Minute, Share: ShareNo}, "gavel: restart=1m share=no"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.tag.Format(); got != tc.want {
				t.Fatalf("Format() = %q, want %q", got, tc.want)
			}
		})
	}
}

func FuzzParseTag(f *testing.F) {
	for _, seed := range []string{
		"gavel:",
		`gavel: model="ResNet-50 (batch size 64)" steps=250k weight=2 slo=12h entity=lab class=te grace=60`,
		"x gavel: steps=1.5M, weight=0.25; rest",
		`gavel: model='it''s' entity="a\"b"`,
		"gavel: slo=1h30m grace=0",
		"gavel: steps=1e6 weight=1e-3",
		"gavel: slo=1-12:00:00 grace=05:00 preempt=checkpoint",
		"gavel: restart=2m30s mixed=ok share=no",
		"gavel: model=\"a\u202eb\"",
		"GAVEL:steps=1_000",
		"nothing here",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, comment string) {
		tag, err := ParseTag(comment)
		if err != nil {
			return
		}
		text := tag.Format()
		again, err := ParseTag(text)
		if err != nil {
			t.Fatalf("Format of %q gave %q which does not parse: %v", comment, text, err)
		}
		if again != tag {
			t.Fatalf("round trip of %q: %+v -> %q -> %+v", comment, tag, text, again)
		}
	})
}
