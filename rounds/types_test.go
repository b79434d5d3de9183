package rounds

import (
	"reflect"
	"strings"
	"testing"

	"github.com/gavel-slurm/gavel-slurm/policy"
)

// stubShuffler is a Shuffler that can be told apart from nil.
type stubShuffler struct{}

func (stubShuffler) Shuffle(int, func(i, j int)) {}

// nameRuleOptions are the options the mechanism used to derive from a
// policy's name before policies declared their traits.
func nameRuleOptions(name string, shuffle Shuffler) Options {
	o := DefaultOptions()
	if strings.HasPrefix(name, "fifo") {
		o.SkipZeroPriority = true
	}
	typeAware := strings.Contains(name, "_perf") || strings.Contains(name, "_packed") ||
		name == "gandiva" || strings.HasPrefix(name, "allox")
	if !typeAware {
		o.Shuffle = shuffle
	}
	return o
}

func TestForPolicyKeepsTheNameRules(t *testing.T) {
	shuffle := stubShuffler{}
	for _, name := range policy.Names() {
		pol, err := policy.New(name, policy.Options{})
		if err != nil {
			t.Fatal(err)
		}
		want := nameRuleOptions(name, shuffle)
		if got := ForTraits(pol.Traits(), shuffle); !reflect.DeepEqual(got, want) {
			t.Errorf("ForTraits(%s) = %+v, the name rules give %+v", name, got, want)
		}
		if got := ForPolicy(name, shuffle); !reflect.DeepEqual(got, want) {
			t.Errorf("ForPolicy(%q) = %+v, the name rules give %+v", name, got, want)
		}
	}
}

func TestForTraits(t *testing.T) {
	shuffle := stubShuffler{}
	cases := []struct {
		name        string
		traits      policy.Traits
		wantShuffle bool
		wantSkip    bool
	}{
		{"agnostic", policy.Traits{}, true, false},
		{"aware", policy.Traits{TypeAware: true}, false, false},
		{"agnostic fifo", policy.Traits{FIFO: true}, true, true},
		{"aware fifo", policy.Traits{TypeAware: true, FIFO: true}, false, true},
		{"packing", policy.Traits{TypeAware: true, Packs: true}, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := ForTraits(c.traits, shuffle)
			if (o.Shuffle != nil) != c.wantShuffle || o.SkipZeroPriority != c.wantSkip {
				t.Errorf("shuffle %v, skip zero priority %v; want %v, %v", o.Shuffle != nil, o.SkipZeroPriority, c.wantShuffle, c.wantSkip)
			}
			// Everything else stays at the defaults.
			o.Shuffle, o.SkipZeroPriority = nil, false
			if !reflect.DeepEqual(o, DefaultOptions()) {
				t.Errorf("options %+v differ from the defaults beyond shuffle and skip", o)
			}
		})
	}
}

func TestForPolicyUnknownNameIsAgnostic(t *testing.T) {
	shuffle := stubShuffler{}
	if o := ForPolicy("no_such_policy", shuffle); o.Shuffle == nil || o.SkipZeroPriority {
		t.Errorf("options %+v, want a shuffled type order and no FIFO rule", o)
	}
}
