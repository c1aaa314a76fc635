// Package redisproc runs a real redis-server as a child process of a test,
// on a free 127.0.0.1 port, with the durability settings capgate documents
// for task bindings (append-only file, fsync on every write).
package redisproc

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Binary is the redis-server executable looked up in PATH.
const Binary = "redis-server"

// StartTimeout bounds how long Start and Restart wait for PONG.
const StartTimeout = 10 * time.Second

// Server is a redis-server child process. Its data directory outlives
// Kill and Stop, so Restart brings back whatever the append-only file holds.
type Server struct {
	// Addr is "127.0.0.1:port"; Dir is the data directory.
	Addr, Dir string

	t    testing.TB
	bin  string
	mu   sync.Mutex
	cmd  *exec.Cmd
	out  *bytes.Buffer
	done chan struct{}
}

// Required reports whether tests that need redis-server must fail rather
// than skip when it is missing: when the CI environment variable is set to
// anything but "", "0" or "false".
func Required() bool {
	switch strings.ToLower(os.Getenv("CI")) {
	case "", "0", "false":
		return false
	}
	return true
}

// Lookup returns the path of redis-server. When it is absent the test is
// skipped, or fails under CI (see Required).
func Lookup(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath(Binary)
	if err == nil {
		return bin
	}
	if Required() {
		t.Fatalf("%s is not installed but CI is set: these tests must run (install the redis-server package; see .ci/run)", Binary)
	}
	t.Skipf("%s is not installed: skipping the tests that need a real Redis (set CI=true to make this a failure)", Binary)
	return ""
}

// Start runs redis-server on a free port with a fresh data directory,
// appendonly yes and appendfsync always, waits until it answers PING, and
// kills it when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, bin: Lookup(t), Dir: t.TempDir()}
	var err error
	for range 5 { // another process may take the free port before redis binds it
		var port int
		if port, err = freePort(); err != nil {
			continue
		}
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if err = s.start(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("redis-server: %v", err)
	}
	t.Cleanup(func() { s.Kill() })
	return s
}

// URL is the redis:// URL of database db.
func (s *Server) URL(db int) string { return fmt.Sprintf("redis://%s/%d", s.Addr, db) }

// Port is the listening port.
func (s *Server) Port() string {
	_, p, _ := net.SplitHostPort(s.Addr)
	return p
}

// Kill ends redis-server with SIGKILL (a crash: nothing is flushed that was
// not already fsynced) and waits for it to exit. It is a no-op when the
// server is not running.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// Restart starts redis-server again on the same port and data directory and
// waits until it answers PING (after loading its append-only file).
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	var err error
	deadline := time.Now().Add(StartTimeout)
	for {
		if err = s.start(); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // the port may linger briefly
	}
	if err != nil {
		s.t.Fatalf("redis-server restart: %v", err)
	}
}

func (s *Server) start() error {
	_, port, _ := net.SplitHostPort(s.Addr)
	cmd := exec.Command(s.bin,
		"--port", port,
		"--bind", "127.0.0.1",
		"--dir", s.Dir,
		"--save", "",
		"--appendonly", "yes",
		"--appendfsync", "always",
		"--daemonize", "no",
		"--logfile", "",
	)
	out := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	deadline := time.Now().Add(StartTimeout)
	for {
		if err := ping(s.Addr); err == nil {
			break
		} else if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			return fmt.Errorf("no PONG on %s after %s: %v\n%s", s.Addr, StartTimeout, err, out)
		}
		select {
		case <-done:
			return fmt.Errorf("exited at start on %s:\n%s", s.Addr, out)
		case <-time.After(20 * time.Millisecond):
		}
	}
	s.mu.Lock()
	s.cmd, s.out, s.done = cmd, out, done
	s.mu.Unlock()
	return nil
}

// ping sends an inline PING and wants +PONG (not -LOADING).
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
