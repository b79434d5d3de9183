// Package plot draws the simulator's charts as SVG with gonum/plot: line
// charts (one line per series over a shared numeric x axis, optionally as
// steps for CDFs and time series) and grouped bar charts. Every chart has
// the same fixed size and the same bytes for the same input, so that
// reports and their tests stay stable, and its root element states how
// many series and points it drew (data-series, data-points), so that a
// page can tell a chart with data from an empty one.
package plot

import (
	"bytes"
	"fmt"
	"image/color"
	"io"
	"math"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Width and Height are the size of every chart: fixed, so that charts
// line up in a report and print at a known size.
const (
	Width  vg.Length = 8 * vg.Inch
	Height vg.Length = 4.8 * vg.Inch
)

// Series is one line of the chart. Points with NaN y are gaps (e.g. a
// saturated rate).
type Series struct {
	Name string
	X, Y []float64
	// Saturated lists x values where the series has no finite value
	// because it grew without bound; each is marked with a cross on the top
	// edge of the frame, so that a gap reads as "off the chart", not as
	// "not measured".
	Saturated []float64
	// Steps draws the series as a step function, each value holding until
	// the next x (a CDF, a utilisation curve), without point markers:
	// such series have many points, and a straight line between two
	// samples would show values that never occurred.
	Steps bool
}

// Chart describes a line chart.
type Chart struct {
	Title, XLabel, YLabel string
	// Subtitle, when set, is a smaller line under the title (the setup).
	Subtitle string
	Series   []Series
	// LogX draws the x axis on a log scale (distributions with long
	// tails, such as job completion times); points with x <= 0 are left
	// out of such a chart.
	LogX bool
}

// BarChart describes a grouped bar chart: one bar per series in each
// group, the series told apart by colour and named in the legend.
type BarChart struct {
	Title, Subtitle, YLabel string
	Groups                  []string
	Series                  []BarSeries
}

// BarSeries is one bar in each group. Values[i] belongs to Groups[i]; a
// NaN or missing value draws no bar.
type BarSeries struct {
	Name   string
	Values []float64
}

// palette holds distinguishable line colours (cycled).
var palette = []color.RGBA{
	rgb(0x1f77b4), rgb(0xd62728), rgb(0x2ca02c), rgb(0xff7f0e), rgb(0x9467bd),
	rgb(0x8c564b), rgb(0xe377c2), rgb(0x17becf), rgb(0x7f7f7f), rgb(0xbcbd22),
}

// dashes and the marker shapes vary with the series too, so that lines stay
// apart in grey print and for readers who do not tell the colours apart.
var dashes = [][]vg.Length{nil, {7, 4}, {2, 3}, {9, 3, 2, 3}}

var markers = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.BoxGlyph{}, draw.PyramidGlyph{}, diamondGlyph{}}

var grey, gridColour = rgb(0x444444), rgb(0xd8d8d8)

func rgb(v uint32) color.RGBA {
	return color.RGBA{R: uint8(v >> 16), G: uint8(v >> 8), B: uint8(v), A: 0xff}
}

// Fonts: Liberation Sans, which gonum/plot embeds for its text metrics. The
// SVG names the family only (embedding it would add hundreds of kilobytes
// to each chart), so fallbacks with the same metrics are added in fixSVG.
var sans = font.Font{Typeface: "Liberation", Variant: "Sans"}

const (
	titleSize    = 14
	subtitleSize = 10
	labelSize    = 11
	tickSize     = 9
	legendSize   = 10
	margin       = vg.Length(10)
)

func textStyle(size font.Length, c color.Color) text.Style {
	return text.Style{Color: c, Font: font.From(sans, size), Handler: gplot.DefaultTextHandler}
}

// stats counts what a chart drew, for the root element's data attributes.
type stats struct {
	series, points, saturated int
}

// WriteSVG renders the chart. It fails if w does, or if there is no finite
// point to draw.
func (c Chart) WriteSVG(w io.Writer) error {
	svg, err := c.SVG()
	if err != nil {
		return err
	}
	_, err = w.Write(svg)
	return err
}

