// Package plot draws simple line charts as SVG: one line per series over a
// shared numeric x axis, with axes, ticks and a legend. It is enough for
// sweep results (average JCT against input rate) without a plotting stack.
package plot

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// Series is one line of the chart. Points with NaN y are gaps (e.g. a
// saturated rate).
type Series struct {
	Name string
	X, Y []float64
	// Saturated lists x values where the series has no finite value
	// because it grew without bound; each is marked with a cross on the top
	// edge, just above the frame, so that a gap reads as "off the chart",
	// not as "not measured".
	Saturated []float64
}

// Chart describes the figure.
type Chart struct {
	Title, XLabel, YLabel string
	// Subtitle, when set, is a smaller line under the title (the setup).
	Subtitle string
	Series   []Series
}

// palette holds distinguishable line colours (cycled).
var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"}

// dashes and the marker shapes vary with the series too, so that lines stay
// apart in grey print and for readers who do not tell the colours apart.
var dashes = []string{"", "7 4", "2 3", "9 3 2 3"}

// marker draws point marker number i (cycling circle, square, triangle,
// diamond) centred on (x, y), tagged with class.
func marker(b *strings.Builder, class string, i int, x, y float64, colour string) {
	const r = 3.5
	switch i % 4 {
	case 0:
		fmt.Fprintf(b, `<circle class="%s" cx="%.1f" cy="%.1f" r="%g" fill="%s"/>`+"\n", class, x, y, r, colour)
	case 1:
		fmt.Fprintf(b, `<rect class="%s" x="%.1f" y="%.1f" width="%g" height="%g" fill="%s"/>`+"\n", class, x-r, y-r, 2*r, 2*r, colour)
	case 2:
		fmt.Fprintf(b, `<polygon class="%s" points="%.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="%s"/>`+"\n", class, x, y-r-1, x-r-1, y+r, x+r+1, y+r, colour)
	default:
		fmt.Fprintf(b, `<polygon class="%s" points="%.1f,%.1f %.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="%s"/>`+"\n", class, x, y-r-1, x+r+1, y, x, y+r+1, x-r-1, y, colour)
	}
}

// cross draws the saturation mark centred on (x, y), tagged with class.
func cross(b *strings.Builder, class string, x, y float64, colour string) {
	const r = 5.0
	fmt.Fprintf(b, `<path class="%s" d="M%.1f,%.1f L%.1f,%.1f M%.1f,%.1f L%.1f,%.1f" stroke="%s" stroke-width="2.5"/>`+"\n",
		class, x-r, y-r, x+r, y+r, x-r, y+r, x+r, y-r, colour)
}

const (
	width, height                          = 780.0, 470.0
	marginL, marginR, marginT, marginB     = 70.0, 220.0, 55.0, 55.0
	plotW, plotH                           = width - marginL - marginR, height - marginT - marginB
	tickLen                                = 5.0
	legendX, legendY, legendStep, fontSize = width - marginR + 15, marginT + 10, 20.0, 12
)

