package slurmtest

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// parseEnvFile reads the shell assignments that slurm-up.sh writes with
// bash's printf %q: NAME=value lines, values possibly backslash-escaped or
// single-quoted. Comments and blank lines are skipped. It is not a shell:
// anything else (expansions, $'...' strings, commands) is an error.
func parseEnvFile(r io.Reader) (map[string]string, error) {
	vars := map[string]string{}
	scanner := bufio.NewScanner(r)
	for lineNo := 1; scanner.Scan(); lineNo++ {
		line := strings.TrimSpace(scanner.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, raw, ok := strings.Cut(line, "=")
		if !ok || !validName(name) {
			return nil, fmt.Errorf("line %d: not a NAME=value assignment: %q", lineNo, line)
		}
		value, err := unquoteShellWord(raw)
		if err != nil {
			return nil, fmt.Errorf("line %d (%s): %w", lineNo, name, err)
		}
		vars[name] = value
	}
	if err := scanner.Err(); err != nil {
		return nil, fmt.Errorf("reading env file: %w", err)
	}
	return vars, nil
}

func validName(name string) bool {
	if name == "" {
		return false
	}
	for i, r := range name {
		letter := r == '_' || (r >= 'A' && r <= 'Z') || (r >= 'a' && r <= 'z')
		if !letter && (i == 0 || r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// unquoteShellWord undoes the quoting of one shell word made of plain
// characters, backslash escapes and single-quoted parts.
func unquoteShellWord(word string) (string, error) {
	var out strings.Builder
	for i := 0; i < len(word); i++ {
		switch c := word[i]; c {
		case '\\':
			if i+1 == len(word) {
				return "", fmt.Errorf("trailing backslash in %q", word)
			}
			i++
			out.WriteByte(word[i])
		case '\'':
			end := strings.IndexByte(word[i+1:], '\'')
			if end < 0 {
				return "", fmt.Errorf("unterminated single quote in %q", word)
			}
			out.WriteString(word[i+1 : i+1+end])
			i += end + 1
		case '$', '`', '"', ' ', '\t', ';', '&', '|', '<', '>', '(', ')':
			return "", fmt.Errorf("unsupported shell syntax %q in %q", c, word)
		default:
			out.WriteByte(c)
		}
	}
	return out.String(), nil
}
