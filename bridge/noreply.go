package bridge

import "errors"

// ErrNoReply says that an action went out to Slurm and no answer came
// back: the request timed out, or the connection broke after it was
// written. Slurm may or may not have carried the action out, so the
// daemon neither counts it as done nor as refused: it keeps its journal
// entry pending and checks Slurm's view of the job at its next read
// (internal/daemon's reconciliation), as after a crash. Treating such an
// action as refused would lose track of a hold or requeue that did land:
// a job held by the daemon would look held by someone else, and wait for
// ever.
var ErrNoReply = errors.New("no reply from Slurm: the action may have been carried out")

// NoReply marks err as an action whose outcome is unknown (ErrNoReply),
// keeping err's own text and chain.
func NoReply(err error) error {
	if err == nil || errors.Is(err, ErrNoReply) {
		return err
	}
	return noReplyError{err}
}

type noReplyError struct{ err error }

func (e noReplyError) Error() string   { return e.err.Error() + " (no reply: outcome unknown)" }
func (e noReplyError) Unwrap() []error { return []error{e.err, ErrNoReply} }

// OutcomeUnknown reports whether err says that an action may or may not
// have been carried out (ErrNoReply).
func OutcomeUnknown(err error) bool { return errors.Is(err, ErrNoReply) }
