package gateway

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/protocol"
)

func TestRequestVersionRefusesRepeatedHeader(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	r.Header.Add(HeaderVersion, "1.0")
	r.Header.Add(HeaderVersion, "0.3")
	_, err := requestVersion(r)
	require.NotNil(t, err)
	require.Equal(t, protocol.InvalidRequest, err.Code)
	require.Equal(t, protocol.RepeatedVersion().Message, err.Message)

	one := httptest.NewRequest(http.MethodPost, "/", nil)
	one.Header.Set(HeaderVersion, "1.0")
	v, err := requestVersion(one)
	require.Nil(t, err)
	require.Equal(t, protocol.V1, v)
}
