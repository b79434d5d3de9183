package htmlpage

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/internal/browsertest"
	"github.com/gavel-slurm/gavel-slurm/internal/sim/plot"
)

func mustSVG(t *testing.T, render func() ([]byte, error)) []byte {
	t.Helper()
	svg, err := render()
	if err != nil {
		t.Fatal(err)
	}
	return svg
}

// reportPage has two line charts (one of steps, a CDF), a bar chart and
// a table, with text that must be escaped.
func reportPage(t *testing.T) Page {
	jct := plot.Chart{Title: "Average JCT", XLabel: "rate", YLabel: "hours", Series: []plot.Series{
		{Name: "aware", X: []float64{1, 2, 3}, Y: []float64{2, 3, math.NaN()}, Saturated: []float64{3}},
		{Name: "agnostic", X: []float64{1, 2, 3}, Y: []float64{3, 5, 8}},
	}}
	cdf := plot.Chart{Title: "JCT CDF", XLabel: "hours", YLabel: "fraction of jobs", Series: []plot.Series{
		{Name: "aware", X: []float64{0, 1, 2, 4}, Y: []float64{0, 0.25, 0.75, 1}, Steps: true},
	}}
	util := plot.BarChart{Title: "Utilisation", YLabel: "busy", Groups: []string{"k80", "v100"}, Series: []plot.BarSeries{
		{Name: "aware", Values: []float64{0.5, 0.9}}, {Name: "agnostic", Values: []float64{0.7, 0.6}},
	}}
	return Page{
		Title: "Sweep <report>", Subtitle: "36 k80 & 36 v100",
		Sections: []Section{{
			Heading:    "Results",
			Paragraphs: []string{`Jobs "measured": 0-99 <b>not bold</b>`},
			Tables: []Table{{
				Caption: "Average JCT (hours)", Header: []string{"policy", "rate", "JCT"},
				Rows:           [][]string{{"aware", "1", "2.00"}, {"agnostic", "1", "3.00"}},
				NumericColumns: []int{1, 2},
			}},
			Charts: []Chart{
				{Caption: "Average JCT", SVG: mustSVG(t, jct.SVG)},
				{Caption: "JCT CDF", SVG: mustSVG(t, cdf.SVG)},
				{Caption: "Utilisation by type", SVG: mustSVG(t, util.SVG)},
			},
		}},
		Footer: "gavel-slurm simulate",
	}
}

func write(t *testing.T, p Page) string {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, p); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestWriteEscapesAndIsSelfContained(t *testing.T) {
	html := write(t, reportPage(t))
	for _, want := range []string{
		"<title>Sweep &lt;report&gt;</title>",
		"36 k80 &amp; 36 v100",
		"&lt;b&gt;not bold&lt;/b&gt;",
		`<th class="num">rate</th>`, `<td class="num">2.00</td>`, "<td>aware</td>",
		"<caption>Average JCT (hours)</caption>",
		`<figure class="chart" data-caption="JCT CDF">`,
		"<footer>gavel-slurm simulate</footer>",
	} {
		if !strings.Contains(html, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if n := strings.Count(html, "<svg "); n != 3 {
		t.Errorf("%d inline SVGs, want 3", n)
	}
	// Nothing is fetched: no URL-bearing attribute, no @import or url().
	for _, re := range []string{`(?i)\s(src|href)=`, `(?i)@import`, `(?i)url\(`, `<\?xml`} {
		if m := regexp.MustCompile(re).FindString(html); m != "" {
			t.Errorf("page has %q", m)
		}
	}
}

func TestWriteRejectsBadSVG(t *testing.T) {
	cases := map[string]string{
		"not SVG":       `<p>hello</p>`,
		"script":        `<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`,
		"handler":       `<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"></svg>`,
		"unclosed":      `<svg xmlns="http://www.w3.org/2000/svg"><g></svg>`,
		"trailing HTML": `<svg xmlns="http://www.w3.org/2000/svg"></svg><img src="x">`,
	}
	for name, svg := range cases {
		t.Run(name, func(t *testing.T) {
			p := Page{Title: "t", Sections: []Section{{Charts: []Chart{{Caption: "c", SVG: []byte(svg)}}}}}
			if err := Write(&bytes.Buffer{}, p); err == nil || !strings.Contains(err.Error(), `chart 1 ("c")`) {
				t.Errorf("error %v, want one naming the chart", err)
			}
		})
	}
}

// load writes p to a file and loads it in Chromium.
func load(t *testing.T, p Page) (dom string, consoleErrors []string) {
	t.Helper()
	browsertest.Require(t)
	path := filepath.Join(t.TempDir(), "page.html")
	if err := os.WriteFile(path, []byte(write(t, p)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dom, consoleErrors, err := browsertest.Load(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	return dom, consoleErrors
}

var chartsState = regexp.MustCompile(`<body[^>]* data-charts="([^"]*)"`)

func TestPageInBrowser(t *testing.T) {
	dom, errs := load(t, reportPage(t))
	if len(errs) != 0 {
		t.Errorf("console errors: %q", errs)
	}
	if m := chartsState.FindStringSubmatch(dom); m == nil || m[1] != "ok" {
		t.Errorf("body data-charts %q, want ok", m)
	}
	figures := regexp.MustCompile(`(?s)<figure class="chart" data-caption="([^"]*)">\s*<svg [^>]*data-points="(\d+)"`).FindAllStringSubmatch(dom, -1)
	var captions []string
	for _, f := range figures {
		captions = append(captions, f[1])
		if n, _ := strconv.Atoi(f[2]); n <= 0 {
			t.Errorf("chart %q has data-points=%s", f[1], f[2])
		}
	}
	if want := "Average JCT|JCT CDF|Utilisation by type"; strings.Join(captions, "|") != want {
		t.Errorf("charts with an svg in the DOM: %q, want %s", captions, want)
	}
	for _, cell := range []string{"<td>agnostic</td>", `<td class="num">3.00</td>`, "<th>policy</th>"} {
		if !strings.Contains(dom, cell) {
			t.Errorf("DOM lacks table cell %s", cell)
		}
	}
}

func TestPageInBrowserFlagsEmptyChart(t *testing.T) {
	p := reportPage(t)
	p.Sections = append(p.Sections, Section{Heading: "Nothing", Charts: []Chart{
		{Caption: `Queue "length"`, SVG: []byte(`<svg xmlns="http://www.w3.org/2000/svg" data-series="0" data-points="0" width="10" height="10"></svg>`)},
	}})
	dom, errs := load(t, p)
	if len(errs) != 0 {
		t.Errorf("console errors: %q", errs)
	}
	if m := chartsState.FindStringSubmatch(dom); m == nil || m[1] != "empty:Queue &quot;length&quot;" {
		t.Errorf("body data-charts %q, want the empty chart's caption", m)
	}
}
