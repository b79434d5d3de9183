// Package slurmcontrib tests the Slurm-side files in contrib/slurm that
// need more than a shell: job_submit.lua is run by every Lua interpreter
// found on PATH, through testdata/harness.lua, and compared with the
// daemon's own Go code.
package slurmcontrib

import (
	"bytes"
	"context"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Interpreters tried, oldest first. Slurm links the Lua its distribution
// ships: 5.1 on Debian and Ubuntu, 5.3 on Enterprise Linux 8 and 9.
var luaNames = []string{"lua5.1", "lua5.2", "lua5.3", "lua5.4", "luajit", "lua"}

// requireLuaEnv makes a missing interpreter a failure instead of a skip,
// for CI machines that are meant to have one.
const requireLuaEnv = "GAVEL_REQUIRE_LUA"

// interpreters returns the distinct Lua interpreters on PATH, or skips the
// test when there is none.
func interpreters(t *testing.T) []string {
	t.Helper()
	var found []string
	seen := map[string]bool{}
	for _, name := range luaNames {
		path, err := exec.LookPath(name)
		if err != nil {
			continue
		}
		// "lua" is usually a link to one of the others.
		real, err := filepath.EvalSymlinks(path)
		if err != nil {
			real = path
		}
		if seen[real] {
			continue
		}
		seen[real] = true
		found = append(found, path)
	}
	if len(found) == 0 {
		msg := "no Lua interpreter on PATH (tried " + strings.Join(luaNames, ", ") +
			"): the job_submit.lua half of this test did not run; install one with `apt-get install lua5.1` or `make deps`"
		if os.Getenv(requireLuaEnv) != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return found
}

// forEachLua runs f as a subtest for each interpreter.
func forEachLua(t *testing.T, f func(t *testing.T, lua string)) {
	for _, lua := range interpreters(t) {
		t.Run(filepath.Base(lua), func(t *testing.T) { f(t, lua) })
	}
}

// runHarness runs testdata/harness.lua in mode with one hex-encoded input
// line per element of inputs and returns its output lines.
func runHarness(t *testing.T, lua, mode string, inputs []string) []string {
	t.Helper()
	var stdin bytes.Buffer
	for _, in := range inputs {
		stdin.WriteString(hex.EncodeToString([]byte(in)))
		stdin.WriteByte('\n')
	}
	return runHarnessRaw(t, lua, mode, stdin.Bytes())
}

func runHarnessRaw(t *testing.T, lua, mode string, stdin []byte) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, lua, filepath.Join("testdata", "harness.lua"), "job_submit.lua", mode)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s harness.lua %s: %v\n%s", lua, mode, err, stderr.String())
	}
	out := strings.TrimSuffix(stdout.String(), "\n")
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}

// unhex decodes a field of the harness's output.
func unhex(t *testing.T, s string) string {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("harness output %q is not hex: %v", s, err)
	}
	return string(b)
}
