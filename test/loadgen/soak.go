package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/capgate/capgate/manifests"
	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/sidecar/handler/echo"
	"github.com/capgate/capgate/sidecar/handlerauth"
	"github.com/capgate/capgate/sidecar/identity"
	"github.com/capgate/capgate/sidecar/settings"
)

// The soak's defaults (used unless the flags are given) and bounds
// (docs/benchmarks.md, "Soak").
const (
	soakDuration    = 90 * time.Second
	soakMinDuration = 60 * time.Second
	soakConcurrency = 8
	soakWindow      = 5 * time.Second
	soakReloadEvery = 3 * time.Second
	soakRedisDown   = 2 * time.Second // Redis stays down this long in the middle of the run
	soakTimeout     = 10 * time.Second
	// soakGrace: a request that started up to this long after Redis answered
	// again may still have met the outage (go-redis redials on the next
	// command; a request already past its store call reports it).
	soakGrace = 2 * time.Second

	// soakCheckMargin: a task is read back after the run only if its
	// binding outlives the read by this much (the binding expires
	// binding_ttl after it was written, just before it was acknowledged).
	soakCheckMargin = 10 * time.Second

	maxRSSGrowth       = 16 << 20 // per replica, median of the last window − median of the first after warm-up
	maxLiveHeapGrowth  = 8 << 20  // per replica, the live heap after a GC at the two quiet points
	maxGoroutineGrowth = 16       // idle goroutines: ±9 seen between two quiet points on the shared VM; a leak per request or per reload exceeds it
)

// soakCallers: the owner of every task, and another partner entitled to the
// same capability in the same tenant who must never see them.
var soakCallers = [2]struct{ sub, tenant, scope string }{
	{"partner-1", "acme", "recon.run"},
	{"partner-2", "acme", "recon.run"},
}

// replica is one capgate serve process and its clients, one per binding.
type replica struct {
	name    string
	c       *child
	clients map[a2a.TransportProtocol]*a2aclient.Client
	rss     []sample
	anon    []sample // RssAnon: VmRSS without the pages of the binary (and other files) mapped in
	gor     []sample
	goal    []sample   // go_memstats_next_gc_bytes: the heap goal, twice the live heap after the last GC (GOGC=100)
	idle    [2]float64 // goroutines with no request in flight and the generator's connections closed: after warm-up, at the end
	live    [2]float64 // go_memstats_heap_alloc_bytes right after a forced GC at the same two quiet points: the live heap
	mu      sync.Mutex // scrape's samples
	tr      []*http.Transport
	reloads float64 // capgate_reloads_total{result="ok"} at the last scrape
	alloc   float64 // go_memstats_heap_alloc_bytes at the last scrape
	reject  float64 // capgate_reloads_total{result="rejected"}
	stderr  lineCounter
}

// lineCounter counts the lines written to it and keeps the first: a
// replica's stderr (capgate logs JSON to stdout; what reaches stderr comes
// from elsewhere, e.g. go-redis's own logger while Redis is down).
type lineCounter struct {
	mu    sync.Mutex
	lines int
	first string
}

func (l *lineCounter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.first == "" {
		l.first = strings.TrimSpace(string(p[:min(len(p), 200)]))
	}
	l.lines += bytes.Count(p, []byte("\n"))
	return len(p), nil
}

var soakBindings = []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON}

