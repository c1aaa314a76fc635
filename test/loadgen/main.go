// Command loadgen measures capgate's ext_authz Check on loopback against a
// no-op Authorization server in the same run, the memory of a large
// deployment under many distinct callers, and capgate's A2A gateway against
// a bare reverse proxy in front of the same upstream agent. The servers run
// as child processes of this binary pinned to CPU 0 with GOMAXPROCS=1; the
// load generator (and the gateway test's upstream) pin to CPU 1. The soak
// (-mode soak, unpinned) runs two capgate replicas on one redis-server
// under mixed load, reloads and a Redis restart, and fails on growth, 5xx
// or a lost task. See docs/benchmarks.md.
//
//	go run ./test/loadgen                 # throughput, ratio, latency at half load, then on a Redis store (~55 s)
//	go run ./test/loadgen -mode rss -memory 32MiB  # 10,000 capabilities, 100,000 distinct tokens, VmRSS
//	go run ./test/loadgen -mode gateway   # capgate's gateway against a bare reverse proxy, both bindings, streaming (~1.5 min)
//	go run ./test/loadgen -mode gateway-compare -builds base=BIN,head=BIN  # the gateways of two builds side by side (make bench-compare BASE=commit)
//	go run ./test/loadgen -mode gateway -stream-only  # only the 10,000-event stream: RSS growth while relaying
//	go run ./test/loadgen -mode soak      # two capgate replicas on one redis-server, all operations, reloads, a Redis restart (~2 min; -heap-profiles DIR saves heap profiles)
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	var o options
	flag.StringVar(&o.mode, "mode", "bench", "bench: ext_authz throughput and latency; rss: memory of a 10,000-capability registry; gateway: the gateway against a bare reverse proxy; gateway-compare: the gateways of -builds side by side (A B A B); soak: two replicas on one Redis under mixed load, reloads and a Redis restart; quotas: ext_authz and the gateway on Redis with quotas off and on; all: bench, rss and gateway")
	flag.StringVar(&o.role, "role", "", "internal: run as a child server (capgate, noop, upstream, proxy, gateway)")
	flag.StringVar(&o.upstream, "upstream", "", "internal: the upstream URL of the proxy child")
	flag.StringVar(&o.routing, "routing-manifests", "../shared/data/routing/manifests.json", "gateway: the registry (a JSON list of manifests, CLINC150 routing data)")
	flag.IntVar(&o.events, "events", 10_000, "gateway: events in the streamed answer")
	flag.BoolVar(&o.streamOnly, "stream-only", false, "gateway: only the streaming case (no throughput or latency phases)")
	flag.BoolVar(&o.noContexts, "no-contexts", false, "gateway: messages name no context (before #33 the only workload; by default each caller continues a context of its own)")
	flag.IntVar(&o.contextTasks, "context-tasks", 0, "gateway: tasks each caller's context holds before the measured phases (each an upstream task bound to the context)")
	flag.StringVar(&o.builds, "builds", "", "gateway-compare: name=loadgen-binary,... built from the commits to compare (see scripts/bench-compare.sh)")
	flag.IntVar(&o.rounds, "rounds", 3, "gateway-compare: A B A B rounds")
	flag.StringVar(&o.config, "config", "", "internal: deployment config of the capgate child (empty: the embedded finance example)")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "length of each measured phase")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured load before each phase")
	flag.IntVar(&o.concurrency, "concurrency", 128, "concurrent requests in closed-loop phases")
	flag.IntVar(&o.conns, "conns", 1, "gRPC connections the requests share")
	flag.IntVar(&o.tokens, "tokens", 16, "distinct bearer tokens the benchmark rotates through")
	flag.IntVar(&o.capabilities, "capabilities", 10_000, "rss: capabilities in the synthetic registry")
	flag.IntVar(&o.distinct, "distinct-tokens", 100_000, "rss: distinct tokens sent")
	flag.IntVar(&o.classes, "classes", 50, "rss: entitlement classes (tenant × scope) the callers fall into, at most 50")
	flag.BoolVar(&o.noPin, "no-pin", false, "do not pin processes to CPUs")
	flag.BoolVar(&o.noRedis, "no-redis", false, "bench, gateway, gateway-compare: skip the phases with the task store on a loopback redis-server")
	flag.StringVar(&o.contextCache, "context-cache", "", "bench: the Redis store's context_cache (e.g. 0 to measure without it; empty: its default)")
	flag.StringVar(&o.cpuProfile, "server-cpuprofile", "", "write the capgate child's CPU profile to this file prefix (<prefix>.<pid>.pprof)")
	flag.StringVar(&o.memory, "memory", "", "rss: limits.memory of the capgate under test (e.g. 40MiB; empty: no limit)")
	flag.DurationVar(&o.reloadEvery, "reload-every", soakReloadEvery, "soak: reload both replicas this often (0: never)")
	flag.StringVar(&o.heapDir, "heap-profiles", "", "soak: write each replica's heap profile (admin /debug/pprof/heap) after warm-up and at the end into this directory (<replica>-early.pprof, <replica>-late.pprof)")
	flag.StringVar(&o.memProfile, "server-memprofile", "", "write the capgate (or gateway) child's heap profile on exit to this file prefix (<prefix>.<pid>.pprof; alloc_objects counts every allocation)")
	flag.Parse()
	o.set = map[string]bool{}
	flag.Visit(func(f *flag.Flag) { o.set[f.Name] = true })

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if o.role != "" {
		err = runChild(ctx, o)
	} else {
		err = run(ctx, o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

type options struct {
	mode, role, config     string
	duration, warmup       time.Duration
	concurrency, conns     int
	tokens                 int
	capabilities, distinct int
	classes                int
	noPin, noRedis         bool
	noContexts             bool
	contextTasks, rounds   int
	builds                 string
	cpuProfile, memProfile string
	memory                 string
	upstream, routing      string
	contextCache           string
	events                 int
	streamOnly             bool
	reloadEvery            time.Duration
	heapDir                string
	set                    map[string]bool // flags given on the command line
}

func run(ctx context.Context, o options) error {
	if o.mode == "soak" {
		// Not a throughput measurement: the replicas, Redis and the
		// generator share the machine's CPUs unpinned.
		return soak(ctx, o)
	}
	pinned, err := pinSelf(o)
	if err != nil || pinned {
		return err // the pinned copy ran (or could not start)
	}
	o.classes = min(max(o.classes, 1), 50)
	switch o.mode {
	case "bench":
		return bench(ctx, o)
	case "rss":
		return rss(ctx, o)
	case "gateway":
		return gatewayBench(ctx, o)
	case "gateway-compare":
		return gatewayCompare(ctx, o)
	case "quotas":
		return quotasBench(ctx, o)
	case "all":
		if err := bench(ctx, o); err != nil {
			return err
		}
		if err := rss(ctx, o); err != nil {
			return err
		}
		return gatewayBench(ctx, o)
	default:
		return fmt.Errorf("-mode %q: want bench, rss, gateway, gateway-compare, quotas, soak or all", o.mode)
	}
}
