package workload

import (
	"fmt"
	"strings"

	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
)

// ReferenceType is the GPU type generated work is measured on: a job that
// runs D seconds alone on it at scale factor s has D times its rate at s
// steps.
const ReferenceType = "v100"

// ScaleFactors are the scale factors generated jobs run at, and
// PhillyScaleWeights their frequencies in the Philly trace, which the
// reference simulator draws from (70% on 1 GPU, 10% on 2, 15% on 4, 5%
// on 8).
var (
	ScaleFactors       = [4]int{1, 2, 4, 8}
	PhillyScaleWeights = [4]float64{70, 10, 15, 5}
)

// ReferenceRate is model's rate at scale factor scale on the reference
// type, or an error when the table has none.
func ReferenceRate(table *throughputs.Table, model string, scale int) (float64, error) {
	rate := table.Isolated(model, scale, ReferenceType)
	if rate <= 0 {
		return 0, fmt.Errorf("throughput table has no %s rate for %s at scale factor %d", ReferenceType, model, scale)
	}
	return rate, nil
}

// ModelsAt lists, in table order, the table's models of family (the
// family's name alone, or followed by a parenthesized variant such as a
// batch size) that have a reference rate at scale factor scale.
func ModelsAt(table *throughputs.Table, family string, scale int) []string {
	var out []string
	for _, m := range table.Models() {
		if (m == family || strings.HasPrefix(m, family+" (")) && table.Isolated(m, scale, ReferenceType) > 0 {
			out = append(out, m)
		}
	}
	return out
}
