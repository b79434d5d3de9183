package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gavel-slurm/gavel-slurm/internal/config"
	"github.com/gavel-slurm/gavel-slurm/internal/store"
	"github.com/gavel-slurm/gavel-slurm/nvml"
)

// The manual page, docs/gavel-slurm.1, is written by `gavel-slurm man`
// (`make man`) from the same help text `gavel-slurm COMMAND -h` prints,
// so that the page cannot describe flags the binary does not have;
// TestManPageIsCurrent fails when the committed page is stale.

func init() {
	register("man", subcommand{
		summary: "write the manual page gavel-slurm(1) in roff to standard output",
		hidden:  true,
		run: func(args []string) int {
			if len(args) > 0 {
				fmt.Fprintln(os.Stderr, "usage: gavel-slurm man > gavel-slurm.1")
				return 2
			}
			page, err := manPage()
			if err != nil {
				fmt.Fprintf(os.Stderr, "man: %v\n", err)
				return 1
			}
			if _, err := io.WriteString(os.Stdout, page); err != nil {
				fmt.Fprintf(os.Stderr, "man: %v\n", err)
				return 1
			}
			return 0
		},
	})
}

// manCommand is what the page says about one command.
type manCommand struct {
	name, summary string
	help          commandHelp
}

// commandHelp is a command's -h output, parsed.
type commandHelp struct {
	// synopsis is the command's own usage line after "usage: ", when it
	// prints one; empty when it only lists its flags.
	synopsis string
	flags    []flagHelp
}

// flagHelp is one flag as the flag package prints it.
type flagHelp struct {
	// name is without dashes; arg is the value's placeholder ("string",
	// "duration", or a back-quoted word of the usage), empty for a
	// boolean flag.
	name, arg string
	// usage includes the flag package's "(default ...)".
	usage string
}

// manPage builds the page from every visible registered command.
func manPage() (string, error) {
	names := make([]string, 0, len(subcommands))
	for n, c := range subcommands {
		if !c.hidden {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var cmds []manCommand
	for _, n := range names {
		text, err := captureHelp(subcommands[n])
		if err != nil {
			return "", fmt.Errorf("%s -h: %w", n, err)
		}
		cmds = append(cmds, manCommand{name: n, summary: subcommands[n].summary, help: parseHelp(text)})
	}
	var b strings.Builder
	writeManPage(&b, cmds)
	return b.String(), nil
}

// captureHelp runs the command with -h and returns what it printed. The
// commands write their help to os.Stdout or os.Stderr (their flag sets
// are built inside their run functions, which other files own), so both
// are pointed at one temporary file while it runs. Every command answers
// -h by printing and returning; one without flags (version) prints what
// it always prints, which parseHelp ignores.
func captureHelp(c subcommand) (string, error) {
	f, err := os.CreateTemp("", "gavel-slurm-help-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	stdout, stderr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = f, f
	func() {
		defer func() { os.Stdout, os.Stderr = stdout, stderr }()
		c.run([]string{"-h"})
	}()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	text, err := io.ReadAll(f)
	return string(text), err
}

// parseHelp reads the flag package's PrintDefaults format:
//
//	usage: gavel-slurm allocate --policy NAME ...   (a custom usage line)
//	  -name type
//	    	usage, continued
//	    	on more lines (default "x")
//
// A one-letter flag has its usage on its own line after a tab. Lines
// before the first flag other than a "usage: " line ("Usage of status:")
// are left out.
func parseHelp(text string) commandHelp {
	var h commandHelp
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "usage: ") && len(h.flags) == 0:
			h.synopsis = strings.TrimSpace(strings.TrimPrefix(line, "usage: "))
		case strings.HasPrefix(line, "  -"):
			head, usage, _ := strings.Cut(strings.TrimPrefix(line, "  -"), "\t")
			name, arg, _ := strings.Cut(strings.TrimSpace(head), " ")
			h.flags = append(h.flags, flagHelp{name: name, arg: arg, usage: strings.TrimSpace(usage)})
		case strings.HasPrefix(line, "    \t") && len(h.flags) > 0:
			last := &h.flags[len(h.flags)-1]
			last.usage = strings.TrimSpace(last.usage + " " + strings.TrimPrefix(line, "    \t"))
		}
	}
	return h
}

