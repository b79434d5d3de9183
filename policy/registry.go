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

// New returns a fresh instance of the named policy.
func New(name string, opts Options) (Policy, error) {
	build, ok := constructors[name]
	if !ok {
		return nil, fmt.Errorf("unknown policy %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	return build(opts), nil
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