// SVG renders the chart; see WriteSVG.
func (c Chart) SVG() ([]byte, error) {
	p := newPlot(c.XLabel, c.YLabel, true)
	var st stats
	anySaturated := false
	for i, s := range c.Series {
		colour := palette[i%len(palette)]
		line := draw.LineStyle{Color: colour, Width: vg.Points(1.5), Dashes: dashes[i%len(dashes)]}
		glyph := draw.GlyphStyle{Color: colour, Radius: vg.Points(3.5), Shape: markers[i%len(markers)]}
		var segment plotter.XYs
		var finitePoints plotter.XYs
		drawn := 0
		flush := func() error {
			if len(segment) > 1 {
				l, err := plotter.NewLine(segment)
				if err != nil {
					return fmt.Errorf("plot %q, series %q: %w", c.Title, s.Name, err)
				}
				l.LineStyle = line
				if s.Steps {
					l.StepStyle = plotter.PostStep
				}
				p.Add(l)
			}
			segment = nil
			return nil
		}
		for k := range s.X {
			if k >= len(s.Y) || !finite(s.X[k]) || !finite(s.Y[k]) || c.LogX && s.X[k] <= 0 {
				if err := flush(); err != nil {
					return nil, err
				}
				continue
			}
			segment = append(segment, plotter.XY{X: s.X[k], Y: s.Y[k]})
			finitePoints = append(finitePoints, plotter.XY{X: s.X[k], Y: s.Y[k]})
			drawn++
		}
		if err := flush(); err != nil {
			return nil, err
		}
		thumbs := []gplot.Thumbnailer{&plotter.Line{LineStyle: line}}
		if len(finitePoints) > 0 && !s.Steps {
			sc, err := plotter.NewScatter(finitePoints)
			if err != nil {
				return nil, fmt.Errorf("plot %q, series %q: %w", c.Title, s.Name, err)
			}
			sc.GlyphStyle = glyph
			p.Add(sc)
		}
		if !s.Steps {
			thumbs = append(thumbs, &plotter.Scatter{GlyphStyle: glyph})
		}
		var sat []float64
		for _, x := range s.Saturated {
			if finite(x) {
				sat = append(sat, x)
			}
		}
		if len(sat) > 0 {
			p.Add(saturationMarks{xs: sat, colour: colour})
			anySaturated = true
			st.saturated += len(sat)
		}
		if drawn > 0 || len(sat) > 0 {
			st.series++
		}
		st.points += drawn
		p.Legend.Add(s.Name, thumbs...)
	}
	if st.points == 0 {
		return nil, fmt.Errorf("plot %q: no finite point to draw", c.Title)
	}
	if anySaturated {
		p.Legend.Add("saturated", crossThumb{grey})
	}
	// Lines of positive values start from zero, so that their heights
	// compare as ratios.
	p.Y.Min = math.Min(p.Y.Min, 0)
	if c.LogX {
		p.X.Scale = gplot.LogScale{}
		p.X.Tick.Marker = gplot.LogTicks{Prec: -1}
	}
	return render(p, c.Title, c.Subtitle, st)
}

// WriteSVG renders the bar chart. It fails if w does, or if there is no
// finite value to draw.
func (c BarChart) WriteSVG(w io.Writer) error {
	svg, err := c.SVG()
	if err != nil {
		return err
	}
	_, err = w.Write(svg)
	return err
}

// SVG renders the bar chart; see WriteSVG.
func (c BarChart) SVG() ([]byte, error) {
	if len(c.Groups) == 0 {
		return nil, fmt.Errorf("bar chart %q: no group", c.Title)
	}
	// Groups are categories: no vertical grid lines between them.
	p := newPlot("", c.YLabel, false)
	var st stats
	for i, s := range c.Series {
		if len(s.Values) > len(c.Groups) {
			return nil, fmt.Errorf("bar chart %q, series %q: %d values for %d groups", c.Title, s.Name, len(s.Values), len(c.Groups))
		}
		b := &bars{values: s.Values, index: i, of: len(c.Series), colour: palette[i%len(palette)]}
		drawn := 0
		for _, v := range s.Values {
			if finite(v) {
				drawn++
			}
		}
		if drawn > 0 {
			st.series++
			p.Add(b)
		}
		st.points += drawn
		p.Legend.Add(s.Name, b)
	}
	if st.points == 0 {
		return nil, fmt.Errorf("bar chart %q: no finite value to draw", c.Title)
	}
	// Each group is one unit wide and centred on its index; the bars are
	// measured from zero, with a little room above the highest.
	p.NominalX(c.Groups...)
	p.X.Min, p.X.Max = -0.5, float64(len(c.Groups))-0.5
	p.Y.Min = math.Min(p.Y.Min, 0)
	p.Y.Max = math.Max(p.Y.Max, 0)
	p.Y.Max += 0.05 * (p.Y.Max - p.Y.Min)
	return render(p, c.Title, c.Subtitle, st)
}