// writeManPage renders the page. Only its prose is written here; the
// commands' sections come from their help.
func writeManPage(w io.Writer, cmds []manCommand) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	def := config.Default()
	p(`.\" gavel-slurm(1), written by "gavel-slurm man" (make man) from the commands' help: do not edit.`)
	p(`.TH GAVEL\-SLURM 1 "" "gavel\-slurm" "gavel\-slurm manual"`)
	// Neither hyphenate nor justify: flags, paths and policy names broken
	// or stretched across a line could not be copied from the page.
	p(".nh")
	p(".ad l")
	p(".SH NAME")
	p(`gavel\-slurm \- heterogeneity\-aware GPU scheduler for Slurm`)

	p(".SH SYNOPSIS")
	p(`.B gavel\-slurm`)
	p(".I command")
	p(".RI [ flags ]")
	p(".br")
	p(`.B gavel\-slurm`)
	p(".I command")
	p(`.B \-h`)

	p(".SH DESCRIPTION")
	p("%s", roffText("gavel-slurm shares the GPUs of a Slurm cluster that has several GPU types by effective throughput, with the policies of Gavel (OSDI 2020): a job that trains much faster on a newer GPU gets the newer GPUs, and fairness is counted in work done rather than in GPU-hours."))
	p(".PP")
	p("%s", roffText("The daemon runs beside slurmctld. Every round it reads the queue and the typed GPU GRES of the managed partitions through slurmrestd, computes each job's share of each GPU type with the configured policy, and carries it out with ordinary Slurm actions: priorities, GPU-type constraints and holds on pending jobs, and for running jobs a warning signal, then a requeue. It manages only jobs whose --comment carries a gavel: tag, for example"))
	p(".PP")
	p(".RS")
	p(".nf")
	p("%s", roffText("sbatch --gres=gpu:1 --comment='gavel: model=resnet50-bs64 steps=250k preempt=checkpoint' train.sh"))
	p(".fi")
	p(".RE")
	p(".PP")
	p("%s", roffText("and leaves every other job to Slurm. The collector runs on each GPU node and reports the jobs' measured training rates to the daemon; status shows what the daemon decided for each job and why; allocate and simulate run the same policies on a problem file or on a simulated cluster."))
	p(".PP")
	p("%s", roffText("Flags take one dash or two (-dry-run and --dry-run are the same flag). Durations in the daemon's flags and configuration are bare seconds (360), numbers with units (6m, 1h30m) or Slurm's forms (05:00, 1-12:00:00)."))

	p(".SH COMMANDS")
	for _, c := range cmds {
		writeManCommand(w, c)
	}

	p(".SH FILES")
	item := func(tag, text string) {
		p(".TP")
		p(`\fB%s\fR`, roffText(tag))
		p("%s", roffText(text))
	}
	item(config.DefaultPath, "The daemon's configuration (TOML), read at start and again on SIGHUP. Every key is documented in the installed file; the keys marked as flags are also flags of daemon, which win over the file. Without --config a missing file means the defaults.")
	item(def.Slurm.TokenFile, "The JWT the daemon sends to slurmrestd (slurm.token_file), read again before each round.")
	item(def.Daemon.CollectorTokenFile, "The secret the collectors send with their reports (daemon.collector_token_file, and the collector's --token-file).")
	item(filepath.Join(def.Daemon.StateDir, store.FileName), "The daemon's state (daemon.state_dir): time received per job and GPU type, decisions and the journal of actions that makes a restart safe.")
	item(nvml.DefaultJobsDir, "Each job's GPUs on a node, written by the Slurm Prolog and read by the collector.")
	item(nvml.DefaultProgressDir, "Each job's progress file (JOBID.progress), which the training loop appends its step count to and the collector reads.")

	p(".SH SIGNALS")
	item("SIGHUP", "The daemon reads its configuration again once the round in progress has finished, and carries on from its saved state. A file that does not load is logged and the running configuration kept; a new daemon.listen needs a restart.")
	item("SIGTERM, SIGINT", "The daemon finishes the round in progress, stops its API and exits. The collector stops and logs the reports it sent, dropped and had refused.")

	p(".SH EXIT STATUS")
	item("0", "Success.")
	item("1", "A failure while running: the daemon stopped on an error, status could not reach the daemon, the policy failed, the collector could not work.")
	item("2", "A bad command line or an unknown command, a daemon configuration that does not load, or a problem file allocate cannot read.")

	p(".SH SEE ALSO")
	p(`\fBsbatch\fR(1), \fBscontrol\fR(1), \fBsqueue\fR(1), \fBslurm.conf\fR(5), \fBslurmctld\fR(8), \fBslurmrestd\fR(8)`)
	p(".PP")
	p("%s", roffText("/usr/share/doc/gavel-slurm/: README.md (set-up, tags, status), packaging.md (installation and the slurm.conf settings), comment-tag.md (the gavel: tag), preemption.md (checkpointing job scripts), troubleshooting.md (every reason status shows, and what to do)."))
}

// writeManCommand renders one command: its synopsis, summary and flags.
func writeManCommand(w io.Writer, c manCommand) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p(`.SS "%s"`, roffText(c.name))
	synopsis := c.help.synopsis
	if synopsis == "" {
		synopsis = "gavel-slurm " + c.name
		if len(c.help.flags) > 0 {
			synopsis += " [flags]"
		}
	}
	// A text line rather than .B, whose arguments a quote in a usage line
	// would split.
	p(`\fB%s\fR`, roffText(synopsis))
	p(".PP")
	p("%s", roffText(sentence(c.summary)))
	for _, f := range c.help.flags {
		p(".TP")
		if f.arg == "" {
			p(`.B \-\-%s`, roffText(f.name))
		} else {
			p(`.BI \-\-%s " %s"`, roffText(f.name), roffText(f.arg))
		}
		p("%s", roffText(f.usage))
	}
}

// sentence starts s with a capital letter and ends it with a full stop:
// the summaries, written as phrases for the usage list, read as sentences
// in the page. Flags' usages are kept as -h prints them, since many start
// with a name that must stay lower case (slurmrestd, host:port).
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return s
	}
	first, size := utf8.DecodeRuneInString(s)
	s = string(unicode.ToUpper(first)) + s[size:]
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

// roffText escapes plain text for a roff text line or a macro argument:
// backslashes, hyphens (roff would print "-" as a typographic hyphen, which
// breaks flags copied from the page) and a leading period or quote, which
// roff would read as a request.
func roffText(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}
