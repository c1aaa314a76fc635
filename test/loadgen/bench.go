package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Targets (docs/benchmarks.md).
const (
	targetRatio = 0.50
	targetP99   = 200 * time.Microsecond
)

// phase is one server measured in closed loop.
type phase struct {
	name      string
	st        *stats
	serverCPU time.Duration // CPU the server used in the measured window
	genCPU    time.Duration // CPU the generator used in the measured window
}

func (p *phase) serverUtil() float64 { return p.serverCPU.Seconds() / p.st.elapsed.Seconds() }
func (p *phase) genUtil() float64    { return p.genCPU.Seconds() / p.st.elapsed.Seconds() }
func (p *phase) cpuPerCheck() time.Duration {
	if p.st.n == 0 {
		return 0
	}
	return p.serverCPU / time.Duration(p.st.n)
}

func bench(ctx context.Context, o options) error {
	key, kid, err := demoKey()
	if err != nil {
		return err
	}
	reqs := make([]marshalled, max(o.tokens, 1))
	for i := range reqs {
		tok, err := mint(key, kid, fmt.Sprintf("orchestrator-%d@partner", i), "partner-co", "recon.run invoices.read")
		if err != nil {
			return err
		}
		// Each caller continues its own conversation: the context's owner check
		// (a claim that renews the caller's own) is on the measured path.
		if reqs[i], err = encode(checkRequest(tok, fmt.Sprintf("ctx-%04d-invoices", i), i)); err != nil {
			return err
		}
	}
	printSetup(o, len(reqs[0]))

	floor, err := closedPhase(ctx, o, "noop", "", reqs)
	if err != nil {
		return err
	}
	cg, err := closedPhase(ctx, o, "capgate", "", reqs)
	if err != nil {
		return err
	}
	half, err := halfLoad(ctx, o, reqs, cg.st.rate()/2)
	if err != nil {
		return err
	}
	printTable(floor, cg, half)
	if o.noRedis {
		return nil
	}
	onRedis, err := redisPhase(ctx, o, reqs)
	if err != nil {
		return err
	}
	printRedisTable(o, floor, cg, onRedis)
	return nil
}

// targetRedisRatio is how close the checks/s on a loopback Redis must come
// to the memory store's for a Check naming a known context (issue #33).
const targetRedisRatio = 0.90

// redisPhase measures capgate with the finance example's store on a
// redis-server this process starts (on the generator's CPU when pinned: the
// server's CPU pays only its client side of each round trip).
func redisPhase(ctx context.Context, o options, reqs []marshalled) (*phase, error) {
	if err := lookRedis(); err != nil {
		return nil, fmt.Errorf("%w (or run with -no-redis)", err)
	}
	dir, err := os.MkdirTemp("", "loadgen-bench-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if err := os.Mkdir(filepath.Join(dir, "redis"), 0o755); err != nil {
		return nil, err
	}
	rds, err := startRedis(filepath.Join(dir, "redis"))
	if err != nil {
		return nil, err
	}
	defer rds.kill()
	cfgDir := filepath.Join(dir, "finance")
	if err := writeFinance(cfgDir); err != nil {
		return nil, err
	}
	config := filepath.Join(cfgDir, "capgate.yaml")
	raw, err := os.ReadFile(config)
	if err != nil {
		return nil, err
	}
	if !strings.Contains(string(raw), "store: memory") {
		return nil, fmt.Errorf("the finance example's capgate.yaml has no \"store: memory\" to replace")
	}
	store := "store: redis://" + rds.addr + "/0"
	if o.contextCache != "" {
		store += "?context_cache=" + o.contextCache
	}
	cfg := strings.ReplaceAll(string(raw), "store: memory", store)
	if err := writeConfig(config, cfg); err != nil {
		return nil, err
	}
	return closedPhase(ctx, o, "capgate", config, reqs)
}

