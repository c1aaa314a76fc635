package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"time"

	"github.com/capgate/capgate/test/replicas/redisproc"
)

// redisServer is the soak's redis-server: started as test/replicas/redisproc
// starts it (loopback, append-only file with fsync on every write, so an
// acknowledged write survives a SIGKILL); redisproc.Start itself needs a
// testing.TB, which a command does not have.
type redisServer struct {
	addr, dir string
	persist   []string // redis-server's persistence arguments
	cmd       *exec.Cmd
	done      chan struct{}
}

// startRedis runs redis-server on a free loopback port with dir as its data
// directory.
func startRedis(dir string) (*redisServer, error) {
	return startRedisWith(dir, "--appendonly", "yes", "--appendfsync", "always")
}

// startRedisVolatile runs redis-server on a free loopback port without
// persistence (no append-only file, no snapshots): a throughput phase
// measures capgate's round trips, not the disk.
func startRedisVolatile(dir string) (*redisServer, error) {
	return startRedisWith(dir, "--appendonly", "no")
}

// startRedisWith runs redis-server on a free loopback port with dir as its
// data directory and the persistence arguments persist.
func startRedisWith(dir string, persist ...string) (*redisServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	r := &redisServer{addr: addr, dir: dir, persist: persist}
	return r, r.start()
}

func (r *redisServer) start() error {
	_, port, _ := net.SplitHostPort(r.addr)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		args := append([]string{"--port", port, "--bind", "127.0.0.1", "--dir", r.dir,
			"--save", "", "--daemonize", "no", "--logfile", ""}, r.persist...)
		cmd := exec.Command("redis-server", args...)
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("redis-server: %w", err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		for alive := true; alive && time.Now().Before(deadline); {
			if redisproc.Ping(r.addr) == nil {
				r.cmd, r.done = cmd, done
				return nil
			}
			select {
			case <-done: // the port may linger briefly after a kill: start again
				alive = false
			case <-time.After(20 * time.Millisecond):
			}
		}
		_ = cmd.Process.Kill()
		<-done
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("redis-server on %s: no PONG after 10 s", r.addr)
}

// kill ends redis-server with SIGKILL (a crash) and waits for it.
func (r *redisServer) kill() {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	<-r.done
	r.cmd = nil
}

// lookRedis fails clearly when redis-server is not installed.
func lookRedis() error {
	if _, err := exec.LookPath("redis-server"); err != nil {
		fmt.Fprintln(os.Stderr, "the soak needs redis-server (Debian package redis-server)")
		return err
	}
	return nil
}
