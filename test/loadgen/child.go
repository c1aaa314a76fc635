package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"runtime/pprof"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"

	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/sidecar/extauthz"
	"github.com/capgate/capgate/sidecar/server"
	"github.com/capgate/capgate/sidecar/settings"
)

// runChild serves as a child process until its stdin closes, after printing
// "READY <addr> [<admin addr> [<stats addr>]]" on stdout.
func runChild(ctx context.Context, o options) (err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin) // the parent closes stdin to stop us
		if o.memProfile != "" {
			writeHeapProfile(fmt.Sprintf("%s.%d.pprof", o.memProfile, os.Getpid()))
		}
		cancel()
	}()
	if o.cpuProfile != "" {
		f, cerr := os.Create(fmt.Sprintf("%s.%d.pprof", o.cpuProfile, os.Getpid()))
		if cerr != nil {
			return cerr
		}
		// Deferred before StopCPUProfile, so it runs after the profile is
		// flushed; a failed close may have lost the end of the profile.
		defer func() {
			if cerr := f.Close(); cerr != nil && err == nil {
				err = cerr
			}
		}()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	switch o.role {
	case "noop":
		return serveNoop(ctx)
	case "capgate":
		return serveCapgate(ctx, o.config)
	case "upstream":
		return serveUpstream(ctx)
	case "proxy":
		return serveProxy(ctx, o.upstream)
	case "gateway":
		return serveGateway(ctx, o.config)
	default:
		return fmt.Errorf("-role %q: want capgate, noop, upstream, proxy or gateway", o.role)
	}
}

// writeHeapProfile writes the live heap (after a collection) to path; the
// child calls it on its way out, so the profile shows what a loaded server
// keeps.
func writeHeapProfile(path string) {
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		return
	}
	defer func() {
		if err := f.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "loadgen:", err)
		}
	}()
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
	}
}

// serveNoop serves extauthz.Noop: allow without looking, the floor.
func serveNoop(ctx context.Context) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	g := grpc.NewServer()
	authv3.RegisterAuthorizationServer(g, extauthz.Noop{})
	go func() {
		<-ctx.Done()
		g.Stop()
	}()
	fmt.Printf("READY %s\n", ln.Addr())
	return g.Serve(ln)
}

// serveCapgate runs capgate's ext_authz server (and its admin listener, for
// /metrics) as `capgate serve` wires it, with a decision log that is
// encoded as JSON and discarded: the encoding is paid, the disk is not.
func serveCapgate(ctx context.Context, config string) error {
	d, err := deployment.Load(config, settings.Checks()...)
	if err != nil {
		return err
	}
	d.Config.Listen.ExtAuthz = "127.0.0.1:0"
	d.Config.Listen.Admin = "127.0.0.1:0"
	d.Config.Listen.A2A = "127.0.0.1:0"
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	dlog := zap.New(zapcore.NewCore(enc, zapcore.AddSync(io.Discard), zapcore.InfoLevel))
	return server.Run(ctx, server.Options{
		Deployment:     d,
		Logger:         zap.NewNop(),
		DecisionLogger: dlog,
		ExtAuthz:       true,
		OnReady:        func(a server.Addrs) { fmt.Printf("READY %s %s\n", a.ExtAuthz, a.Admin) },
	})
}
