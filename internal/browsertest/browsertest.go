// Package browsertest loads HTML files in headless Chromium, for tests that
// check what a reader's browser makes of a generated page: the DOM after
// its scripts ran, the errors they raised, and how it looks.
//
// It drives the chromium command line (--dump-dom, --screenshot) rather
// than the DevTools protocol. The command line does not tell console.error
// from console.log, so Load runs a copy of the page with a small script in
// front that records errors into the DOM it dumps.
package browsertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// names are the Chromium commands looked for on PATH, Debian's first.
var names = []string{"chromium", "chromium-browser", "google-chrome-stable", "google-chrome"}

// Available returns the path of the Chromium command, and whether there is
// one.
func Available() (path string, ok bool) {
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p, true
		}
	}
	return "", false
}

// RequireEnv, when set, makes a missing Chromium a test failure instead of
// a skip, on machines meant to have one (`make test` sets it).
const RequireEnv = "GAVEL_REQUIRE_CHROMIUM"

// Require skips the test when there is no Chromium, or fails it when
// RequireEnv is set, so that a browser check that did not run is visible.
func Require(t testing.TB) {
	t.Helper()
	if _, ok := Available(); ok {
		return
	}
	msg := "no Chromium on PATH (tried " + strings.Join(names, ", ") + "): the browser checks did not run; " +
		"install it with `bash scripts/test-deps.sh` (or `apt-get install chromium`)"
	if os.Getenv(RequireEnv) != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// virtualTimeBudget is how much page time (timers, animation frames)
// Chromium lets pass before it dumps the DOM or takes the screenshot, in
// virtual time: a page's timers run without the test waiting for them.
const virtualTimeBudget = 5 * time.Second

// errorsAttr is the attribute of <html> where the hook keeps the errors.
const errorsAttr = "data-browsertest-errors"

// hook records console.error calls, uncaught exceptions and unhandled
// promise rejections into errorsAttr as a JSON list of strings. It runs
// before any script of the page; it never throws.
const hook = `<script id="browsertest-hook">(function(){` +
	`var errs=[],root=document.documentElement;` +
	`function keep(m){try{errs.push(String(m));root.setAttribute("` + errorsAttr + `",JSON.stringify(errs));}catch(e){}}` +
	`function str(a){try{return a instanceof Error?String(a.stack||a):typeof a==="object"?JSON.stringify(a):String(a);}catch(e){return String(a);}}` +
	`var orig=console.error;console.error=function(){var p=[];for(var i=0;i<arguments.length;i++)p.push(str(arguments[i]));keep("console.error: "+p.join(" "));return orig.apply(console,arguments);};` +
	`window.addEventListener("error",function(e){if(e.target&&e.target!==window&&e.target.tagName){keep("failed to load "+e.target.tagName.toLowerCase()+" "+(e.target.src||e.target.href||""));return;}keep("uncaught: "+(e.error?str(e.error):e.message)+" ("+e.filename+":"+e.lineno+")");},true);` +
	`window.addEventListener("unhandledrejection",function(e){keep("unhandled rejection: "+str(e.reason));});` +
	`})();</script>`

// Load opens htmlPath in headless Chromium and returns the DOM after the
// page's scripts ran (serialized, without Load's own hook), and every
// console.error call, uncaught exception, unhandled rejection and failed
// load of an element's resource, in order. err is set when Chromium could
// not run or the page could not be read; errors of the page itself are in
// consoleErrors.
func Load(ctx context.Context, htmlPath string) (dom string, consoleErrors []string, err error) {
	page, err := os.ReadFile(htmlPath)
	if err != nil {
		return "", nil, fmt.Errorf("browsertest: %w", err)
	}
	abs, err := filepath.Abs(htmlPath)
	if err != nil {
		return "", nil, fmt.Errorf("browsertest: %w", err)
	}
	dir, err := os.MkdirTemp("", "browsertest-")
	if err != nil {
		return "", nil, fmt.Errorf("browsertest: %w", err)
	}
	defer os.RemoveAll(dir)
	// The copy lives in the temporary directory; a <base> keeps the page's
	// relative links pointing next to the original.
	inject := hook
	if !regexp.MustCompile(`(?i)<base[\s>]`).Match(page) {
		inject = `<base href="` + html.EscapeString(fileURL(filepath.Dir(abs))+"/") + `">` + hook
	}
	copyPath := filepath.Join(dir, filepath.Base(abs))
	if err := os.WriteFile(copyPath, insertHook(page, inject), 0o600); err != nil {
		return "", nil, fmt.Errorf("browsertest: %w", err)
	}
	out, err := run(ctx, dir, "--dump-dom", fileURL(copyPath))
	if err != nil {
		return "", nil, fmt.Errorf("browsertest: load %s: %w", htmlPath, err)
	}
	dom, consoleErrors, err = extractErrors(string(out))
	if err != nil {
		return "", nil, fmt.Errorf("browsertest: load %s: %w", htmlPath, err)
	}
	return removeHook(dom, inject != hook), consoleErrors, nil
}

// removeHook takes the hook, and the <base> inserted before it, out of the
// dumped DOM. The script's text comes back as it went in; the <base> is
// found by position, as Chromium may escape its URL differently.
func removeHook(dom string, withBase bool) string {
	i := strings.Index(dom, hook)
	if i < 0 {
		return dom
	}
	start := i
	if b := strings.LastIndex(dom[:i], "<base "); withBase && b >= 0 && strings.Count(dom[b:i], "<") == 1 {
		start = b
	}
	return dom[:start] + dom[i+len(hook):]
}

// Screenshot saves a PNG of htmlPath as headless Chromium shows it in a
// window of width x height CSS pixels (the part of the page beyond is cut).
func Screenshot(ctx context.Context, htmlPath, pngPath string, width, height int) error {
	if width <= 0 || height <= 0 {
		return fmt.Errorf("browsertest: screenshot size %dx%d", width, height)
	}
	abs, err := filepath.Abs(htmlPath)
	if err != nil {
		return fmt.Errorf("browsertest: %w", err)
	}
	if _, err := os.Stat(abs); err != nil {
		return fmt.Errorf("browsertest: %w", err)
	}
	png, err := filepath.Abs(pngPath)
	if err != nil {
		return fmt.Errorf("browsertest: %w", err)
	}
	dir, err := os.MkdirTemp("", "browsertest-")
	if err != nil {
		return fmt.Errorf("browsertest: %w", err)
	}
	defer os.RemoveAll(dir)
	if _, err := run(ctx, dir, "--screenshot="+png, fmt.Sprintf("--window-size=%d,%d", width, height), "--hide-scrollbars", fileURL(abs)); err != nil {
		return fmt.Errorf("browsertest: screenshot of %s: %w", htmlPath, err)
	}
	// Chromium reports a failed screenshot only in its log.
	if info, err := os.Stat(png); err != nil || info.Size() == 0 {
		return fmt.Errorf("browsertest: screenshot of %s: Chromium wrote no %s", htmlPath, pngPath)
	}
	return nil
}

// run starts Chromium with its own profile under dir and returns its
// standard output. Chromium forks helper processes; they share its process
// group, which is killed when ctx ends so that none outlives the call.
func run(ctx context.Context, dir string, args ...string) ([]byte, error) {
	bin, ok := Available()
	if !ok {
		return nil, errors.New("no Chromium on PATH (tried " + strings.Join(names, ", ") + ")")
	}
	flags := []string{
		"--headless",
		"--user-data-dir=" + filepath.Join(dir, "profile"),
		"--disable-gpu",
		"--disable-dev-shm-usage", // containers often have a small /dev/shm
		"--no-first-run",
		"--no-default-browser-check",
		"--disable-extensions",
		"--disable-background-networking",
		"--disable-component-update",
		"--disable-sync",
		"--allow-file-access-from-files",
		fmt.Sprintf("--virtual-time-budget=%d", virtualTimeBudget.Milliseconds()),
	}
	// Chromium refuses to start its sandbox as root.
	if os.Geteuid() == 0 {
		flags = append(flags, "--no-sandbox")
	}
	cmd := exec.CommandContext(ctx, bin, append(flags, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	// Helpers that linger after Chromium itself exits go with it.
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			err = ctxErr
		}
		return nil, fmt.Errorf("%s: %w; stderr: %s", bin, err, tail(stderr.String(), 2000))
	}
	return stdout.Bytes(), nil
}

// insertHook puts inject where it runs before any script of the page:
// right after <head ...>, else after <html ...>, else after the doctype,
// else first.
func insertHook(page []byte, inject string) []byte {
	for _, re := range []*regexp.Regexp{
		regexp.MustCompile(`(?i)<head(\s[^>]*)?>`),
		regexp.MustCompile(`(?i)<html(\s[^>]*)?>`),
		regexp.MustCompile(`(?i)<!doctype[^>]*>`),
	} {
		if loc := re.FindIndex(page); loc != nil {
			out := make([]byte, 0, len(page)+len(inject))
			out = append(out, page[:loc[1]]...)
			out = append(out, inject...)
			return append(out, page[loc[1]:]...)
		}
	}
	return append([]byte(inject), page...)
}

var errorsAttrRE = regexp.MustCompile(` ` + errorsAttr + `="([^"]*)"`)

// extractErrors takes the hook's attribute out of the dumped DOM and
// decodes the errors it holds.
func extractErrors(dom string) (string, []string, error) {
	m := errorsAttrRE.FindStringSubmatchIndex(dom)
	if m == nil {
		return dom, nil, nil
	}
	var list []string
	if err := json.Unmarshal([]byte(html.UnescapeString(dom[m[2]:m[3]])), &list); err != nil {
		return "", nil, fmt.Errorf("errors recorded in the page: %w", err)
	}
	return dom[:m[0]] + dom[m[1]:], list, nil
}

func fileURL(path string) string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(path)}).String()
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
