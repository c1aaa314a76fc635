// Package push holds the policy for push notification webhooks: whether they are enabled, and
// which URLs a caller may have an agent call back.
package push

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Policy is the deployment's push notification policy (config push.*).
type Policy struct {
	Enabled bool
	// Allowed are URL prefixes; a webhook URL must start with one of them, at a path boundary.
	Allowed []string
}

// Validate reports every problem of the policy (errors.Join of *PrefixError): each allowed
// prefix must pass CheckPrefix. policy/config holds the file's push section; this is its rule.
func (p Policy) Validate() error {
	var errs []error
	for i, u := range p.Allowed {
		if err := CheckPrefix(u); err != nil {
			errs = append(errs, &PrefixError{Index: i, Err: err})
		}
	}
	return errors.Join(errs...)
}

// PrefixError is a push.allowed_urls entry CheckPrefix refuses: its index and why.
type PrefixError struct {
	Index int
	Err   error
}

func (e *PrefixError) Error() string { return fmt.Sprintf("allowed_urls[%d]: %v", e.Index, e.Err) }
func (e *PrefixError) Unwrap() error { return e.Err }

// ErrDisabled is CheckURL's answer when push notifications are off.
var ErrDisabled = errors.New("push notifications are not supported by this agent")

// maxShown bounds how much of a URL an error repeats.
const maxShown = 128

// CheckURL decides whether a webhook URL may be used. The URL must already be in its canonical
// form (see Canonical): capgate checks the URL and forwards the request's bytes, so the URL it
// checked is the one the handler stores and the webhook sender dials only when the two are the
// same string. A URL that is not canonical is refused with its canonical spelling; one that has
// none is refused saying why. Then it refuses, unless a listed prefix explicitly admits the URL:
// http (only through a listed http:// prefix), and hosts that are literal loopback, link-local,
// private, unspecified or multicast addresses. Every URL must match a listed prefix on a
// path-segment boundary; with none listed, none is allowed. DNS names are not resolved here:
// resolving and checking the address at delivery time is the handler's job (see
// docs/security.md).
func (p Policy) CheckURL(raw string) error {
	if !p.Enabled {
		return ErrDisabled
	}
	canon, err := Canonical(raw)
	if err != nil {
		return fmt.Errorf("push notification URL %q %w", shown(raw), err)
	}
	if canon != raw {
		return fmt.Errorf("push notification URL %q is not in canonical form (RFC 3986 section 6); send it as %q", shown(raw), shown(canon))
	}
	for _, prefix := range p.Allowed {
		if Matches(canon, prefix) {
			return nil
		}
	}
	if strings.HasPrefix(canon, "http:") {
		return fmt.Errorf("push notification URL %q: http is not allowed; use https", shown(raw))
	}
	if internalHost(hostOf(canon)) {
		return fmt.Errorf("push notification URL %q names a loopback, link-local or private address", shown(raw))
	}
	return fmt.Errorf("push notification URL %q is not in push.allowed_urls", shown(raw))
}

// CheckPrefix checks a push.allowed_urls entry: a canonical http(s) URL (see Canonical) with no
// query.
func CheckPrefix(prefix string) error {
	canon, err := Canonical(prefix)
	if err != nil {
		return fmt.Errorf("%q %w", shown(prefix), err)
	}
	if strings.Contains(canon, "?") {
		return fmt.Errorf("%q: a prefix has no query", shown(prefix))
	}
	if canon != prefix {
		return fmt.Errorf("%q is not in canonical form (RFC 3986 section 6); write it as %q", shown(prefix), shown(canon))
	}
	return nil
}

// Matches reports whether the canonical URL canon is under prefix: the prefix's canonical
// origin is the URL's whole origin, and the prefix's path is the URL's path or a whole-segment
// prefix of it ("/a2a" admits "/a2a" and "/a2a/x", not "/a2ax"; "/a2a/" admits "/a2a/x"). A
// prefix with no canonical form matches nothing.
func Matches(canon, prefix string) bool {
	p, err := Canonical(prefix)
	if err != nil {
		return false
	}
	path, _, _ := strings.Cut(canon, "?")
	if !strings.HasPrefix(path, p) {
		return false
	}
	rest := path[len(p):]
	return rest == "" || strings.HasSuffix(p, "/") || rest[0] == '/'
}

// hostOf is the host of a canonical URL, without brackets or port.
func hostOf(canon string) string {
	_, rest, _ := strings.Cut(canon, "://")
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		rest = rest[:i]
	}
	if strings.HasPrefix(rest, "[") {
		h, _, _ := strings.Cut(rest[1:], "]")
		return h
	}
	h, _, _ := strings.Cut(rest, ":")
	return h
}

// internalHost reports whether a host is an address that must not be called back by default.
// Hosts that are not IP literals in any accepted form are names, decided at delivery.
func internalHost(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	addr, ok := parseIP(host)
	if !ok {
		return false
	}
	addr = addr.Unmap()
	return addr.IsLoopback() || addr.IsPrivate() || addr.IsLinkLocalUnicast() || addr.IsLinkLocalMulticast() ||
		addr.IsUnspecified() || addr.IsMulticast() || addr.IsInterfaceLocalMulticast()
}

// parseIP reads an IP literal, including the forms inet_aton accepts that some HTTP clients
// resolve (2130706433, 0x7f.1, 017700000001).
func parseIP(host string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return a, true
	}
	if ip := net.ParseIP(host); ip != nil {
		a, ok := netip.AddrFromSlice(ip)
		return a, ok
	}
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var nums []uint64
	for _, p := range parts {
		n, err := strconv.ParseUint(p, 0, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		nums = append(nums, n)
	}
	var v uint64
	switch len(nums) {
	case 1:
		v = nums[0]
	case 2:
		v = nums[0]<<24 | nums[1]
	case 3:
		v = nums[0]<<24 | nums[1]<<16 | nums[2]
	case 4:
		v = nums[0]<<24 | nums[1]<<16 | nums[2]<<8 | nums[3]
	}
	if v > 0xffffffff {
		return netip.Addr{}, false
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

func shown(s string) string {
	if len(s) <= maxShown {
		return s
	}
	return s[:maxShown] + "…"
}
