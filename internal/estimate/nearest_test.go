package estimate

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/internal/throughputs"
)

// A job the table does not know is matched to the reference model it
// computes like: by shape when measured on several types, by its rate
// within its family when measured on one, not at all when unmeasured.
func TestNearestReferenceModel(t *testing.T) {
	table, err := throughputs.Reference()
	if err != nil {
		t.Fatal(err)
	}
	rate := func(model, typ string) float64 {
		a, ok := table.IsolatedRates(model, 1)
		if !ok {
			t.Fatalf("no table entry for %s", model)
		}
		return a[slicesIndex(table.Types(), typ)]
	}
	const lm = "LM (batch size 20)"
	const a3c = "A3C"
	tests := []struct {
		name     string
		model    string
		measured map[string]float64
		want     string // "" for no answer
		basis    string
	}{
		{"known tag", "a3c", nil, a3c, "its tag"},
		{"unmeasured unknown", "my-net", nil, "", ""},
		// An LM's shape across the three types, at its own scale (a
		// site's copy runs 30% faster everywhere).
		{"shape on three types", "my-net", map[string]float64{
			"v100": 1.3 * rate(lm, "v100"), "p100": 1.3 * rate(lm, "p100"), "k80": 1.3 * rate(lm, "k80")}, "", "rates on k80, p100, v100"},
		// One type, a family the table has: the family member nearest in
		// rate.
		{"one type within the family", "lm-bs33", map[string]float64{"v100": rate(lm, "v100")}, lm, "within its family"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := New(table, Options{})
			if err != nil {
				t.Fatal(err)
			}
			for typ, r := range tc.measured {
				for i := range 4 {
					if err := e.Observe(obs("9", tc.model, 1, typ, r, time.Duration(i)*time.Minute)); err != nil {
						t.Fatal(err)
					}
				}
			}
			got, detail, ok := e.Nearest(JobKey{ID: "9", Model: tc.model, Scale: 1})
			t.Logf("%s: %q (%s)", tc.name, got, detail)
			switch {
			case tc.measured == nil && tc.want == "":
				if ok {
					t.Fatalf("an unmeasured unknown model got %q", got)
				}
				return
			case !ok:
				t.Fatal("no nearest model")
			case tc.want != "" && got != tc.want:
				t.Fatalf("nearest %q, want %q", got, tc.want)
			case !strings.Contains(detail, tc.basis):
				t.Fatalf("detail %q, want it to say %q", detail, tc.basis)
			}
			if tc.name == "shape on three types" {
				// Whatever row won fits the shape as well as the LM's.
				want := fitOf(t, table, lm, tc.measured)
				if g := fitOf(t, table, got, tc.measured); g > want+1e-9 {
					t.Fatalf("%s fits the shape with error %g, worse than the LM's %g", got, g, want)
				}
			}
		})
	}
}

func slicesIndex(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

// fitOf is the shape error of model's table rates against measured, as
// the fingerprint scores it, without penalties.
func fitOf(t *testing.T, table *throughputs.Table, model string, measured map[string]float64) float64 {
	t.Helper()
	rates, _ := table.IsolatedRates(model, 1)
	var cand, known []float64
	for i, typ := range table.Types() {
		cand = append(cand, logOrNaN(rates[i]))
		known = append(known, logOrNaN(measured[typ]))
	}
	_, err, _ := fit(cand, known, -1)
	return err
}

func logOrNaN(x float64) float64 {
	if x > 0 {
		return math.Log(x)
	}
	return math.NaN()
}
