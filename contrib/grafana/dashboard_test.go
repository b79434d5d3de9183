// Package grafana checks contrib/grafana/gavel-slurm.json, the Grafana
// dashboard for the daemon's /metrics: it must load, and every PromQL query
// in it must name only metrics and labels the daemon exports, so that a
// renamed metric breaks this test instead of leaving an empty panel.
package grafana

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const (
	dashboardFile = "gavel-slurm.json"
	// The daemon's own series are all created here.
	metricsFile = "../../internal/api/metrics.go"
	// And here the daemon registers the Go and process collectors.
	daemonFile = "../../cmd/gavel-slurm/daemon.go"
)

// Labels Prometheus adds to every series it scrapes.
var targetLabels = []string{"instance", "job"}

// Series of client_golang's standard collectors that the dashboard may
// use, by the constructor daemon.go must call for them to exist.
var standardSeries = map[string][]string{
	"collectors.NewProcessCollector": {"process_cpu_seconds_total", "process_resident_memory_bytes"},
	"collectors.NewGoCollector":      {"go_goroutines"},
}

// Metrics the dashboard need not show. Add a new metric here only when a
// panel for it would not help an operator.
var notOnDashboard = []string{"go_goroutines"}

// exported maps each series name the daemon exports to its labels.
type exported map[string][]string

// daemonMetrics reads the metric names and labels from metrics.go: every
// prometheus.NewX(prometheus.XOpts{Name: "..."}, []string{labels...}).
func daemonMetrics(t *testing.T) exported {
	t.Helper()
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, metricsFile, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	m := exported{}
	ast.Inspect(file, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || !strings.HasPrefix(sel.Sel.Name, "New") {
			return true
		}
		if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "prometheus" {
			return true
		}
		opts, ok := call.Args[0].(*ast.CompositeLit)
		if !ok {
			return true
		}
		name := ""
		for _, e := range opts.Elts {
			if kv, ok := e.(*ast.KeyValueExpr); ok {
				if key, ok := kv.Key.(*ast.Ident); ok && key.Name == "Name" {
					if lit, ok := kv.Value.(*ast.BasicLit); ok {
						name, _ = strconv.Unquote(lit.Value)
					}
				}
			}
		}
		if name == "" {
			t.Errorf("%s: %s without a literal Name: this test cannot see it", fset.Position(call.Pos()), sel.Sel.Name)
			return true
		}
		var labels []string
		if len(call.Args) > 1 {
			if list, ok := call.Args[1].(*ast.CompositeLit); ok {
				for _, e := range list.Elts {
					if lit, ok := e.(*ast.BasicLit); ok {
						s, _ := strconv.Unquote(lit.Value)
						labels = append(labels, s)
					}
				}
			}
		}
		switch {
		case strings.HasPrefix(sel.Sel.Name, "NewHistogram"):
			m[name+"_bucket"] = append(slices.Clone(labels), "le")
			m[name+"_sum"], m[name+"_count"] = labels, labels
		case strings.HasPrefix(sel.Sel.Name, "NewSummary"):
			m[name] = append(slices.Clone(labels), "quantile")
			m[name+"_sum"], m[name+"_count"] = labels, labels
		default:
			m[name] = labels
		}
		return true
	})
	if len(m) < 10 {
		t.Fatalf("found only %d metrics in %s: has it moved?", len(m), metricsFile)
	}
	daemon, err := os.ReadFile(daemonFile)
	if err != nil {
		t.Fatal(err)
	}
	for constructor, names := range standardSeries {
		if strings.Contains(string(daemon), constructor+"(") {
			for _, n := range names {
				m[n] = nil
			}
		}
	}
	return m
}

// dashboard is the part of Grafana's model this test reads.
type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ X, Y, W, H int } `json:"gridPos"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// queries returns every PromQL query of the dashboard with where it is.
func (d dashboard) queries(t *testing.T) map[string]string {
	out := map[string]string{}
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				out[p.Title+" "+tg.RefID] = tg.Expr
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Errorf("variable %s: query: %v", v.Name, err)
		}
		out["variable "+v.Name] = q.Query
	}
	return out
}

func TestDashboardLoads(t *testing.T) {
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" || d.SchemaVersion == 0 {
		t.Errorf("uid %q, title %q, schemaVersion %d: Grafana needs all three", d.UID, d.Title, d.SchemaVersion)
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	if !vars["datasource"] {
		t.Error("no datasource variable: the dashboard would be tied to one Prometheus")
	}
	ids := map[int]string{}
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if other, ok := ids[p.ID]; ok {
				t.Errorf("panels %q and %q share id %d", other, p.Title, p.ID)
			}
			ids[p.ID] = p.Title
			if p.Title == "" {
				t.Errorf("panel %d has no title", p.ID)
			}
			if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
				t.Errorf("panel %q: gridPos %+v does not fit the 24-column grid", p.Title, p.GridPos)
			}
			if p.Type != "row" && (p.Datasource == nil || p.Datasource.UID != "${datasource}") {
				t.Errorf("panel %q: datasource must be the ${datasource} variable", p.Title)
			}
			refs := map[string]bool{}
			for _, tg := range p.Targets {
				if refs[tg.RefID] || tg.RefID == "" || strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("panel %q: target %q is empty or its refId is repeated", p.Title, tg.RefID)
				}
				refs[tg.RefID] = true
			}
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
}

func TestDashboardNamesExportedMetrics(t *testing.T) {
	metrics := daemonMetrics(t)
	d := loadDashboard(t)
	used := map[string]bool{}
	for where, expr := range d.queries(t) {
		refs, err := scanPromQL(expr)
		if err != nil {
			t.Errorf("%s: %v\n%s", where, err, expr)
			continue
		}
		if len(refs.metrics) == 0 {
			t.Errorf("%s: names no metric: %s", where, expr)
		}
		for _, s := range refs.selectors {
			labels, ok := metrics[s.metric]
			if !ok {
				t.Errorf("%s: %s is not a metric the daemon exports", where, s.metric)
				continue
			}
			used[s.metric] = true
			for _, l := range s.labels {
				if !slices.Contains(labels, l) && !slices.Contains(targetLabels, l) {
					t.Errorf("%s: %s has no label %q (it has %v)", where, s.metric, l, labels)
				}
			}
		}
		// by (...) and the like may name the labels of any metric of the
		// query.
		var known []string
		for _, m := range refs.metrics {
			known = append(known, metrics[m]...)
		}
		for _, l := range refs.grouping {
			if !slices.Contains(known, l) && !slices.Contains(targetLabels, l) {
				t.Errorf("%s: groups by %q, a label none of %v has", where, l, refs.metrics)
			}
		}
	}
	// A metric the daemon exports but no panel shows is most likely one
	// added since the dashboard was made.
	for name := range metrics {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
		if used[name] || used[base+"_bucket"] || used[base+"_sum"] || used[base+"_count"] || slices.Contains(notOnDashboard, name) {
			continue
		}
		t.Errorf("the daemon exports %s but no panel shows it: add one, or list it in notOnDashboard", name)
	}
}
