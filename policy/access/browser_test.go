package access_test

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/capgate/capgate/policy/access"
)

// chromium finds Debian's chromium. Without it the browser test fails on
// CI (CI=true; .ci/run installs it) and is skipped, loudly, elsewhere.
func chromium(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("chromium")
	if err == nil {
		return p
	}
	const msg = "chromium is not installed: the HTML report was NOT rendered in a browser " +
		"(apt-get install chromium; .ci/run installs it)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Log("!!! " + msg)
	t.Skip(msg)
	return ""
}

// runChromium runs headless chromium with its own profile, no network
// services and no sandbox (tests may run as root), and returns stdout.
func runChromium(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	// A safety bound for a hung browser, not a timing assertion.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir()}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "chromium %s: %s", strings.Join(args, " "), stderr.String())
	return stdout.Bytes()
}

// TestHTMLReportInBrowser renders the diff report of the golden
// deployments in headless chromium: a screenshot that is a real page, and
// the DOM after the page's script ran (every cell, the known gained cell,
// the filter preset from the address).
func TestHTMLReportInBrowser(t *testing.T) {
	bin := chromium(t)
	base, head := load(t, "base"), load(t, "head")
	bm, hm, d := diff(t, base, head)
	dir := t.TempDir()
	page := filepath.Join(dir, "diff.html")
	var buf bytes.Buffer
	require.NoError(t, access.WriteDiffHTML(&buf, bm, hm, d))
	require.NoError(t, os.WriteFile(page, buf.Bytes(), 0o644))
	require.NotContains(t, buf.String(), "http://", "self-contained: no external assets")
	require.NotContains(t, buf.String(), "https://")
	url := "file://" + page
	columns := len(access.Columns(bm, hm))
	cells := len(hm.Classes) * columns

	t.Run("screenshot", func(t *testing.T) {
		shot := filepath.Join(dir, "diff.png")
		runChromium(t, bin, "--window-size=1400,900", "--hide-scrollbars", "--screenshot="+shot, url)
		f, err := os.Open(shot)
		require.NoError(t, err)
		defer func() { _ = f.Close() }()
		img, err := png.Decode(f)
		require.NoError(t, err)
		require.Equal(t, image.Rect(0, 0, 1400, 900), img.Bounds())
		colours := map[uint32]bool{}
		for y := 0; y < 900; y += 7 {
			for x := 0; x < 1400; x += 7 {
				r, g, b, _ := img.At(x, y).RGBA()
				colours[r>>8<<16|g>>8<<8|b>>8] = true
			}
		}
		require.Greater(t, len(colours), 8, "a rendered page, not a blank one")
		if keep := os.Getenv("CAPGATE_KEEP_SCREENSHOT"); keep != "" {
			b, err := os.ReadFile(shot)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(keep, b, 0o644))
		}
	})

	t.Run("DOM", func(t *testing.T) {
		doc, err := html.Parse(bytes.NewReader(runChromium(t, bin, "--dump-dom", url)))
		require.NoError(t, err)
		tds := elements(doc, "td")
		require.Len(t, tds, cells, "one cell per class and capability")
		gained := find(t, d.Gained, "tenant:globex", "reconcile-invoice-v2")
		var hit *html.Node
		for _, td := range tds {
			if attr(td, "data-class") == gained.Class && attr(td, "data-capability") == gained.Capability {
				hit = td
			}
		}
		require.NotNil(t, hit, "the gained cell is in the page")
		require.Contains(t, strings.Fields(attr(hit, "class")), "gained")
		require.Equal(t, "·→run", text(hit))
		require.Contains(t, attr(hit, "title"), "head: entitled")
		require.Contains(t, attr(hit, "title"), "grant tenant.listed(globex)")
		marked := 0
		for _, td := range tds {
			if strings.Contains(attr(td, "data-change"), "gained") {
				marked++
			}
		}
		require.Equal(t, len(d.Gained), marked, "every gained cell is highlighted")
		require.Equal(t, fmt.Sprintf("showing %d of %d cells", cells, cells), text(byID(t, doc, "shown")), "the page's script ran")
	})

	t.Run("filters from the address", func(t *testing.T) {
		doc, err := html.Parse(bytes.NewReader(runChromium(t, bin, "--dump-dom", url+"#class=tenant:&cap=reconcile&changed=1")))
		require.NoError(t, err)
		var shown []string
		for _, td := range elements(doc, "td") {
			if !slices.Contains(strings.Fields(attr(td, "class")), "hidden") && !hiddenRow(td) && attr(td, "data-change") != "" {
				shown = append(shown, attr(td, "data-class")+" "+attr(td, "data-capability"))
			}
		}
		require.ElementsMatch(t, []string{
			"tenant:acme reconcile-invoice", "tenant:globex reconcile-invoice", "tenant:globex reconcile-invoice-v2",
		}, shown)
		require.Equal(t, fmt.Sprintf("showing 3 of %d cells", cells), text(byID(t, doc, "shown")))
	})
}

func elements(n *html.Node, tag string) []*html.Node {
	var out []*html.Node
	for c := range n.Descendants() {
		if c.Type == html.ElementNode && c.Data == tag {
			out = append(out, c)
		}
	}
	return out
}

func byID(t *testing.T, n *html.Node, id string) *html.Node {
	t.Helper()
	for c := range n.Descendants() {
		if c.Type == html.ElementNode && attr(c, "id") == id {
			return c
		}
	}
	require.Failf(t, "no element", "#%s", id)
	return nil
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func text(n *html.Node) string {
	var b strings.Builder
	for c := range n.Descendants() {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
	}
	return b.String()
}

// hiddenRow reports whether the cell's row is filtered out.
func hiddenRow(td *html.Node) bool {
	return td.Parent != nil && slices.Contains(strings.Fields(attr(td.Parent, "class")), "hidden")
}
