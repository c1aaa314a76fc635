package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The gateway benchmark's defaults (used unless the flags are given) and
// targets (docs/benchmarks.md).
const (
	gatewayDuration    = 4 * time.Second
	gatewayWarmup      = time.Second
	gatewayConcurrency = 32 // capgate's handler client keeps 32 idle connections per upstream
	gatewayTexts       = 64 // distinct message texts sent
	gatewayCallers     = 16 // distinct ES256 callers (verification cached after first use)
	warmStreamEvents   = 100
	// openLoopShare: the latency phases send at capgate's max / this, the
	// same rate to both proxies: light enough that a shared core's
	// slow moments do not make capgate's queue grow.
	openLoopShare = 4

	targetGatewayRatio = 0.50
	targetAddedP50     = 250 * time.Microsecond
	targetStreamGrowth = 2 << 20
)

// gatewayConfig is the deployment of the gateway benchmark: the routing
// registry, every handler at the upstream, an issuer whose JWKS holds the
// generated key.
const gatewayConfig = `agent:
  name: Routing Agent
  description: The CLINC150 routing registry, for the gateway benchmark.
  version: 1.0.0
  url: http://127.0.0.1:8080
manifests: [./capabilities]
auth:
  issuers:
    - issuer: %s
      audiences: [%s]
      jwks_file: ./jwks.json
      algorithms: [ES256]
  scopes_claim: scope
  tenant_claim: tenant
listen: {a2a: 127.0.0.1:0, extauthz: 127.0.0.1:0, admin: 127.0.0.1:0}
store: memory
handlers:
`

// binding is one of the two A2A bindings the benchmark sends SendMessage on.
type binding struct {
	name, path string
	body       func(text string, i int, contextID string) []byte
}

var bindings = []binding{
	{"JSON-RPC", "/", func(text string, i int, contextID string) []byte {
		return jsonrpcBody("SendMessage", text, i, 0, contextID)
	}},
	{"HTTP+JSON", "/message:send", func(text string, i int, contextID string) []byte {
		return mustJSON(sendParams(text, i, 0, contextID))
	}},
}

// sendParams are SendMessage's params: a user message with one text part,
// no skill id (the gateway routes it), accepting JSON, in the context
// contextID ("": none, a new conversation). A context is its owner's: the
// bodies of the measured phases give each caller a context of its own
// (contextBodies).
func sendParams(text string, i, events int, contextID string) map[string]any {
	msg := map[string]any{
		"messageId": fmt.Sprintf("%s-%05d", messageIDStem, i),
		"role":      "ROLE_USER",
		"parts":     []any{map[string]any{"text": text}},
	}
	if contextID != "" {
		msg["contextId"] = contextID
	}
	if events > 0 {
		msg["metadata"] = map[string]any{eventsKey: events}
	}
	return map[string]any{"message": msg, "configuration": map[string]any{"acceptedOutputModes": []string{"application/json"}}}
}

func jsonrpcBody(method, text string, i, events int, contextID string) []byte {
	return mustJSON(map[string]any{"jsonrpc": "2.0", "id": fmt.Sprintf("loadgen-%d", i), "method": method, "params": sendParams(text, i, events, contextID)})
}

// contextBodies are b's bodies for the measured phases: every text, and
// with contexts as many more as make their count a multiple of the
// callers, so that request i (sent with bearer i mod callers, see
// httpSender) names the context of that caller: each caller continues a
// conversation of its own, as a real client does, and the gateway checks
// and renews its context on every message.
func contextBodies(b binding, texts []string, callers int, contexts bool) [][]byte {
	n := len(texts)
	if contexts {
		n = (n + callers - 1) / callers * callers
	}
	bodies := make([][]byte, n)
	for i := range bodies {
		contextID := ""
		if contexts {
			contextID = contextOf(i % callers)
		}
		bodies[i] = b.body(texts[i%len(texts)], i, contextID)
	}
	return bodies
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // maps of strings and numbers always marshal
	}
	return b
}