func soak(ctx context.Context, o options) error {
	if !o.set["duration"] {
		o.duration = soakDuration
	}
	if !o.set["concurrency"] {
		o.concurrency = soakConcurrency
	}
	if o.duration < soakMinDuration {
		return fmt.Errorf("-duration %v: the soak needs at least %v (a warm-up, the restart, two windows after)", o.duration, soakMinDuration)
	}
	ttl, warmup := soakPlan(o.duration)
	if err := lookRedis(); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "capgate-soak-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	bin, err := buildCapgate(ctx, dir)
	if err != nil {
		return err
	}
	if err := os.Mkdir(filepath.Join(dir, "redis"), 0o700); err != nil {
		return err
	}
	rds, err := startRedis(filepath.Join(dir, "redis"))
	if err != nil {
		return err
	}
	defer rds.kill()

	cfgDir := filepath.Join(dir, "finance")
	config, upstream, up, err := soakDeployment(ctx, cfgDir, rds.addr, ttl)
	if err != nil {
		return err
	}
	hook := strings.TrimSuffix(upstream, "/") + "/hooks/soak"

	var reps []*replica
	for _, name := range []string{"A", "B"} {
		r := &replica{name: name, clients: map[a2a.TransportProtocol]*a2aclient.Client{}}
		c, err := startCapgateOnly(ctx, bin, config, "gateway", &r.stderr)
		if err != nil {
			return fmt.Errorf("replica %s: %w", name, err)
		}
		defer c.stop()
		r.c = c
		for _, b := range soakBindings {
			tr := &http.Transport{MaxIdleConns: 4 * o.concurrency, MaxIdleConnsPerHost: 2 * o.concurrency, DisableCompression: true}
			r.tr = append(r.tr, tr)
			if r.clients[b], err = soakClient(ctx, c.addr, b, tr); err != nil {
				return fmt.Errorf("replica %s, %s client: %w", name, b, err)
			}
		}
		reps = append(reps, r)
	}
	var bearers [2]string
	key, kid, err := demoKey()
	if err != nil {
		return err
	}
	for i, c := range soakCallers {
		if bearers[i], err = mint(key, kid, c.sub, c.tenant, c.scope); err != nil {
			return err
		}
	}
	fmt.Printf("\nsoak: 2 capgate replicas (%s serve --only gateway, GOMAXPROCS=1) on redis-server %s (appendonly, appendfsync always), echo handler upstream %s\n", filepath.Base(bin), rds.addr, upstream)
	fmt.Printf("load: %d workers, closed loop, %v; config reload every %v (file rewrite and SIGHUP in turn); Redis SIGKILLed at %v for %v\n",
		o.concurrency, o.duration, o.reloadEvery, o.duration/2, soakRedisDown)
	fmt.Printf("store binding_ttl %v (the default): the owner's task set grows for the whole run, every ListTasks reads one page of it; growth is measured after a warm-up of %v\n\n", ttl, warmup)

	w := &soakLoad{reps: reps, bearers: bearers, hook: hook, upstream: up, ttl: ttl}
	begin := time.Now()
	end := begin.Add(o.duration)
	loadCtx, stopLoad := context.WithDeadline(ctx, end)
	defer stopLoad()
	var wg sync.WaitGroup
	for i := range o.concurrency {
		wg.Go(func() { w.worker(loadCtx, i) })
	}
	wg.Go(func() { sampleReplicas(loadCtx, reps) })
	idleErr := make(chan error, 1)
	wg.Go(func() {
		sleep(loadCtx, warmup)
		if loadCtx.Err() == nil {
			idleErr <- w.quiesce(ctx, 0, o.heapDir)
		}
		close(idleErr)
	})
	reloadErr := make(chan error, 1)
	wg.Go(func() { reloadErr <- reloadLoop(loadCtx, config, reps, o.reloadEvery) })

	var out outage
	restartErr := make(chan error, 1)
	wg.Go(func() {
		defer close(restartErr)
		sleep(loadCtx, o.duration/2)
		if loadCtx.Err() != nil {
			return
		}
		out.down = time.Now()
		rds.kill()
		sleep(ctx, soakRedisDown)
		if err := rds.start(); err != nil {
			restartErr <- err
			return
		}
		out.up = time.Now()
	})
	wg.Wait()
	if err := <-restartErr; err != nil {
		return fmt.Errorf("redis restart: %w", err)
	}
	if err := <-reloadErr; err != nil {
		return err
	}
	if err := <-idleErr; err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := w.quiesce(ctx, 1, o.heapDir); err != nil {
		return err
	}

	// Every task acknowledged before the restart whose binding has not
	// expired since, read by its owner through both replicas and both
	// bindings after it.
	before := w.ackedBetween(time.Now().Add(soakCheckMargin-ttl), out.down)
	lost := w.checkOwnership(ctx, before)

	ws := windows(w.outs, begin, end, soakWindow)
	printSoakTable(ws, reps, out, begin, warmup)
	problems, inWindow := verdicts(w.outs, out, soakGrace)
	fmt.Printf("\nRedis down %s → answering %s (%v); store-unavailable answers: %d, all inside the restart window (+%v grace)\n",
		out.down.Sub(begin).Round(time.Millisecond), out.up.Sub(begin).Round(time.Millisecond), out.up.Sub(out.down).Round(time.Millisecond), inWindow, soakGrace)
	fmt.Printf("ownership: %d tasks acknowledged before the restart (and within binding_ttl of the check), each read by its owner through A and B over JSON-RPC and HTTP+JSON after it: %d lost\n", len(before), len(lost))
	if len(before) == 0 {
		problems = append(problems, "no task acknowledged before the restart is still within binding_ttl: nothing to read back (a longer -duration)")
	}
	if len(lost) > 0 {
		problems = append(problems, fmt.Sprintf("%d acknowledged tasks not readable by their owner after the restart (first: %s)", len(lost), lost[0]))
	}
	warmEnd := begin.Add(warmup)
	for _, r := range reps {
		gr, ok1 := growth(r.rss, warmEnd, soakWindow)
		ga, _ := growth(r.anon, warmEnd, soakWindow)
		gg := r.idle[1] - r.idle[0]
		gl := r.live[1] - r.live[0]
		if !ok1 {
			problems = append(problems, fmt.Sprintf("replica %s: too few samples to measure growth", r.name))
			continue
		}
		fmt.Printf("replica %s: stderr %d lines (first: %q)\n", r.name, r.stderr.lines, r.stderr.first)
		fmt.Printf("replica %s: VmRSS growth after warm-up (median of the last %v − median of the first %v after %v) %s (bound %s: %s), of which RssAnon %s; live heap after a GC, after warm-up → at the end %s → %s (bound +%s: %s); idle goroutines after warm-up → at the end %.0f → %.0f, %+.0f (bound %d: %s); reloads ok %.0f, rejected %.0f\n",
			r.name, soakWindow, soakWindow, warmup, mib(int64(gr)), mib(maxRSSGrowth), verdict(gr <= maxRSSGrowth), mib(int64(ga)),
			mib(int64(r.live[0])), mib(int64(r.live[1])), mib(maxLiveHeapGrowth), verdict(gl <= maxLiveHeapGrowth),
			r.idle[0], r.idle[1], gg, maxGoroutineGrowth, verdict(gg <= maxGoroutineGrowth), r.reloads, r.reject)
		if gr > maxRSSGrowth {
			problems = append(problems, fmt.Sprintf("replica %s: VmRSS grew %s after warm-up (bound %s)", r.name, mib(int64(gr)), mib(maxRSSGrowth)))
		}
		if gl > maxLiveHeapGrowth {
			problems = append(problems, fmt.Sprintf("replica %s: the live heap grew %s after warm-up (bound %s)", r.name, mib(int64(gl)), mib(maxLiveHeapGrowth)))
		}
		if gg > maxGoroutineGrowth {
			problems = append(problems, fmt.Sprintf("replica %s: %+.0f goroutines after warm-up (bound %d)", r.name, gg, maxGoroutineGrowth))
		}
		if minimum := float64(o.duration/max(o.reloadEvery, 1)) / 2; o.reloadEvery > 0 && r.reloads < minimum || r.reject > 0 {
			problems = append(problems, fmt.Sprintf("replica %s: %.0f reloads ok (want ≥ %.0f), %.0f rejected", r.name, r.reloads, minimum, r.reject))
		}
	}
	if len(problems) > 0 {
		fmt.Println("\nverdict: FAIL")
		return errors.New("soak: " + strings.Join(problems, "; "))
	}
	fmt.Println("\nverdict: PASS")
	return nil
}

