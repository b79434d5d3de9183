// Package report writes and reads the simulator's results: the text
// summary and per-job CSV of one run, and the CSV and average-JCT chart of
// a sweep over policies, arrival rates and seeds. It owns these formats so
// that the command only wires flags and files to them, and so that a sweep
// written by one run can be read back and replotted by another.
package report

import "strconv"

// num formats a float in the shortest form that reads back exactly, so a
// CSV loses nothing and a whole number prints without decimals.
func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
