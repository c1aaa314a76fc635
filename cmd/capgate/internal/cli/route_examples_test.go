package cli_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/cmd/capgate/internal/cli"
	"github.com/capgate/capgate/sidecar/tasks/redisstore"
	"github.com/capgate/capgate/test/replicas/redisproc"
	"github.com/capgate/capgate/test/testnet"
	"github.com/capgate/capgate/test/testutil"
)

// TestRouteExamplesReview (issue 36): candidates captured in the store are
// listed per capability (near-duplicates merged, with the classifier's
// answer); accepting one needs the manifest to name an examples file (a
// reviewed change), writes the text there and forgets it in the store, and
// the deployment loaded again routes that text to the capability; rejecting
// only forgets. The card never shows an accepted example.
func TestRouteExamplesReview(t *testing.T) {
	srv := redisproc.Start(t)
	cfg := testutil.CopyFinance(t)
	testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
		s = strings.Replace(s, "store: memory", "store: "+srv.URL(0), 1)
		return strings.Replace(s, "router: {threshold: 0.6}", "router: {threshold: 0.6, learn: {capture: true}}", 1)
	})
	st, err := redisstore.Dial(t.Context(), srv.URL(0))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	const text = "where does my supplier bill stand"
	for _, s := range []string{text, text, "where does my supplier bill stand now", "drop everything"} {
		require.NoError(t, st.AddExample(t.Context(), "lookup-invoice", s, time.Hour, 10))
	}
	claims := writeClaims(t, `{"sub":"p1","scope":"recon.run"}`)
	route := func() string {
		r := run(t, "route", "--config", cfg, "--claims", claims, text)
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		return r.stdout
	}
	require.Contains(t, route(), "layer: clarify")

	r := run(t, "route", "examples", "--config", cfg)
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "lookup-invoice (routing auto; no routing.examples_file): 3 candidate(s) from 4 answer(s), 2 after merging near-duplicates")
	require.Contains(t, r.stdout, `merged: "where does my supplier bill stand now"`)
	line := regexp.MustCompile(`(?m)^  ([0-9a-f]{10})  x3 +classifier: (\S+) ([0-9.]+) .*"` + text + `"$`).FindStringSubmatch(r.stdout)
	require.NotNil(t, line, r.stdout)
	id := line[1]
	drop := regexp.MustCompile(`(?m)^  ([0-9a-f]{10})  x1 .*"drop everything"$`).FindStringSubmatch(r.stdout)
	require.NotNil(t, drop, r.stdout)

	// Accepting needs the manifest to name its examples file.
	r = run(t, "route", "examples", "accept", "--config", cfg, "--capability", "lookup-invoice", id)
	require.Equal(t, cli.ExitUsage, r.code)
	require.Contains(t, r.stderr, "routing: {examples_file: lookup-invoice.examples.txt}")
	testutil.EditFile(t, cfg, "capabilities/lookup-invoice.yaml", func(s string) string {
		return s + "routing: {examples_file: lookup-invoice.examples.txt}\n"
	})
	require.Contains(t, route(), "layer: clarify", "naming an empty file changes nothing")

	r = run(t, "route", "examples", "accept", "--config", cfg, "--capability", "lookup-invoice", id)
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "1 example(s) added")
	b, err := os.ReadFile(filepath.Join(filepath.Dir(cfg), "capabilities", "lookup-invoice.examples.txt"))
	require.NoError(t, err)
	require.Contains(t, string(b), "\n"+text+"\n")
	require.NotContains(t, string(b), "stand now", "a merged near-duplicate is not added twice")

	// The deployment loaded again (as the reloader does) routes the text.
	out := route()
	require.Contains(t, out, "layer: classifier")
	require.Contains(t, out, "capability: lookup-invoice")

	// Reject forgets; what was accepted or rejected is gone from the store.
	r = run(t, "route", "examples", "reject", "--config", cfg, "--capability", "lookup-invoice", drop[1])
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	left, err := st.ExamplesOf(t.Context(), "lookup-invoice", time.Hour)
	require.NoError(t, err)
	require.Empty(t, left)
	r = run(t, "route", "examples", "--config", cfg, "--json")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Equal(t, "[]\n", r.stdout)

	// An accepted example is server-side: no card shows it.
	for _, args := range [][]string{{"card", "--config", cfg}, {"card", "--config", cfg, "--claims", claims}} {
		r = run(t, args...)
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		require.NotContains(t, r.stdout, "supplier bill")
	}

	// Errors name what to fix.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"route", "examples", "accept", "--config", cfg, "--capability", "lookup-invoice"}, "needs --capability and the review ids"},
		{[]string{"route", "examples", "accept", "--config", cfg, "--capability", "lookup-invoice", "0123456789"}, `no candidate with review id "0123456789"`},
		{[]string{"route", "examples", "--config", cfg, "--capability", "nope"}, `--capability "nope" is not a capability`},
		{[]string{"route", "examples", "promote", "--config", cfg}, `"promote" is not one of list, accept, reject`},
		// --admin reads through that admin listener even with a shared store.
		{[]string{"route", "examples", "--config", cfg, "--admin", "http://" + testnet.RefusedAddr(t)}, "is capgate serving this config?"},
	} {
		r = run(t, tc.args...)
		require.Equal(t, cli.ExitUsage, r.code, tc.args)
		require.Contains(t, r.stderr, tc.want, tc.args)
	}
}