// gwPhase is one proxy measured in closed loop.
type gwPhase struct {
	st                    *stats
	serverCPU, otherCPU   time.Duration // the proxy's; the generator's and the upstream's (core 1)
	allocObjs, allocBytes uint64
	open                  *stats // at the fixed rate
	openServerCPU         time.Duration
	openRate              float64
}

func (p *gwPhase) perReq(d time.Duration) time.Duration {
	if p.st.n == 0 {
		return 0
	}
	return d / time.Duration(p.st.n)
}

// gwSetup is what every gateway measurement shares: the deployment's
// files (the memory-store config and, with -store redis, one on Redis), the
// upstream, the callers' bearers and the texts the classifier routes.
type gwSetup struct {
	dir, upstreamURL           string
	config                     string // store: memory
	up                         *child
	bearers, texts             []string
	client                     *http.Client
	caps, handlers, candidates int
}

// close stops the upstream and removes the deployment's files.
func (g *gwSetup) close() {
	if g.up != nil {
		g.up.stop()
	}
	_ = os.RemoveAll(g.dir)
}

// gatewayDefaults applies the gateway benchmark's phase lengths and
// concurrency unless the flags were given.
func gatewayDefaults(o options) options {
	if !o.set["duration"] {
		o.duration = gatewayDuration
	}
	if !o.set["warmup"] {
		o.warmup = gatewayWarmup
	}
	if !o.set["concurrency"] {
		o.concurrency = gatewayConcurrency
	}
	return o
}

// setupGateway writes the routing deployment, starts the upstream and finds
// the texts the classifier routes (probing a capgate child of probeBin, ""
// for this binary). The caller closes it.
func setupGateway(ctx context.Context, o options, probeBin string) (_ *gwSetup, err error) {
	raw, err := os.ReadFile(o.routing)
	if err != nil {
		return nil, fmt.Errorf("read the routing registry (the CLINC150 manifests of shared/data/routing; -routing-manifests): %w", err)
	}
	var mans []map[string]any
	if err := json.Unmarshal(raw, &mans); err != nil {
		return nil, fmt.Errorf("%s: %w", o.routing, err)
	}
	dir, err := os.MkdirTemp("", "capgate-gateway-")
	if err != nil {
		return nil, err
	}
	g := &gwSetup{dir: dir, caps: len(mans)}
	defer func() {
		if err != nil {
			g.close()
		}
	}()
	if g.up, err = startChildOn(ctx, o, generatorCPU, "upstream", ""); err != nil {
		return nil, err
	}
	g.upstreamURL = "http://" + g.up.addr + "/"

	const kid = "gateway-es256"
	key, jwks, err := callerKey(kid)
	if err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf(gatewayConfig, issuer, audience)
	files := map[string][]byte{"jwks.json": jwks}
	var candidates []string // one example utterance per skill
	handlers := map[string]bool{}
	for _, m := range mans {
		id, _ := m["id"].(string)
		h, _ := m["handler"].(string)
		if id == "" || h == "" {
			return nil, fmt.Errorf("%s: a manifest without id or handler", o.routing)
		}
		if !handlers[h] {
			handlers[h] = true
			cfg += fmt.Sprintf("  %s: %s\n", h, g.upstreamURL)
		}
		files["capabilities/"+id+".json"] = mustJSON(m)
		if skill, ok := m["skill"].(map[string]any); ok {
			if ex, ok := skill["examples"].([]any); ok && len(ex) > 0 {
				if s, ok := ex[0].(string); ok {
					candidates = append(candidates, s)
				}
			}
		}
	}
	g.handlers, g.candidates = len(handlers), len(candidates)
	files["capgate.yaml"] = []byte(cfg)
	for name, b := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return nil, err
		}
	}
	g.bearers = make([]string, gatewayCallers)
	for i := range g.bearers {
		tok, err := mint(key, kid, fmt.Sprintf("orchestrator-%d@partner", i), "partner-co", "")
		if err != nil {
			return nil, err
		}
		g.bearers[i] = "Bearer " + tok
	}
	g.config = filepath.Join(dir, "capgate.yaml")
	g.client = &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		MaxIdleConns: 4 * o.concurrency, MaxIdleConnsPerHost: 2 * o.concurrency, DisableCompression: true,
	}}

	gw, err := startGatewayChild(ctx, o, probeBin, g.config)
	if err != nil {
		return nil, err
	}
	defer gw.stop()
	// Keep the utterances the classifier routes with confidence (the others
	// get a clarification, answered by capgate without the upstream).
	probe := sender(g.client, "http://"+gw.addr+"/", g.bearers, nil)
	var firstErr error
	for i, s := range candidates {
		if len(g.texts) == gatewayTexts {
			break
		}
		b := jsonrpcBody("SendMessage", s, i, 0, "")
		if err := probe.one(ctx, b, g.bearers[0]); err != nil {
			firstErr = cmp.Or(firstErr, err)
			continue
		}
		g.texts = append(g.texts, s)
	}
	if len(g.texts) == 0 {
		return nil, fmt.Errorf("the gateway routed none of the %d example utterances to the upstream; first answer: %w", len(candidates), firstErr)
	}
	return g, nil
}

