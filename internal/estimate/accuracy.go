package estimate

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
)

// Methods compared by Accuracy.
const (
	// MethodEstimator is this package: measurements on the revealed
	// types, Rates on the hidden ones.
	MethodEstimator = "estimator"
	// MethodColumnMean predicts a type as the mean of the table's column,
	// scaled by how the job compares with the column means on its
	// revealed types (geometric mean of the ratios).
	MethodColumnMean = "column mean, scaled"
	// MethodWrongTag takes another model's table row at the same GPU
	// count as it stands, as if the job's tag named the wrong model; the
	// error is averaged over every other model.
	MethodWrongTag = "another model's row"
	// MethodWrongTagScaled is the same, with the row scaled to the job's
	// revealed rates.
	MethodWrongTagScaled = "another model's row, scaled"
)

// Hidden parts of the table in Accuracy.
const (
	// HideJobType hides the job type (model at one GPU count); the same
	// model at other GPU counts stays in the table.
	HideJobType = "job type"
	// HideModel hides the model at every GPU count: a configuration the
	// table has never seen, of an architecture it knows at other batch
	// sizes.
	HideModel = "model"
	// HideFamily hides every batch size of the architecture at every GPU
	// count: an architecture the table has never seen.
	HideFamily = "family"
)

// AccuracyRow is the error of one method in one setting.
type AccuracyRow struct {
	Hidden string
	// Revealed is how many of the job's types were measured.
	Revealed int
	// Scale is the GPU count of the hidden job types, 0 for all of them.
	Scale  int
	Method string
	// Cells is how many hidden (job type, GPU type) rates were predicted.
	Cells int
	// Median and P90 are the median and 90th percentile of the relative
	// error |predicted - true| / true.
	Median, P90 float64
}

// Accuracy measures the estimator by leave-one-out over the table: each
// job type in turn is hidden (alone, with its model at every GPU count,
// or with every model of its family), some of its rates are fed in as measurements, and the others
// are predicted and compared with the table. Every non-empty proper
// subset of the job type's types with positive rates is revealed in turn;
// rows are reported for 1 and 2 revealed types and for all but one, over
// every GPU count (Scale 0) and for each.
func Accuracy(table *throughputs.Table, opts Options) ([]AccuracyRow, error) {
	ref, err := newReference(table)
	if err != nil {
		return nil, err
	}
	var out []AccuracyRow
	for _, hide := range []string{HideJobType, HideModel, HideFamily} {
		errs := map[errKey][]float64{}
		for h := range ref.rows {
			if err := accuracyOf(ref, h, hide, opts, errs); err != nil {
				return nil, err
			}
		}
		out = append(out, summarize(hide, errs)...)
	}
	return out, nil
}

// accuracyOf runs every reveal of job type h, adding the relative errors
// per revealed count and method to errs.
func accuracyOf(ref reference, h int, hide string, opts Options, errs map[errKey][]float64) error {
	target := ref.rows[h]
	var kept []refRow
	for i, r := range ref.rows {
		hidden := i == h ||
			hide == HideModel && r.key.Model == target.key.Model ||
			hide == HideFamily && family(r.key.Model) == family(target.key.Model)
		if !hidden {
			kept = append(kept, r)
		}
	}
	reduced, err := buildReference(ref.types, kept)
	if err != nil {
		return err
	}
	est, err := newEstimator(reduced, opts)
	if err != nil {
		return err
	}
	var positive []int
	for k, x := range target.rates {
		if x > 0 {
			positive = append(positive, k)
		}
	}
	for _, shown := range subsets(len(positive)) {
		revealed := pick(positive, shown)
		if !reportedCount(len(revealed), len(positive)) {
			continue
		}
		got, err := reveal(est, target, revealed)
		if err != nil {
			return err
		}
		for _, k := range positive {
			if slices.Contains(revealed, k) {
				continue
			}
			add := func(method string, e float64) {
				if !math.IsNaN(e) {
					for _, sf := range []int{0, target.key.ScaleFactor} {
						key := errKey{len(revealed), sf, method}
						errs[key] = append(errs[key], e)
					}
				}
			}
			add(MethodEstimator, relErr(got[ref.types[k]].StepsPerSecond, target.rates[k]))
			add(MethodColumnMean, relErr(columnMean(kept, revealed, target, k), target.rates[k]))
			wrong, scaled := wrongTag(kept, revealed, target, k)
			add(MethodWrongTag, wrong)
			add(MethodWrongTagScaled, scaled)
		}
	}
	return nil
}

// reportedCount says whether k revealed types out of n are reported: 1,
// 2 and all but one.
func reportedCount(k, n int) bool {
	return k <= 2 || k == n-1
}

// reveal feeds target's rates on the revealed types to est as one job's
// measurements, asks for every type, then forgets the job.
func reveal(est *Estimator, target refRow, revealed []int) (map[string]Estimate, error) {
	const id = "probe"
	at := time.Unix(1e9, 0)
	for _, k := range revealed {
		m := Measurement{
			JobID: id, Model: target.key.Model, Scale: target.key.ScaleFactor, Type: est.ref.types[k],
			StepsPerSecond: target.rates[k], At: at, SinceStart: time.Hour,
		}
		if err := est.Observe(m); err != nil {
			return nil, fmt.Errorf("reveal %s: %w", target.key, err)
		}
	}
	got := est.Rates(JobKey{ID: id, Model: target.key.Model, Scale: target.key.ScaleFactor}, est.ref.types, at)
	est.Forget(id)
	return got, nil
}

