package browsertest

import (
	"context"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func writePage(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func context60(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestLoadReportsErrors(t *testing.T) {
	Require(t)
	dir := t.TempDir()
	// A 1x1 PNG next to the page: a relative link to it must still load
	// from the copy Load runs.
	img := image.NewRGBA(image.Rect(0, 0, 1, 1))
	f, err := os.Create(filepath.Join(dir, "dot.png"))
	if err != nil {
		t.Fatal(err)
	}
	if err := png.Encode(f, img); err != nil {
		t.Fatal(err)
	}
	f.Close()
	cases := []struct {
		name     string
		page     string
		want     []string // substrings, one per reported error
		inDOM    []string
		notInDOM []string
	}{
		{
			name: "clean page",
			page: `<!doctype html><html><head><title>t</title></head><body><p>hi</p><img src="dot.png">` +
				`<script>console.log("just a log"); console.warn("a warning"); document.body.dataset.ran = "yes";</script></body></html>`,
			inDOM:    []string{`data-ran="yes"`, "<p>hi</p>"},
			notInDOM: []string{"browsertest", "<base"},
		},
		{
			name: "throw and console.error",
			page: `<!doctype html><html><body><script>console.error("y"); throw new Error("x");</script></body></html>`,
			want: []string{"console.error: y", "Error: x"},
		},
		{
			name: "later errors: timer, rejection, missing image",
			page: `<p>no html or head tag</p><img src="missing.png">` +
				`<script>setTimeout(function(){ null.f(); }, 1000); Promise.reject(new Error("nope"));</script>`,
			want: []string{"missing.png", "unhandled rejection: Error: nope", "TypeError"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writePage(t, dir, strings.ReplaceAll(c.name, " ", "_")+".html", c.page)
			dom, errs, err := Load(context60(t), path)
			if err != nil {
				t.Fatal(err)
			}
			if len(errs) != len(c.want) {
				t.Fatalf("errors %q, want %d like %q", errs, len(c.want), c.want)
			}
			// Asynchronous errors (a failed load, a rejection) come in
			// no fixed order.
			for _, want := range c.want {
				if !slices.ContainsFunc(errs, func(e string) bool { return strings.Contains(e, want) }) {
					t.Errorf("no error mentions %q: %q", want, errs)
				}
			}
			for _, want := range c.inDOM {
				if !strings.Contains(dom, want) {
					t.Errorf("DOM lacks %q:\n%s", want, dom)
				}
			}
			for _, no := range c.notInDOM {
				if strings.Contains(dom, no) {
					t.Errorf("DOM has %q:\n%s", no, dom)
				}
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	if _, _, err := Load(context.Background(), filepath.Join(t.TempDir(), "none.html")); err == nil {
		t.Error("loading a missing file succeeded")
	}
}

func TestScreenshot(t *testing.T) {
	Require(t)
	dir := t.TempDir()
	page := writePage(t, dir, "red.html", `<!doctype html><html><body style="margin:0;background:#ff0000"></body></html>`)
	out := filepath.Join(dir, "red.png")
	if err := Screenshot(context60(t), page, out, 320, 200); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 320 || b.Dy() != 200 {
		t.Errorf("screenshot is %dx%d, want 320x200", b.Dx(), b.Dy())
	}
	r, g, b, _ := img.At(160, 100).RGBA()
	if got := (color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), 0}); got.R < 0xf0 || got.G > 0x10 || got.B > 0x10 {
		t.Errorf("centre pixel %v, want the page's red", got)
	}
	if err := Screenshot(context60(t), page, out, 0, 10); err == nil {
		t.Error("a 0-pixel-wide screenshot succeeded")
	}
}

func TestLoadHonoursContext(t *testing.T) {
	Require(t)
	page := writePage(t, t.TempDir(), "p.html", `<p>x</p>`)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if _, _, err := Load(ctx, page); err == nil {
		t.Error("Load with a cancelled context succeeded")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Load took %v after its context ended", d)
	}
}
