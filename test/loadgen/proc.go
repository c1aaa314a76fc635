package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// CPUs: servers on serverCPU, the generator on generatorCPU.
const (
	serverCPU    = "0"
	generatorCPU = "1"
	envPinned    = "CAPGATE_LOADGEN_PINNED"
	clockTicks   = 100 // USER_HZ: /proc/<pid>/stat times are in 1/100 s on Linux
)

// canPin reports whether taskset exists and there are two CPUs; it warns
// once otherwise.
func canPin(o options) bool {
	if o.noPin {
		return false
	}
	if _, err := exec.LookPath("taskset"); err != nil {
		fmt.Fprintln(os.Stderr, "WARNING: taskset not found: running unpinned; the figures mix server and generator CPU")
		return false
	}
	if onlineCPUs() < 2 {
		fmt.Fprintln(os.Stderr, "WARNING: fewer than 2 CPUs: running unpinned")
		return false
	}
	return true
}

// pinSelf re-executes this binary under taskset on the generator's CPU.
// It returns true when the pinned copy ran (its result is err).
func pinSelf(o options) (bool, error) {
	if os.Getenv(envPinned) != "" || !canPin(o) {
		return false, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return false, err
	}
	cmd := exec.Command("taskset", append([]string{"-c", generatorCPU, exe}, os.Args[1:]...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), envPinned+"=1", "GOMAXPROCS=1")
	return true, cmd.Run()
}

// child is a server process started by this binary.
type child struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	addr   string // what it serves: gRPC (ext_authz roles) or HTTP (gateway roles)
	admin  string // capgate's admin listener ("" for the others)
	stats  string // the allocation counter of the gateway roles (statsHandler)
	exited chan struct{}
	// signal stops the child (capgate serve); nil: close its stdin (a
	// child role of this binary).
	signal   os.Signal
	memLimit string // the memory limit capgate logged, if any
}

// startChild runs this binary as role, pinned to the server CPU with
// GOMAXPROCS=1, and waits for its READY line.
func startChild(ctx context.Context, o options, role, config string) (*child, error) {
	return startChildOn(ctx, o, serverCPU, role, config)
}

// startChildOn is startChild on cpu (when this process is pinned), with
// extra arguments for the role.
func startChildOn(ctx context.Context, o options, cpu, role, config string, extra ...string) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return startChildBin(ctx, o, exe, cpu, role, config, extra...)
}

// startChildBin is startChildOn with the child run from the loadgen binary
// exe (another commit's build, for side-by-side runs).
func startChildBin(ctx context.Context, o options, exe, cpu, role, config string, extra ...string) (*child, error) {
	args := append([]string{"-role", role}, extra...)
	if config != "" {
		args = append(args, "-config", config)
	}
	if o.cpuProfile != "" && (role == "capgate" || role == "gateway") {
		args = append(args, "-server-cpuprofile", o.cpuProfile)
	}
	if o.memProfile != "" && (role == "capgate" || role == "gateway") {
		args = append(args, "-server-memprofile", o.memProfile)
	}
	cmd := serverCommandOn(cpu, exe, args)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{name: role, cmd: cmd, stdin: stdin, exited: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			// READY <addr> [<admin> [<stats>]]; "-" for one a role lacks.
			if f := strings.Fields(sc.Text()); len(f) > 1 && f[0] == "READY" {
				f = append(f, "-", "-")
				c.addr = f[1]
				c.admin = strings.TrimPrefix(f[2], "-")
				c.stats = strings.TrimPrefix(f[3], "-")
				close(ready)
				return
			}
		}
	}()
	if err := c.awaitReady(ctx, ready); err != nil {
		return nil, err
	}
	return c, nil
}

// serverCommand runs bin with args as a server child: on the server CPU
// when this process is pinned, with GOMAXPROCS=1.
func serverCommand(bin string, args []string) *exec.Cmd {
	return serverCommandOn(serverCPU, bin, args)
}

// serverCommandOn is serverCommand on cpu.
func serverCommandOn(cpu, bin string, args []string) *exec.Cmd {
	var cmd *exec.Cmd
	if os.Getenv(envPinned) != "" {
		cmd = exec.Command("taskset", append([]string{"-c", cpu, bin}, args...)...)
	} else {
		cmd = exec.Command(bin, args...)
	}
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	cmd.Stderr = os.Stderr
	return cmd
}

// awaitReady reaps the started child in the background and waits until
// ready is closed, the child exits, two minutes pass or ctx ends; on
// anything but ready the child is stopped and an error returned.
func (c *child) awaitReady(ctx context.Context, ready <-chan struct{}) error {
	go func() { _ = c.cmd.Wait(); close(c.exited) }()
	select {
	case <-ready:
		return nil
	case <-c.exited:
		return fmt.Errorf("%s server exited before it was ready", c.name)
	case <-time.After(2 * time.Minute):
		c.stop()
		return fmt.Errorf("%s server not ready after 2 minutes", c.name)
	case <-ctx.Done():
		c.stop()
		return ctx.Err()
	}
}

// stop asks the child to shut down (its signal, or closing its stdin) and
// waits, killing it after 10 s.
func (c *child) stop() {
	if c.signal != nil {
		_ = c.cmd.Process.Signal(c.signal)
	} else {
		_ = c.stdin.Close()
	}
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
}

// cpuTime is the user+system CPU time the process has used.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command (which may contain spaces) start after ") ".
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("malformed stat")
	}
	f := strings.Fields(s[i+2:])
	if len(f) < 13 {
		return 0, errors.New("short stat")
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64) // field 14: utime
	st, _ := strconv.ParseInt(f[12], 10, 64) // field 15: stime
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// mem is a process's resident memory from /proc/<pid>/status, in bytes.
type mem struct {
	RSS  int64 // VmRSS: Anon + File (+ shared memory)
	HWM  int64 // VmHWM: peak RSS
	Anon int64 // RssAnon: heap, stacks, runtime data
	File int64 // RssFile: pages of the executable (and other files) mapped in
}

// memStatus reads the process's resident memory.
func memStatus(pid int) (mem, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return mem{}, err
	}
	var m mem
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			m.RSS = n << 10
		case "VmHWM":
			m.HWM = n << 10
		case "RssAnon":
			m.Anon = n << 10
		case "RssFile":
			m.File = n << 10
		}
	}
	return m, nil
}
