package nvml

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDefaultTypeMap(t *testing.T) {
	m := DefaultTypeMap()
	cases := []struct{ product, want string }{
		{"NVIDIA H100 80GB HBM3", "h100"},
		{"NVIDIA H100 PCIe", "h100"},
		{"NVIDIA H100 NVL", "h100"},
		{"NVIDIA H200", "h200"},
		{"NVIDIA GH200 480GB", "gh200"},
		{"Tesla V100-SXM2-16GB", "v100"},
		{"Tesla V100S-PCIE-32GB", "v100"},
		{"NVIDIA A100-SXM4-40GB", "a100"},
		{"NVIDIA A100 80GB PCIe", "a100"},
		{"Mock NVIDIA A100-SXM4-40GB", "a100"}, // go-nvml's dgxa100 mock
		{"NVIDIA A10", "a10"},
		{"NVIDIA A10G", "a10g"},
		{"NVIDIA A40", "a40"},
		{"Tesla K80", "k80"},
		{"Tesla P100-PCIE-16GB", "p100"},
		{"Tesla P4", "p4"},
		{"Tesla T4", "t4"},
		{"NVIDIA L40S", "l40s"},
		{"NVIDIA L40", "l40"},
		{"NVIDIA L4", "l4"},
		{"nvidia l40s", "l40s"}, // case does not matter
		// No rule: the first model word.
		{"NVIDIA B300 SXM6 AC", "b300"},
		{"NVIDIA GeForce RTX 4090", "rtx4090"},
		{"NVIDIA RTX A6000", "rtxa6000"},
		{"Quadro GV100", "gv100"},
		{"NVIDIA TITAN V", "titanv"},
		{"NVIDIA", "unknown"},
		{"", "unknown"},
		{"NVIDIA ☃☃", "unknown"},
		{"NVIDIA X/Y\x1b[1m", "xy1m"},
	}
	for _, c := range cases {
		if got := m.Type(c.product); got != c.want {
			t.Errorf("Type(%q) = %q, want %q", c.product, got, c.want)
		}
	}
}

func TestLoadTypeMap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "types")
	const file = `# site types
a100-80g   A100.*80GB     # the big ones
tesla_v100	V100
`
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := LoadTypeMap(path)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ product, want string }{
		{"NVIDIA A100 80GB PCIe", "a100-80g"},  // site rule first
		{"NVIDIA A100-SXM4-40GB", "a100"},      // then the built-in ones
		{"Tesla V100-SXM2-16GB", "tesla_v100"}, // a site rule replaces a built-in one
		{"Tesla K80", "k80"},
	}
	for _, c := range cases {
		if got := m.Type(c.product); got != c.want {
			t.Errorf("Type(%q) = %q, want %q", c.product, got, c.want)
		}
	}
	if _, err := LoadTypeMap(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing type map loaded")
	}
}

func TestParseTypeRulesErrors(t *testing.T) {
	cases := []struct{ text, want string }{
		{"a100", "want a type name and a pattern"},
		{"a100 (", "line 1: pattern"},
		{"\n\nbad:type A100", "line 3: type name"},
		{"v 100 V100", ""}, // "v" with pattern "100 V100": legal, if odd
		{strings.Repeat("x", 65) + " X", "type name"},
	}
	for _, c := range cases {
		_, err := ParseTypeRules(strings.NewReader(c.text))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v", c.text, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: error %v, want one mentioning %q", c.text, err, c.want)
		}
	}
}
