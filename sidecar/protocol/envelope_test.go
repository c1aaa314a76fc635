package protocol_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/protocol"
)

func TestRequestVersionRefusesRepeatedHeader(t *testing.T) {
	for name, vals := range map[string][]string{"two lines": {"1.0", "0.3"}, "joined by a proxy": {"1.0,0.3"}} {
		t.Run(name, func(t *testing.T) {
			h := http.Header{}
			for _, v := range vals {
				h.Add(protocol.VersionHeader, v)
			}
			_, _, err := protocol.RequestVersion(protocol.HTTPHeader(h), "")
			require.NotNil(t, err)
			require.Equal(t, protocol.InvalidRequest, err.Code)
			require.Equal(t, protocol.RepeatedVersion().Message, err.Message)
		})
	}
	h := http.Header{}
	h.Set(protocol.VersionHeader, "1.0")
	v, _, err := protocol.RequestVersion(protocol.HTTPHeader(h), "")
	require.Nil(t, err)
	require.Equal(t, protocol.V1, v)
	v, _, err = protocol.RequestVersion(protocol.HTTPHeader(http.Header{}), "")
	require.Nil(t, err)
	require.Equal(t, protocol.V03, v, "no header is 0.3 (spec rule)")
}