// redisConfig writes a copy of the deployment's config with its task store
// on the redis-server at addr and returns its path.
func (g *gwSetup) redisConfig(addr string) (string, error) {
	raw, err := os.ReadFile(g.config)
	if err != nil {
		return "", err
	}
	cfg := strings.Replace(string(raw), "store: memory", "store: redis://"+addr+"/0", 1)
	p := filepath.Join(g.dir, "capgate-redis.yaml")
	return p, os.WriteFile(p, []byte(cfg), 0o644)
}

// startGatewayChild starts a gateway child from bin ("": this binary; else
// a loadgen built from another commit, whose gateway role speaks the same
// READY line and statistics).
func startGatewayChild(ctx context.Context, o options, bin, config string) (*child, error) {
	if bin == "" {
		return startChildOn(ctx, o, serverCPU, "gateway", config)
	}
	return startChildBin(ctx, o, bin, serverCPU, "gateway", config)
}

// fillContexts gives each caller's context n tasks before a measurement:
// n SendMessages per caller asking the upstream for a task (one status
// update), each answered with a task in that caller's context, which the
// gateway binds to it.
func (g *gwSetup) fillContexts(ctx context.Context, gw *child, n int) error {
	if n <= 0 {
		return nil
	}
	s := sender(g.client, "http://"+gw.addr+"/", g.bearers, nil)
	var wg sync.WaitGroup
	errs := make(chan error, len(g.bearers))
	for c, bearer := range g.bearers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				body := jsonrpcBody("SendMessage", g.texts[i%len(g.texts)], 0, 1, contextOf(c))
				body = bytes.Replace(body, []byte(messageIDStem), []byte(fmt.Sprintf("loadgen-msg-%012d", sentMessages.Add(1)%1e12)), 1)
				if err := s.oneWant(ctx, body, bearer, "TASK_STATE_COMPLETED"); err != nil {
					errs <- fmt.Errorf("filling caller %d's context (task %d of %d): %w", c, i+1, n, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// contextOf is caller c's context id.
func contextOf(c int) string { return fmt.Sprintf("loadgen-ctx-caller-%02d", c) }

func gatewayBench(ctx context.Context, o options) error {
	o = gatewayDefaults(o)
	g, err := setupGateway(ctx, o, "")
	if err != nil {
		return err
	}
	defer g.close()
	proxy, err := startChildOn(ctx, o, serverCPU, "proxy", "", "-upstream", g.upstreamURL)
	if err != nil {
		return err
	}
	defer proxy.stop()
	gw, err := startChildOn(ctx, o, serverCPU, "gateway", g.config)
	if err != nil {
		return err
	}
	defer gw.stop()
	if err := g.fillContexts(ctx, gw, o.contextTasks); err != nil {
		return err
	}
	printGatewaySetup(o, g.caps, g.handlers, len(g.texts), g.candidates)
	fmt.Printf("profiles while it runs: bare proxy http://%s/debug/pprof/, capgate http://%s/debug/pprof/\n\n", proxy.stats, gw.stats)

	client, bearers, texts := g.client, g.bearers, g.texts
	type pair struct{ proxy, gw *gwPhase }
	results := make([]pair, len(bindings))
	for bi, b := range bindings {
		if o.streamOnly {
			break
		}
		bodies := contextBodies(b, texts, len(bearers), !o.noContexts)
		if results[bi].proxy, err = gatewayClosed(ctx, o, proxy, g.up, b.name+", bare proxy", sender(client, "http://"+proxy.addr+b.path, bearers, bodies)); err != nil {
			return err
		}
		if results[bi].gw, err = gatewayClosed(ctx, o, gw, g.up, b.name+", capgate", sender(client, "http://"+gw.addr+b.path, bearers, bodies)); err != nil {
			return err
		}
		rate := results[bi].gw.st.rate() / openLoopShare
		for _, x := range []struct {
			c *child
			p *gwPhase
			n string
		}{{proxy, results[bi].proxy, ", bare proxy"}, {gw, results[bi].gw, ", capgate"}} {
			if err := gatewayOpen(ctx, o, x.c, b.name+x.n, sender(client, "http://"+x.c.addr+b.path, bearers, bodies), rate, x.p); err != nil {
				return err
			}
		}
	}
	gw.stop()
	var onRedis *gwPhase
	if !o.streamOnly && !o.noRedis {
		if onRedis, err = gatewayRedis(ctx, o, g, "", ""); err != nil {
			return err
		}
	}
	proxy.stop()

	// Streaming: fresh processes, one warm-up stream, then the measured one.
	var streams [2]streamResult
	for i, role := range []string{"proxy", "gateway"} {
		var c *child
		if role == "proxy" {
			c, err = startChildOn(ctx, o, serverCPU, "proxy", "", "-upstream", g.upstreamURL)
		} else {
			c, err = startChildOn(ctx, o, serverCPU, "gateway", g.config)
		}
		if err != nil {
			return err
		}
		streams[i], err = streamPhase(ctx, client, c, bearers[0], texts[0], o.events)
		c.stop()
		if err != nil {
			return fmt.Errorf("stream through the %s: %w", role, err)
		}
	}
	fmt.Println()
	for bi, b := range bindings {
		if !o.streamOnly {
			printGatewayTable(b.name, results[bi].proxy, results[bi].gw)
		}
	}
	if onRedis != nil {
		printGatewayRedis(results[0].proxy, results[0].gw, onRedis)
	}
	printStreamTable(o.events, streams)
	return nil
}

// gatewayRedis measures the gateway (a child of bin, "" for this binary)
// with its task store on a redis-server this process starts (on the
// generator's CPU when pinned, so capgate's core pays only its side of each
// round trip): JSON-RPC, the contexts workload, in closed loop. Every
// message then reserves its messageId, claims its context and settles on
// Redis, as replicas sharing a store do.
func gatewayRedis(ctx context.Context, o options, g *gwSetup, bin, label string) (*gwPhase, error) {
	if err := lookRedis(); err != nil {
		return nil, fmt.Errorf("%w (or run with -no-redis)", err)
	}
	rdir := filepath.Join(g.dir, fmt.Sprintf("redis-%d", sentMessages.Load()))
	if err := os.Mkdir(rdir, 0o755); err != nil {
		return nil, err
	}
	rds, err := startRedisVolatile(rdir)
	if err != nil {
		return nil, err
	}
	defer rds.kill()
	config, err := g.redisConfig(rds.addr)
	if err != nil {
		return nil, err
	}
	gw, err := startGatewayChild(ctx, o, bin, config)
	if err != nil {
		return nil, err
	}
	defer gw.stop()
	if err := g.fillContexts(ctx, gw, o.contextTasks); err != nil {
		return nil, err
	}
	b := bindings[0]
	bodies := contextBodies(b, g.texts, len(g.bearers), !o.noContexts)
	return gatewayClosed(ctx, o, gw, g.up, label+b.name+", capgate on Redis", sender(g.client, "http://"+gw.addr+b.path, g.bearers, bodies))
}

// printGatewayRedis sets the gateway on Redis beside the same gateway on
// the memory store (and the bare proxy) of this run.
func printGatewayRedis(px, mem, rds *gwPhase) {
	fmt.Printf("SendMessage, JSON-RPC, the task store on a loopback redis-server (messageId reserved and settled, context claimed, on Redis):\n\n")
	fmt.Println("| store | req/s (closed loop) | CPU per message | × bare proxy | allocations per message (objects · bytes) |")
	fmt.Println("|---|---:|---:|---:|---|")
	for _, r := range []struct {
		n string
		p *gwPhase
	}{{"memory", mem}, {"Redis", rds}} {
		fmt.Printf("| %s | %.0f | %s | %.1f× | %d · %d |\n", r.n, r.p.st.rate(), us(r.p.perReq(r.p.serverCPU)),
			float64(r.p.perReq(r.p.serverCPU))/float64(max(px.perReq(px.serverCPU), 1)),
			r.p.allocObjs/uint64(max(r.p.st.n, 1)), r.p.allocBytes/uint64(max(r.p.st.n, 1)))
	}
	fmt.Printf("| Redis / memory | %.0f %% | %.2f× | | |\n\n", 100*rds.st.rate()/mem.st.rate(),
		float64(rds.perReq(rds.serverCPU))/float64(max(mem.perReq(mem.serverCPU), 1)))
}

// messageIDStem starts every messageId the gateway benchmark sends;
// httpSender overwrites the stem with a number of its own in each request.
const messageIDStem = "loadgen-msg-000000000000"

// sentMessages numbers the requests of this process, so that no two carry
// one messageId: a repeated id from the same caller is a retry, which capgate
// answers from the first call's record without calling the handler
// (docs/operations.md, "Retries and messageId"), and the benchmark measures
// new messages.
var sentMessages atomic.Uint64

// httpSender posts pre-encoded SendMessage bodies, each with a messageId of
// its own, and requires the upstream's answer.
type httpSender struct {
	client  *http.Client
	url     string
	bearers []string
	bodies  [][]byte
	stems   []int // where each body's messageIDStem starts (-1: none)
}

func sender(c *http.Client, url string, bearers []string, bodies [][]byte) *httpSender {
	s := &httpSender{client: c, url: url, bearers: bearers, bodies: bodies, stems: make([]int, len(bodies))}
	for i, b := range bodies {
		s.stems[i] = bytes.Index(b, []byte(messageIDStem))
	}
	return s
}

func (s *httpSender) send(ctx context.Context, _, i int) error {
	k := i % len(s.bodies)
	body := s.bodies[k]
	if at := s.stems[k]; at >= 0 {
		body = bytes.Clone(body)
		copy(body[at:at+len(messageIDStem)], fmt.Sprintf("loadgen-msg-%012d", sentMessages.Add(1)%1e12))
	}
	return s.one(ctx, body, s.bearers[i%len(s.bearers)])
}

func (s *httpSender) one(ctx context.Context, body []byte, bearer string) error {
	return s.oneWant(ctx, body, bearer, upstreamReply)
}

// oneWant posts body and requires an answer of 200 holding want.
func (s *httpSender) oneWant(ctx context.Context, body []byte, bearer, want string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	req.Header.Set("Authorization", bearer)
	res, err := s.client.Do(req)
	if err != nil {
		return err
	}
	b, err := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(want)) {
		return fmt.Errorf("status %d without the upstream's answer: %.300s", res.StatusCode, b)
	}
	return nil
}

// heapStats are a child's cumulative heap allocations and its live heap
// as of the last collection (statsHandler).
type heapStats struct{ objs, bytes, live uint64 }

func readHeap(ctx context.Context, c *child) (heapStats, error) {
	var h heapStats
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.stats+"/", nil)
	if err != nil {
		return h, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return h, err
	}
	defer func() { _ = res.Body.Close() }()
	_, err = fmt.Fscan(res.Body, &h.objs, &h.bytes, &h.live)
	return h, err
}

// gatewayClosed measures one proxy at maximum throughput: requests, its
// CPU and allocations, and the CPU of core 1 (generator and upstream).
func gatewayClosed(ctx context.Context, o options, c, up *child, name string, s *httpSender) (*gwPhase, error) {
	fmt.Printf("%-22s closed loop ... ", name)
	p := &gwPhase{}
	var s0, g0, u0 time.Duration
	var a0, b0 uint64
	var markErr error
	st, err := closedLoopMarked(ctx, s.send, o.concurrency, o.warmup, o.duration, func(begin bool) {
		sc, _ := cpuTime(c.cmd.Process.Pid)
		g, _ := cpuTime(os.Getpid())
		u, _ := cpuTime(up.cmd.Process.Pid)
		h, err := readHeap(ctx, c)
		if err != nil {
			markErr = err
		}
		a, b := h.objs, h.bytes
		if begin {
			s0, g0, u0, a0, b0 = sc, g, u, a, b
			return
		}
		p.serverCPU, p.otherCPU, p.allocObjs, p.allocBytes = sc-s0, (g-g0)+(u-u0), a-a0, b-b0
	})
	if err != nil {
		return nil, err
	}
	if markErr != nil {
		return nil, markErr
	}
	p.st = st
	fmt.Printf("%.0f req/s (errors %d)\n", st.rate(), st.errors)
	if st.errors > 0 {
		return nil, fmt.Errorf("%s: %d failed requests, first: %v", name, st.errors, st.firstErr)
	}
	return p, nil
}

// gatewayOpen sends at a fixed rate and records the round trips in p.
func gatewayOpen(ctx context.Context, o options, c *child, name string, s *httpSender, rate float64, p *gwPhase) error {
	fmt.Printf("%-22s open loop at %.0f/s ... ", name, rate)
	s0, _ := cpuTime(c.cmd.Process.Pid)
	st, _, err := openLoop(ctx, s.send, rate, 256, o.warmup, o.duration)
	if err != nil {
		return err
	}
	s1, _ := cpuTime(c.cmd.Process.Pid)
	p.open, p.openRate, p.openServerCPU = st, rate, s1-s0
	fmt.Printf("%.0f req/s (errors %d, dropped %d)\n", st.rate(), st.errors, st.dropped)
	if st.errors > 0 {
		return fmt.Errorf("%s: %d failed requests, first: %v", name, st.errors, st.firstErr)
	}
	return nil
}

// streamResult is one streamed answer relayed by a proxy.
type streamResult struct {
	events              int
	elapsed             time.Duration
	before, peak, end   int64  // the proxy's VmRSS
	liveBefore, liveEnd uint64 // its live heap after the last collection
	allocBytes          uint64 // allocated while relaying
}

// streamPhase sends one short stream (warm-up), then one of events
// events, sampling the proxy's resident memory while it relays them.
func streamPhase(ctx context.Context, client *http.Client, c *child, bearer, text string, events int) (streamResult, error) {
	url := "http://" + c.addr + "/"
	if _, err := stream(ctx, client, url, bearer, jsonrpcBody("SendStreamingMessage", text, 1, warmStreamEvents, ""), warmStreamEvents); err != nil {
		return streamResult{}, err
	}
	pid := c.cmd.Process.Pid
	before, err := memStatus(pid)
	if err != nil {
		return streamResult{}, err
	}
	h0, err := readHeap(ctx, c)
	if err != nil {
		return streamResult{}, err
	}
	r := streamResult{before: before.RSS, peak: before.RSS, liveBefore: h0.live}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if m, err := memStatus(pid); err == nil {
					r.peak = max(r.peak, m.RSS)
				}
			}
		}
	}()
	start := time.Now()
	n, err := stream(ctx, client, url, bearer, jsonrpcBody("SendStreamingMessage", text, 2, events, ""), events)
	r.elapsed = time.Since(start)
	close(done)
	wg.Wait()
	if err != nil {
		return streamResult{}, err
	}
	after, err := memStatus(pid)
	if err != nil {
		return streamResult{}, err
	}
	h1, err := readHeap(ctx, c)
	if err != nil {
		return streamResult{}, err
	}
	r.events, r.end, r.peak, r.liveEnd = n, after.RSS, max(r.peak, after.RSS), h1.live
	r.allocBytes = h1.bytes - h0.bytes
	return r, nil
}

