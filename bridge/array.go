package bridge

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxArrayTask bounds the task ids read from Slurm: MaxArraySize is at
// most 4,000,001, so no task id is above 4,000,000.
const MaxArrayTask = 4_000_000

// ArrayTaskIDs reads Slurm's expression of a job array's tasks ("0-7",
// "1,3,5-9:2", "4"; without the "%N" of a limit) and returns the first
// max task ids in the expression's order and how many tasks it names in
// all. Counting does not list the ids, so an expression of millions of
// tasks costs no more than max.
func ArrayTaskIDs(expr string, max int) (ids []uint32, total int, err error) {
	if strings.TrimSpace(expr) == "" {
		return nil, 0, fmt.Errorf("array tasks %q: empty", expr)
	}
	for _, part := range strings.Split(expr, ",") {
		first, last, step, err := arrayRange(part)
		if err != nil {
			return nil, 0, fmt.Errorf("array tasks %q: %w", expr, err)
		}
		for t := first; t <= last && len(ids) < max; t += step {
			ids = append(ids, uint32(t))
		}
		total += (last-first)/step + 1
	}
	return ids, total, nil
}

// arrayRange reads one part of a task expression: "N", "N-M" or "N-M:S".
func arrayRange(part string) (first, last, step int, err error) {
	num := func(s string) (int, error) {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 0 || n > MaxArrayTask {
			return 0, fmt.Errorf("%q is not a task id", s)
		}
		return n, nil
	}
	span, stepText, stepped := strings.Cut(part, ":")
	from, to, isRange := strings.Cut(span, "-")
	if first, err = num(from); err != nil {
		return 0, 0, 0, err
	}
	last, step = first, 1
	if isRange {
		if last, err = num(to); err != nil {
			return 0, 0, 0, err
		}
	}
	if stepped {
		if !isRange {
			return 0, 0, 0, fmt.Errorf("%q: a step without a range", part)
		}
		if step, err = num(stepText); err != nil || step == 0 {
			return 0, 0, 0, fmt.Errorf("%q: step is not a positive number", part)
		}
	}
	if last < first {
		return 0, 0, 0, fmt.Errorf("%q: range ends before it starts", part)
	}
	return first, last, step, nil
}
