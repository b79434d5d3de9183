package estimate

import (
	"fmt"
	"math"
	"regexp"
	"strings"

	"github.com/gavel-slurm/gavel-slurm/bridge"
	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
)

// refRow is one job type of the reference table.
type refRow struct {
	key throughputs.Key
	// rates on the table's types, in order; 0 where the job type cannot
	// run (the table's way of saying it does not fit in memory).
	rates []float64
}

// reference is the part of the throughput table the estimator uses: the
// isolated rates of every job type. It is built once and never changed.
type reference struct {
	types  []string
	models []string
	rows   []refRow
	byKey  map[throughputs.Key]int
	isType map[string]bool
}

// newReference reads every job type of the table.
func newReference(t *throughputs.Table) (reference, error) {
	if t == nil {
		return reference{}, fmt.Errorf("estimator needs a throughput table")
	}
	var rows []refRow
	for _, m := range t.Models() {
		// Scale factors in the table are small powers of two; asking each
		// plausible one keeps this on the table's public API.
		for sf := 1; sf <= maxTableScale; sf++ {
			if r, ok := t.IsolatedRates(m, sf); ok {
				rows = append(rows, refRow{throughputs.Key{Model: m, ScaleFactor: sf}, r})
			}
		}
	}
	return buildReference(t.Types(), rows)
}

// maxTableScale bounds the scale factors looked up in a table.
const maxTableScale = 64

// buildReference indexes rows over types; rows must be indexed like types.
func buildReference(types []string, rows []refRow) (reference, error) {
	ref := reference{
		types:  append([]string(nil), types...),
		rows:   rows,
		byKey:  make(map[throughputs.Key]int, len(rows)),
		isType: make(map[string]bool, len(types)),
	}
	for _, t := range types {
		ref.isType[t] = true
	}
	seen := map[string]bool{}
	for i, r := range rows {
		if len(r.rates) != len(types) {
			return reference{}, fmt.Errorf("reference %s: %d rates for %d types", r.key, len(r.rates), len(types))
		}
		for _, x := range r.rates {
			if x < 0 || math.IsNaN(x) || math.IsInf(x, 0) {
				return reference{}, fmt.Errorf("reference %s: bad rate %v", r.key, x)
			}
		}
		ref.byKey[r.key] = i
		if !seen[r.key.Model] {
			seen[r.key.Model] = true
			ref.models = append(ref.models, r.key.Model)
		}
	}
	return ref, nil
}

// resolve matches a tagged model name against the table like the rest of
// the daemon does (exact name, then alias), and returns the table name
// and the row at scale, or -1 when the table has no entry there.
func (r *reference) resolve(model string, scale int) (name string, row int) {
	name, ok := bridge.ResolveModel(model, r.models)
	if !ok {
		return "", -1
	}
	if i, ok := r.byKey[throughputs.Key{Model: name, ScaleFactor: scale}]; ok {
		return name, i
	}
	return name, -1
}

// rate is row i's rate on type t, 0 when unknown.
func (r *reference) rate(i int, t string) float64 {
	for k, x := range r.types {
		if x == t {
			return r.rows[i].rates[k]
		}
	}
	return 0
}

// batchSize matches the batch size part of reference model names.
var batchSize = regexp.MustCompile(`(?i)\(\s*batch\s+size\s+\d+\s*\)|[-_ ]?bs\d+$`)

// family reduces a model name to its architecture, the name without its
// batch size, in the alias form the tag matching uses: "ResNet-50 (batch
// size 64)" and "resnet50-bs128" are both "resnet50". Models of a family
// gain alike from faster types, so the family is a prior for a job whose
// exact configuration the table lacks. "" for no model.
func family(model string) string {
	return bridge.ModelKey(batchSize.ReplaceAllString(strings.TrimSpace(model), ""))
}

// identity names a model for grouping jobs: the table's name when the tag
// matches one, else its alias form, so that "resnet50-bs48" and
// "ResNet50_BS48" group together. An untagged job has its own identity
// (none), since untagged jobs can run anything.
func (r *reference) identity(model string) string {
	if name, ok := bridge.ResolveModel(model, r.models); ok {
		return "table:" + name
	}
	if key := bridge.ModelKey(model); key != "" {
		return "alias:" + key
	}
	return "none"
}