// newPlot returns a plot with the package's fonts, axis labels and a light
// grid, drawn under everything added afterwards.
func newPlot(xlabel, ylabel string, verticalGrid bool) *gplot.Plot {
	p := gplot.New()
	p.X.Label.Text, p.Y.Label.Text = xlabel, ylabel
	for _, a := range []*gplot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = font.From(sans, labelSize)
		a.Tick.Label.Font = font.From(sans, tickSize)
	}
	p.Legend.TextStyle = textStyle(legendSize, color.Black)
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.ThumbnailWidth = vg.Points(24)
	p.Legend.Padding = vg.Points(4)
	grid := plotter.NewGrid()
	grid.Horizontal.Color = gridColour
	grid.Vertical.Color = nil
	if verticalGrid {
		grid.Vertical.Color = gridColour
	}
	p.Add(grid)
	return p
}

// render lays the chart out on a canvas of the fixed size: title and
// subtitle on top, the legend in a column on the right (beside the frame,
// where it hides no data), the axes and data in the rest.
func render(p *gplot.Plot, title, subtitle string, st stats) ([]byte, error) {
	canvas := vgsvg.New(Width, Height)
	dc := draw.New(canvas)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	area := draw.Crop(dc, margin, -margin, margin, -margin)

	if title != "" || subtitle != "" {
		top := area.Max.Y
		if title != "" {
			sty := textStyle(titleSize, color.Black)
			sty.XAlign, sty.YAlign = draw.XCenter, draw.YTop
			area.FillText(sty, vg.Point{X: area.Center().X, Y: top}, title)
			top -= sty.Height(title) + 2
		}
		if subtitle != "" {
			sty := textStyle(subtitleSize, grey)
			sty.XAlign, sty.YAlign = draw.XCenter, draw.YTop
			area.FillText(sty, vg.Point{X: area.Center().X, Y: top}, subtitle)
			top -= sty.Height(subtitle)
		}
		area.Max.Y = top - 8
	}

	// The legend takes a column right of the plot, or, when its names are
	// too long for a column that leaves the plot most of the width, a
	// band under it: a name must never run off the canvas.
	size := p.Legend.Rectangle(area).Size()
	legendWidth := size.X + 2*margin
	legend := area
	if legendWidth <= (area.Max.X-area.Min.X)*0.4 {
		legend.Min.X = area.Max.X - legendWidth + margin
		area.Max.X -= legendWidth
	} else {
		legend.Max.Y = area.Min.Y + size.Y
		area.Min.Y += size.Y + margin
	}
	p.Legend.Draw(legend)
	// The plot draws its legend inside the frame; that one is already drawn.
	p.Legend = gplot.NewLegend()

	p.Draw(area)

	var b bytes.Buffer
	if _, err := canvas.WriteTo(&b); err != nil {
		return nil, fmt.Errorf("plot %q: SVG: %w", title, err)
	}
	return fixSVG(b.Bytes(), st), nil
}

// fixSVG adds the counts to the root element and font fallbacks to the
// text: a browser without Liberation Sans would otherwise pick its default
// serif font, wider than the one the layout was measured with.
func fixSVG(svg []byte, st stats) []byte {
	attrs := fmt.Sprintf(`<svg data-series="%d" data-points="%d" data-saturated="%d" `, st.series, st.points, st.saturated)
	out := bytes.Replace(svg, []byte("<svg "), []byte(attrs), 1)
	return bytes.ReplaceAll(out, []byte("font-family:Liberation Sans;"),
		[]byte("font-family:'Liberation Sans',Arimo,Arial,Helvetica,sans-serif;"))
}

// saturationMarks draws a cross on the top edge of the frame at each x.
type saturationMarks struct {
	xs     []float64
	colour color.Color
}

