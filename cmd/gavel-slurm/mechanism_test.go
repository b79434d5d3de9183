package main

import (
	"io"
	"testing"

	"github.com/gavel-slurm/gavel-slurm/rounds"
)

// The daemon runs the improved round mechanism unless the site asks for
// the paper's.
func TestDaemonMechanismSetting(t *testing.T) {
	tests := map[string]struct {
		toml string
		want rounds.Variant
	}{
		"default":          {"[scheduler]\nround = \"1m\"\n", rounds.VariantImproved},
		"gavel on request": {"[scheduler]\nmechanism = \"gavel\"\n", rounds.VariantGavel},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg, _, err := loadDaemonConfig([]string{"--config", writeConfig(t, tc.toml)}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if got := coreSettings(cfg).Mechanism; got != tc.want {
				t.Errorf("mechanism %q, want %q", got, tc.want)
			}
		})
	}
}
