// Package testnet holds loopback addresses with a known behaviour for tests.
// It imports nothing of capgate, so any package's tests may use it.
package testnet

import (
	"net/netip"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// RefusedAddr is a loopback address where a connection is refused for the
// whole test: the port is bound to a socket that never listens and is held
// until the test ends, so no other listener in this process or a parallel
// test package can be handed it. (Closing a listener and reusing its address
// is not enough: the next ":0" listener may get the same port.)
func RefusedAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Close(fd) })
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	sa, err := syscall.Getsockname(fd)
	require.NoError(t, err)
	in4, ok := sa.(*syscall.SockaddrInet4)
	require.True(t, ok, "a bound IPv4 socket has an IPv4 name")
	return netip.AddrPortFrom(netip.AddrFrom4(in4.Addr), uint16(in4.Port)).String()
}
