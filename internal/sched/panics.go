package sched

import (
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// panicError is a panic recovered from a policy or solver, with where it
// happened: enough to report the bug without the whole stack.
type panicError struct {
	what, site string
}

func (e *panicError) Error() string {
	if e.site == "" {
		return e.what
	}
	return e.what + " (at " + e.site + ")"
}

// panicSite is the function and line that panicked, called from a
// deferred recover: the first frame below the runtime's panic machinery.
// Only Go panics can be recovered; a crash inside the LP solver's C code
// still ends the process.
func panicSite() string {
	pcs := make([]uintptr, 32)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	seenPanic := false
	for {
		f, more := frames.Next()
		switch {
		case strings.HasPrefix(f.Function, "runtime."):
			seenPanic = seenPanic || f.Function == "runtime.gopanic" || strings.HasPrefix(f.Function, "runtime.panic")
		case seenPanic:
			return f.Function + " " + shortFile(f.File) + ":" + strconv.Itoa(f.Line)
		}
		if !more {
			return ""
		}
	}
}

// shortFile is a source path's package folder and file name.
func shortFile(path string) string {
	return filepath.Join(filepath.Base(filepath.Dir(path)), filepath.Base(path))
}
