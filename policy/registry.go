package policy

import (
	"fmt"
	"sort"
	"strings"
)

// constructors maps Gavel policy names to constructors. Each policy file
// registers its own names in an init function.
var constructors = map[string]func(Options) Policy{}

// register adds a policy constructor under its Gavel name.
func register(name string, build func(Options) Policy) {
	if _, dup := constructors[name]; dup {
		panic("policy: duplicate registration of " + name)
	}
	constructors[name] = build
}

// New returns a fresh instance of the named policy. It refuses a nil
// problem here, so no policy has to check for one.
func New(name string, opts Options) (Policy, error) {
	build, ok := constructors[name]
	if !ok {
		return nil, fmt.Errorf("unknown policy %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	return refusesNil{build(opts)}, nil
}

// refusesNil answers a nil problem with an error before the policy sees it.
type refusesNil struct{ Policy }

func (r refusesNil) Allocate(p *Problem) (*Allocation, error) {
	if p == nil {
		return nil, fmt.Errorf("%s: nil problem", r.Name())
	}
	return r.Policy.Allocate(p)
}

// Names lists the registered policy names in sorted order.
func Names() []string {
	names := make([]string, 0, len(constructors))
	for n := range constructors {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