// soakDeployment writes the finance example into dir with every handler at
// an echo upstream served by this process (sharing its tasks between the
// replicas), the store at Redis, push notifications on with one allowed
// webhook prefix at the upstream, and a handler-token key both replicas sign
// with; bindings live ttl (binding_ttl). It returns the config path and the
// upstream's URL.
func soakDeployment(ctx context.Context, dir, redisAddr string, ttl time.Duration) (config, upstream string, srv *http.Server, err error) {
	if err := writeFinance(dir); err != nil {
		return "", "", nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", "", nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "signing.pem"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return "", "", nil, err
	}
	config = filepath.Join(dir, "capgate.yaml")
	d, err := deployment.Load(config, settings.Checks()...)
	if err != nil {
		return "", "", nil, err
	}
	minter, err := identity.NewMinter(d.Config.Identity.Issuer, key)
	if err != nil {
		return "", "", nil, err
	}
	var names []string
	for name := range d.Config.Handlers {
		names = append(names, name)
	}
	slices.Sort(names)
	v, err := handlerauth.NewVerifier(ctx, handlerauth.Config{Issuer: minter.Issuer(), Audience: names[0], Audiences: names[1:], JWKS: minter.JWKS()})
	if err != nil {
		return "", "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", "", nil, err
	}
	addr := ln.Addr().String()
	srv = &http.Server{Handler: echo.New(v.Verify), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	context.AfterFunc(ctx, func() { _ = srv.Close() })
	upstream = "http://" + addr + "/"
	raw, err := os.ReadFile(config)
	if err != nil {
		return "", "", nil, err
	}
	cfg := string(raw)
	for old, repl := range map[string]string{
		"builtin:echo": upstream,
		"listen: {a2a: 127.0.0.1:8080, extauthz: 127.0.0.1:9191, admin: 127.0.0.1:9090}": "listen: {a2a: 127.0.0.1:0, extauthz: 127.0.0.1:0, admin: 127.0.0.1:0}",
		"store: memory": "store: redis://" + redisAddr + "/0?binding_ttl=" + ttl.String(),
	} {
		if !strings.Contains(cfg, old) {
			return "", "", nil, fmt.Errorf("the finance example's capgate.yaml has no %q to replace", old)
		}
		cfg = strings.ReplaceAll(cfg, old, repl)
	}
	cfg += "identity: {signing_key_file: ./signing.pem}\n"
	cfg += fmt.Sprintf("push: {enabled: true, allowed_urls: [\"http://%s/hooks\"]}\n", addr)
	return config, upstream, srv, writeConfig(config, cfg)
}

// writeFinance copies the embedded finance example into dir.
func writeFinance(dir string) error {
	return fs.WalkDir(manifests.FS, "finance", func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(p, "finance")))
		if e.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := manifests.FS.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
}

