package push_test

import (
	"net/url"
	"path"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/push"
	"github.com/capgate/capgate/sidecar/push/pushtest"
)

func TestCanonical(t *testing.T) {
	for _, tc := range []struct{ in, want, refused string }{
		{in: "https://hooks.example.com/a2a/x", want: "https://hooks.example.com/a2a/x"},
		{in: "HTTPS://HOOKS.Example.COM/a2a/x", want: "https://hooks.example.com/a2a/x"},
		{in: "https://hooks.example.com:443/a2a", want: "https://hooks.example.com/a2a"},
		{in: "http://hooks.example.com:80/a2a", want: "http://hooks.example.com/a2a"},
		{in: "https://hooks.example.com:/a2a", want: "https://hooks.example.com/a2a"},
		{in: "https://hooks.example.com:08443/a2a", want: "https://hooks.example.com:8443/a2a"},
		{in: "https://hooks.example.com", want: "https://hooks.example.com/"},
		{in: "https://hooks.example.com?x=1", want: "https://hooks.example.com/?x=1"},
		{in: "https://hooks.example.com/%7e%41%2d/%c3%a9", want: "https://hooks.example.com/~A-/%C3%A9"},
		{in: "https://hooks.example.com/é x", want: "https://hooks.example.com/%C3%A9%20x"},
		{in: "https://hooks.example.com/a2a/../admin", want: "https://hooks.example.com/admin"},
		{in: "https://hooks.example.com/a2a/%2e%2e/admin", want: "https://hooks.example.com/admin"},
		{in: "https://hooks.example.com/a2a/.%2e/admin", want: "https://hooks.example.com/admin"},
		{in: "https://hooks.example.com/a2a/./x/.", want: "https://hooks.example.com/a2a/x/"},
		{in: "https://hooks.example.com/a2a/x/..", want: "https://hooks.example.com/a2a/"},
		{in: "https://hooks.example.com/a2a?%2f%2e%25", want: "https://hooks.example.com/a2a?%2F.%25"},
		{in: "https://höoks.example.com/", want: "https://xn--hoks-5qa.example.com/"},
		{in: "https://ｈooks.example.com/", want: "https://hooks.example.com/"},
		{in: "https://[2001:DB8:0::1]:443/", want: "https://[2001:db8::1]/"},
		{in: "https://[::FFFF:7F00:1]/", want: "https://[::ffff:127.0.0.1]/"},
		{in: "https://hooks.example.com/a2a/..%2fadmin", refused: `encoded "/"`},
		{in: "https://hooks.example.com/a2a/%2E%2E%2Fadmin", refused: `encoded "/"`},
		{in: "https://hooks.example.com/a2a/..%5cadmin", refused: `encoded "/" or "\"`},
		{in: "https://hooks.example.com/a2a/;/../admin", refused: `";" path parameter`},
		{in: "https://hooks.example.com/a2a;x=1/b", refused: `";" path parameter`},
		{in: "https://hooks.example.com/../admin", refused: "climbs above the root"},
		{in: "https://hooks.example.com/a2a/%252e%252e/admin", refused: "double encoding"},
		{in: `https://hooks.example.com/a2a\..\admin`, refused: "backslash"},
		{in: "https://hooks.example.com/a2a/\x00", refused: "control character"},
		{in: "https://hooks.example.com/a2a/%0a", refused: "control character"},
		{in: "https://hooks.example.com/a2a//x", refused: "empty path segment"},
		{in: "https://hooks.example.com/a2a/%zz", refused: "malformed percent-encoding"},
		{in: "https://hooks.example.com/a2a#x", refused: "fragment"},
		{in: "https://user@hooks.example.com/", refused: "user information"},
		{in: "https://[fe80::1%25eth0]/", refused: "zone identifier"},
		{in: "https://hooks.example.com./", refused: "trailing dot"},
		{in: "https://hooks..example.com/", refused: "empty label"},
		{in: "https://hooks%2eexample.com/", refused: "percent-encoded host"},
		{in: "https://2130706433/", refused: "dotted-decimal"},
		{in: "https://0x7f.1/", refused: "dotted-decimal"},
		{in: "https://127.000.0.1/", refused: "dotted-decimal"},
		{in: "https://xn--a.example.com/", refused: "domain name"},
		{in: "https://hooks-.example.com/", refused: "domain name"},
		{in: "https://hooks_example.com/", refused: "domain name"},
		{in: "https://hooks.example.com:65536/", refused: "not a port number"},
		{in: "https://hooks.example.com:+443/", refused: "not a port number"},
		{in: "ftp://hooks.example.com/", refused: "scheme"},
		{in: "hooks.example.com/a2a", refused: "absolute"},
		{in: "https://hooks.example.com/" + strings.Repeat("x", push.MaxURLBytes), refused: "longer than"},
	} {
		t.Run(tc.in[:min(len(tc.in), 60)], func(t *testing.T) {
			got, err := push.Canonical(tc.in)
			if tc.refused != "" {
				require.ErrorContains(t, err, tc.refused)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// TestCorpus runs the generated corpus through the policy with each spelling of the prefix.
// Every URL admitted must be canonical, be read by net/url as the same host and a path under
// the prefix, and stay under the prefix for a server that normalises as leniently as any
// does (decoding percent-encoding until nothing changes, treating "\" as "/", dropping ";"
// parameters, merging slashes, resolving dot segments). The issue's six URLs are refused.
func TestCorpus(t *testing.T) {
	corpus := pushtest.Corpus()
	require.Greater(t, len(corpus), 300, "the corpus looks truncated")
	for _, prefix := range []string{pushtest.Prefix, pushtest.Prefix + "/"} {
		p := push.Policy{Enabled: true, Allowed: []string{prefix}}
		admitted := 0
		for _, u := range corpus {
			if c, err := push.Canonical(u); err == nil {
				again, err := push.Canonical(c)
				require.NoError(t, err, "the canonical form of %q is refused", u)
				require.Equal(t, c, again, "Canonical is not idempotent on %q", u)
			}
			err := p.CheckURL(u)
			if err != nil {
				require.LessOrEqual(t, len(err.Error()), 2*128+200, "an error repeats at most 128 bytes of the URL")
				continue
			}
			admitted++
			c, cerr := push.Canonical(u)
			require.NoError(t, cerr)
			require.Equal(t, c, u, "admitted a URL that is not canonical: %q", u)
			pu, perr := url.Parse(u)
			require.NoError(t, perr, u)
			require.Equal(t, "hooks.example.com", pu.Host, u)
			require.True(t, under(pu.Path, "/a2a"), "net/url reads %q as path %q", u, pu.Path)
			require.True(t, under(lenientPath(pu.EscapedPath()), "/a2a"), "a normalising server reads %q as %q", u, lenientPath(pu.EscapedPath()))
		}
		require.Positive(t, admitted, "the corpus admits nothing: the success path is untested")
		for _, u := range pushtest.Issue21 {
			require.Error(t, p.CheckURL(u), "issue 21's %q is admitted under %q", u, prefix)
		}
		require.NoError(t, p.CheckURL(pushtest.Allowed))
	}
}

// under reports whether p is dir or below it.
func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// lenientPath is the path the most lenient normalising server would serve.
func lenientPath(p string) string {
	for {
		d, err := url.PathUnescape(p)
		if err != nil || d == p {
			break
		}
		p = d
	}
	p = strings.ReplaceAll(p, `\`, "/")
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i], _, _ = strings.Cut(s, ";")
	}
	return path.Clean("/" + strings.Join(segs, "/"))
}

func TestCheckPrefix(t *testing.T) {
	require.NoError(t, push.CheckPrefix("https://hooks.example.com/a2a/"))
	require.NoError(t, push.CheckPrefix("http://127.0.0.1:9000/"))
	require.ErrorContains(t, push.CheckPrefix("https://HOOKS.example.com/a2a/"), `write it as "https://hooks.example.com/a2a/"`)
	require.ErrorContains(t, push.CheckPrefix("https://hooks.example.com/a2a?x"), "no query")
	require.ErrorContains(t, push.CheckPrefix("https://hooks.example.com/a2a/../"), "canonical")
	require.ErrorContains(t, push.CheckPrefix("https://u@hooks.example.com/"), "user information")
}
