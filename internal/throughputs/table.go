// Package throughputs reads the reference throughput table: the measured
// step rates of the reference job types on each GPU type, alone and
// co-located in pairs. The simulator, the estimator and the daemon all look
// rates up through a Table.
package throughputs

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/gavel-slurm/gavel-slurm/etc"
)

// Key identifies a job type: a model configuration at a scale factor
// (number of GPUs). Rates of multi-GPU keys are whole-job rates.
type Key struct {
	Model       string
	ScaleFactor int
}

func (k Key) String() string { return fmt.Sprintf("%s x%d", k.Model, k.ScaleFactor) }

// pairKey identifies the co-location of two models at one scale factor.
type pairKey struct {
	a, b string
	sf   int
}

// Table holds isolated and co-located step rates (steps/s) per GPU type.
// It is immutable after loading and safe for concurrent use.
type Table struct {
	types []string
	// isolated[key][i] is the rate on types[i].
	isolated map[Key][]float64
	// pairs[{a,b,sf}][i] is {rate of a, rate of b} when sharing types[i].
	pairs  map[pairKey][][2]float64
	models []string
}

// jobTypeKey matches the table's job-type keys, Python tuples printed with
// str(): "('ResNet-50 (batch size 64)', 4)".
var jobTypeKey = regexp.MustCompile(`^\('(.*)', (\d+)\)$`)

// parseJobType splits a job-type key into model and scale factor.
func parseJobType(s string) (Key, error) {
	m := jobTypeKey.FindStringSubmatch(s)
	if m == nil {
		return Key{}, fmt.Errorf("job type %q is not of the form ('model', scale_factor)", s)
	}
	sf, err := strconv.Atoi(m[2])
	if err != nil || sf < 1 {
		return Key{}, fmt.Errorf("job type %q: bad scale factor %q", s, m[2])
	}
	return Key{Model: m[1], ScaleFactor: sf}, nil
}

// Reference returns the table embedded in the binary (the one the Gavel
// paper's simulations use). It is parsed once and shared.
func Reference() (*Table, error) { return reference() }

var reference = sync.OnceValues(func() (*Table, error) {
	t, err := Parse(etc.SimulationThroughputs)
	if err != nil {
		return nil, fmt.Errorf("embedded reference throughput table: %w", err)
	}
	return t, nil
})

// Load reads a table from a JSON file in the reference format.
func Load(path string) (*Table, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read throughput table: %w", err)
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("throughput table %s: %w", path, err)
	}
	return t, nil
}

// Parse decodes a table in the reference format:
// {gpu type: {job type: {"null": rate, other job type: [rate, other rate]}}}.
// GPU types whose name contains "_unconsolidated" describe multi-GPU jobs
// spread over servers; placement is always assumed consolidated, so they
// are skipped.
func Parse(data []byte) (*Table, error) {
	var raw map[string]map[string]map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("decode throughput table: %w", err)
	}
	t := &Table{isolated: map[Key][]float64{}, pairs: map[pairKey][][2]float64{}}
	for gpu := range raw {
		if !strings.Contains(gpu, "_unconsolidated") {
			t.types = append(t.types, gpu)
		}
	}
	if len(t.types) == 0 {
		return nil, fmt.Errorf("throughput table has no GPU types")
	}
	sort.Strings(t.types)
	models := map[string]bool{}
	for ti, gpu := range t.types {
		for jobType, entries := range raw[gpu] {
			key, err := parseJobType(jobType)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", gpu, err)
			}
			models[key.Model] = true
			for other, value := range entries {
				if other == "null" {
					var rate float64
					if err := json.Unmarshal(value, &rate); err != nil {
						return nil, fmt.Errorf("%s %s: isolated rate: %w", gpu, jobType, err)
					}
					if rate < 0 {
						return nil, fmt.Errorf("%s %s: negative rate %v", gpu, jobType, rate)
					}
					row := t.isolated[key]
					if row == nil {
						row = make([]float64, len(t.types))
						t.isolated[key] = row
					}
					row[ti] = rate
					continue
				}
				otherKey, err := parseJobType(other)
				if err != nil {
					return nil, fmt.Errorf("%s %s: %w", gpu, jobType, err)
				}
				var rates [2]float64
				if err := json.Unmarshal(value, &rates); err != nil {
					return nil, fmt.Errorf("%s %s with %s: pair rates: %w", gpu, jobType, other, err)
				}
				if otherKey.ScaleFactor != key.ScaleFactor {
					// Co-location is only defined between equal scale factors.
					continue
				}
				pk := pairKey{key.Model, otherKey.Model, key.ScaleFactor}
				row := t.pairs[pk]
				if row == nil {
					row = make([][2]float64, len(t.types))
					t.pairs[pk] = row
				}
				row[ti] = rates
			}
		}
	}
	for m := range models {
		t.models = append(t.models, m)
	}
	sort.Strings(t.models)
	return t, nil
}