// writeConfig replaces the config file at once (a rename), as a
// ConfigMap update does, so that a reload never reads half a file.
func writeConfig(path, content string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// reloadLoop reloads both replicas every soakReloadEvery until ctx ends:
// in turn by rewriting the config file (a new comment line) and by SIGHUP.
func reloadLoop(ctx context.Context, config string, reps []*replica, every time.Duration) error {
	if every <= 0 {
		return nil
	}
	raw, err := os.ReadFile(config)
	if err != nil {
		return err
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if n%2 == 0 {
			if err := writeConfig(config, string(raw)+fmt.Sprintf("# soak reload %d\n", n)); err != nil {
				return err
			}
			continue
		}
		for _, r := range reps {
			if err := r.c.cmd.Process.Signal(syscall.SIGHUP); err != nil {
				return fmt.Errorf("SIGHUP replica %s: %w", r.name, err)
			}
		}
	}
}

// sampleReplicas reads each replica's VmRSS and goroutines every second.
func sampleReplicas(ctx context.Context, reps []*replica) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, r := range reps {
			_ = r.scrape(ctx)
		}
	}
}

// scrape samples the replica's VmRSS and its admin /metrics: go_goroutines
// and capgate_reloads_total.
func (r *replica) scrape(ctx context.Context) error {
	now := time.Now()
	m, err := memStatus(r.c.cmd.Process.Pid)
	if err != nil {
		return fmt.Errorf("replica %s: %w", r.name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res, err := r.adminGet(ctx, "/metrics")
	if err != nil {
		return err
	}
	defer func() { _ = res.Body.Close() }()
	vals, err := promValues(res.Body, "go_goroutines", "go_memstats_next_gc_bytes", "go_memstats_heap_alloc_bytes", `capgate_reloads_total{result="ok"}`, `capgate_reloads_total{result="rejected"}`)
	if err != nil {
		return fmt.Errorf("replica %s /metrics: %w", r.name, err)
	}
	g, ok := vals["go_goroutines"]
	if !ok {
		return fmt.Errorf("replica %s /metrics: no go_goroutines", r.name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rss = append(r.rss, sample{now, float64(m.RSS)})
	r.anon = append(r.anon, sample{now, float64(m.Anon)})
	r.gor = append(r.gor, sample{now, g})
	r.goal = append(r.goal, sample{now, vals["go_memstats_next_gc_bytes"]})
	r.alloc = vals["go_memstats_heap_alloc_bytes"]
	r.reloads, r.reject = vals[`capgate_reloads_total{result="ok"}`], vals[`capgate_reloads_total{result="rejected"}`]
	return nil
}

// quiesce holds the workers between operations, closes the idle
// connections of the generator and of the upstream (so the replicas'
// per-connection goroutines end, on both sides), waits a second and records
// each replica's goroutines as idle[i]: counts that do not depend on how
// many requests or connections happened to be open. With heapDir it also
// saves each replica's heap profile there (early after warm-up, late at
// the end).
func (l *soakLoad) quiesce(ctx context.Context, i int, heapDir string) error {
	l.gate.Lock()
	defer l.gate.Unlock()
	for _, r := range l.reps {
		for _, tr := range r.tr {
			tr.CloseIdleConnections()
		}
	}
	l.upstream.SetKeepAlivesEnabled(false) // closes its idle connections
	l.upstream.SetKeepAlivesEnabled(true)
	sleep(ctx, time.Second)
	for _, r := range l.reps {
		if err := r.scrape(ctx); err != nil {
			return err
		}
		r.mu.Lock()
		r.idle[i] = r.gor[len(r.gor)-1].v
		r.mu.Unlock()
		path := ""
		if heapDir != "" {
			path = filepath.Join(heapDir, r.name+"-"+[]string{"early", "late"}[i]+".pprof")
		}
		if err := r.heapProfile(ctx, path); err != nil {
			return err
		}
		// The profile's GC just ran and nothing is in flight: the heap
		// allocated now is what the replica holds.
		if err := r.scrape(ctx); err != nil {
			return err
		}
		r.mu.Lock()
		r.live[i] = r.alloc
		r.mu.Unlock()
	}
	return nil
}

// adminGet sends GET path to the replica's admin listener.
func (r *replica) adminGet(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.c.admin+path, nil)
	if err != nil {
		return nil, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("replica %s %s: %w", r.name, path, err)
	}
	return res, nil
}

// heapProfile runs a GC in the replica (through its admin heap profile)
// and saves the profile to path ("": discards it).
func (r *replica) heapProfile(ctx context.Context, path string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := r.adminGet(ctx, "/debug/pprof/heap?gc=1")
	if err != nil {
		return err
	}
	defer func() { _ = res.Body.Close() }()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("replica %s heap profile: %s", r.name, res.Status)
	}
	if path == "" {
		_, err = io.Copy(io.Discard, res.Body)
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, res.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// promValues reads the named series (name plus labels as exposed) from a
// Prometheus text exposition.
func promValues(r io.Reader, series ...string) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || !slices.Contains(series, name) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[name] = v
	}
	return out, sc.Err()
}

// statusKey carries a *callStatus in a call's context: the transport
// records the HTTP status and whether the body said the store is
// unavailable.
type statusKey struct{}

type callStatus struct {
	status      int
	unavailable bool
}

// bearerKey carries the caller's bearer token in a call's context.
type bearerKey struct{}

// recordingTransport fills the call's callStatus.
type recordingTransport struct{ base http.RoundTripper }

// storeUnavailable is capgate's message when the task store cannot answer.
var storeUnavailable = []byte("task bindings are unavailable")

func (t recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := t.base.RoundTrip(req)
	cs, _ := req.Context().Value(statusKey{}).(*callStatus)
	if err != nil || cs == nil {
		return res, err
	}
	cs.status = res.StatusCode
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		return res, nil
	}
	b, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	_ = res.Body.Close()
	if err != nil {
		return nil, err
	}
	cs.unavailable = bytes.Contains(b, storeUnavailable)
	res.Body = io.NopCloser(bytes.NewReader(b))
	return res, nil
}

// bearerInterceptor sends the context's bearer token.
type bearerInterceptor struct{}

func (bearerInterceptor) Before(ctx context.Context, req *a2aclient.Request) (context.Context, any, error) {
	if b, ok := ctx.Value(bearerKey{}).(string); ok {
		req.ServiceParams.Append("Authorization", b)
	}
	return ctx, nil, nil
}

func (bearerInterceptor) After(context.Context, *a2aclient.Response) error { return nil }

// soakClient is an a2a-go client of the capgate at addr over binding, built
// from its public card with the interface URLs pointed at addr.
func soakClient(ctx context.Context, addr string, binding a2a.TransportProtocol, tr *http.Transport) (*a2aclient.Client, error) {
	hc := &http.Client{Timeout: soakTimeout, Transport: recordingTransport{base: tr}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/.well-known/agent-card.json", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("A2A-Version", "1.0")
	res, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = res.Body.Close() }()
	var card a2a.AgentCard
	if err := json.NewDecoder(res.Body).Decode(&card); err != nil {
		return nil, fmt.Errorf("public card: %w", err)
	}
	var ifaces []*a2a.AgentInterface
	for _, iface := range card.SupportedInterfaces {
		if iface.ProtocolBinding != binding {
			continue
		}
		cp := *iface
		cp.URL = strings.Replace(cp.URL, "http://127.0.0.1:8080", "http://"+addr, 1)
		ifaces = append(ifaces, &cp)
	}
	if len(ifaces) == 0 {
		return nil, fmt.Errorf("the public card advertises no %s interface", binding)
	}
	card.SupportedInterfaces = ifaces
	return a2aclient.NewFromCard(ctx, &card,
		a2aclient.WithJSONRPCTransport(hc),
		a2aclient.WithRESTTransport(hc),
		a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []a2a.TransportProtocol{binding}}),
		a2aclient.WithCallInterceptors(bearerInterceptor{}))
}

