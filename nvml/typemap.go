package nvml

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/gavel-slurm/gavel-slurm/internal/reports"
)

// TypeRule maps the NVML product names its pattern matches to a Slurm GRES
// type name.
type TypeRule struct {
	Pattern *regexp.Regexp
	Type    string
}

// TypeMap turns NVML product names into the GRES type names the site uses
// in gres.conf, which is what the daemon schedules by. The first matching
// rule wins; a name no rule matches gets FallbackType.
type TypeMap struct {
	Rules []TypeRule
}

// defaultRules cover the data-centre boards of the last decade. Each model
// number stands as a whole word, so that "A10" does not catch "A100",
// "L4" does not catch "L40S", nor "H200" "GH200". V100 has no word end:
// "V100S" and "V100-SXM2" are V100s.
var defaultRules = []struct{ pattern, typ string }{
	{`\bGB200\b`, "gb200"},
	{`\bGH200\b`, "gh200"},
	{`\bB200\b`, "b200"},
	{`\bB100\b`, "b100"},
	{`\bH200\b`, "h200"},
	{`\bH100\b`, "h100"},
	{`\bH800\b`, "h800"},
	{`\bA100\b`, "a100"},
	{`\bA800\b`, "a800"},
	{`\bA40\b`, "a40"},
	{`\bA30\b`, "a30"},
	{`\bA10G\b`, "a10g"},
	{`\bA10\b`, "a10"},
	{`\bL40S\b`, "l40s"},
	{`\bL40\b`, "l40"},
	{`\bL4\b`, "l4"},
	{`\bT4\b`, "t4"},
	{`\bV100`, "v100"},
	{`\bP100\b`, "p100"},
	{`\bP40\b`, "p40"},
	{`\bP4\b`, "p4"},
	{`\bK80\b`, "k80"},
}

// DefaultTypeMap returns the built-in rules.
func DefaultTypeMap() *TypeMap {
	m := &TypeMap{}
	for _, r := range defaultRules {
		m.Rules = append(m.Rules, TypeRule{Pattern: regexp.MustCompile(`(?i)` + r.pattern), Type: r.typ})
	}
	return m
}

// Type returns the GRES type for an NVML product name.
func (m *TypeMap) Type(product string) string {
	if m != nil {
		for _, r := range m.Rules {
			if r.Pattern.MatchString(product) {
				return r.Type
			}
		}
	}
	return FallbackType(product)
}

// vendorWords are dropped from the front of a product name before its
// model is taken.
var vendorWords = map[string]bool{"nvidia": true, "tesla": true, "geforce": true, "quadro": true, "mock": true}

// seriesWords name a series whose model number follows as its own word:
// "RTX 4090" is the model rtx4090, not rtx.
var seriesWords = map[string]bool{"rtx": true, "gtx": true, "titan": true}

// FallbackType is the lowercased first model word of a product name with
// the vendor words dropped ("NVIDIA B300 SXM" gives b300, "NVIDIA GeForce
// RTX 4090" rtx4090), limited to the characters type names may have.
// A name with nothing left gives "unknown".
func FallbackType(product string) string {
	words := strings.Fields(strings.ToLower(product))
	for len(words) > 0 && vendorWords[words[0]] {
		words = words[1:]
	}
	if len(words) == 0 {
		return "unknown"
	}
	model := words[0]
	if seriesWords[model] && len(words) > 1 {
		model += words[1]
	}
	var b strings.Builder
	for i := 0; i < len(model) && b.Len() < reports.MaxTypeLen; i++ {
		if reports.ValidTypeByte(model[i]) {
			b.WriteByte(model[i])
		}
	}
	if b.Len() == 0 {
		return "unknown"
	}
	return b.String()
}

// LoadTypeMap reads the site's rules from path and puts them before the
// built-in ones, which still apply to names the site's rules do not match.
//
// Each line is a type name, then a regular expression (matched against the
// whole product name, ignoring case, anywhere in it); '#' starts a comment:
//
//	# GRES type  product name pattern
//	a100-80g     A100.*80GB
//	a100-40g     A100
func LoadTypeMap(path string) (*TypeMap, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("type map: %w", err)
	}
	defer f.Close()
	rules, err := ParseTypeRules(f)
	if err != nil {
		return nil, fmt.Errorf("type map %s: %w", path, err)
	}
	m := DefaultTypeMap()
	m.Rules = append(rules, m.Rules...)
	return m, nil
}

// ParseTypeRules reads rules in LoadTypeMap's format.
func ParseTypeRules(r io.Reader) ([]TypeRule, error) {
	var rules []TypeRule
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		typ, pattern, ok := strings.Cut(line, " ")
		if !ok {
			typ, pattern, ok = strings.Cut(line, "\t")
		}
		pattern = strings.TrimSpace(pattern)
		if !ok || pattern == "" {
			return nil, fmt.Errorf("line %d: want a type name and a pattern, got %q", n, line)
		}
		if err := checkTypeName(typ); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		re, err := regexp.Compile(`(?i)` + pattern)
		if err != nil {
			return nil, fmt.Errorf("line %d: pattern %q: %w", n, pattern, err)
		}
		rules = append(rules, TypeRule{Pattern: re, Type: typ})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return rules, nil
}

// checkTypeName refuses names the daemon would refuse in a report.
func checkTypeName(typ string) error {
	if typ == "" || len(typ) > reports.MaxTypeLen {
		return fmt.Errorf("type name %q: want 1 to %d characters", typ, reports.MaxTypeLen)
	}
	for i := 0; i < len(typ); i++ {
		if !reports.ValidTypeByte(typ[i]) {
			return fmt.Errorf("type name %q: only letters, digits, '_', '-' and '.' are allowed", typ)
		}
	}
	return nil
}
