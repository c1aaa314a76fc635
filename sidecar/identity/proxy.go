package identity

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/capgate/capgate/policy/config"
)

// ProxyTrust is how the gateway, behind Envoy, learns the mTLS peer Envoy verified: a request
// from one of the proxy's addresses carrying the proxy's shared secret has its peer read from
// Envoy's x-forwarded-client-cert header (the URI= of its last element, which Envoy's
// forward_client_cert_details: SANITIZE_SET writes). From anyone else both headers are
// ignored, so a direct caller cannot claim a peer identity.
type ProxyTrust struct {
	prefixes   []netip.Prefix
	unix       bool // connections over the gateway's Unix socket come from the proxy
	secret     []byte
	header     string
	peerHeader string
}

// NewProxyTrust builds the trust of auth.trusted_proxy; nil (and no error) when it is absent.
func NewProxyTrust(tp *config.TrustedProxy, readFile func(string) ([]byte, error)) (*ProxyTrust, error) {
	if tp == nil {
		return nil, nil
	}
	t := &ProxyTrust{header: tp.Header, peerHeader: tp.PeerHeader}
	if t.header == "" {
		t.header = config.DefaultProxySecretHeader
	}
	if t.peerHeader == "" {
		t.peerHeader = config.DefaultProxyPeerHeader
	}
	for _, a := range tp.Addresses {
		if a == config.TrustedProxyUnix {
			t.unix = true
			continue
		}
		if p, err := netip.ParsePrefix(a); err == nil {
			t.prefixes = append(t.prefixes, p.Masked())
			continue
		}
		addr, err := netip.ParseAddr(a)
		if err != nil {
			return nil, fmt.Errorf("trusted_proxy: %q is neither an IP address nor a CIDR", a)
		}
		t.prefixes = append(t.prefixes, netip.PrefixFrom(addr.Unmap(), addr.Unmap().BitLen()))
	}
	if len(t.prefixes) == 0 && !t.unix {
		return nil, errors.New("trusted_proxy: no addresses")
	}
	if tp.SecretFile == "" || readFile == nil {
		return nil, errors.New("trusted_proxy: secret_file is required")
	}
	b, err := readFile(tp.SecretFile)
	if err != nil {
		return nil, fmt.Errorf("trusted_proxy: secret_file: %w", err)
	}
	if t.secret = []byte(strings.TrimSpace(string(b))); len(t.secret) < 32 {
		return nil, errors.New("trusted_proxy: the secret must be at least 32 bytes")
	}
	return t, nil
}

// Headers are the header names the proxy sets; the gateway never passes them on.
func (t *ProxyTrust) Headers() []string {
	if t == nil {
		return nil
	}
	return []string{t.header, t.peerHeader}
}

// Peer returns the mTLS peer the proxy vouches for. trusted is false (and peer "") when the
// request does not come from the proxy: another address, no secret or a wrong one. A request
// from the proxy with a malformed or repeated peer header is an error.
func (t *ProxyTrust) Peer(remoteAddr string, h http.Header) (peer string, trusted bool, err error) {
	if t == nil {
		return "", false, nil
	}
	in := t.unix && (remoteAddr == "" || remoteAddr == "@") // net/http's remote address of a Unix socket peer
	if host, _, serr := net.SplitHostPort(remoteAddr); serr == nil {
		if addr, perr := netip.ParseAddr(host); perr == nil {
			addr = addr.Unmap()
			for _, p := range t.prefixes {
				if p.Contains(addr) {
					in = true
					break
				}
			}
		}
	}
	secrets := h.Values(t.header)
	if !in || len(secrets) != 1 || subtle.ConstantTimeCompare([]byte(secrets[0]), t.secret) != 1 {
		return "", false, nil
	}
	xfcc := h.Values(t.peerHeader)
	switch len(xfcc) {
	case 0:
		return "", true, nil
	case 1:
	default:
		return "", true, errors.New("the proxy sent the client certificate header more than once")
	}
	uri, ok := xfccURI(xfcc[0])
	if !ok {
		return "", true, errors.New("the proxy's client certificate header is malformed")
	}
	return uri, true, nil
}

// xfccURI reads the URI= field of the last element of an x-forwarded-client-cert value
// (elements separated by commas, fields by semicolons, values optionally double-quoted).
func xfccURI(v string) (string, bool) {
	elems := splitQuoted(v, ',')
	last := strings.TrimSpace(elems[len(elems)-1])
	uri := ""
	for _, f := range splitQuoted(last, ';') {
		k, val, ok := strings.Cut(strings.TrimSpace(f), "=")
		if !ok {
			return "", false
		}
		if strings.EqualFold(k, "URI") {
			if uri != "" {
				return "", false // two URIs: which one is the peer is ambiguous
			}
			uri = strings.Trim(val, `"`)
		}
	}
	return uri, true
}

// splitQuoted splits s at sep outside double quotes.
func splitQuoted(s string, sep byte) []string {
	var out []string
	quoted, start := false, 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && quoted:
			i++
		case s[i] == '"':
			quoted = !quoted
		case s[i] == sep && !quoted:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}
