package main

import (
	"fmt"
	"runtime"
)

func init() {
	register("version", subcommand{
		summary: "print the version",
		run: func([]string) int {
			fmt.Printf("gavel-slurm %s (%s, %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return 0
		},
	})
}
