// Package pushtest generates spellings of webhook URLs for tests of the push URL policy: every
// trick of issue 21 (dot segments plain and encoded, encoded separators, path parameters) and
// the usual suspects (case, double encoding, IPv6 zone ids, trailing dots, ports, default ports,
// user information, unicode hosts, control characters, IP addresses in other spellings), each
// applied to a URL under Prefix.
package pushtest

import "strings"

// Prefix is the allow-list entry the corpus is built around, and Allowed a URL under it.
const (
	Prefix  = "https://hooks.example.com/a2a"
	Allowed = "https://hooks.example.com/a2a/x"
)

// Issue21 are the six URLs issue 21 found admitted with push.allowed_urls
// ["https://hooks.example.com/a2a/"]: each names /admin to a normalising server.
var Issue21 = []string{
	"https://hooks.example.com/a2a/../admin",
	"https://hooks.example.com/a2a/%2e%2e/admin",
	"https://hooks.example.com/a2a/..%2fadmin",
	"https://hooks.example.com/a2a/%2E%2E%2Fadmin",
	"https://hooks.example.com/a2a/;/../admin",
	"https://hooks.example.com/a2a/.%2e/admin",
}

// Corpus returns the generated spellings (without duplicates), Issue21 first.
func Corpus() []string {
	var out []string
	seen := map[string]bool{}
	add := func(u string) {
		if !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	for _, u := range Issue21 {
		add(u)
	}
	schemes := []string{"https", "HTTPS", "Https", "http", "ftp", "javascript", ""}
	hosts := []string{
		"hooks.example.com", "HOOKS.Example.COM", "hooks.example.com.", "hooks.example.com..", "hooks..example.com",
		"hooks.example.com%2e", "hooks%2eexample.com", "ｈooks.example.com", "höoks.example.com", "xn--hoks-5qa.example.com",
		"xn--hooks.example.com", "hooks.example.com.evil.net", "evil.net", "user@hooks.example.com",
		"user:pw@hooks.example.com", "hooks.example.com@evil.net", "@hooks.example.com",
		"127.0.0.1", "127.1", "2130706433", "0x7f.1", "017700000001", "0177.0.0.1", "127.000.000.001",
		"169.254.169.254", "10.0.0.1", "localhost", "LOCALHOST", "[::1]", "[::ffff:127.0.0.1]", "[::FFFF:7F00:1]",
		"[fe80::1%25eth0]", "[fe80::1%eth0]", "[FE80::1]", "[0:0:0:0:0:0:0:1]", "[2001:db8::1]", "[2001:DB8:0::1]",
		"[v1.x]", "[127.0.0.1]", "", "hooks.example.com:", "hooks_example.com",
	}
	ports := []string{"", ":", ":443", ":0443", ":80", ":8443", ":08443", ":65536", ":0", ":-1", ":443x", ":+443", ": 443"}
	tricks := []string{
		"..", ".", "%2e%2e", "%2E%2E", ".%2e", "%2e.", "%2e", "..%2f", "%2e%2e%2f", "%2E%2E%2F", "..%5c", "..%5C",
		`..\`, ";", ";x=1", "x;y", "%3b", "%252e%252e", "%252f", "%25", "", "%2f", "%2F", "%5c", "%00", "%0a", "%7f",
		"%7e", "%7E", "~", "%41", "%4a", "%c3%a9", "%C3%A9", "é", " ", "%20", "%", "%zz", "%2", "a%2", "...", ".a", "a.",
		"\t", "\x00", "\x7f",
	}
	for _, s := range schemes {
		add(s + "://hooks.example.com/a2a/x")
	}
	add("hooks.example.com/a2a/x")
	add("//hooks.example.com/a2a/x")
	add("https:/hooks.example.com/a2a/x")
	add("https:hooks.example.com/a2a/x")
	for _, h := range hosts {
		add("https://" + h + "/a2a/x")
		add("HTTPS://" + h + "/a2a/x")
	}
	for _, p := range ports {
		add("https://hooks.example.com" + p + "/a2a/x")
		add("http://hooks.example.com" + p + "/a2a/x")
		add("https://HOOKS.example.com" + p + "/a2a/x")
	}
	for _, t := range tricks {
		add("https://hooks.example.com/a2a/" + t + "/admin")
		add("https://hooks.example.com/a2a/" + t)
		add("https://hooks.example.com/" + t + "/a2a/x")
		add("https://hooks.example.com/a2a/x?" + t)
	}
	for _, u := range []string{
		"https://hooks.example.com", "https://hooks.example.com/", "https://hooks.example.com/a2a", "https://hooks.example.com/a2a/",
		"https://hooks.example.com/a2ax", "https://hooks.example.com/a2a//x", "https://hooks.example.com//a2a/x",
		"https://hooks.example.com/A2A/x", "https://hooks.example.com/a2a/x/", "https://hooks.example.com/a2a/x#frag",
		"https://hooks.example.com/a2a/x?", "https://hooks.example.com/a2a/x?a=1&b=%2f", "https://hooks.example.com?a2a",
		"https://hooks.example.com/a2a/x?%2e%2e", "https://hooks.example.com/a2a/%2e%2e%2fadmin?x",
		"https://hooks.example.com/a2a/%%32%65%%32%65/admin", "https://hooks.example.com/a2a/%u002e%u002e/admin",
		"https://hooks.example.com/a2a/x/../../admin", "https://hooks.example.com/a2a/x/../../../admin",
		"https://hooks.example.com/a2a/./x", "https://hooks.example.com/a2a/x/.", "https://hooks.example.com/a2a/x/..",
		"https://hooks.example.com\\a2a\\x", "https://hooks.example.com/a2a\\..\\admin", " https://hooks.example.com/a2a/x",
		"https://hooks.example.com/a2a/x ", "https://hooks.example.com/a2a/x\r\n", "https://hooks.example.com/a2a/" + strings.Repeat("x", 3000),
		"https://evil.net/https://hooks.example.com/a2a/x", "https://hooks.example.com:443@evil.net/a2a/x",
		"https://evil.net\\@hooks.example.com/a2a/x", "https://hooks.example.com%2f@evil.net/a2a/x",
	} {
		add(u)
	}
	return out
}
