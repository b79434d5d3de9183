package daemon

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/gavel-slurm/gavel-slurm/bridge"
)

func TestOwnFeatures(t *testing.T) {
	isType := func(s string) bool { return s == "v100" || s == "k80" }
	cases := []struct {
		constraint string
		own        []string
		ok         bool
		forK80     string
		typ        string
	}{
		{"", nil, true, "k80", ""},
		{"v100", nil, true, "k80", "v100"},
		{"ib", []string{"ib"}, true, "ib&k80", ""},
		{"ib&v100", []string{"ib"}, true, "ib&k80", "v100"},
		{"v100&ib&bigmem", []string{"ib", "bigmem"}, true, "ib&bigmem&k80", "v100"},
		{" ib & v100 ", []string{"ib"}, true, "ib&k80", "v100"},
		{"ib|eth", nil, false, "", ""},
		{"[rack1|rack2]", nil, false, "", ""},
		{"ib*2", nil, false, "", ""},
		{"(ib&v100)", nil, false, "", ""},
		{"ib,v100", nil, false, "", ""},
		{"ib&&v100", nil, false, "", ""},
	}
	for _, c := range cases {
		own, ok := ownFeatures(c.constraint, isType)
		if ok != c.ok || !slices.Equal(own, c.own) {
			t.Errorf("ownFeatures(%q) = %q, %v; want %q, %v", c.constraint, own, ok, c.own, c.ok)
			continue
		}
		if !ok {
			continue
		}
		if got := constraintFor(own, "k80"); got != c.forK80 {
			t.Errorf("constraintFor(%q, k80) = %q, want %q", c.constraint, got, c.forK80)
		}
		if got := constraintType(c.constraint, isType); got != c.typ {
			t.Errorf("constraintType(%q) = %q, want %q", c.constraint, got, c.typ)
		}
	}
}

// A job's own features stay when the daemon adds and later changes the GPU
// type; a constraint the daemon cannot extend leaves the job to Slurm.
func TestOwnConstraintIsKept(t *testing.T) {
	h := newHarness(t, t.TempDir(), "a1:v100:1", "b1:k80:1")
	withFeature := h.slurm.Submit(bridge.Job{User: "ana", Partition: "gpu", GPUs: 1, Constraints: "ib", Comment: resnet})
	alternatives := h.slurm.Submit(bridge.Job{User: "ana", Partition: "gpu", GPUs: 1, Constraints: "ib|eth", Comment: resnet})

	if rep := h.d.RunRound(context.Background()); rep.Managed != 1 {
		t.Fatalf("report %+v, want only the job with a plain feature managed", rep)
	}
	j := h.job(withFeature)
	if j.Constraints != "ib&v100" {
		t.Fatalf("constraint %q, want the user's feature and the chosen type, ib&v100", j.Constraints)
	}
	if got := kinds(h.slurm.Applied(), alternatives); len(got) != 0 {
		t.Errorf("job with an OR constraint was touched: %v", got)
	}
	for _, js := range h.board.Status().Jobs {
		if js.JobID == alternatives.String() && !strings.Contains(js.Reason, "operators other than &") {
			t.Errorf("reason %q", js.Reason)
		}
	}

	// The type is changed in place: ib stays, v100 goes.
	acts := h.d.Core.runActions(j, "k80", "test")
	if len(acts) == 0 || acts[0].Kind != bridge.ActSetConstraints || acts[0].Constraints != "ib&k80" {
		t.Errorf("moving to k80 sends %v, want constraints ib&k80 first", acts)
	}
}