// WriteSVG renders the chart. It fails only if w does, or if there is no
// finite point to draw.
func (c *Chart) WriteSVG(w io.Writer) error {
	xmin, xmax, ymin, ymax := math.Inf(1), math.Inf(-1), 0.0, math.Inf(-1)
	for _, s := range c.Series {
		for i := range s.X {
			if i >= len(s.Y) || !finite(s.X[i]) || !finite(s.Y[i]) {
				continue
			}
			xmin, xmax = math.Min(xmin, s.X[i]), math.Max(xmax, s.X[i])
			ymin, ymax = math.Min(ymin, s.Y[i]), math.Max(ymax, s.Y[i])
		}
	}
	if math.IsInf(xmin, 1) {
		return fmt.Errorf("plot %q: no finite point to draw", c.Title)
	}
	xticks := niceTicks(xmin, xmax, 8)
	yticks := niceTicks(ymin, ymax, 6)
	x0, x1 := xticks[0], xticks[len(xticks)-1]
	y0, y1 := yticks[0], yticks[len(yticks)-1]
	px := func(x float64) float64 { return marginL + (x-x0)/(x1-x0)*plotW }
	py := func(y float64) float64 { return marginT + plotH - (y-y0)/(y1-y0)*plotH }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" viewBox="0 0 %g %g" font-family="sans-serif" font-size="%d">`+"\n", width, height, width, height, fontSize)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%g" y="%g" text-anchor="middle" font-size="%d">%s</text>`+"\n", marginL+plotW/2, marginT-32, fontSize+3, html.EscapeString(c.Title))
	if c.Subtitle != "" {
		fmt.Fprintf(&b, `<text x="%g" y="%g" text-anchor="middle" font-size="%d" fill="#444">%s</text>`+"\n", marginL+plotW/2, marginT-14, fontSize-1, html.EscapeString(c.Subtitle))
	}
	// Grid, ticks and tick labels.
	for _, t := range xticks {
		x := px(t)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="#eee"/>`+"\n", x, marginT, x, marginT+plotH)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="black"/>`+"\n", x, marginT+plotH, x, marginT+plotH+tickLen)
		fmt.Fprintf(&b, `<text x="%.1f" y="%g" text-anchor="middle">%s</text>`+"\n", x, marginT+plotH+tickLen+fontSize+2, label(t))
	}
	for _, t := range yticks {
		y := py(t)
		fmt.Fprintf(&b, `<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="#eee"/>`+"\n", marginL, y, marginL+plotW, y)
		fmt.Fprintf(&b, `<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="black"/>`+"\n", marginL-tickLen, y, marginL, y)
		fmt.Fprintf(&b, `<text x="%g" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", marginL-tickLen-3, y, label(t))
	}
	// Axes and their labels.
	fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="black"/>`+"\n", marginL, marginT+plotH, marginL+plotW, marginT+plotH)
	fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="black"/>`+"\n", marginL, marginT, marginL, marginT+plotH)
	fmt.Fprintf(&b, `<text x="%g" y="%g" text-anchor="middle">%s</text>`+"\n", marginL+plotW/2, height-12, html.EscapeString(c.XLabel))
	fmt.Fprintf(&b, `<text transform="translate(18 %g) rotate(-90)" text-anchor="middle">%s</text>`+"\n", marginT+plotH/2, html.EscapeString(c.YLabel))
	// Lines (split at gaps) with point markers, saturation crosses on the
	// top edge, and the legend.
	anySaturated := false
	for i, s := range c.Series {
		colour := palette[i%len(palette)]
		dash := ""
		if d := dashes[i%len(dashes)]; d != "" {
			dash = fmt.Sprintf(` stroke-dasharray="%s"`, d)
		}
		var seg []string
		flush := func() {
			if len(seg) > 1 {
				fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", colour, dash, strings.Join(seg, " "))
			}
			seg = seg[:0]
		}
		for k := range s.X {
			if k >= len(s.Y) || !finite(s.X[k]) || !finite(s.Y[k]) {
				flush()
				continue
			}
			seg = append(seg, fmt.Sprintf("%.1f,%.1f", px(s.X[k]), py(s.Y[k])))
			marker(&b, "point", i, px(s.X[k]), py(s.Y[k]), colour)
		}
		flush()
		for _, x := range s.Saturated {
			if finite(x) && x >= x0 && x <= x1 {
				cross(&b, "saturated", px(x), marginT-4, colour)
				anySaturated = true
			}
		}
		ly := legendY + float64(i)*legendStep
		fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="%s" stroke-width="2"%s/>`+"\n", legendX, ly, legendX+24, ly, colour, dash)
		marker(&b, "legend", i, legendX+12, ly, colour)
		fmt.Fprintf(&b, `<text x="%g" y="%g" dominant-baseline="middle">%s</text>`+"\n", legendX+30, ly, html.EscapeString(s.Name))
	}
	if anySaturated {
		ly := legendY + float64(len(c.Series))*legendStep + 6
		cross(&b, "legend", legendX+12, ly, "#444")
		fmt.Fprintf(&b, `<text x="%g" y="%g" dominant-baseline="middle">saturated</text>`+"\n", legendX+30, ly)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// niceTicks returns evenly spaced round tick values (steps of 1, 2 or 5
// times a power of ten) covering [lo, hi] with about n intervals.
func niceTicks(lo, hi float64, n int) []float64 {
	if hi <= lo {
		hi = lo + 1
	}
	raw := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*mag {
			step = m * mag
			break
		}
	}
	start := math.Floor(lo/step) * step
	var ticks []float64
	for v := start; v <= hi+step*1e-9 || len(ticks) < 2; v += step {
		ticks = append(ticks, math.Round(v/step)*step)
	}
	if ticks[len(ticks)-1] < hi {
		ticks = append(ticks, ticks[len(ticks)-1]+step)
	}
	return ticks
}

// label prints a tick value without float noise.
func label(v float64) string {
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", v), "0"), ".")
}
