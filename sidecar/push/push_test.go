package push_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/push"
)

func TestCheckURL(t *testing.T) {
	p := push.Policy{Enabled: true, Allowed: []string{"https://hooks.example.com/a2a", "http://127.0.0.1:9000/", "https://[fd00::1]/"}}
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"https://hooks.example.com/a2a", true},
		{"https://hooks.example.com/a2a/tenant-1", true},
		{"https://HOOKS.example.com/a2a/x", false},                          // not canonical: case
		{"https://hooks.example.com./a2a/x", false},                         // trailing dot
		{"https://hooks.example.com:443/a2a", false},                        // not canonical: default port
		{"http://127.0.0.1:9000/cb", true},                                  // loopback, explicitly listed
		{"https://[fd00::1]/x", true},                                       // private, explicitly listed
		{"https://hooks.example.com/a2ax", false},                           // not at a path boundary
		{"https://hooks.example.com.evil.net/a2a", false},                   // host suffix
		{"https://hooks.example.com:8443/a2a", false},                       // other port
		{"http://hooks.example.com/a2a", false},                             // http not listed
		{"https://user:pw@hooks.example.com/a2a", false},                    // userinfo
		{"https://evil.example.net/", false},                                // not listed
		{"https://127.0.0.1/", false},                                       // loopback, not listed
		{"https://2130706433/", false},                                      // 127.0.0.1 in decimal
		{"https://0x7f.1/", false},                                          // 127.0.0.1 in inet_aton form
		{"https://[::ffff:127.0.0.1]/", false},                              // IPv4-mapped
		{"https://169.254.169.254/latest/meta-data", false},                 // link-local metadata
		{"https://[fe80::1]/", false},                                       // link-local v6
		{"https://10.1.2.3/", false},                                        // private
		{"https://localhost/", false},                                       // name of loopback
		{"ftp://hooks.example.com/a2a", false},                              // scheme
		{"javascript:alert(1)", false},                                      // opaque
		{"/relative", false},                                                // not absolute
		{"https://hooks.example.com/a2a/" + strings.Repeat("x", 300), true}, // long but listed
	} {
		t.Run(tc.url[:min(len(tc.url), 60)], func(t *testing.T) {
			err := p.CheckURL(tc.url)
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.LessOrEqual(t, len(err.Error()), 300, "an error repeats at most 128 bytes of the URL")
		})
	}
}

func TestCheckURLOffAndEmpty(t *testing.T) {
	require.True(t, errors.Is(push.Policy{}.CheckURL("https://hooks.example.com/"), push.ErrDisabled))
	require.Error(t, push.Policy{Enabled: true}.CheckURL("https://hooks.example.com/"), "no prefix listed: nothing is allowed")
}
