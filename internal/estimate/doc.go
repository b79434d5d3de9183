// Package estimate gives the step rate of every (job, GPU type) pair and
// says where each figure comes from.
//
// The sources, best first:
//
//   - measured: the job's own recent rate on that type, smoothed over the
//     intervals its collector reported (the first interval after a start is
//     skipped, outliers are dropped);
//   - estimated: predicted from the job's rates on its other types, matched
//     against the reference table and the jobs already measured (a
//     fingerprint: the known job whose rates have the closest shape, blended
//     with a low-rank completion of the job × type matrix, as in §3.3 of the
//     Gavel paper); GPU types that no table knows are learned from the jobs
//     measured there, as speed ratios against the types they also ran on;
//   - table: the reference table's entry for the model named in the job's
//     tag, at its GPU count;
//   - default: the same rate on every type, which treats the types as
//     interchangeable rather than guessing a speed-up.
//
// The package does no I/O and reads no clock: measurements carry their own
// time and every query is given "now".
package estimate
