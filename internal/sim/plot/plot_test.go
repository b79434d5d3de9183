package plot

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// svgInfo is what the tests read back from a rendered chart.
type svgInfo struct {
	root  map[string]string // attributes of the root element
	texts []string          // the text of every <text> element
	paths []svgPath
}

type svgPath struct {
	d, style string
}

// parseSVG checks that svg is well-formed XML with an <svg> root and
// collects its texts and paths.
func parseSVG(t *testing.T, svg []byte) svgInfo {
	t.Helper()
	info := svgInfo{root: map[string]string{}}
	dec := xml.NewDecoder(bytes.NewReader(svg))
	depth := 0
	var inText bool
	var text strings.Builder
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				if tok.Name.Local != "svg" {
					t.Fatalf("root element <%s>, want <svg>", tok.Name.Local)
				}
				for _, a := range tok.Attr {
					info.root[a.Name.Local] = a.Value
				}
			}
			depth++
			switch tok.Name.Local {
			case "text":
				inText = true
				text.Reset()
			case "path":
				var p svgPath
				for _, a := range tok.Attr {
					switch a.Name.Local {
					case "d":
						p.d = a.Value
					case "style":
						p.style = a.Value
					}
				}
				info.paths = append(info.paths, p)
			}
		case xml.CharData:
			if inText {
				text.Write(tok)
			}
		case xml.EndElement:
			depth--
			if tok.Name.Local == "text" {
				inText = false
				info.texts = append(info.texts, text.String())
			}
		}
	}
	if depth != 0 || len(info.root) == 0 {
		t.Fatal("SVG has no complete root element")
	}
	return info
}

func (info svgInfo) attr(t *testing.T, name string) int {
	t.Helper()
	v, ok := info.root[name]
	if !ok {
		t.Fatalf("root element has no %s", name)
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}

func (info svgInfo) hasText(s string) bool {
	for _, t := range info.texts {
		if t == s {
			return true
		}
	}
	return false
}

// maxSegments is the largest number of line segments of one stroked path
// in colour: the line of a series, not its legend thumbnail.
func (info svgInfo) maxSegments(colour string) int {
	most := 0
	for _, p := range info.paths {
		if strings.Contains(p.style, "stroke:"+colour) && strings.Contains(p.style, "fill:none") {
			most = max(most, strings.Count(p.d, "L"))
		}
	}
	return most
}

func TestLineChart(t *testing.T) {
	nan := math.NaN()
	cases := []struct {
		name      string
		chart     Chart
		series    int
		points    int
		saturated int
		texts     []string
		absent    []string
	}{
		{
			name: "gap and saturation",
			chart: Chart{
				Title: "avg JCT", Subtitle: "36 k80; single-GPU", XLabel: "rate (jobs/h)", YLabel: "hours",
				Series: []Series{
					{Name: "a<b>", X: []float64{1, 2, 3}, Y: []float64{10, 12, nan}, Saturated: []float64{3}},
					{Name: "c", X: []float64{1, 2, 3}, Y: []float64{5, 6, 7}},
				},
			},
			series: 2, points: 5, saturated: 1,
			texts: []string{"avg JCT", "36 k80; single-GPU", "rate (jobs/h)", "hours", "a<b>", "c", "saturated"},
		},
		{
			name: "no saturation, no legend entry for it",
			chart: Chart{Title: "t", Series: []Series{
				{Name: "a", X: []float64{1, 2}, Y: []float64{1, 2}},
				{Name: "all NaN", X: []float64{1}, Y: []float64{nan}},
			}},
			series: 1, points: 2,
			texts:  []string{"t", "a", "all NaN"},
			absent: []string{"saturated"},
		},
		{
			// Decades as ticks; a point at x <= 0 has no place on a log
			// axis and is left out.
			name: "log x axis",
			chart: Chart{Title: "cdf", LogX: true, Series: []Series{
				{Name: "a", X: []float64{0, 0.5, 3, 40, 700}, Y: []float64{0, 0.25, 0.5, 0.75, 1}, Steps: true},
			}},
			series: 1, points: 4,
			texts: []string{"1", "10", "100"},
		},
		{
			name: "x without y and infinite values are skipped",
			chart: Chart{Title: "t", Series: []Series{
				{Name: "a", X: []float64{1, 2, 3, 4}, Y: []float64{1, math.Inf(1), 3}},
			}},
			series: 1, points: 2,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			svg, err := c.chart.SVG()
			if err != nil {
				t.Fatal(err)
			}
			info := parseSVG(t, svg)
			if got := info.attr(t, "data-series"); got != c.series {
				t.Errorf("data-series=%d, want %d", got, c.series)
			}
			if got := info.attr(t, "data-points"); got != c.points {
				t.Errorf("data-points=%d, want %d", got, c.points)
			}
			if got := info.attr(t, "data-saturated"); got != c.saturated {
				t.Errorf("data-saturated=%d, want %d", got, c.saturated)
			}
			for _, want := range c.texts {
				if !info.hasText(want) {
					t.Errorf("no text %q among %q", want, info.texts)
				}
			}
			for _, no := range c.absent {
				if info.hasText(no) {
					t.Errorf("text %q drawn", no)
				}
			}
			var b bytes.Buffer
			if err := c.chart.WriteSVG(&b); err != nil || !bytes.Equal(b.Bytes(), svg) {
				t.Errorf("WriteSVG differs from SVG (error %v)", err)
			}
		})
	}
}

