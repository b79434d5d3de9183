package throughputs

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestReferenceIsolated(t *testing.T) {
	table, err := Reference()
	if err != nil {
		t.Fatal(err)
	}
	// Expected values read from etc/gavel-simulation-throughputs.json.
	cases := []struct {
		model string
		sf    int
		gpu   string
		want  float64
	}{
		{"ResNet-18 (batch size 16)", 1, "v100", 32.353384328946916},
		{"ResNet-50 (batch size 64)", 4, "v100", 9.451949566394442},
		{"A3C", 1, "p100", 5.681346110543853},
		{"ResNet-50 (batch size 128)", 2, "k80", 0}, // does not fit
		{"A3C", 2, "v100", 0},                       // not distributed: unknown key
		{"ResNet-18 (batch size 16)", 1, "a100", 0}, // unknown type
	}
	for _, c := range cases {
		if got := table.Isolated(c.model, c.sf, c.gpu); got != c.want {
			t.Errorf("Isolated(%q, %d, %s) = %v, want %v", c.model, c.sf, c.gpu, got, c.want)
		}
	}
}

func TestReferenceShape(t *testing.T) {
	table, err := Reference()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(table.Types(), ","); got != "k80,p100,v100" {
		t.Errorf("Types() = %s, want k80,p100,v100 (unconsolidated tables skipped)", got)
	}
	if n := len(table.Models()); n != 26 {
		t.Errorf("%d models, want 26", n)
	}
	if len(Templates) != 26 {
		t.Fatalf("%d templates, want 26", len(Templates))
	}
	distributed := 0
	for _, tpl := range Templates {
		if !table.Has(tpl.Model, 1) {
			t.Errorf("template %q missing from the table", tpl.Model)
		}
		if tpl.Distributed {
			distributed++
			for _, sf := range []int{2, 4, 8} {
				if !table.Has(tpl.Model, sf) {
					t.Errorf("distributed template %q has no scale factor %d", tpl.Model, sf)
				}
			}
		} else if table.Has(tpl.Model, 2) {
			t.Errorf("single-GPU template %q has a scale factor 2 entry", tpl.Model)
		}
	}
	if distributed != 19 {
		t.Errorf("%d distributed templates, want 19", distributed)
	}
	if Templates[0].Model != "ResNet-18 (batch size 16)" || Templates[25].Model != "CycleGAN" {
		t.Errorf("template order changed: first %q last %q", Templates[0].Model, Templates[25].Model)
	}
}

func TestReferencePairs(t *testing.T) {
	table, err := Reference()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		a, b   string
		sf     int
		gpu    string
		wa, wb float64
		ok     bool
	}{
		{"A3C", "CycleGAN", 1, "p100", 2.9861354534193176, 1.1999531379682131, true},
		{"CycleGAN", "A3C", 1, "p100", 1.1999531379682131, 2.9861354534193176, true},
		{"ResNet-18 (batch size 16)", "LM (batch size 5)", 2, "k80", 0, 0, true},
		{"A3C", "CycleGAN", 2, "p100", 0, 0, false},
	}
	for _, c := range cases {
		a, b, ok := table.Pair(c.a, c.b, c.sf, c.gpu)
		if a != c.wa || b != c.wb || ok != c.ok {
			t.Errorf("Pair(%q, %q, %d, %s) = %v, %v, %v; want %v, %v, %v", c.a, c.b, c.sf, c.gpu, a, b, ok, c.wa, c.wb, c.ok)
		}
	}
}

func TestParseErrors(t *testing.T) {
	cases := map[string]struct{ json, wantErr string }{
		"not json":        {`{`, "decode"},
		"no types":        {`{}`, "no GPU types"},
		"bad key":         {`{"v100": {"ResNet": {"null": 1}}}`, "not of the form"},
		"bad scale":       {`{"v100": {"('A', 0)": {"null": 1}}}`, "bad scale factor"},
		"negative rate":   {`{"v100": {"('A', 1)": {"null": -1}}}`, "negative"},
		"rate not number": {`{"v100": {"('A', 1)": {"null": "x"}}}`, "isolated rate"},
		"pair not list":   {`{"v100": {"('A', 1)": {"('B', 1)": 3}}}`, "pair rates"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(c.json))
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("Parse error = %v, want one mentioning %q", err, c.wantErr)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.json")
	body := `{"v100": {"('A', 1)": {"null": 2.5, "('B', 1)": [1, 0.5]}}, "v100_unconsolidated": {"('A', 1)": {"null": 9}}}`
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	table, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := table.Isolated("A", 1, "v100"); got != 2.5 {
		t.Errorf("Isolated = %v, want 2.5", got)
	}
	if a, b, ok := table.Pair("A", "B", 1, "v100"); a != 1 || b != 0.5 || !ok {
		t.Errorf("Pair = %v %v %v, want 1 0.5 true", a, b, ok)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.json")); err == nil || !strings.Contains(err.Error(), "read throughput table") {
		t.Errorf("Load(missing) error = %v", err)
	}
}

func TestNewOrdersRatesByType(t *testing.T) {
	tab, err := New([]string{"v100", "a100"}, map[Key][]float64{{"job-1", 2}: {3, 7}})
	if err != nil {
		t.Fatal(err)
	}
	if got := tab.Types(); !reflect.DeepEqual(got, []string{"a100", "v100"}) {
		t.Fatalf("types %v", got)
	}
	if a, v := tab.Isolated("job-1", 2, "a100"), tab.Isolated("job-1", 2, "v100"); a != 7 || v != 3 {
		t.Fatalf("a100 %v v100 %v, want 7 and 3", a, v)
	}
	if !tab.Has("job-1", 2) || tab.Has("job-1", 1) {
		t.Fatal("Has answers for the wrong scale factor")
	}
}

func TestNewRefusesBadRows(t *testing.T) {
	for name, tc := range map[string]struct {
		types []string
		rows  map[Key][]float64
	}{
		"no types":      {nil, nil},
		"type twice":    {[]string{"a", "a"}, nil},
		"short row":     {[]string{"a", "b"}, map[Key][]float64{{"m", 1}: {1}}},
		"negative rate": {[]string{"a"}, map[Key][]float64{{"m", 1}: {-1}}},
		"NaN rate":      {[]string{"a"}, map[Key][]float64{{"m", 1}: {math.NaN()}}},
		"zero scale":    {[]string{"a"}, map[Key][]float64{{"m", 0}: {1}}},
		"infinite rate": {[]string{"a"}, map[Key][]float64{{"m", 1}: {math.Inf(1)}}},
	} {
		if _, err := New(tc.types, tc.rows); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