// columnMean is the column-mean baseline for type k: the mean rate of the
// rows on k, times the geometric mean over revealed types of the job's
// rate divided by that type's mean.
func columnMean(rows []refRow, revealed []int, target refRow, k int) float64 {
	logRatio := 0.0
	for _, s := range revealed {
		logRatio += math.Log(target.rates[s] / meanRate(rows, s))
	}
	return meanRate(rows, k) * math.Exp(logRatio/float64(len(revealed)))
}

// meanRate is the mean positive rate of rows on type k.
func meanRate(rows []refRow, k int) float64 {
	sum, n := 0.0, 0
	for _, r := range rows {
		if r.rates[k] > 0 {
			sum += r.rates[k]
			n++
		}
	}
	return sum / float64(n)
}

// wrongTag is the mean relative error on type k of taking each other
// model's row at the target's GPU count, as it stands and scaled to the
// revealed rates.
func wrongTag(rows []refRow, revealed []int, target refRow, k int) (raw, scaled float64) {
	n := 0
	for _, r := range rows {
		if r.key.ScaleFactor != target.key.ScaleFactor || r.key.Model == target.key.Model || r.rates[k] <= 0 {
			continue
		}
		shift, ok := logShift(r, revealed, target)
		if !ok {
			continue
		}
		raw += relErr(r.rates[k], target.rates[k])
		scaled += relErr(r.rates[k]*math.Exp(shift), target.rates[k])
		n++
	}
	if n == 0 {
		return math.NaN(), math.NaN()
	}
	return raw / float64(n), scaled / float64(n)
}

// logShift is the mean log ratio of target to r over the revealed types.
func logShift(r refRow, revealed []int, target refRow) (float64, bool) {
	sum := 0.0
	for _, s := range revealed {
		if r.rates[s] <= 0 {
			return 0, false
		}
		sum += math.Log(target.rates[s] / r.rates[s])
	}
	return sum / float64(len(revealed)), true
}

func relErr(pred, truth float64) float64 { return math.Abs(pred-truth) / truth }

// subsets lists the non-empty proper subsets of n items as bit masks.
func subsets(n int) []uint {
	var out []uint
	for m := uint(1); m < 1<<n-1; m++ {
		out = append(out, m)
	}
	return out
}

// pick returns the items of xs selected by mask.
func pick(xs []int, mask uint) []int {
	var out []int
	for i, x := range xs {
		if mask&(1<<i) != 0 {
			out = append(out, x)
		}
	}
	return out
}

// errKey groups errors by revealed count, GPU count (0 for all) and
// method.
type errKey struct {
	revealed, scale int
	method          string
}

// summarize turns the errors into rows, by GPU count, revealed count and
// method.
func summarize(hide string, errs map[errKey][]float64) []AccuracyRow {
	keys := slices.Collect(maps.Keys(errs))
	order := map[string]int{MethodEstimator: 0, MethodColumnMean: 1, MethodWrongTag: 2, MethodWrongTagScaled: 3}
	slices.SortFunc(keys, func(a, b errKey) int {
		return cmp.Or(cmp.Compare(a.scale, b.scale), cmp.Compare(a.revealed, b.revealed), cmp.Compare(order[a.method], order[b.method]))
	})
	out := make([]AccuracyRow, 0, len(keys))
	for _, k := range keys {
		e := errs[k]
		slices.Sort(e)
		out = append(out, AccuracyRow{Hidden: hide, Revealed: k.revealed, Scale: k.scale, Method: k.method, Cells: len(e), Median: quantile(e, 0.5), P90: quantile(e, 0.9)})
	}
	return out
}

// quantile of sorted xs by the nearest-rank rule.
func quantile(sorted []float64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}

// FormatAccuracy writes the rows over every GPU count as a Markdown
// table.
func FormatAccuracy(rows []AccuracyRow) string {
	var b strings.Builder
	b.WriteString("| hidden | revealed types | method | cells | median error | p90 error |\n")
	b.WriteString("|---|---:|---|---:|---:|---:|\n")
	for _, r := range rows {
		if r.Scale == 0 {
			fmt.Fprintf(&b, "| %s | %d | %s | %d | %.1f%% | %.1f%% |\n", r.Hidden, r.Revealed, r.Method, r.Cells, 100*r.Median, 100*r.P90)
		}
	}
	return b.String()
}

// FormatAccuracyByScale writes the estimator's and the scaled column
// mean's errors per GPU count as a Markdown table.
func FormatAccuracyByScale(rows []AccuracyRow) string {
	type key struct {
		hidden          string
		revealed, scale int
	}
	by := map[key]map[string]AccuracyRow{}
	var keys []key
	for _, r := range rows {
		k := key{r.Hidden, r.Revealed, r.Scale}
		if r.Scale == 0 {
			continue
		}
		if by[k] == nil {
			by[k] = map[string]AccuracyRow{}
			keys = append(keys, k)
		}
		by[k][r.Method] = r
	}
	var b strings.Builder
	b.WriteString("| hidden | GPUs | revealed types | cells | estimator median | estimator p90 | column mean median | column mean p90 |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, k := range keys {
		est, col := by[k][MethodEstimator], by[k][MethodColumnMean]
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %.1f%% | %.1f%% | %.1f%% | %.1f%% |\n",
			k.hidden, k.scale, k.revealed, est.Cells, 100*est.Median, 100*est.P90, 100*col.Median, 100*col.P90)
	}
	return b.String()
}
