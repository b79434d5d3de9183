// Package htmlpage writes a report as one self-contained HTML file: text,
// tables and SVG charts, with the style inline and nothing fetched from
// anywhere, so that the file can be mailed, archived or opened on a
// machine without network and still read (and print) the same.
package htmlpage

import (
	"bytes"
	"embed"
	"encoding/xml"
	"errors"
	"fmt"
	"html/template"
	"io"
	"strings"
)

// Page is the whole report.
type Page struct {
	Title, Subtitle string
	Sections        []Section
	Footer          string
}

// Section is a heading followed by its paragraphs, tables and charts, in
// that order.
type Section struct {
	Heading    string
	Paragraphs []string
	Tables     []Table
	Charts     []Chart
}

// Table is a captioned table. NumericColumns are the indices of the
// columns whose cells are right-aligned (numbers line up by their digits).
type Table struct {
	Caption        string
	Header         []string
	Rows           [][]string
	NumericColumns []int
}

// Chart is a captioned SVG figure, as internal/sim/plot renders it. Its
// root element's data-points attribute (the points drawn) is what the
// page's check reads.
type Chart struct {
	Caption string
	SVG     []byte
}

//go:embed page.html.tmpl
var files embed.FS

var page = template.Must(template.New("page.html.tmpl").Funcs(template.FuncMap{
	"numeric": func(t Table, col int) bool {
		for _, c := range t.NumericColumns {
			if c == col {
				return true
			}
		}
		return false
	},
}).ParseFS(files, "page.html.tmpl"))

// view is the page with each chart's SVG checked and ready to inline.
type view struct {
	Page
	Sections []sectionView
}

type sectionView struct {
	Section
	Charts []chartView
}

type chartView struct {
	Caption string
	SVG     template.HTML
}

// Write writes p as HTML. All text is escaped; the SVGs go in as they are,
// after a check that each is one well-formed <svg> element without
// scripts, so that a chart cannot break the page or run code in it.
func Write(w io.Writer, p Page) error {
	v := view{Page: p}
	for i, s := range p.Sections {
		sv := sectionView{Section: s}
		for j, c := range s.Charts {
			svg, err := inlineSVG(c.SVG)
			if err != nil {
				return fmt.Errorf("html page %q, section %d (%q), chart %d (%q): %w", p.Title, i+1, s.Heading, j+1, c.Caption, err)
			}
			sv.Charts = append(sv.Charts, chartView{Caption: c.Caption, SVG: svg})
		}
		v.Sections = append(v.Sections, sv)
	}
	var b bytes.Buffer
	if err := page.Execute(&b, v); err != nil {
		return fmt.Errorf("html page %q: %w", p.Title, err)
	}
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("html page %q: %w", p.Title, err)
	}
	return nil
}

// inlineSVG returns svg from its root element on: the XML declaration
// and comments before it mean nothing inside HTML.
func inlineSVG(svg []byte) (template.HTML, error) {
	start := bytes.Index(svg, []byte("<svg"))
	if start < 0 {
		return "", errors.New("no <svg> element")
	}
	body := bytes.TrimSpace(svg[start:])
	dec := xml.NewDecoder(bytes.NewReader(body))
	depth, roots := 0, 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("SVG: %w", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			name := strings.ToLower(tok.Name.Local)
			if name == "script" || name == "foreignobject" {
				return "", fmt.Errorf("SVG has a <%s> element", tok.Name.Local)
			}
			for _, a := range tok.Attr {
				if strings.HasPrefix(strings.ToLower(a.Name.Local), "on") {
					return "", fmt.Errorf("SVG has an event handler (%s)", a.Name.Local)
				}
			}
			if depth == 0 {
				roots++
			}
			depth++
		case xml.EndElement:
			depth--
		case xml.CharData:
			if depth == 0 && len(bytes.TrimSpace(tok)) > 0 {
				return "", errors.New("SVG has text after its root element")
			}
		}
	}
	if roots != 1 || depth != 0 {
		return "", fmt.Errorf("SVG has %d root elements, want one complete <svg>", roots)
	}
	return template.HTML(body), nil
}