// stream sends a streaming request and reads its events as they come; the
// answer must hold the task, want working updates and the completion.
func stream(ctx context.Context, client *http.Client, url, bearer string, body []byte, want int) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("A2A-Version", "1.0")
	req.Header.Set("Authorization", bearer)
	res, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = res.Body.Close() }()
	if ct := res.Header.Get("Content-Type"); res.StatusCode != http.StatusOK || !strings.HasPrefix(ct, "text/event-stream") {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 300))
		return 0, fmt.Errorf("status %d, %s: %s", res.StatusCode, ct, b)
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	n, completed := 0, false
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte("data:")) {
			continue
		}
		n++
		if bytes.Contains(line, []byte(`"error"`)) {
			return n, fmt.Errorf("event %d is an error: %.300s", n, line)
		}
		completed = bytes.Contains(line, []byte("TASK_STATE_COMPLETED"))
	}
	if err := sc.Err(); err != nil {
		return n, err
	}
	if !completed || n < want+2 {
		return n, fmt.Errorf("%d events, completed %v: want the task, %d updates and the completion", n, completed, want)
	}
	return n, nil
}

func printGatewaySetup(o options, caps, handlers, texts, candidates int) {
	pin := "unpinned"
	if os.Getenv(envPinned) != "" {
		pin = "proxies on CPU " + serverCPU + " (GOMAXPROCS=1), generator and upstream on CPU " + generatorCPU
	}
	fmt.Printf("\nA2A gateway on loopback — %d CPUs, %s, %s\n", onlineCPUs(), runtime.Version(), pin)
	fmt.Printf("registry: %d capabilities (%s), %d handlers, all at one a2a-go v2 upstream answering each message at once\n", caps, o.routing, handlers)
	contexts := "each continuing a context of its own (the upstream answers in it)"
	if o.noContexts {
		contexts = "naming no context (-no-contexts)"
	}
	fmt.Printf("requests: SendMessage without skill id, one text part; %d of %d example utterances (one per skill) are routed by the classifier and sent in rotation; %d ES256 callers (cached after first use), %s\n",
		texts, candidates, gatewayCallers, contexts)
	fmt.Printf("closed loop: %d in flight (HTTP/1.1 keep-alive), %v warm-up + %v measured per phase; open loop at a quarter of capgate's max\n",
		o.concurrency, o.warmup, o.duration)
}

