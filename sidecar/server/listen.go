package server

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"

	"github.com/capgate/capgate/policy/config"
)

// SocketMode is the mode of a Unix socket capgate listens on: its owner and
// group may connect (in the sidecar pod, Envoy through the pod's fsGroup),
// nobody else.
const SocketMode fs.FileMode = 0o660

// listenOn listens on a listen address of the config: TCP host:port, or a
// Unix socket for "unix:/path". A socket file left by a previous process
// (one that crashed before removing it) is replaced; any other file at the
// path is an error, never removed. The listener removes its socket when
// closed.
func listenOn(addr string) (net.Listener, error) {
	network, address := config.Network(addr)
	if network != "unix" {
		return net.Listen(network, address)
	}
	if fi, err := os.Lstat(address); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("%s exists and is not a socket", address)
		}
		if err := os.Remove(address); err != nil {
			return nil, fmt.Errorf("remove stale socket: %w", err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	ln, err := net.Listen("unix", address)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(address, SocketMode); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("chmod socket: %w", err)
	}
	return ln, nil
}