// soakLoad is the workload: its replicas, callers and outcomes.
type soakLoad struct {
	reps     []*replica
	bearers  [2]string // the owner's, another partner's
	hook     string
	upstream *http.Server  // the echo, in this process
	ttl      time.Duration // the store's binding_ttl

	gate  sync.RWMutex // held by quiesce, read-held by every operation
	mu    sync.Mutex
	outs  []soakOutcome
	acked []ackedTask
}

type ackedTask struct {
	id string
	at time.Time // when the SendMessage was answered
}

// soakOps is the rotation each worker goes through: every A2A operation.
var soakOps = []string{"send", "stream", "get", "list", "cancel", "subscribe", "push", "card", "intruder-get"}

// worker runs the rotation until ctx ends; worker w starts at op w and
// alternates replicas and bindings, so every operation meets both.
func (l *soakLoad) worker(ctx context.Context, w int) {
	rng := mrand.New(mrand.NewPCG(uint64(w), 7))
	for i := w; ctx.Err() == nil; i++ {
		r := l.reps[(i/len(soakOps)+w)%len(l.reps)]
		b := soakBindings[(i/(2*len(soakOps))+w)%len(soakBindings)]
		l.gate.RLock()
		l.op(ctx, r.clients[b], soakOps[i%len(soakOps)], fmt.Sprintf("soak-%d-%d", w, i), rng)
		l.gate.RUnlock()
	}
}

