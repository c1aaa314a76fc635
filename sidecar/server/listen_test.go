package server

import (
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestListenOnUnixSocket(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "a2a.sock")

	ln, err := listenOn("unix:" + sock)
	require.NoError(t, err)
	fi, err := os.Stat(sock)
	require.NoError(t, err)
	require.Equal(t, fs.ModeSocket, fi.Mode().Type())
	require.Equal(t, SocketMode, fi.Mode().Perm())

	accepted := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_ = c.Close()
		}
		accepted <- err
	}()
	c, err := net.Dial("unix", sock)
	require.NoError(t, err)
	_ = c.Close()
	require.NoError(t, <-accepted)

	require.NoError(t, ln.Close())
	_, err = os.Stat(sock)
	require.ErrorIs(t, err, fs.ErrNotExist, "the socket is removed on close")

	t.Run("a stale socket is replaced", func(t *testing.T) {
		stale, err := net.Listen("unix", sock)
		require.NoError(t, err)
		stale.(*net.UnixListener).SetUnlinkOnClose(false)
		require.NoError(t, stale.Close()) // the file stays, as after a crash
		ln, err := listenOn("unix://" + sock)
		require.NoError(t, err)
		require.NoError(t, ln.Close())
	})
	t.Run("any other file is left alone", func(t *testing.T) {
		require.NoError(t, os.WriteFile(sock, []byte("data"), 0o600))
		_, err := listenOn("unix:" + sock)
		require.ErrorContains(t, err, "exists and is not a socket")
		b, err := os.ReadFile(sock)
		require.NoError(t, err)
		require.Equal(t, "data", string(b))
	})
	t.Run("tcp", func(t *testing.T) {
		ln, err := listenOn("127.0.0.1:0")
		require.NoError(t, err)
		require.Equal(t, "tcp", ln.Addr().Network())
		require.NoError(t, ln.Close())
	})
}
