package bridge

import "testing"

func TestResolveModel(t *testing.T) {
	known := []string{
		"ResNet-50 (batch size 64)", "ResNet-18 (batch size 64)", "LM (batch size 20)",
		"Recommendation (batch size 512)", "A3C", "CycleGAN", "Transformer (batch size 128)",
	}
	tests := map[string]struct {
		name   string
		want   string
		wantOK bool
	}{
		"exact":                 {"ResNet-50 (batch size 64)", "ResNet-50 (batch size 64)", true},
		"alias with dash":       {"resnet50-bs64", "ResNet-50 (batch size 64)", true},
		"alias other case":      {"ResNet50_BS64", "ResNet-50 (batch size 64)", true},
		"different depth":       {"resnet18-bs64", "ResNet-18 (batch size 64)", true},
		"lm":                    {"lm-bs20", "LM (batch size 20)", true},
		"single word":           {"cyclegan", "CycleGAN", true},
		"recommendation":        {"recommendation-bs512", "Recommendation (batch size 512)", true},
		"unknown batch size":    {"resnet50-bs65", "", false},
		"unknown model":         {"bert-large", "", false},
		"punctuation only":      {"---", "", false},
		"spaces in batch words": {"transformer (Batch Size 128)", "Transformer (batch size 128)", true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := ResolveModel(tc.name, known)
			if got != tc.want || ok != tc.wantOK {
				t.Fatalf("ResolveModel(%q) = %q, %v; want %q, %v", tc.name, got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestResolveModelAmbiguous(t *testing.T) {
	if got, ok := ResolveModel("ab", []string{"A-B", "a_b"}); ok {
		t.Fatalf("ambiguous alias resolved to %q", got)
	}
}
