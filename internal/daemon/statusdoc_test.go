package daemon

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/internal/sched"
)

// An idle cluster (no job in the managed partitions) gives "jobs": [] in
// /v1/status, as the standby's document does, not "jobs": null, which
// `jq '.jobs[]'` and typed clients choke on.
func TestStatusDocOfAnIdleClusterHasEmptyLists(t *testing.T) {
	doc := statusDoc(sched.View{Round: 3, Policy: "max_min_fairness_perf", Length: 6 * time.Minute})
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"jobs":[]`, `"types":[]`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/v1/status of an idle cluster lacks %s: %s", want, b)
		}
	}
}
