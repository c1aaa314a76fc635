package interop

import (
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/test/testutil"
)

// front is a TCP forwarder on 127.0.0.1, a layer-4 load balancer in front of capgate: it holds
// an address before capgate starts, so capgate's config can name it in agent.url and its card
// can be used exactly as served, by clients that dial only what the card says.
type front struct {
	ln     net.Listener
	mu     sync.Mutex
	conns  []net.Conn
	closed bool
	wg     sync.WaitGroup
}

// newFront listens on 127.0.0.1:0 until the test ends.
func newFront(t *testing.T) *front {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := &front{ln: ln}
	t.Cleanup(f.close)
	return f
}

// URL is the front's base URL, http://127.0.0.1:port.
func (f *front) URL() string { return "http://" + f.ln.Addr().String() }

// forwardTo copies every connection the front accepts to target, both ways.
func (f *front) forwardTo(target string) {
	f.wg.Go(func() {
		for {
			in, err := f.ln.Accept()
			if err != nil {
				return // closed
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				_ = in.Close()
				continue
			}
			if !f.track(in, out) {
				_, _ = in.Close(), out.Close()
				return
			}
			f.wg.Go(func() { pipe(out, in) })
			f.wg.Go(func() { pipe(in, out) })
		}
	})
}

func (f *front) track(c ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.conns = append(f.conns, c...)
	return true
}

// pipe copies src to dst, then half-closes dst's write side as src did.
func pipe(dst, src net.Conn) {
	_, err := io.Copy(dst, src)
	if tc, ok := dst.(*net.TCPConn); ok && err == nil {
		_ = tc.CloseWrite()
		return
	}
	if err != nil && !errors.Is(err, net.ErrClosed) {
		_ = dst.Close()
	}
}

func (f *front) close() {
	_ = f.ln.Close()
	f.mu.Lock()
	for _, c := range f.conns {
		_ = c.Close()
	}
	f.closed, f.conns = true, nil
	f.mu.Unlock()
	f.wg.Wait()
}

// frontedServer starts the finance example behind a front whose URL is agent.url, with extra
// appended to capgate.yaml, and returns the front's URL and the server.
func frontedServer(t *testing.T, extra ...string) (string, *testutil.Server) {
	t.Helper()
	return frontedServerEdit(t, func(s string) string { return s }, extra...)
}

// frontedServerEdit is frontedServer with edit applied to capgate.yaml first.
func frontedServerEdit(t *testing.T, edit func(string) string, extra ...string) (string, *testutil.Server) {
	t.Helper()
	f := newFront(t)
	cfg := testutil.CopyFinance(t)
	testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
		const def = "  url: http://127.0.0.1:8080\n"
		require.Contains(t, s, def)
		return strings.Replace(edit(s), def, "  url: "+f.URL()+"\n", 1) + strings.Join(extra, "")
	})
	srv := testutil.Start(t, testutil.LoadDeployment(t, cfg))
	f.forwardTo(srv.Addrs.A2A)
	return f.URL(), srv
}
