package bridge

import "context"

// lookKey marks a context whose snapshot is a look between rounds.
type lookKey struct{}

// AsLook marks ctx for a snapshot taken between rounds (the grace-period
// and refill checks). A Reader may then answer from a lighter question to
// Slurm (such as every job's state alone) when that shows nothing
// changed since its last full read; what such a look may miss (a changed
// priority, comment or constraint of a job whose state did not change)
// the next round's snapshot sees. Readers that cannot tell read in full.
func AsLook(ctx context.Context) context.Context {
	return context.WithValue(ctx, lookKey{}, true)
}

// IsLook reports whether ctx was marked by AsLook.
func IsLook(ctx context.Context) bool {
	v, _ := ctx.Value(lookKey{}).(bool)
	return v
}
