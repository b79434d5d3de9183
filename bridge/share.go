package bridge

import (
	"fmt"
	"strings"
)

// maxShards bounds the shards one share action asks for: a GPU rarely
// offers more than a few dozen, and a corrupt journal entry must not ask
// Slurm for absurd counts.
const maxShards = 1 << 16

// validateShare checks an ActSetShare: a share names one node by a name
// Slurm could hold (no list, no range expression, which would let the job
// land on another node than its partner's); an unshare names none.
func (a Action) validateShare() error {
	if strings.ContainsAny(a.Constraints, "\n\x00") {
		return fmt.Errorf("%s: constraints hold a control character", a)
	}
	switch {
	case a.Shards < 0 || a.Shards > maxShards:
		return fmt.Errorf("%s: shards out of range", a)
	case a.Shards == 0 && a.Node != "":
		return fmt.Errorf("%s: a whole-GPU request names no node", a)
	case a.Shards > 0 && !nodeName(a.Node):
		return fmt.Errorf("%s: want one node name", a)
	}
	return nil
}

// nodeName reports whether s can only be read as one node's name by
// Slurm: not empty, and none of the characters of its lists and host
// ranges ("a,b", "n[1-2]") or of whitespace.
func nodeName(s string) bool {
	return s != "" && len(s) <= 255 && !strings.ContainsAny(s, ",[] \t\n\x00")
}

// SharesGPUWith reports whether two running jobs hold shards of the same
// GPU: both on one node and one index in common. It is how the daemon
// checks that a pair it started landed together (docs/space-sharing.md).
func SharesGPUWith(a, b Job) bool {
	if a.State != JobRunning || b.State != JobRunning || len(a.RunningNodes) != 1 || len(b.RunningNodes) != 1 ||
		a.RunningNodes[0] != b.RunningNodes[0] {
		return false
	}
	for _, i := range a.SharedGPUs {
		for _, k := range b.SharedGPUs {
			if i == k {
				return true
			}
		}
	}
	return false
}
