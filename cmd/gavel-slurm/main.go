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
	// run gets the arguments after the verb and returns the exit status.
	run func(args []string) int
}

var subcommands = map[string]subcommand{}

func register(name string, c subcommand) { subcommands[name] = c }

func usage() {
	fmt.Fprintln(os.Stderr, "usage: gavel-slurm COMMAND [flags]\n\ncommands:")
	names := make([]string, 0, len(subcommands))
	for n := range subcommands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-10s %s\n", n, subcommands[n].summary)
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
