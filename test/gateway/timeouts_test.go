package gateway_test

import (
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/test/testutil"
)

// TestSlowClientIsCutOff: a client that announces a body and never finishes sending it holds a
// connection no longer than limits.read_timeout.
func TestSlowClientIsCutOff(t *testing.T) {
	d := testutil.LoadDeployment(t, "")
	d.Config.Limits.ReadTimeout = 300 * time.Millisecond
	srv := testutil.Start(t, d)
	conn, err := net.Dial("tcp", srv.Addrs.A2A)
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	_, err = fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"jsonrpc\":")
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = io.ReadAll(conn) // the server answers (or not) and closes
	require.NoError(t, err, "the server must close the connection, not leave it to the client's 10s deadline")
}
