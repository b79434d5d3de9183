package sched

import (
	"slices"
	"testing"
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
		if got := ConstraintType(c.constraint, isType); got != c.typ {
			t.Errorf("ConstraintType(%q) = %q, want %q", c.constraint, got, c.typ)
		}
	}
}