const crossRadius = vg.Length(4.5)

func (m saturationMarks) Plot(c draw.Canvas, p *gplot.Plot) {
	trX, _ := p.Transforms(&c)
	for _, x := range m.xs {
		pt := vg.Point{X: trX(x), Y: c.Max.Y}
		if c.ContainsX(pt.X) {
			drawCross(&c, pt, m.colour)
		}
	}
}

// DataRange widens the x axis to the saturated values, which have no
// point of their own; it leaves the y axis alone.
func (m saturationMarks) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax = math.Inf(1), math.Inf(-1)
	for _, x := range m.xs {
		xmin, xmax = math.Min(xmin, x), math.Max(xmax, x)
	}
	return xmin, xmax, math.Inf(1), math.Inf(-1)
}

// GlyphBoxes keeps room for the crosses above the highest point.
func (m saturationMarks) GlyphBoxes(p *gplot.Plot) []gplot.GlyphBox {
	boxes := make([]gplot.GlyphBox, len(m.xs))
	for i, x := range m.xs {
		boxes[i] = gplot.GlyphBox{X: p.X.Norm(x), Y: 1, Rectangle: vg.Rectangle{
			Min: vg.Point{X: -crossRadius, Y: -crossRadius}, Max: vg.Point{X: crossRadius, Y: crossRadius}}}
	}
	return boxes
}

func drawCross(c *draw.Canvas, pt vg.Point, colour color.Color) {
	r := crossRadius
	sty := draw.LineStyle{Color: colour, Width: vg.Points(2)}
	c.StrokeLines(sty,
		[]vg.Point{{X: pt.X - r, Y: pt.Y - r}, {X: pt.X + r, Y: pt.Y + r}},
		[]vg.Point{{X: pt.X - r, Y: pt.Y + r}, {X: pt.X + r, Y: pt.Y - r}})
}

// crossThumb is the legend's saturation entry.
type crossThumb struct{ colour color.Color }

func (t crossThumb) Thumbnail(c *draw.Canvas) { drawCross(c, c.Center(), t.colour) }

// diamondGlyph is a filled diamond, the fourth marker shape.
type diamondGlyph struct{}

func (diamondGlyph) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	r := sty.Radius * 1.2
	var path vg.Path
	path.Move(vg.Point{X: pt.X, Y: pt.Y + r})
	path.Line(vg.Point{X: pt.X + r, Y: pt.Y})
	path.Line(vg.Point{X: pt.X, Y: pt.Y - r})
	path.Line(vg.Point{X: pt.X - r, Y: pt.Y})
	path.Close()
	c.Fill(path)
}

// bars draws one series of a grouped bar chart: in group g, bar number
// index of the of bars, each a share of the group's unit width.
type bars struct {
	values    []float64
	index, of int
	colour    color.Color
}

func (b *bars) Plot(c draw.Canvas, p *gplot.Plot) {
	trX, trY := p.Transforms(&c)
	group := trX(1) - trX(0)
	width := group * 0.8 / vg.Length(b.of)
	for g, v := range b.values {
		if !finite(v) {
			continue
		}
		left := trX(float64(g)) - group*0.4 + width*vg.Length(b.index)
		b.bar(&c, vg.Rectangle{
			Min: vg.Point{X: left, Y: min(trY(0), trY(v))},
			Max: vg.Point{X: left + width, Y: max(trY(0), trY(v))},
		})
	}
}

func (b *bars) bar(c *draw.Canvas, r vg.Rectangle) {
	c.SetColor(b.colour)
	c.Fill(r.Path())
	c.SetLineStyle(draw.LineStyle{Color: color.Black, Width: vg.Points(0.5)})
	c.Stroke(r.Path())
}

func (b *bars) Thumbnail(c *draw.Canvas) { b.bar(c, c.Rectangle) }

// DataRange covers the groups and the values, and zero: bars start there.
func (b *bars) DataRange() (xmin, xmax, ymin, ymax float64) {
	ymin, ymax = 0, 0
	for _, v := range b.values {
		if finite(v) {
			ymin, ymax = math.Min(ymin, v), math.Max(ymax, v)
		}
	}
	return -0.5, float64(len(b.values)) - 0.5, ymin, ymax
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
