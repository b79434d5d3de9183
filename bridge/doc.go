// Package bridge is the Slurm side of the daemon: what it reads from Slurm
// and what it asks Slurm to do.
//
// The daemon sees Slurm through two narrow interfaces:
//
//   - Reader.Snapshot returns an immutable *Snapshot of the managed
//     partitions: nodes (GPU type and count from their GRES, GPUs in use,
//     partitions, features, state) and jobs (GPUs requested, typed or not,
//     constraints, where a running job is, restarts, priority, hold, times,
//     the --comment and its parsed gavel: Tag or the reason it is unmanaged).
//   - Actuator.Apply carries out one Action: a comparable value (kind, job
//     id, arguments) so that the daemon can journal it before sending it and
//     skip a repeat. Kinds: set-priority, hold, release, set-constraints
//     (pending jobs), begin-now, signal, requeue, requeue-hold.
//
// Facts about the actions, checked against Slurm 24.11 and 26.05 (see the
// integration tests in bridge/rest):
//
//   - a held job refuses set-priority (Slurm error 2042): release first;
//   - release resets the begin time a requeue sets, so after requeue-hold
//     send set-constraints, release, then begin-now;
//   - set-constraints fails on a running job ("no longer pending");
//   - signal reaches the batch script and all steps;
//   - hold, release and set-constraints may be repeated without error.
//
// A BatchActuator carries out many actions in few calls (bridge/rest:
// scontrol lists, slurmrestd's list endpoints), and a snapshot taken
// with AsLook's context may be answered from a lighter read when nothing
// changed (bridge/rest: every job's state alone).
//
// A bridge that is also a RequeueChecker proves, without changing a job,
// that its requeues would work; the daemon preempts nothing until then.
//
// Implementations: bridge/rest talks to slurmrestd (JWT, API version
// negotiation, requeue through slurmrestd on v0.0.45 and scontrol before);
// bridge/fake is an in-memory Slurm with
// failure injection for tests of the daemon's logic.
//
// The comment tag grammar (ParseTag, Tag.Format, ResolveModel) is documented
// for users in docs/comment-tag.md. GRES strings ("gpu:v100:4(S:0)") are read
// by ParseGRESList.
//
// Everything in this package proper is pure: no I/O, no clocks.
package bridge
