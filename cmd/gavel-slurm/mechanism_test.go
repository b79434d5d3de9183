package main

import (
	"io"
	"testing"
	"time"

	"github.com/gavel-slurm/gavel-slurm/rounds"
)

// The daemon runs the restart-aware round mechanism unless the site asks
// for another, with the configured default restart cost.
func TestDaemonMechanismSetting(t *testing.T) {
	tests := map[string]struct {
		toml        string
		want        rounds.Variant
		wantRestart time.Duration
	}{
		"default":             {"[scheduler]\nround = \"1m\"\n", rounds.VariantRestart, time.Minute},
		"gavel on request":    {"[scheduler]\nmechanism = \"gavel\"\n", rounds.VariantGavel, time.Minute},
		"improved on request": {"[scheduler]\nmechanism = \"improved\"\ndefault_restart_cost = \"3m\"\n", rounds.VariantImproved, 3 * time.Minute},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg, _, err := loadDaemonConfig([]string{"--config", writeConfig(t, tc.toml)}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			set := coreSettings(cfg)
			if set.Mechanism != tc.want || set.DefaultRestart != tc.wantRestart {
				t.Errorf("mechanism %q, default restart cost %s; want %q, %s", set.Mechanism, set.DefaultRestart, tc.want, tc.wantRestart)
			}
		})
	}
}
