package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net"
	"net/http"
	"net/http/httputil"
	"net/http/pprof"
	"net/url"
	"runtime/metrics"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/sidecar/server"
	"github.com/capgate/capgate/sidecar/settings"
)

// The gateway benchmark's child roles: the upstream A2A agent, a bare
// reverse proxy in front of it, and capgate's gateway in front of it.

// upstreamReply is the text of the upstream's answer to a message: the
// generator counts an answer without it (a clarification, an error) as a
// failure.
const upstreamReply = "loadgen-upstream-ok"

// eventsKey is the message metadata asking the upstream to stream that
// many status updates.
const eventsKey = "loadgen-events"

// serveUpstream serves an a2a-go v2 agent on both bindings (JSON-RPC at /,
// HTTP+JSON elsewhere) that answers a message at once with an agent
// message holding one JSON data part, or, when the message's metadata asks for N events, streams a
// task with N working status updates and a completed one.
func serveUpstream(ctx context.Context) error {
	rh := a2asrv.NewHandler(upstreamAgent{})
	jsonrpc, rest := a2asrv.NewJSONRPCHandler(rh), a2asrv.NewRESTHandler(rh)
	mux := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" {
			jsonrpc.ServeHTTP(w, r)
			return
		}
		rest.ServeHTTP(w, r)
	})
	addr, err := serveHTTP(ctx, mux)
	if err != nil {
		return err
	}
	fmt.Printf("READY %s\n", addr)
	<-ctx.Done()
	return nil
}

type upstreamAgent struct{}

var _ a2asrv.AgentExecutor = upstreamAgent{}

func (upstreamAgent) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		n, _ := ec.Message.Metadata[eventsKey].(float64)
		if n <= 0 {
			// JSON, as the routing manifests' outputModes promise.
			// In the caller's context, as an agent continuing a conversation answers.
			m := a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewDataPart(map[string]any{"reply": upstreamReply}))
			m.ContextID = ec.Message.ContextID
			yield(m, nil)
			return
		}
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		for range int(n) {
			if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
				return
			}
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (upstreamAgent) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// serveProxy serves a bare httputil.ReverseProxy to upstream: the floor of
// any HTTP gateway in Go. Its transport keeps as many idle connections to
// the upstream as capgate's handler client does (32).
func serveProxy(ctx context.Context, upstream string) error {
	u, err := url.Parse(upstream)
	if err != nil || u.Host == "" {
		return fmt.Errorf("-upstream %q: want an http URL", upstream)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 32
	rp.Transport = tr
	addr, err := serveHTTP(ctx, rp)
	if err != nil {
		return err
	}
	stats, err := serveHTTP(ctx, statsHandler{})
	if err != nil {
		return err
	}
	fmt.Printf("READY %s - %s\n", addr, stats)
	<-ctx.Done()
	return nil
}

// serveGateway runs capgate's A2A gateway (and its admin listener) as
// `capgate serve --only gateway` wires it, with the decision log and the
// audit stream encoded as JSON and discarded: the encoding is paid, the
// disk is not.
func serveGateway(ctx context.Context, config string) error {
	d, err := deployment.Load(config, settings.Checks()...)
	if err != nil {
		return err
	}
	d.Config.Listen.ExtAuthz = "127.0.0.1:0"
	d.Config.Listen.Admin = "127.0.0.1:0"
	d.Config.Listen.A2A = "127.0.0.1:0"
	stats, err := serveHTTP(ctx, statsHandler{})
	if err != nil {
		return err
	}
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	dlog := zap.New(zapcore.NewCore(enc, zapcore.AddSync(io.Discard), zapcore.InfoLevel))
	return server.Run(ctx, server.Options{
		Deployment:     d,
		Logger:         zap.NewNop(),
		DecisionLogger: dlog,
		AuditWriter:    io.Discard,
		Gateway:        true,
		OnReady:        func(a server.Addrs) { fmt.Printf("READY %s %s %s\n", a.A2A, a.Admin, stats) },
	})
}

// serveHTTP serves h on a loopback port until ctx ends and returns its
// address.
func serveHTTP(ctx context.Context, h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Println("loadgen: serve:", err)
		}
	}()
	return ln.Addr().String(), nil
}

// statsHandler answers / with the process's cumulative heap allocations
// and its live heap as of the last collection ("<objects> <bytes> <live
// bytes>") and serves net/http/pprof under /debug/pprof/, to
// look inside a proxy under load.
type statsHandler struct{}

func (statsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/debug/pprof/") {
		pprofMux.ServeHTTP(w, r)
		return
	}
	s := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	_, _ = fmt.Fprintf(w, "%d %d %d\n", s[0].Value.Uint64(), s[1].Value.Uint64(), s[2].Value.Uint64())
}

// pprofMux serves the runtime profiles of a child.
var pprofMux = func() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("/debug/pprof/", pprof.Index)
	m.HandleFunc("/debug/pprof/profile", pprof.Profile)
	return m
}()
