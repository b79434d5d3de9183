package bridge

import (
	"regexp"
	"strings"
)

// batchSize matches the "(batch size N)" part of reference job type names.
var batchSize = regexp.MustCompile(`(?i)\(\s*batch\s+size\s+(\d+)\s*\)`)

// ModelKey reduces a model name to the form that aliases share: lower case,
// "(batch size N)" written "bsN", everything but letters and digits dropped.
// "ResNet-50 (batch size 64)", "resnet50-bs64" and "ResNet50_BS64" all give
// "resnet50bs64", so users can type a short alias without spaces.
func ModelKey(name string) string {
	name = batchSize.ReplaceAllString(name, " bs$1 ")
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// ResolveModel matches a tag's model name against known job types (such as
// the models of a throughput table): an exact match first, then a match by
// ModelKey. It returns the known name and whether one matched; an ambiguous
// alias matches nothing.
func ResolveModel(name string, known []string) (string, bool) {
	for _, k := range known {
		if k == name {
			return k, true
		}
	}
	key := ModelKey(name)
	if key == "" {
		return "", false
	}
	match := ""
	for _, k := range known {
		if ModelKey(k) == key {
			if match != "" && match != k {
				return "", false
			}
			match = k
		}
	}
	return match, match != ""
}
