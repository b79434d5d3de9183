package grafana

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// A small reader of the PromQL the dashboard uses: enough to list the
// metrics, the labels of their matchers and the labels queries group by.
// It refuses what it does not know (an unknown function, a selector
// without a metric name) rather than guess.

type selector struct {
	metric string
	labels []string
}

type promRefs struct {
	metrics   []string
	selectors []selector
	grouping  []string
}

var promFunctions = []string{
	// aggregations
	"sum", "avg", "min", "max", "count", "topk", "bottomk", "quantile", "stddev", "stdvar", "group", "count_values",
	// functions
	"rate", "irate", "increase", "delta", "idelta", "deriv", "histogram_quantile", "label_replace", "clamp_min",
	"clamp_max", "abs", "round", "ceil", "floor", "sort", "sort_desc", "vector", "scalar", "time", "absent",
	"changes", "resets", "avg_over_time", "max_over_time", "min_over_time", "sum_over_time",
}

// Keywords that take a list of labels in parentheses.
var groupingKeywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}

// Keywords that stand alone.
var promKeywords = []string{"and", "or", "unless", "bool", "offset"}

type tokKind int

const (
	tokIdent tokKind = iota
	tokString
	tokNumber
	tokVar
	tokPunct
)

type tok struct {
	kind tokKind
	text string
}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isIdentChar(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

func tokenize(s string) ([]tok, error) {
	var out []tok
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			i++
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			for j < len(s) && s[j] != c {
				if s[j] == '\\' && c != '`' {
					j++
				}
				j++
			}
			if j >= len(s) {
				return nil, errors.New("unterminated string")
			}
			out = append(out, tok{tokString, s[i+1 : j]})
			i = j + 1
		case c == '$':
			j := i + 1
			if j < len(s) && s[j] == '{' {
				end := strings.IndexByte(s[j:], '}')
				if end < 0 {
					return nil, errors.New("unterminated ${")
				}
				j += end + 1
			} else {
				for j < len(s) && isIdentChar(s[j]) {
					j++
				}
			}
			out = append(out, tok{tokVar, s[i:j]})
			i = j
		case c >= '0' && c <= '9' || c == '.':
			// Numbers and durations (5m, 1e3, 0.95).
			j := i
			for j < len(s) && (isIdentChar(s[j]) || s[j] == '.') {
				j++
			}
			out = append(out, tok{tokNumber, s[i:j]})
			i = j
		case isIdentStart(c):
			j := i
			for j < len(s) && isIdentChar(s[j]) {
				j++
			}
			out = append(out, tok{tokIdent, s[i:j]})
			i = j
		default:
			// Two-character operators stay together: =~ != !~ == >= <=.
			if i+1 < len(s) && strings.Contains("=~ != !~ == >= <=", s[i:i+2]) {
				out = append(out, tok{tokPunct, s[i : i+2]})
				i += 2
				continue
			}
			out = append(out, tok{tokPunct, string(c)})
			i++
		}
	}
	return out, nil
}

