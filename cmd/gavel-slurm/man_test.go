package main

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// manPagePath is the committed page, relative to this package.
const manPagePath = "../../docs/gavel-slurm.1"

// TestManPageIsCurrent regenerates the page and compares it with the
// committed one: a flag added, renamed or reworded without `make man`
// would otherwise ship a manual that describes another binary.
func TestManPageIsCurrent(t *testing.T) {
	page, err := manPage()
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile(manPagePath)
	if err != nil {
		t.Fatalf("%v: run make man", err)
	}
	if string(committed) != page {
		t.Errorf("docs/gavel-slurm.1 is stale (differs from what gavel-slurm man writes): run make man\n%s", firstDifference(string(committed), page))
	}
}

// firstDifference shows the first line where two texts differ.
func firstDifference(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return "line " + strconv.Itoa(i+1) + ":\n  committed: " + x + "\n  generated: " + y
		}
	}
	return ""
}

// TestManPageDescribesEveryCommand checks that the capture of each
// command's -h worked: every visible command has its section, every
// command with flags lists them, and the hidden ones stay out.
func TestManPageDescribesEveryCommand(t *testing.T) {
	page, err := manPage()
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range subcommands {
		heading := `.SS "` + roffText(name) + `"`
		if c.hidden {
			if strings.Contains(page, heading) {
				t.Errorf("hidden command %s has a section", name)
			}
			continue
		}
		if !strings.Contains(page, heading) {
			t.Errorf("command %s has no section", name)
			continue
		}
		help, err := captureHelp(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range parseHelp(help).flags {
			if !strings.Contains(page, `\-\-`+roffText(f.name)) {
				t.Errorf("%s: flag --%s missing from the page", name, f.name)
			}
		}
	}
	for _, flagged := range []string{"daemon", "status", "collector", "simulate", "allocate"} {
		help, err := captureHelp(subcommands[flagged])
		if err != nil {
			t.Fatal(err)
		}
		if len(parseHelp(help).flags) == 0 {
			t.Errorf("%s -h gave no flags: %q", flagged, help)
		}
	}
}

// TestParseHelp feeds parseHelp what the flag package really prints, so a
// change of its format shows here rather than as a page without flags.
func TestParseHelp(t *testing.T) {
	tests := []struct {
		name   string
		header string
		define func(fs *flag.FlagSet)
		want   commandHelp
	}{
		{
			name:   "default header, kinds of flags",
			header: "Usage of demo:",
			define: func(fs *flag.FlagSet) {
				fs.Bool("dry-run", false, "decide without sending")
				fs.String("server", "127.0.0.1:8390", "daemon address")
				fs.Duration("watch", 10*time.Second, "print again every interval")
				fs.Int("seed", 0, "seed of the `generator`")
			},
			want: commandHelp{flags: []flagHelp{
				{name: "dry-run", usage: "decide without sending"},
				{name: "seed", arg: "generator", usage: "seed of the generator"},
				{name: "server", arg: "string", usage: `daemon address (default "127.0.0.1:8390")`},
				{name: "watch", arg: "duration", usage: "print again every interval (default 10s)"},
			}},
		},
		{
			name:   "custom usage line, one-letter flag, usage on two lines",
			header: "usage: gavel-slurm demo --x N [--json]",
			define: func(fs *flag.FlagSet) {
				fs.Bool("x", false, "short")
				fs.Bool("json", false, "first line\nsecond line")
			},
			want: commandHelp{synopsis: "gavel-slurm demo --x N [--json]", flags: []flagHelp{
				{name: "json", usage: "first line second line"},
				{name: "x", usage: "short"},
			}},
		},
		{
			name:   "no flags: other text is left out",
			header: "gavel-slurm dev (go1.26, linux/amd64)",
			define: func(*flag.FlagSet) {},
			want:   commandHelp{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("demo", flag.ContinueOnError)
			tt.define(fs)
			var out bytes.Buffer
			fs.SetOutput(&out)
			out.WriteString(tt.header + "\n")
			fs.PrintDefaults()
			got := parseHelp(out.String())
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("parseHelp(%q)\n got %+v\nwant %+v", out.String(), got, tt.want)
			}
		})
	}
}

func TestRoffText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"--dry-run", `\-\-dry\-run`},
		{`C:\path`, `C:\epath`},
		{".hidden request", `\&.hidden request`},
		{"'quoted", `\&'quoted`},
		{"a.b 'c'", "a.b 'c'"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := roffText(tt.in); got != tt.want {
			t.Errorf("roffText(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestSentence(t *testing.T) {
	tests := []struct{ in, want string }{
		{"print the version", "Print the version."},
		{"show jobs (squeue-like)", "Show jobs (squeue-like)."},
		{"already one.", "Already one."},
		{"élan", "Élan."},
		{"", ""},
	}
	for _, tt := range tests {
		if got := sentence(tt.in); got != tt.want {
			t.Errorf("sentence(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestUsageHidesHiddenCommands: `gavel-slurm -h` lists what sites run,
// not the tools that build the project.
func TestUsageHidesHiddenCommands(t *testing.T) {
	text, err := captureHelp(subcommand{run: func([]string) int { usage(); return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range subcommands {
		listed := strings.Contains(text, "\n  "+name+" ")
		if listed == c.hidden {
			t.Errorf("usage lists %s: %v, hidden: %v\n%s", name, listed, c.hidden, text)
		}
	}
}

// TestManPageHasNoRoffWarnings runs groff with every warning on over the
// committed page.
func TestManPageHasNoRoffWarnings(t *testing.T) {
	if _, err := exec.LookPath("groff"); err != nil {
		t.Skip("groff not installed")
	}
	cmd := exec.Command("groff", "-man", "-Tutf8", "-ww", "-z", manPagePath)
	out, err := cmd.CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("groff -man -ww: %v\n%s", err, out)
	}
}

// TestManPageRendersAwkwardHelp renders a command whose help holds what
// roff reads specially (quotes, a leading period, backslashes, dashes)
// and checks with groff that the text comes out as written.
func TestManPageRendersAwkwardHelp(t *testing.T) {
	if _, err := exec.LookPath("groff"); err != nil {
		t.Skip("groff not installed")
	}
	cmds := []manCommand{{name: "demo", summary: "try odd text", help: commandHelp{
		synopsis: `gavel-slurm demo --name "A B" [--json]`,
		flags: []flagHelp{
			{name: "path", arg: "string", usage: `.dotfile or C:\dir, see --name (default "x")`},
			{name: "json", usage: "'quoted' first"},
		},
	}}}
	var page bytes.Buffer
	writeManPage(&page, cmds)
	cmd := exec.Command("groff", "-man", "-Tutf8", "-ww", "-P-c", "-P-b", "-P-u")
	cmd.Stdin = &page
	cmd.Env = append(os.Environ(), "MANWIDTH=1000")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil || errOut.Len() > 0 {
		t.Fatalf("groff: %v\n%s", err, errOut.String())
	}
	text := strings.Join(strings.Fields(out.String()), " ")
	for _, want := range []string{
		`gavel-slurm demo --name "A B" [--json]`,
		`.dotfile or C:\dir, see --name (default "x")`,
		"'quoted' first",
		"--path string",
		"Try odd text.",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("rendered page lacks %q:\n%s", want, text)
		}
	}
}