func printRedisTable(o options, floor, mem, rds *phase) {
	ratio := rds.st.rate() / mem.st.rate()
	cache := "context_cache at its default"
	if o.contextCache != "" {
		cache = "context_cache=" + o.contextCache
	}
	fmt.Printf("\nthe same Check with the task store on a loopback redis-server (%s):\n\n", cache)
	fmt.Println("| store | checks/s | / floor | server CPU per check |")
	fmt.Println("|---|---:|---:|---:|")
	fmt.Printf("| memory | %.0f | %.2f | %s |\n", mem.st.rate(), mem.st.rate()/floor.st.rate(), us(mem.cpuPerCheck()))
	fmt.Printf("| Redis | %.0f | %.2f | %s |\n", rds.st.rate(), rds.st.rate()/floor.st.rate(), us(rds.cpuPerCheck()))
	fmt.Printf("| Redis / memory | **%.0f %%** (target ≥ %.0f %%: %s) | | |\n", ratio*100, targetRedisRatio*100, verdict(ratio >= targetRedisRatio))
}

func printSetup(o options, reqBytes int) {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	pin := "unpinned"
	if os.Getenv(envPinned) != "" {
		pin = "servers on CPU " + serverCPU + " (GOMAXPROCS=1), generator on CPU " + generatorCPU
	}
	fmt.Printf("ext_authz Check on loopback — %d CPUs (%s), %s, %s\n", onlineCPUs(), model, runtime.Version(), pin)
	fmt.Printf("request: allowed A2A 1.0 JSON-RPC SendMessage, %d B body, 12 headers + 4 pseudo-headers, ES256 bearer (%d distinct, cached after first use); CheckRequest %d B\n",
		len(sendMessageBody("ctx-0000-invoices")), o.tokens, reqBytes)
	fmt.Printf("closed loop: %d in flight over %d gRPC connection(s), %v warm-up + %v measured per server\n\n",
		o.concurrency, o.conns, o.warmup, o.duration)
}

// onlineCPUs counts the machine's CPUs (runtime.NumCPU is 1 once pinned).
func onlineCPUs() int {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.NumCPU()
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if k, _, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "processor" {
			n++
		}
	}
	return max(n, 1)
}

// closedPhase measures one child server at maximum throughput.
func closedPhase(ctx context.Context, o options, role, config string, reqs []marshalled) (*phase, error) {
	c, err := startChild(ctx, o, role, config)
	if err != nil {
		return nil, err
	}
	defer c.stop()
	return measureClosed(ctx, o, c, role, "", reqs)
}

// measureClosed measures the running child c (named role; note, when not
// "", is printed after "closed loop") at maximum throughput: its checks/s
// and the CPU it and the generator spent in the measured window.
func measureClosed(ctx context.Context, o options, c *child, role, note string, reqs []marshalled) (*phase, error) {
	t, err := dial(c.addr, o.conns)
	if err != nil {
		return nil, err
	}
	defer t.close()
	p := &phase{name: role}
	if note != "" {
		note = " (" + note + ")"
	}
	fmt.Printf("%-8s closed loop%s ... ", role, note)
	var s0, g0 time.Duration
	st, err := closedLoopMarked(ctx, checks(t, reqs), o.concurrency, o.warmup, o.duration, func(begin bool) {
		s, _ := cpuTime(c.cmd.Process.Pid)
		g, _ := cpuTime(os.Getpid())
		if begin {
			s0, g0 = s, g
			return
		}
		p.serverCPU, p.genCPU = s-s0, g-g0
	})
	if err != nil {
		return nil, err
	}
	p.st = st
	fmt.Printf("%.0f checks/s (errors %d)\n", st.rate(), st.errors)
	if st.errors > 0 {
		return nil, fmt.Errorf("%s: %d failed checks, first: %v", role, st.errors, st.firstErr)
	}
	return p, nil
}

// closedLoopMarked is closedLoop with mark called at the start and end of
// the measured window.
func closedLoopMarked(ctx context.Context, send sendFunc, workers int, warmup, d time.Duration, mark func(begin bool)) (*stats, error) {
	type out struct {
		st  *stats
		err error
	}
	done := make(chan out, 1)
	go func() {
		st, err := closedLoop(ctx, send, workers, warmup, d)
		done <- out{st, err}
	}()
	sleep(ctx, warmup)
	mark(true)
	sleep(ctx, d)
	mark(false)
	r := <-done
	return r.st, r.err
}

// half is capgate at a fixed rate.
type half struct {
	rate     float64
	st       *stats
	late     int64
	decision *histogram
}

