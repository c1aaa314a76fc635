package config_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/config"
)

// FuzzConfig feeds arbitrary bytes as capgate.yaml: the loader may refuse
// them but must never panic, and never accept a config that breaks a rule
// the rest of capgate relies on.
func FuzzConfig(f *testing.F) {
	f.Add([]byte(base))
	f.Add([]byte("agent: {name: A, description: B, version: 0.1.0, url: https://a}\nmanifests: [capabilities]\n"))
	f.Add([]byte("auth: {issuers: [{algorithms: [none]}]}"))
	f.Add([]byte("handlers: {a: builtin:echo, b: &x http://h, c: *x}"))
	f.Add([]byte("agent: {extensions: [{params: {a: &a [*a]}}]}"))
	f.Add([]byte("router: {threshold: .nan}\ncards: {max_age: 1h}"))
	f.Add([]byte(base + "limits: {stream_keepalive: 0s, stream_idle_timeout: 1s}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := config.LoadFS(fsWith(string(data)), "capgate.yaml")
		if err != nil {
			require.Nil(t, c)
			return
		}
		require.NotEmpty(t, c.Agent.Name)
		require.True(t, c.Router.Threshold >= 0 && c.Router.Threshold <= 1)
		for _, is := range c.Auth.Issuers {
			require.NotContains(t, is.Algorithms, "none")
		}
		if k := c.Limits.StreamKeepAlive; k != 0 {
			require.GreaterOrEqual(t, k, config.MinStreamKeepAlive)
			require.Less(t, k, c.Limits.StreamIdleTimeout)
		}
		network, _ := config.Network(c.Listen.Admin)
		require.Equal(t, "tcp", network, "the admin listener is never a socket")
	})
}
