package push

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// MaxURLBytes bounds a webhook URL.
const MaxURLBytes = 2048

// hosts maps a host name to its IDNA ASCII form (UTS #46 lookup mapping: lower case, NFC), and
// checks what a DNS name may be (STD3 characters, hyphens, bidi, label and name lengths).
var hosts = idna.New(idna.MapForLookup(), idna.BidiRule(), idna.VerifyDNSLength(true), idna.Transitional(false))

// Canonical brings a webhook URL to its one canonical form (RFC 3986 §6.2.2 and §6.2.3 for
// http and https): scheme and host in lower case, a host name in its IDNA ASCII form, an IPv6
// literal in RFC 5952 form, the default port and an empty port dropped, percent-encodings of
// unreserved characters decoded and all others in upper-case hex, characters a URI cannot hold
// percent-encoded, dot segments removed (§5.2.4) and an empty path written "/".
//
// It refuses, rather than guess, what has no canonical form that means the same thing to every
// server or proxy that reads it: a scheme other than http or https, user information, a
// fragment, control characters, backslashes, an encoded "/" or "\" in the path, ";" path
// parameters, an encoded "%" in the path (double encoding), empty path segments ("//"), dot
// segments that climb above the root, malformed percent-encoding, an IPv6 zone identifier, a
// host with a trailing dot or empty label or percent-encoding, an IPv4 address in any form but
// dotted decimal (2130706433, 0x7f.1, 017.0.0.1), a host name that is not a valid IDNA name or
// does not round-trip, a bad port, and a URL longer than MaxURLBytes.
func Canonical(raw string) (string, error) {
	if len(raw) > MaxURLBytes {
		return "", fmt.Errorf("is longer than %d bytes", MaxURLBytes)
	}
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c < 0x20 || c == 0x7f:
			return "", errors.New("contains a control character")
		case c == '\\':
			return "", errors.New(`contains a backslash`)
		case c == '#':
			return "", errors.New("has a fragment (#), which is never sent")
		}
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || scheme == "" {
		return "", errors.New("is not an absolute http or https URL")
	}
	scheme = strings.ToLower(scheme)
	if scheme != "https" && scheme != "http" {
		return "", fmt.Errorf("has scheme %q, which is not allowed; use https", shown(scheme))
	}
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	authority, rest := rest[:end], rest[end:]
	path, query, hasQuery := strings.Cut(rest, "?")
	host, err := canonicalAuthority(scheme, authority)
	if err != nil {
		return "", err
	}
	path, err = canonicalPath(path)
	if err != nil {
		return "", err
	}
	out := scheme + "://" + host + path
	if hasQuery {
		q, err := canonicalQuery(query)
		if err != nil {
			return "", err
		}
		out += "?" + q
	}
	return out, nil
}