// halfLoad sends to a fresh capgate at rate for the measured window and
// reads capgate's own decision histogram before and after it.
func halfLoad(ctx context.Context, o options, reqs []marshalled, rate float64) (*half, error) {
	c, err := startChild(ctx, o, "capgate", "")
	if err != nil {
		return nil, err
	}
	defer c.stop()
	t, err := dial(c.addr, o.conns)
	if err != nil {
		return nil, err
	}
	defer t.close()
	fmt.Printf("capgate  open loop at %.0f/s ... ", rate)
	h := &half{rate: rate}
	var before *histogram
	var herr error
	mark := time.AfterFunc(o.warmup, func() { before, herr = scrapeDecisions(ctx, c.admin) })
	defer mark.Stop()
	st, late, err := openLoop(ctx, checks(t, reqs), rate, 256, o.warmup, o.duration)
	if err != nil {
		return nil, err
	}
	if herr != nil {
		return nil, herr
	}
	after, err := scrapeDecisions(ctx, c.admin)
	if err != nil {
		return nil, err
	}
	h.st, h.late, h.decision = st, late, after.minus(before)
	fmt.Printf("%.0f checks/s (errors %d, dropped %d)\n\n", st.rate(), st.errors, st.dropped)
	if st.errors > 0 {
		return nil, fmt.Errorf("half load: %d failed checks, first: %v", st.errors, st.firstErr)
	}
	return h, nil
}

func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d.Nanoseconds())/1e3) }

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

func printTable(floor, cg *phase, h *half) {
	ratio := cg.st.rate() / floor.st.rate()
	cpuRatio := float64(floor.cpuPerCheck()) / float64(cg.cpuPerCheck())
	p99 := h.decision.quantile(0.99)
	fmt.Println("| | no-op floor | capgate | capgate / floor |")
	fmt.Println("|---|---:|---:|---:|")
	fmt.Printf("| max throughput, closed loop (checks/s) | %.0f | %.0f | **%.0f %%** (target ≥ %.0f %%: %s) |\n",
		floor.st.rate(), cg.st.rate(), ratio*100, targetRatio*100, verdict(ratio >= targetRatio))
	fmt.Printf("| server CPU busy (core %s) | %.0f %% | %.0f %% | |\n", serverCPU, floor.serverUtil()*100, cg.serverUtil()*100)
	fmt.Printf("| server CPU per check | %s | %s | %.0f %% |\n", us(floor.cpuPerCheck()), us(cg.cpuPerCheck()), cpuRatio*100)
	fmt.Printf("| generator CPU busy (core %s) | %.0f %% | %.0f %% | |\n", generatorCPU, floor.genUtil()*100, cg.genUtil()*100)
	fmt.Printf("| round trip at max, p50 / p99 (client) | %s / %s | %s / %s | |\n",
		us(floor.st.pct(0.5)), us(floor.st.pct(0.99)), us(cg.st.pct(0.5)), us(cg.st.pct(0.99)))
	fmt.Println()
	fmt.Printf("capgate at half its max (%.0f checks/s, open loop):\n\n", h.rate)
	fmt.Println("| latency | p50 | p99 | mean |")
	fmt.Println("|---|---:|---:|---:|")
	fmt.Printf("| capgate decision (server side, capgate_decision_duration_seconds) | %s | **%s** (target ≤ %s: %s) | %s |\n",
		us(h.decision.quantile(0.5)), us(p99), us(targetP99), verdict(p99 <= targetP99), us(h.decision.mean()))
	fmt.Printf("| round trip (client, gRPC on loopback) | %s | %s | |\n", us(h.st.pct(0.5)), us(h.st.pct(0.99)))
	fmt.Printf("\ndecisions ≤ 200 µs: %.2f %% (histogram buckets: 25/50/100/200/500 µs …; quantiles interpolated inside a bucket)\n",
		h.decision.fractionUnder(200e-6)*100)
	if h.st.dropped > 0 {
		fmt.Printf("WARNING: %d requests were not sent at half load: %d were already waiting, capgate fell behind the fixed rate\n", h.st.dropped, 256)
	}
	if floor.serverUtil() < 0.9 || cg.serverUtil() < 0.9 {
		load, _ := os.ReadFile("/proc/loadavg")
		fmt.Printf("WARNING: a server used less than 90 %% of its CPU at maximum load: it did not get its core (load average %s)."+
			" Other processes share the CPUs; throughput and round trips are unreliable in this run, CPU per check less so.\n",
			strings.Join(strings.Fields(string(load))[:3], " "))
	}
}