func printGatewayTable(name string, px, gw *gwPhase) {
	ratio := gw.st.rate() / px.st.rate()
	fmt.Printf("SendMessage, %s:\n\n", name)
	fmt.Println("| | bare reverse proxy | capgate gateway | capgate / proxy |")
	fmt.Println("|---|---:|---:|---:|")
	fmt.Printf("| max throughput, closed loop (req/s) | %.0f | %.0f | **%.0f %%** (target ≥ %.0f %%: %s) |\n",
		px.st.rate(), gw.st.rate(), ratio*100, targetGatewayRatio*100, verdict(ratio >= targetGatewayRatio))
	fmt.Printf("| proxy CPU busy (core %s) | %.0f %% | %.0f %% | |\n", serverCPU,
		100*px.serverCPU.Seconds()/px.st.elapsed.Seconds(), 100*gw.serverCPU.Seconds()/gw.st.elapsed.Seconds())
	fmt.Printf("| proxy CPU per request | %s | %s | %.1f× |\n", us(px.perReq(px.serverCPU)), us(gw.perReq(gw.serverCPU)),
		float64(gw.perReq(gw.serverCPU))/float64(max(px.perReq(px.serverCPU), 1)))
	fmt.Printf("| proxy allocations per request (objects · bytes) | %d · %d | %d · %d | |\n",
		px.allocObjs/uint64(max(px.st.n, 1)), px.allocBytes/uint64(max(px.st.n, 1)),
		gw.allocObjs/uint64(max(gw.st.n, 1)), gw.allocBytes/uint64(max(gw.st.n, 1)))
	fmt.Printf("| generator + upstream CPU busy (core %s) | %.0f %% | %.0f %% | |\n", generatorCPU,
		100*px.otherCPU.Seconds()/px.st.elapsed.Seconds(), 100*gw.otherCPU.Seconds()/gw.st.elapsed.Seconds())
	fmt.Printf("| round trip at max, p50 / p99 | %s / %s | %s / %s | |\n",
		us(px.st.pct(0.5)), us(px.st.pct(0.99)), us(gw.st.pct(0.5)), us(gw.st.pct(0.99)))
	added50 := gw.open.pct(0.5) - px.open.pct(0.5)
	added99 := gw.open.pct(0.99) - px.open.pct(0.99)
	fmt.Printf("| round trip at %.0f req/s (open loop), p50 / p99 | %s / %s | %s / %s | added: p50 **%s** (target ≤ %s: %s), p99 %s |\n",
		gw.openRate, us(px.open.pct(0.5)), us(px.open.pct(0.99)), us(gw.open.pct(0.5)), us(gw.open.pct(0.99)),
		us(added50), us(targetAddedP50), verdict(added50 <= targetAddedP50), us(added99))
	if px.open.dropped+gw.open.dropped > 0 {
		fmt.Printf("WARNING: %d / %d requests not sent at the fixed rate (the proxy fell behind)\n", px.open.dropped, gw.open.dropped)
	}
	if u := px.serverCPU.Seconds() / px.st.elapsed.Seconds(); u < 0.9 {
		load, _ := os.ReadFile("/proc/loadavg")
		fmt.Printf("WARNING: the bare proxy used %.0f %% of its core at max: the generator and upstream (core %s) or other processes (load average %s) held it back; the throughput ratio overstates capgate, CPU per request does not\n",
			u*100, generatorCPU, strings.Join(strings.Fields(string(load))[:3], " "))
	}
	fmt.Println()
}

