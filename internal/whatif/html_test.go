package whatif

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/internal/browsertest"
	"github.com/gavel-slurm/gavel-slurm/internal/history"
	"github.com/gavel-slurm/gavel-slurm/internal/sim"
	"github.com/gavel-slurm/gavel-slurm/rounds"
)

// smallReport replays eight jobs of two accounts on two types under one
// policy and two seeds.
func smallReport(t *testing.T) *Report {
	t.Helper()
	cluster := Cluster{GPUs: map[string]int{"v100": 2, "k80": 2}, PerServer: map[string]int{"v100": 2, "k80": 2}}
	var jobs []history.Job
	for i := 1; i <= 8; i++ {
		account, typ := "physics", "k80"
		if i%2 == 0 {
			account, typ = "biology", "v100"
		}
		jobs = append(jobs, hjob(i, account, typ, 1+i%2, float64(60*i), float64(300*i), float64(300*i+1200+100*i)))
	}
	jobs = append(jobs, history.Job{ID: "99"})
	w, err := Build(&history.History{Jobs: jobs[:8], Skipped: []history.Skip{{ID: "99", Reason: history.ReasonNoGPUs}}}, cluster,
		Sources{Speed: map[string]float64{"v100": 2.5, "k80": 1}}, Options{Typed: TypedFree})
	if err != nil {
		t.Fatal(err)
	}
	base, err := sim.Defaults()
	if err != nil {
		t.Fatal(err)
	}
	base.RoundSeconds, base.MinResetInterval, base.Mechanism = 120, 0, rounds.VariantRestart
	r, err := Run(w, Settings{Policies: []string{"max_min_fairness_perf"}, Seeds: []int64{0, 1}, Sim: base, Workers: 4}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The page loads in a real browser without script errors, every chart
// has data, and the tables carry the report's figures.
func TestHTMLReportLoadsInABrowserWithDataInEveryChart(t *testing.T) {
	browsertest.Require(t)
	r := smallReport(t)
	path := filepath.Join(t.TempDir(), "report.html")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.WriteHTML(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dom, consoleErrors, err := browsertest.Load(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if len(consoleErrors) > 0 {
		t.Errorf("console errors: %v", consoleErrors)
	}
	if !strings.Contains(dom, `data-charts="ok"`) {
		t.Errorf("the page's own check did not pass: %s", regexp.MustCompile(`<body[^>]*>`).FindString(dom))
	}
	// A JCT CDF, a share chart, and use over time for the history, the
	// Slurm replay and the policy's first seed.
	points := regexp.MustCompile(`<svg[^>]*data-points="(\d+)"`).FindAllStringSubmatch(dom, -1)
	if len(points) != 5 {
		t.Fatalf("%d charts in the page, want 5", len(points))
	}
	for k, m := range points {
		if n, _ := strconv.Atoi(m[1]); n == 0 {
			t.Errorf("chart %d has no data", k)
		}
	}
	for _, want := range []string{"slurm replay", "max_min_fairness_perf seed 1", "biology", "physics", history.ReasonNoGPUs, Hours(r.Slurm.AvgJCT)} {
		if !strings.Contains(dom, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}