// scanPromQL lists what a query refers to. Grafana's label_values(sel,
// label) is read too: its last argument is a label.
func scanPromQL(expr string) (promRefs, error) {
	var r promRefs
	if inner, ok := strings.CutPrefix(strings.TrimSpace(expr), "label_values("); ok {
		inner = strings.TrimSuffix(strings.TrimSpace(inner), ")")
		i := strings.LastIndexByte(inner, ',')
		if i < 0 {
			return r, errors.New("label_values needs a selector and a label")
		}
		r.grouping = append(r.grouping, strings.TrimSpace(inner[i+1:]))
		expr = inner[:i]
	}
	toks, err := tokenize(expr)
	if err != nil {
		return r, err
	}
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		next := func(k int) string {
			if i+k < len(toks) && toks[i+k].kind == tokPunct {
				return toks[i+k].text
			}
			return ""
		}
		switch {
		case t.kind == tokPunct && t.text == "[":
			// A range: durations and variables up to ']'.
			for i < len(toks) && !(toks[i].kind == tokPunct && toks[i].text == "]") {
				i++
			}
			if i == len(toks) {
				return r, errors.New("unclosed [")
			}
		case t.kind == tokPunct && t.text == "{":
			return r, errors.New("a selector without a metric name")
		case t.kind != tokIdent:
		case slices.Contains(groupingKeywords, t.text):
			if next(1) != "(" {
				return r, fmt.Errorf("%s without a label list", t.text)
			}
			i += 2
			for ; i < len(toks) && !(toks[i].kind == tokPunct && toks[i].text == ")"); i++ {
				if toks[i].kind == tokIdent {
					r.grouping = append(r.grouping, toks[i].text)
				} else if !(toks[i].kind == tokPunct && toks[i].text == ",") {
					return r, fmt.Errorf("%s (...): unexpected %q", t.text, toks[i].text)
				}
			}
			if i == len(toks) {
				return r, fmt.Errorf("unclosed %s (", t.text)
			}
		case slices.Contains(promKeywords, t.text):
		case slices.Contains(promFunctions, t.text):
			if next(1) != "(" && !(i+1 < len(toks) && slices.Contains(groupingKeywords, toks[i+1].text)) {
				return r, fmt.Errorf("%s is a function but is not called", t.text)
			}
		case next(1) == "(":
			return r, fmt.Errorf("unknown function %s", t.text)
		default:
			s := selector{metric: t.text}
			if next(1) == "{" {
				i += 2
				for ; i < len(toks) && !(toks[i].kind == tokPunct && toks[i].text == "}"); i++ {
					if toks[i].kind == tokPunct && toks[i].text == "," {
						continue
					}
					if i+2 >= len(toks) || toks[i].kind != tokIdent || toks[i+1].kind != tokPunct ||
						!slices.Contains([]string{"=", "!=", "=~", "!~"}, toks[i+1].text) || toks[i+2].kind != tokString {
						return r, fmt.Errorf("%s{...}: a matcher must be label, operator, string", t.text)
					}
					s.labels = append(s.labels, toks[i].text)
					i += 2
				}
				if i == len(toks) {
					return r, fmt.Errorf("%s{ is not closed", t.text)
				}
			}
			r.selectors = append(r.selectors, s)
			if !slices.Contains(r.metrics, s.metric) {
				r.metrics = append(r.metrics, s.metric)
			}
		}
	}
	return r, nil
}

func TestScanPromQL(t *testing.T) {
	cases := []struct {
		expr     string
		want     promRefs
		wantErrs string
	}{
		{expr: `gavel_slurm_rounds_total`,
			want: promRefs{metrics: []string{"gavel_slurm_rounds_total"}, selectors: []selector{{metric: "gavel_slurm_rounds_total"}}}},
		{expr: `sum by (gpu_type) (gavel_slurm_busy_gpus{instance=~"$instance", gpu_type!="x"})`,
			want: promRefs{metrics: []string{"gavel_slurm_busy_gpus"},
				selectors: []selector{{"gavel_slurm_busy_gpus", []string{"instance", "gpu_type"}}}, grouping: []string{"gpu_type"}}},
		{expr: `histogram_quantile(0.95, sum by (le) (rate(x_bucket{a="1"}[$__rate_interval])))`,
			want: promRefs{metrics: []string{"x_bucket"}, selectors: []selector{{"x_bucket", []string{"a"}}}, grouping: []string{"le"}}},
		{expr: `sum(rate(x[5m])) by (kind, result) * 60`,
			want: promRefs{metrics: []string{"x"}, selectors: []selector{{metric: "x"}}, grouping: []string{"kind", "result"}}},
		{expr: `a{l="}{"} - on (job_id) b offset 5m`,
			want: promRefs{metrics: []string{"a", "b"}, selectors: []selector{{"a", []string{"l"}}, {metric: "b"}}, grouping: []string{"job_id"}}},
		{expr: `label_values(x{instance=~"$i"}, job_id)`,
			want: promRefs{metrics: []string{"x"}, selectors: []selector{{"x", []string{"instance"}}}, grouping: []string{"job_id"}}},
		{expr: `nosuchfunc(x)`, wantErrs: "unknown function nosuchfunc"},
		{expr: `sum({a="b"})`, wantErrs: "without a metric name"},
		{expr: `x{a="b"`, wantErrs: "not closed"},
		{expr: `x{a}`, wantErrs: "a matcher must be"},
		{expr: `x{a="b}`, wantErrs: "unterminated string"},
		{expr: `rate(x[5m)`, wantErrs: "unclosed ["},
		{expr: `sum by gpu_type (x)`, wantErrs: "without a label list"},
	}
	for _, c := range cases {
		got, err := scanPromQL(c.expr)
		if c.wantErrs != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErrs) {
				t.Errorf("%s: error %v, want one saying %q", c.expr, err, c.wantErrs)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.expr, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.expr, got, c.want)
		}
	}
}