func printStreamTable(events int, s [2]streamResult) {
	fmt.Printf("SendStreamingMessage relaying %d events (JSON-RPC, SSE), after a %d-event warm-up stream:\n\n", events, warmStreamEvents)
	fmt.Println("| | bare reverse proxy | capgate gateway |")
	fmt.Println("|---|---:|---:|")
	fmt.Printf("| events received, time | %d in %v | %d in %v |\n", s[0].events, s[0].elapsed.Round(time.Millisecond), s[1].events, s[1].elapsed.Round(time.Millisecond))
	fmt.Printf("| proxy VmRSS before · peak · after | %s · %s · %s | %s · %s · %s |\n",
		mib(s[0].before), mib(s[0].peak), mib(s[0].end), mib(s[1].before), mib(s[1].peak), mib(s[1].end))
	fmt.Printf("| live heap after the last collection, before · after | %s · %s | %s · %s |\n",
		mib(int64(s[0].liveBefore)), mib(int64(s[0].liveEnd)), mib(int64(s[1].liveBefore)), mib(int64(s[1].liveEnd)))
	fmt.Printf("| heap allocated per event relayed | %d B | %d B |\n",
		s[0].allocBytes/uint64(max(s[0].events, 1)), s[1].allocBytes/uint64(max(s[1].events, 1)))
	g0, g1 := s[0].peak-s[0].before, s[1].peak-s[1].before
	fmt.Printf("| growth (peak − before) | %s | **%s** (target ≤ %s: %s) |\n", mib(g0), mib(g1), mib(targetStreamGrowth), verdict(g1 <= targetStreamGrowth))
}