// call runs f as the caller with bearer and records its outcome as op;
// refusals lists the error kinds op is meant to get.
func (l *soakLoad) call(ctx context.Context, op string, bearer int, f func(ctx context.Context) error, refusals ...string) error {
	cs := &callStatus{}
	cctx, cancel := context.WithTimeout(context.WithValue(context.WithValue(ctx, statusKey{}, cs), bearerKey{}, "Bearer "+l.bearers[bearer]), soakTimeout)
	defer cancel()
	start := time.Now()
	err := f(cctx)
	o := soakOutcome{op: op, start: start, end: time.Now(), kind: errKind(err)}
	if ctx.Err() != nil && err != nil {
		return err // the run ended during the call: not an outcome
	}
	if err != nil && (cs.unavailable || strings.Contains(err.Error(), string(storeUnavailable))) { // the body, or an SSE error event
		o.kind = kindUnavailable
	}
	o.expected = o.kind == kindOK || slices.Contains(refusals, o.kind)
	o.server = cs.status >= 500 || (err != nil && (errors.Is(err, a2a.ErrInternalError) || errors.Is(err, a2a.ErrServerError)))
	l.mu.Lock()
	l.outs = append(l.outs, o)
	l.mu.Unlock()
	return err
}

// pick returns an acknowledged task id ("" before the first).
func (l *soakLoad) pick(rng *mrand.Rand) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.acked) == 0 {
		return ""
	}
	// Mostly recent tasks, sometimes any whose binding has not expired
	// (nor will during the call).
	n := len(l.acked)
	if rng.IntN(4) > 0 {
		return l.acked[n-1-rng.IntN(min(n, 64))].id
	}
	from := time.Now().Add(soakCheckMargin - l.ttl)
	lo, _ := slices.BinarySearchFunc(l.acked, from, func(a ackedTask, t time.Time) int { return a.at.Compare(t) })
	lo = min(lo, n-1)
	return l.acked[lo+rng.IntN(n-lo)].id
}

