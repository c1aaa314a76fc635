package access_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/test/ci"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/capgate/capgate/policy/access"
)

// chromium finds Debian's chromium. Without it the browser test fails on
// CI (CI=true; .ci/run installs it) and is skipped, loudly, elsewhere.
func chromium(t *testing.T) string {
	t.Helper()
	return tool(t, "chromium", "chromium is not installed: the HTML report was NOT rendered in a browser "+
		"(apt-get install chromium; .ci/run installs it)")
}

// tool finds a program the browser test needs: failing on CI without it,
// skipped loudly elsewhere with msg.
func tool(t *testing.T, name, msg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if ci.Required() {
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
	d.Provenance = access.Provenance{GeneratedAt: time.Date(2026, 12, 3, 15, 0, 0, 0, time.UTC), Version: "v0.0.0-test", Commit: "0123456789ab", Config: "testdata/head/capgate.yaml"}
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
		require.Greater(t, colours(img), 8, "a rendered page, not a blank one")
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
		note := attr(hit, "data-note")
		require.Equal(t, "none → entitled["+note+"]", text(hit), "the cell says its levels in the CLI's words, and its note")
		require.Contains(t, attr(hit, "title"), "head: entitled")
		require.Contains(t, attr(hit, "title"), "grant tenant.listed(globex)")
		// The reasons are in the page, not only on hover: the cell's note.
		reasons := text(byID(t, doc, "note-"+note))
		require.Contains(t, reasons, "base none: tenant.not_listed(globex)")
		require.Contains(t, reasons, "head entitled: auth.authenticated scope.held(recon.run) state.ga tenant.listed(globex)")
		for _, td := range tds {
			require.NotEmpty(t, text(byID(t, doc, "note-"+attr(td, "data-note"))), "every cell has its note")
		}
		// One vocabulary: every cell's label is made of the CLI's level words.
		for _, td := range tds {
			label, _, _ := strings.Cut(text(td), "[")
			for _, w := range strings.Fields(label) {
				if w != "→" {
					require.Contains(t, []string{"none", "visible", "entitled", "entitled-hidden"}, w)
				}
			}
		}
		// Provenance, owners, what changed and the ranked gains with their causes.
		prov := text(byID(t, doc, "provenance"))
		for _, want := range []string{"generated at: 2026-12-03T15:00:00Z", "capgate: v0.0.0-test (commit 0123456789ab)", "config: testdata/head/capgate.yaml"} {
			require.Contains(t, prov, want)
		}
		require.Contains(t, text(doc), "testdata/base (revision ", "the subtitle names both policy revisions")
		require.Contains(t, text(doc), "owner ")
		require.Contains(t, text(byID(t, doc, "changed")), "reconcile-invoice-v2: changed: tenants [acme] → [acme globex]")
		require.Contains(t, text(byID(t, doc, "gains")), "caused by reconcile-invoice-v2: tenants [acme] → [acme globex]")
		marked := 0
		for _, td := range tds {
			if strings.Contains(attr(td, "data-change"), "gained") {
				marked++
			}
		}
		require.Equal(t, len(d.Gained), marked, "every gained cell is highlighted")
		require.Equal(t, fmt.Sprintf("showing %d of %d cells", cells, cells), text(byID(t, doc, "shown")), "the page's script ran")
	})

	t.Run("print to PDF", func(t *testing.T) {
		pdftoppm, pdftotext := poppler(t, "pdftoppm"), poppler(t, "pdftotext")
		pdf := filepath.Join(dir, "diff.pdf")
		runChromium(t, bin, "--no-pdf-header-footer", "--print-to-pdf="+pdf, url)
		// The images: landscape pages (the print rules' @page), each a
		// rendered page, the matrix's with its cells' colours.
		prefix := filepath.Join(dir, "page")
		out, err := exec.CommandContext(t.Context(), pdftoppm, "-png", "-r", "60", pdf, prefix).CombinedOutput()
		require.NoError(t, err, "%s", out)
		pages, err := filepath.Glob(prefix + "*.png")
		require.NoError(t, err)
		require.NotEmpty(t, pages)
		most := 0
		for i, p := range pages {
			f, err := os.Open(p)
			require.NoError(t, err)
			img, err := png.Decode(f)
			require.NoError(t, errors.Join(err, f.Close()))
			require.Greater(t, img.Bounds().Dx(), img.Bounds().Dy(), "A4 landscape")
			most = max(most, colours(img))
			if keep := os.Getenv("CAPGATE_KEEP_PRINT"); keep != "" {
				b, err := os.ReadFile(p)
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(fmt.Sprintf("%s-%d.png", keep, i+1), b, 0o644))
			}
		}
		require.Greater(t, most, 8, "a page with the coloured matrix, not blank ones")
		// The text: the reasons are on paper, and no word of the matrix
		// runs off the page's right edge (the matrix wraps).
		out, err = exec.CommandContext(t.Context(), pdftotext, "-bbox", pdf, "-").Output()
		require.NoError(t, err)
		doc, err := html.Parse(bytes.NewReader(out))
		require.NoError(t, err)
		var words []string
		for _, page := range elements(doc, "page") {
			width, err := strconv.ParseFloat(attr(page, "width"), 64)
			require.NoError(t, err)
			for _, w := range elements(page, "word") {
				xMax, err := strconv.ParseFloat(attr(w, "xmax"), 64)
				require.NoError(t, err)
				require.LessOrEqual(t, xMax, width, "%q runs off the page", text(w))
				words = append(words, text(w))
			}
		}
		all := strings.Join(words, " ")
		for _, want := range []string{"tenant.not_listed(globex)", "tenant.listed(globex)", "deny.sec(incident", "Deciding", "generated"} {
			require.Contains(t, all, want, "printed")
		}
		for _, col := range access.Columns(bm, hm) {
			// A long id may be broken across lines: its first part is printed.
			first, _, _ := strings.Cut(col.ID, "-")
			require.Contains(t, all, first, "every column is on the page")
		}
		require.Contains(t, all, "reconcile-", "the last column is on the page")
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

// colours counts the distinct colours of a sample of the image's pixels.
func colours(img image.Image) int {
	seen := map[uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 7 {
		for x := b.Min.X; x < b.Max.X; x += 7 {
			r, g, bl, _ := img.At(x, y).RGBA()
			seen[r>>8<<16|g>>8<<8|bl>>8] = true
		}
	}
	return len(seen)
}

// poppler finds one of poppler-utils' tools, like chromium.
func poppler(t *testing.T, name string) string {
	t.Helper()
	return tool(t, name, name+" is not installed: the report's print-to-PDF render was NOT checked "+
		"(apt-get install poppler-utils; .ci/run installs it)")
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

// overflowProbe is appended to a report for the browser test: it lists,
// in body[data-overflow], every element whose content is cut off — a
// table's box wider than the page (but the matrix's, which scrolls under
// sticky headers by design), a scope or rule list, a caller's scopes
// under a class name — as "tag.class: text".
const overflowProbe = `<script>
(function () {
  var cut = [];
  document.querySelectorAll(".wrap:not(:has(#matrix)), td.list, tbody th small, #lost li").forEach(function (e) {
    if (e.scrollWidth > e.clientWidth + 1) { cut.push(e.tagName.toLowerCase() + "." + e.className + " (" + e.scrollWidth + " > " + e.clientWidth + "): " + e.textContent.slice(0, 60)); }
  });
  document.body.setAttribute("data-overflow", cut.join(" | "));
  document.body.setAttribute("data-probed", "1");
})();
</script>`

// probe renders page (with overflowProbe) at a laptop's width and returns
// its DOM.
func probe(t *testing.T, bin, dir, name string, page []byte) *html.Node {
	t.Helper()
	path := filepath.Join(dir, name)
	page = bytes.Replace(page, []byte("</body>"), []byte(overflowProbe+"</body>"), 1)
	require.NoError(t, os.WriteFile(path, page, 0o644))
	doc, err := html.Parse(bytes.NewReader(runChromium(t, bin, "--window-size=1280,800", "--dump-dom", "file://"+path)))
	require.NoError(t, err)
	body := elements(doc, "body")[0]
	require.Equal(t, "1", attr(body, "data-probed"), "the probe ran")
	return doc
}

// The diff's HTML says what the text and Markdown say: a Lost section
// listing every lost cell with its cause and both sides' rules; and the
// long lists (a caller's scopes, the replay's scopes and rules) wrap
// within their columns, none cut off at a table's edge.
func TestHTMLReportsListLossesAndWrap(t *testing.T) {
	bin := chromium(t)
	dir := t.TempDir()
	// head → base: the gains of the golden diff are losses.
	bm, hm, d := diff(t, load(t, "head"), load(t, "base"))
	require.NotEmpty(t, d.Lost)
	var page, textReport bytes.Buffer
	require.NoError(t, access.WriteDiffHTML(&page, bm, hm, d))
	require.NoError(t, access.WriteDiffText(&textReport, d))
	doc := probe(t, bin, dir, "diff.html", page.Bytes())
	require.Empty(t, attr(elements(doc, "body")[0], "data-overflow"))
	var lost []string
	for _, li := range elements(byID(t, doc, "lost"), "li") {
		lost = append(lost, li.FirstChild.Data)
		require.Contains(t, textReport.String(), "  "+li.FirstChild.Data+"\n", "the text report's line")
	}
	require.Len(t, lost, len(d.Lost), "every lost cell is listed")
	for i, c := range d.Lost {
		require.True(t, strings.HasPrefix(lost[i], fmt.Sprintf("%s × %s: %s → %s, caused by ", c.Class, c.Capability, c.Base.Level(), c.Head.Level())), lost[i])
	}
	require.Contains(t, text(byID(t, doc, "lost")), "base: ", "both sides' rules")

	// A replay whose caller holds many scopes and whose rules are long.
	var scopes, rules []string
	for i := range 24 {
		scopes = append(scopes, fmt.Sprintf("finance.invoices.reconcile.region-%02d", i))
		rules = append(rules, fmt.Sprintf("deny.incident_freeze_region_%02d", i))
	}
	at := time.Date(2026, 12, 3, 15, 0, 0, 0, time.UTC)
	flip := access.Flip{Change: access.Loss, Capability: "reconcile-invoice", Operation: "SendMessage", Count: 3, First: at, Last: at,
		Caller: access.Caller{Issuer: "https://idp.example.com", Authenticated: true, Subject: "partner-1", Tenant: "acme", Scopes: scopes},
		Before: []string{"scope.held"}, After: rules}
	rep := &access.ReplayReport{HeadRevision: "h", Events: 3, Questions: 3, Distinct: 1, Flips: []access.Flip{flip},
		ByCapability: []access.CapabilityFlips{{Capability: "reconcile-invoice", Tally: access.Tally{Losses: 3}, Callers: 1}},
		ByCaller:     []access.CallerFlips{{Caller: flip.Caller, Tally: access.Tally{Losses: 3}, Capabilities: 1}}}
	page.Reset()
	require.NoError(t, access.WriteReplayHTML(&page, rep))
	doc = probe(t, bin, dir, "replay.html", page.Bytes())
	require.Empty(t, attr(elements(doc, "body")[0], "data-overflow"))
	require.Contains(t, page.String(), `<td class="list">`+strings.Join(scopes, " "), "the scopes are in a wrapping column")
}
