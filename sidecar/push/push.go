// Package push holds the policy for push notification webhooks: whether they are enabled, and
// which URLs a caller may have an agent call back.
package push

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// Policy is the deployment's push notification policy (config push.*).
type Policy struct {
	Enabled bool
	// Allowed are URL prefixes; a webhook URL must start with one of them, at a path boundary.
	Allowed []string
}

// ErrDisabled is CheckURL's answer when push notifications are off.
var ErrDisabled = errors.New("push notifications are not supported by this agent")

// maxShown bounds how much of a URL an error repeats.
const maxShown = 128

// CheckURL decides whether a webhook URL may be used. It refuses, unless a listed prefix
// explicitly admits the URL: schemes other than https (http only through a listed http://
// prefix), userinfo, and hosts that are literal loopback, link-local, private, unspecified or
// multicast addresses in any spelling the URL parser accepts (dotted, decimal, IPv4-mapped
// IPv6, trailing dots). Every URL must match a listed prefix; with none listed, none is allowed.
// DNS names are not resolved here: resolving and checking the address at delivery time is the
// handler's job (see docs/security.md).
func (p Policy) CheckURL(raw string) error {
	if !p.Enabled {
		return ErrDisabled
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return fmt.Errorf("push notification URL %q is not an absolute URL", shown(raw))
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "https" && scheme != "http" {
		return fmt.Errorf("push notification URL %q: scheme %q is not allowed; use https", shown(raw), shown(u.Scheme))
	}
	if u.User != nil {
		return fmt.Errorf("push notification URL %q must not carry user information", shown(raw))
	}
	norm := normalize(u)
	for _, prefix := range p.Allowed {
		if matches(norm, prefix) {
			return nil
		}
	}
	if scheme == "http" {
		return fmt.Errorf("push notification URL %q: http is not allowed; use https", shown(raw))
	}
	if internalHost(u.Hostname()) {
		return fmt.Errorf("push notification URL %q names a loopback, link-local or private address", shown(raw))
	}
	return fmt.Errorf("push notification URL %q is not in push.allowed_urls", shown(raw))
}

// normalize writes scheme and host in lower case, without a trailing dot on the host or a
// default port, followed by the escaped path.
func normalize(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	port := u.Port()
	if defaultPort := port == "" || (scheme == "https" && port == "443") || (scheme == "http" && port == "80"); !defaultPort {
		host += ":" + port
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	return scheme + "://" + host + path
}

// matches reports whether url (normalized) starts with prefix at a path boundary: the prefix's
// origin must be the URL's whole origin, and its path a whole-segment prefix of the URL's path
// (or end with "/").
func matches(norm, prefix string) bool {
	pu, err := url.Parse(prefix)
	if err != nil {
		return false
	}
	p := normalize(pu)
	if !strings.HasPrefix(norm, p) {
		return false
	}
	rest := norm[len(p):]
	return rest == "" || strings.HasSuffix(p, "/") || rest[0] == '/'
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