func reconcileMessage(id string) *a2a.SendMessageRequest {
	pdf := a2a.NewRawPart([]byte("%PDF-1.4"))
	pdf.MediaType, pdf.Filename = "application/pdf", "inv.pdf"
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("reconcile this against the PO"), pdf)
	msg.ID = id
	return &a2a.SendMessageRequest{Message: msg}
}

func (l *soakLoad) op(ctx context.Context, c *a2aclient.Client, op, id string, rng *mrand.Rand) {
	const owner, intruder = 0, 1
	switch op {
	case "send":
		_ = l.call(ctx, op, owner, func(ctx context.Context) error {
			res, err := c.SendMessage(ctx, reconcileMessage(id))
			if err != nil {
				return err
			}
			t, ok := res.(*a2a.Task)
			if !ok || t.ID == "" {
				return fmt.Errorf("%w: SendMessage answered %T, not a task", errUnexpected, res)
			}
			l.mu.Lock()
			l.acked = append(l.acked, ackedTask{id: string(t.ID), at: time.Now()}) // in time order: taken under l.mu
			l.mu.Unlock()
			return nil
		})
	case "stream":
		_ = l.call(ctx, op, owner, func(ctx context.Context) error {
			return drain(c.SendStreamingMessage(ctx, reconcileMessage(id)))
		})
	case "list":
		_ = l.call(ctx, op, owner, func(ctx context.Context) error {
			_, err := c.ListTasks(ctx, &a2a.ListTasksRequest{PageSize: 5})
			return err
		})
	case "card":
		_ = l.call(ctx, op, owner, func(ctx context.Context) error {
			_, err := c.GetExtendedAgentCard(ctx, &a2a.GetExtendedAgentCardRequest{})
			return err
		})
	}
	task := a2a.TaskID(l.pick(rng))
	if task == "" {
		return
	}
	switch op {
	case "get":
		_ = l.call(ctx, op, owner, func(ctx context.Context) error {
			_, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task})
			return err
		})
	case "intruder-get":
		_ = l.call(ctx, op, intruder, func(ctx context.Context) error {
			_, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: task})
			return err
		}, "task-not-found")
	case "cancel": // the echo completes every task at once
		_ = l.call(ctx, op, owner, func(ctx context.Context) error {
			_, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task})
			return err
		}, "task-not-cancelable")
	case "subscribe": // to a completed task
		_ = l.call(ctx, op, owner, func(ctx context.Context) error {
			return drain(c.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: task}))
		}, "task-not-found", "unsupported-operation") // a2a-go 2.3.1: no running execution is TaskNotFound
	case "push":
		cfgID := id
		if l.call(ctx, "push-create", owner, func(ctx context.Context) error {
			_, err := c.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: task, ID: cfgID, URL: l.hook, Token: "soak"})
			return err
		}) != nil {
			return
		}
		_ = l.call(ctx, "push-get", owner, func(ctx context.Context) error {
			_, err := c.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigRequest{TaskID: task, ID: cfgID})
			return err
		})
		_ = l.call(ctx, "push-list", owner, func(ctx context.Context) error {
			_, err := c.ListTaskPushConfigs(ctx, &a2a.ListTaskPushConfigRequest{TaskID: task})
			return err
		})
		_ = l.call(ctx, "push-delete", owner, func(ctx context.Context) error {
			return c.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigRequest{TaskID: task, ID: cfgID})
		})
	}
}

// errUnexpected marks an answer of the wrong shape.
var errUnexpected = errors.New("unexpected answer")

// drain reads a stream to its end.
func drain(events iter.Seq2[a2a.Event, error]) error {
	for _, err := range events {
		if err != nil {
			return err
		}
	}
	return nil
}

// errKinds names the A2A errors the soak tells apart.
var errKinds = []struct {
	err  error
	kind string
}{
	{a2a.ErrTaskNotFound, "task-not-found"},
	{a2a.ErrTaskNotCancelable, "task-not-cancelable"},
	{a2a.ErrUnsupportedOperation, "unsupported-operation"},
	{a2a.ErrPushNotificationNotSupported, "push-not-supported"},
	{a2a.ErrExtendedCardNotConfigured, "extended-card-not-configured"},
	{a2a.ErrUnauthenticated, "unauthenticated"},
	{a2a.ErrUnauthorized, "unauthorized"},
	{a2a.ErrInvalidParams, "invalid-params"},
	{a2a.ErrInvalidRequest, "invalid-request"},
	{a2a.ErrMethodNotFound, "method-not-found"},
	{a2a.ErrInternalError, "internal-error"},
	{a2a.ErrServerError, "server-error"},
	{errUnexpected, "unexpected-answer"},
	{context.DeadlineExceeded, "timeout"},
}

