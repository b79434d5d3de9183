// Command gavel-slurm is a heterogeneity-aware GPU scheduler for Slurm: a
// sidecar daemon beside slurmctld, its status client, the policy solver and a
// trace-driven simulator, all in one binary.
package main

import (
	"fmt"
	"os"
	"sort"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// subcommand is one verb of the binary. Each lives in its own file and
// registers itself in init.
type subcommand struct {
	summary string
	// hidden leaves the command out of the usage list and the manual page
	// (tools for building the project, not for sites).
	hidden bool
	// run gets the arguments after the verb and returns the exit status.
	run func(args []string) int
}

var subcommands = map[string]subcommand{}

func register(name string, c subcommand) { subcommands[name] = c }

func usage() {
	fmt.Fprintln(os.Stderr, "usage: gavel-slurm COMMAND [flags]\n\ncommands:")
	names := make([]string, 0, len(subcommands))
	for n, c := range subcommands {
		if !c.hidden {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	// The summaries line up after the longest name.
	width := 0
	for _, n := range names {
		width = max(width, len(n))
	}
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-*s  %s\n", width, n, subcommands[n].summary)
	}
	fmt.Fprintln(os.Stderr, "\nRun 'gavel-slurm COMMAND -h' for the flags of a command.")
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage()
		if len(os.Args) < 2 {
			os.Exit(2)
		}
		return
	}
	c, ok := subcommands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "gavel-slurm: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	os.Exit(c.run(os.Args[2:]))
}
