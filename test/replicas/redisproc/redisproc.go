// Package redisproc runs a real redis-server as a child process of a test,
// on a free 127.0.0.1 port, with the durability settings capgate documents
// for task bindings (append-only file, fsync on every write).
package redisproc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/test/ci"
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

	t        testing.TB
	bin      string
	password string   // requirepass: PING authenticates with it
	sentinel string   // the config a Sentinel starts from
	args     []string // after the defaults (Start) or instead of them (sentinel)
	mu       sync.Mutex
	cmd      *exec.Cmd
	out      *bytes.Buffer
	done     chan struct{}
}

// Lookup returns the path of redis-server. When it is absent the test is
// skipped, or fails under CI (ci.Required).
func Lookup(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath(Binary)
	if err == nil {
		return bin
	}
	if ci.Required() {
		t.Fatalf("%s is not installed but CI is set: these tests must run (install the redis-server package; see .ci/run)", Binary)
	}
	t.Skipf("%s is not installed: skipping the tests that need a real Redis (set CI=true to make this a failure)", Binary)
	return ""
}

// Start runs redis-server on a free port with a fresh data directory,
// appendonly yes and appendfsync always (and args after those, e.g.
// "--replicaof", "127.0.0.1 6380"), waits until it answers PING, and kills
// it when the test ends.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	return launch(t, &Server{t: t, bin: Lookup(t), Dir: t.TempDir(), args: args})
}

// StartAuth is Start with requirepass password (and masterauth password,
// so that it can also replicate from a server with the same password).
func StartAuth(t testing.TB, password string, args ...string) *Server {
	t.Helper()
	args = append([]string{"--requirepass", password, "--masterauth", password}, args...)
	return launch(t, &Server{t: t, bin: Lookup(t), Dir: t.TempDir(), args: args, password: password})
}

func launch(t testing.TB, s *Server) *Server {
	t.Helper()
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
	args := []string{
		"--port", port,
		"--bind", "127.0.0.1",
		"--dir", s.Dir,
		"--save", "",
		"--appendonly", "yes",
		"--appendfsync", "always",
		"--daemonize", "no",
		"--logfile", "",
	}
	if s.sentinel != "" {
		conf := filepath.Join(s.Dir, "sentinel.conf")
		if _, err := os.Stat(conf); err != nil { // Sentinel rewrites it; a restart keeps what it learnt
			if err := os.WriteFile(conf, []byte(s.sentinel), 0o600); err != nil {
				return err
			}
		}
		args = []string{conf, "--sentinel", "--port", port, "--bind", "127.0.0.1", "--dir", s.Dir, "--daemonize", "no", "--logfile", ""}
	}
	cmd := exec.Command(s.bin, append(args, s.args...)...)
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
		if err := ping(s.Addr, s.password); err == nil {
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

// Ping sends an inline PING to addr and wants +PONG (not -LOADING): whether
// a redis-server there is ready. It needs no test (test/loadgen's soak uses it).
func Ping(addr string) error { return ping(addr, "") }

// ping sends an inline PING and wants +PONG (not -LOADING), after an AUTH
// with password unless it is "".
func ping(addr, password string) error {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	r := bufio.NewReader(c)
	if password != "" {
		if _, err := fmt.Fprintf(c, "AUTH %s\r\n", password); err != nil {
			return err
		}
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		if strings.TrimSpace(line) != "+OK" {
			return errors.New("AUTH refused")
		}
	}
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := r.ReadString('\n')
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

// StartSentinel runs redis-server as a Sentinel (redis-server <conf>
// --sentinel) on a free port, monitoring the master called name at
// masterAddr with quorum 2, down-after-milliseconds downAfter and a
// failover timeout of 4 × downAfter (short, for tests).
func StartSentinel(t testing.TB, name, masterAddr string, downAfter time.Duration) *Server {
	t.Helper()
	return startSentinel(t, name, masterAddr, downAfter, Auth{})
}

// Auth are the passwords of a Sentinel set: the Redis servers' requirepass
// (which the Sentinels use as auth-pass) and the Sentinels' own
// requirepass. "" is none.
type Auth struct{ Password, SentinelPassword string }

func startSentinel(t testing.TB, name, masterAddr string, downAfter time.Duration, a Auth) *Server {
	t.Helper()
	host, port, _ := net.SplitHostPort(masterAddr)
	ms := downAfter.Milliseconds()
	conf := fmt.Sprintf("sentinel monitor %[1]s %[2]s %[3]s 2\n"+
		"sentinel down-after-milliseconds %[1]s %[4]d\n"+
		"sentinel failover-timeout %[1]s %[5]d\n"+
		"sentinel parallel-syncs %[1]s 1\n", name, host, port, ms, 4*ms)
	if a.Password != "" {
		conf += fmt.Sprintf("sentinel auth-pass %s %s\n", name, a.Password)
	}
	if a.SentinelPassword != "" {
		conf += fmt.Sprintf("requirepass %s\n", a.SentinelPassword)
	}
	return launch(t, &Server{t: t, bin: Lookup(t), Dir: t.TempDir(), sentinel: conf, password: a.SentinelPassword})
}

// StartCluster runs a Redis Cluster of masters masters with replicas
// replicas each (redis-server --cluster-enabled yes, node timeout 1 s),
// joined by redis-cli --cluster create, and waits until every node reports
// cluster_state:ok and every replica is in sync. The first masters servers are the masters.
func StartCluster(t testing.TB, masters, replicas int) []*Server {
	t.Helper()
	cli := lookupCLI(t)
	nodes := make([]*Server, masters*(1+replicas))
	args := []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "1000"}
	var addrs []string
	for i := range nodes {
		nodes[i] = Start(t, args...)
		addrs = append(addrs, nodes[i].Addr)
	}
	create := append([]string{"--cluster", "create"}, addrs...)
	create = append(create, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command(cli, create...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range nodes {
		for {
			out, err := exec.Command(cli, "-h", "127.0.0.1", "-p", n.Port(), "cluster", "info").Output()
			if err == nil && bytes.Contains(out, []byte("cluster_state:ok")) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cluster node %s not ok after 30s: %v\n%s", n.Addr, err, out)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for _, n := range nodes {
		out, err := exec.Command(cli, "-h", "127.0.0.1", "-p", n.Port(), "info", "replication").Output()
		if err != nil {
			t.Fatalf("cluster node %s: %v", n.Addr, err)
		}
		if bytes.Contains(out, []byte("role:slave")) {
			WaitInSync(t, n)
		}
	}
	return nodes
}

// lookupCLI returns the path of redis-cli, skipping or failing like Lookup.
func lookupCLI(t testing.TB) string {
	t.Helper()
	Lookup(t)
	bin, err := exec.LookPath("redis-cli")
	if err == nil {
		return bin
	}
	if ci.Required() {
		t.Fatalf("redis-cli is not installed but CI is set: these tests must run (install the redis-tools package)")
	}
	t.Skipf("redis-cli is not installed: skipping the Redis Cluster tests (set CI=true to make this a failure)")
	return ""
}