// errKind is the kind of a call's error (kindOK for none).
func errKind(err error) string {
	if err == nil {
		return kindOK
	}
	for _, k := range errKinds {
		if errors.Is(err, k.err) {
			return k.kind
		}
	}
	return "other"
}

// ackedBetween is the tasks acknowledged after from and before to.
func (l *soakLoad) ackedBetween(from, to time.Time) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ids []string
	for _, a := range l.acked {
		if a.at.After(from) && a.at.Before(to) {
			ids = append(ids, a.id)
		}
	}
	return ids
}

// checkOwnership reads every task by its owner through each replica and
// binding; it returns "<id> via <replica> <binding>: <error>" for each
// failed read.
func (l *soakLoad) checkOwnership(ctx context.Context, ids []string) []string {
	ctx = context.WithValue(ctx, bearerKey{}, "Bearer "+l.bearers[0])
	var (
		mu   sync.Mutex
		lost []string
		wg   sync.WaitGroup
	)
	next := make(chan string)
	for range 8 {
		wg.Go(func() {
			for id := range next {
				for _, r := range l.reps {
					for _, b := range soakBindings {
						t, err := r.clients[b].GetTask(ctx, &a2a.GetTaskRequest{ID: a2a.TaskID(id)})
						if err == nil && string(t.ID) != id {
							err = fmt.Errorf("%w: task %s", errUnexpected, t.ID)
						}
						if err != nil {
							mu.Lock()
							lost = append(lost, fmt.Sprintf("%s via %s %s: %v", id, r.name, b, err))
							mu.Unlock()
						}
					}
				}
			}
		})
	}
	for _, id := range ids {
		next <- id
	}
	close(next)
	wg.Wait()
	return lost
}

// printSoakTable prints one row per window.
func printSoakTable(ws []*window, reps []*replica, out outage, begin time.Time, warmup time.Duration) {
	fmt.Println("| window | requests | ok | expected refusals | store-unavailable | 5xx | other (kind) | p99 | VmRSS (RssAnon) A · B | heap goal A · B | goroutines A · B | event |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---|")
	for _, w := range ws {
		var other []string
		for k, n := range w.unexpected {
			other = append(other, fmt.Sprintf("%s ×%d", k, n))
		}
		slices.Sort(other)
		var rss, goal, gor []string
		for _, r := range reps {
			rss = append(rss, fmt.Sprintf("%s (%s)", mib(int64(lastIn(r.rss, w.from, w.to))), mib(int64(lastIn(r.anon, w.from, w.to)))))
			goal = append(goal, mib(int64(lastIn(r.goal, w.from, w.to))))
			gor = append(gor, fmt.Sprintf("%.0f", lastIn(r.gor, w.from, w.to)))
		}
		var ev []string
		if w.from.Before(begin.Add(warmup)) {
			ev = append(ev, "warm-up")
		}
		if !out.down.IsZero() && !out.down.Before(w.from) && out.down.Before(w.to) {
			ev = append(ev, "Redis killed")
		}
		if !out.up.IsZero() && !out.up.Before(w.from) && out.up.Before(w.to) {
			ev = append(ev, "Redis back")
		}
		fmt.Printf("| %v–%v | %d | %d | %d | %d | %d | %s | %s | %s | %s | %s | %s |\n",
			w.from.Sub(begin).Round(time.Second), w.to.Sub(begin).Round(time.Second), w.n, w.ok, w.refused, w.unavailable, w.server,
			strings.Join(other, ", "), ms(w.p99()), strings.Join(rss, " · "), strings.Join(goal, " · "), strings.Join(gor, " · "), strings.Join(ev, ", "))
	}
}

// lastIn is the last sample in [from, to) (0 without one).
func lastIn(s []sample, from, to time.Time) float64 {
	v := 0.0
	for _, x := range s {
		if !x.at.Before(from) && x.at.Before(to) {
			v = x.v
		}
	}
	return v
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