// canonicalAuthority is host[:port] in canonical form.
func canonicalAuthority(scheme, authority string) (string, error) {
	if strings.Contains(authority, "@") {
		return "", errors.New("must not carry user information")
	}
	if authority == "" {
		return "", errors.New("has no host")
	}
	var host, port string
	if strings.HasPrefix(authority, "[") {
		literal, after, ok := strings.Cut(authority[1:], "]")
		if !ok || (after != "" && after[0] != ':') {
			return "", errors.New("has a malformed IPv6 literal")
		}
		if strings.Contains(literal, "%") {
			return "", errors.New("has an IPv6 zone identifier")
		}
		a, err := netip.ParseAddr(literal)
		if err != nil || !a.Is6() {
			return "", errors.New("has a malformed IPv6 literal")
		}
		host, port = "["+a.String()+"]", strings.TrimPrefix(after, ":")
	} else {
		var hasPort bool
		host, port, hasPort = strings.Cut(authority, ":")
		if hasPort && strings.Contains(port, ":") {
			return "", errors.New("has a malformed host")
		}
		var err error
		if host, err = canonicalHost(host); err != nil {
			return "", err
		}
	}
	if port == "" {
		return host, nil
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 || strings.TrimLeft(port, "0123456789") != "" {
		return "", fmt.Errorf("has port %q, which is not a port number", shown(port))
	}
	if (scheme == "https" && n == 443) || (scheme == "http" && n == 80) {
		return host, nil
	}
	return host + ":" + strconv.FormatUint(n, 10), nil
}

// canonicalHost is a registered name or an IPv4 address in canonical form.
func canonicalHost(host string) (string, error) {
	switch {
	case host == "":
		return "", errors.New("has no host")
	case strings.Contains(host, "%"):
		return "", errors.New("has a percent-encoded host")
	case strings.HasSuffix(host, "."):
		return "", errors.New("has a host with a trailing dot")
	case strings.Contains(host, ".."):
		return "", errors.New("has a host with an empty label")
	}
	if a, ok := parseIP(host); ok {
		if !a.Is4() || a.String() != host {
			return "", errors.New("has an IP address that is not in dotted-decimal form")
		}
		return host, nil
	}
	ascii, err := hosts.ToASCII(host)
	if err != nil {
		return "", fmt.Errorf("has host %q, which is not a valid domain name", shown(host))
	}
	// The ASCII form must read back as itself: decoding its xn-- labels and mapping again gives
	// the same name, so the host a resolver looks up is the one checked here.
	uni, err := hosts.ToUnicode(ascii)
	if err != nil {
		return "", fmt.Errorf("has host %q, which is not a valid internationalized domain name", shown(host))
	}
	if again, err := hosts.ToASCII(uni); err != nil || again != ascii {
		return "", fmt.Errorf("has host %q, which does not round-trip through IDNA", shown(host))
	}
	if _, ok := parseIP(ascii); ok {
		return "", errors.New("has an IP address that is not in dotted-decimal form")
	}
	return ascii, nil
}

// canonicalPath normalises the path's percent-encoding segment by segment, refuses what could
// be read as another path, and removes dot segments.
func canonicalPath(path string) (string, error) {
	if path == "" {
		return "/", nil
	}
	segs := strings.Split(path[1:], "/")
	out := make([]string, 0, len(segs))
	for i, s := range segs {
		if s == "" && i < len(segs)-1 {
			return "", errors.New(`has an empty path segment ("//")`)
		}
		if strings.Contains(s, ";") {
			return "", errors.New(`has a ";" path parameter`)
		}
		c, err := canonicalEncoding(s, pathChar, func(b byte) error {
			switch b {
			case '/', '\\':
				return errors.New(`has an encoded "/" or "\" in its path`)
			case '%':
				return errors.New(`has an encoded "%" in its path (double encoding)`)
			}
			return nil
		})
		if err != nil {
			return "", err
		}
		out = append(out, c)
	}
	return removeDotSegments(out)
}

// removeDotSegments is RFC 3986 §5.2.4 over decoded segments of an absolute path; a ".." that
// would climb above the root is refused rather than dropped.
func removeDotSegments(segs []string) (string, error) {
	stack := make([]string, 0, len(segs))
	for i, s := range segs {
		last := i == len(segs)-1
		switch s {
		case ".":
			if last {
				stack = append(stack, "")
			}
		case "..":
			if len(stack) == 0 {
				return "", errors.New(`has a ".." segment that climbs above the root`)
			}
			stack = stack[:len(stack)-1]
			if last {
				stack = append(stack, "")
			}
		default:
			stack = append(stack, s)
		}
	}
	return "/" + strings.Join(stack, "/"), nil
}

// canonicalQuery normalises the query's percent-encoding.
func canonicalQuery(q string) (string, error) {
	return canonicalEncoding(q, queryChar, func(byte) error { return nil })
}

// canonicalEncoding decodes percent-encoded unreserved characters, writes every other encoding
// in upper-case hex and encodes the bytes allowed does not admit literally. refuseDecoded
// vets each decoded byte that stays encoded; a decoded control character is always refused.
func canonicalEncoding(s string, allowed func(byte) bool, refuseDecoded func(byte) error) (string, error) {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			if allowed(c) {
				b.WriteByte(c)
			} else {
				b.WriteByte('%')
				b.WriteByte(hex[c>>4])
				b.WriteByte(hex[c&15])
			}
			continue
		}
		if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			return "", errors.New("has a malformed percent-encoding")
		}
		d := unhex(s[i+1])<<4 | unhex(s[i+2])
		i += 2
		switch {
		case d < 0x20 || d == 0x7f:
			return "", errors.New("has an encoded control character")
		case unreserved(d):
			b.WriteByte(d)
			continue
		}
		if err := refuseDecoded(d); err != nil {
			return "", err
		}
		b.WriteByte('%')
		b.WriteByte(hex[d>>4])
		b.WriteByte(hex[d&15])
	}
	return b.String(), nil
}

// unreserved is RFC 3986's unreserved set.
func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

// pathChar is pchar without "%" (handled apart): unreserved, sub-delims, ":" and "@".
func pathChar(c byte) bool {
	return unreserved(c) || strings.IndexByte("!$&'()*+,;=:@", c) >= 0
}

// queryChar is what a query holds literally: pchar, "/" and "?".
func queryChar(c byte) bool { return pathChar(c) || c == '/' || c == '?' }

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}