// Types lists the GPU types in sorted order (k80, p100, v100 for the
// reference table).
func (t *Table) Types() []string { return append([]string(nil), t.types...) }

// Models lists the model names in sorted order.
func (t *Table) Models() []string { return append([]string(nil), t.models...) }

// typeIndex returns the position of gpu in Types, or -1.
func (t *Table) typeIndex(gpu string) int {
	for i, g := range t.types {
		if g == gpu {
			return i
		}
	}
	return -1
}

// Has reports whether the table has isolated rates for model at scale
// factor sf.
func (t *Table) Has(model string, sf int) bool {
	_, ok := t.isolated[Key{model, sf}]
	return ok
}

// Isolated is the whole-job step rate of model at scale factor sf running
// alone on GPU type gpu; 0 when unknown or when the job cannot run there.
func (t *Table) Isolated(model string, sf int, gpu string) float64 {
	row, ok := t.isolated[Key{model, sf}]
	i := t.typeIndex(gpu)
	if !ok || i < 0 {
		return 0
	}
	return row[i]
}

// IsolatedRates returns the rates of model at sf on every type, indexed like
// Types, or false when the table does not know the job type.
func (t *Table) IsolatedRates(model string, sf int) ([]float64, bool) {
	row, ok := t.isolated[Key{model, sf}]
	if !ok {
		return nil, false
	}
	return append([]float64(nil), row...), true
}

// Pair returns the step rates of modelA and modelB (both at scale factor sf)
// while they share GPUs of type gpu. ok is false when the table has no
// entry; rates of {0, 0} mean the two cannot be co-located.
func (t *Table) Pair(modelA, modelB string, sf int, gpu string) (a, b float64, ok bool) {
	row, found := t.pairs[pairKey{modelA, modelB, sf}]
	i := t.typeIndex(gpu)
	if !found || i < 0 {
		return 0, 0, false
	}
	return row[i][0], row[i][1], true
}

// Template is one of the reference job configurations the workload
// generator draws from.
type Template struct {
	Model string
	// Distributed templates may run with a scale factor above 1.
	Distributed bool
}

// Templates are the 26 reference job configurations in the order the
// reference generator draws from; the order is part of the random stream,
// so it must not change.
var Templates = func() []Template {
	var out []Template
	add := func(family string, batches []int, distributed bool) {
		for _, b := range batches {
			out = append(out, Template{fmt.Sprintf("%s (batch size %d)", family, b), distributed})
		}
	}
	add("ResNet-18", []int{16, 32, 64, 128, 256}, true)
	add("ResNet-50", []int{16, 32, 64, 128}, true)
	add("Transformer", []int{16, 32, 64, 128, 256}, true)
	add("LM", []int{5, 10, 20, 40, 80}, true)
	add("Recommendation", []int{512, 1024, 2048, 4096, 8192}, false)
	out = append(out, Template{"A3C", false}, Template{"CycleGAN", false})
	return out
}()

// New builds a table of isolated rates only (no co-location entries) for
// the given GPU types, e.g. rates made up for a replay of jobs that are not
// in any measured table. Each row holds one rate per type, indexed like
// types; a 0 rate means the job cannot run on that type.
func New(types []string, isolated map[Key][]float64) (*Table, error) {
	if len(types) == 0 {
		return nil, fmt.Errorf("throughput table has no GPU types")
	}
	t := &Table{types: append([]string(nil), types...), isolated: make(map[Key][]float64, len(isolated)), pairs: map[pairKey][][2]float64{}}
	sort.Strings(t.types)
	order := make([]int, len(types)) // order[i]: position in the caller's types of t.types[i]
	for i, typ := range t.types {
		order[i] = slices.Index(types, typ)
		if i > 0 && typ == t.types[i-1] {
			return nil, fmt.Errorf("GPU type %s given twice", typ)
		}
	}
	models := map[string]bool{}
	for key, row := range isolated {
		if len(row) != len(types) {
			return nil, fmt.Errorf("%s: %d rates for %d GPU types", key, len(row), len(types))
		}
		if key.ScaleFactor < 1 {
			return nil, fmt.Errorf("%s: scale factor must be at least 1", key)
		}
		sorted := make([]float64, len(row))
		for i := range sorted {
			r := row[order[i]]
			if !(r >= 0) || math.IsInf(r, 0) {
				return nil, fmt.Errorf("%s on %s: rate %v, must be a finite number >= 0", key, t.types[i], r)
			}
			sorted[i] = r
		}
		t.isolated[key] = sorted
		models[key.Model] = true
	}
	for m := range models {
		t.models = append(t.models, m)
	}
	sort.Strings(t.models)
	return t, nil
}
