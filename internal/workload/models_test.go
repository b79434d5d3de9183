package workload

import (
	"slices"
	"strings"
	"testing"
)

func TestModelsAt(t *testing.T) {
	table := referenceTable(t)
	cases := []struct {
		family string
		scale  int
		want   []string
	}{
		{"CycleGAN", 1, []string{"CycleGAN"}},
		{"CycleGAN", 8, nil},
		{"ResNet-50", 8, []string{"ResNet-50 (batch size 128)", "ResNet-50 (batch size 16)", "ResNet-50 (batch size 32)", "ResNet-50 (batch size 64)"}},
		{"ResNet", 1, nil}, // a prefix of a family's name is not the family
		{"no such family", 1, nil},
	}
	for _, c := range cases {
		if got := ModelsAt(table, c.family, c.scale); !slices.Equal(got, c.want) {
			t.Errorf("ModelsAt(%q, %d) = %q, want %q", c.family, c.scale, got, c.want)
		}
	}
}

func TestReferenceRate(t *testing.T) {
	table := referenceTable(t)
	cases := []struct {
		model   string
		scale   int
		wantErr string
	}{
		{"ResNet-50 (batch size 64)", 8, ""},
		{"CycleGAN", 1, ""},
		{"CycleGAN", 2, "no v100 rate for CycleGAN at scale factor 2"},
		{"no such model", 1, "no v100 rate"},
	}
	for _, c := range cases {
		rate, err := ReferenceRate(table, c.model, c.scale)
		switch {
		case c.wantErr == "" && (err != nil || rate != table.Isolated(c.model, c.scale, "v100")):
			t.Errorf("ReferenceRate(%q, %d) = %v, %v; want the table's v100 rate", c.model, c.scale, rate, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("ReferenceRate(%q, %d): error = %v, want one mentioning %q", c.model, c.scale, err, c.wantErr)
		}
	}
}