func TestStepsDrawHorizontalThenVertical(t *testing.T) {
	xs, ys := []float64{0, 1, 2}, []float64{0, 0.5, 1}
	for _, steps := range []bool{false, true} {
		svg, err := Chart{Title: "cdf", Series: []Series{{Name: "s", X: xs, Y: ys, Steps: steps}}}.SVG()
		if err != nil {
			t.Fatal(err)
		}
		// Three points are two segments as a line and four as steps (each
		// value held until the next x, then a jump).
		want := 2
		if steps {
			want = 4
		}
		if got := parseSVG(t, svg).maxSegments("#1F77B4"); got != want {
			t.Errorf("steps=%v: the line has %d segments, want %d", steps, got, want)
		}
	}
}

func TestBarChart(t *testing.T) {
	c := BarChart{
		Title: "utilisation", Subtitle: "setup", YLabel: "fraction busy",
		Groups: []string{"k80", "p100", "v100"},
		Series: []BarSeries{
			{Name: "aware", Values: []float64{0.5, 0.7, 0.9}},
			{Name: "agnostic", Values: []float64{0.4, math.NaN()}},
		},
	}
	svg, err := c.SVG()
	if err != nil {
		t.Fatal(err)
	}
	info := parseSVG(t, svg)
	if got := info.attr(t, "data-series"); got != 2 {
		t.Errorf("data-series=%d, want 2", got)
	}
	if got := info.attr(t, "data-points"); got != 4 {
		t.Errorf("data-points=%d, want 4 (a NaN and a missing value draw no bar)", got)
	}
	for _, want := range []string{"utilisation", "setup", "fraction busy", "k80", "p100", "v100", "aware", "agnostic"} {
		if !info.hasText(want) {
			t.Errorf("no text %q among %q", want, info.texts)
		}
	}
	// One filled rectangle per bar and per legend entry, in the series'
	// colour.
	fills := func(colour string) int {
		n := 0
		for _, p := range info.paths {
			if strings.Contains(p.style, "fill:"+colour) {
				n++
			}
		}
		return n
	}
	if got := fills("#1F77B4"); got != 3+1 {
		t.Errorf("%d shapes filled in the first colour, want 3 bars and a legend entry", got)
	}
	if got := fills("#D62728"); got != 1+1 {
		t.Errorf("%d shapes filled in the second colour, want 1 bar and a legend entry", got)
	}
}

func TestChartErrors(t *testing.T) {
	cases := []struct {
		name    string
		render  func() ([]byte, error)
		wantErr string
	}{
		{"line without finite point", Chart{Title: "x", Series: []Series{{Name: "x", X: []float64{1}, Y: []float64{math.NaN()}}}}.SVG, "no finite point"},
		{"line without series", Chart{Title: "x"}.SVG, "no finite point"},
		{"bars without group", BarChart{Title: "b"}.SVG, "no group"},
		{"bars without value", BarChart{Title: "b", Groups: []string{"g"}, Series: []BarSeries{{Name: "s", Values: []float64{math.NaN()}}}}.SVG, "no finite value"},
		{"more values than groups", BarChart{Title: "b", Groups: []string{"g"}, Series: []BarSeries{{Name: "s", Values: []float64{1, 2}}}}.SVG, "2 values for 1 groups"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := c.render(); err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("error %v, want one mentioning %q", err, c.wantErr)
			}
		})
	}
}

func TestChartsAreDeterministicAndFixedSize(t *testing.T) {
	line := Chart{Title: "t", XLabel: "x", Series: []Series{{Name: "a", X: []float64{1, 2, 3}, Y: []float64{3, 1, 2}}}}
	bar := BarChart{Title: "b", Groups: []string{"g", "h"}, Series: []BarSeries{{Name: "s", Values: []float64{1, 2}}}}
	size := regexp.MustCompile(`<svg [^>]*width="([0-9.]+)pt" height="([0-9.]+)pt"`)
	for name, render := range map[string]func() ([]byte, error){"line": line.SVG, "bar": bar.SVG} {
		first, err := render()
		if err != nil {
			t.Fatal(err)
		}
		second, err := render()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, second) {
			t.Errorf("%s: two renderings of the same chart differ", name)
		}
		m := size.FindSubmatch(first)
		if m == nil {
			t.Fatalf("%s: no size on the root element", name)
		}
		w, _ := strconv.ParseFloat(string(m[1]), 64)
		h, _ := strconv.ParseFloat(string(m[2]), 64)
		if math.Abs(w-Width.Points()) > 0.01 || math.Abs(h-Height.Points()) > 0.01 {
			t.Errorf("%s: size %vpt x %vpt, want %vpt x %vpt", name, w, h, Width.Points(), Height.Points())
		}
	}
}
