package estimate

import (
	"math"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/policy"
)

// A job tagged with a table model, measured on v100 at 100x the table's
// figure (its steps are smaller than the reference's). Its other table
// types are the tagged row scaled to the measurement (k80 = 100 x 0.619),
// and so is a type the table lacks (h100, no job measured there yet): as
// slow as its slowest type in the job's own units, not the table's.
func TestNewTypeFallbackFollowsMeasuredScale(t *testing.T) {
	const rn50 = "ResNet-50 (batch size 64)" // x1: k80 0.619, p100 2.619, v100 4.395
	e := newTestEstimator(t)
	if err := e.Observe(obs("1", rn50, 1, "v100", 100*4.394774823323071, 0)); err != nil {
		t.Fatal(err)
	}
	got := e.Rates(JobKey{"1", rn50, 1}, []string{"k80", "p100", "v100", "h100"}, t0.Add(time.Minute))
	for _, typ := range []string{"k80", "p100", "v100", "h100"} {
		t.Logf("%s: %.4g %s (%s)", typ, got[typ].StepsPerSecond, got[typ].Source, got[typ].Detail)
	}
	if got["h100"].StepsPerSecond < got["k80"].StepsPerSecond*0.999 {
		t.Errorf("h100 %.4g steps/s is below the job's slowest type (k80 %.4g): the fallback mixes table units with measured ones",
			got["h100"].StepsPerSecond, got["k80"].StepsPerSecond)
	}
}

// Rates the report format accepts (steps_per_s in [0, 1e9], finite) and
// Observe accepts (> 0) can make the speed ratio of a type outside the
// table overflow: job a says h100 is e^711 times v100. Job b's h100
// estimate is still a throughput the policies take (an infinite one would
// keep the job out of scheduling).
func TestExtremeRatesGiveUsableEstimates(t *testing.T) {
	e := newTestEstimator(t)
	for _, m := range []Measurement{
		obs("a", "", 1, "v100", 1e-300, 0), obs("a", "", 1, "h100", 1e9, 0),
		obs("b", "mystery", 1, "v100", 10, 0),
	} {
		if err := e.Observe(m); err != nil {
			t.Fatal(err)
		}
	}
	got := e.Rates(JobKey{"b", "mystery", 1}, []string{"v100", "h100"}, t0.Add(time.Minute))["h100"]
	t.Logf("h100: %+v", got)
	if math.IsInf(got.StepsPerSecond, 0) || math.IsNaN(got.StepsPerSecond) || got.StepsPerSecond > policy.MaxThroughput {
		t.Errorf("h100 estimate %v is not a usable throughput", got.StepsPerSecond)
	}
}
