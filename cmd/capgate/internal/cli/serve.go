package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/capgate/capgate/policy/compile"
	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/policy/diag"
	"github.com/capgate/capgate/sidecar/reload"
	"github.com/capgate/capgate/sidecar/server"
	"github.com/capgate/capgate/sidecar/settings"
	"github.com/capgate/capgate/sidecar/tasks/redisstore"
)

func runServe(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "serve", "serve [--config capgate.yaml [--bundle FILE|URL [--bundle-verification-key key.pem] [--bundle-poll 30s]]] [--only gateway|extauthz] [--listen-gateway ADDR] [--listen-extauthz ADDR] [--listen-admin ADDR] [--log-level info] [--log-format json|console]")
	cfgPath := fs.String("config", "", "deployment config (default: the embedded finance example with demo keys); reloaded on change and on SIGHUP")
	bundleLoc := fs.String("bundle", "", "serve the capabilities and policy of this bundle (built by capgate compile): a file or an http(s) URL; --config provides the rest")
	keyPath := fs.String("bundle-verification-key", "", "PEM public key the bundle's signature must verify against; unsigned or tampered bundles are then refused")
	keyAlg := fs.String("bundle-verification-alg", compile.DefaultSigningAlg, "signature algorithm of --bundle-verification-key")
	keyID := fs.String("bundle-key-id", compile.DefaultKeyID, "key id the bundle signature must name")
	poll := fs.Duration("bundle-poll", reload.DefaultPoll, "how often to poll a bundle URL (conditional GET with ETag)")
	only := fs.String("only", "", "run only the gateway or only the ext_authz server")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	format := fs.String("log-format", "json", "log format: json (one object a line, for collectors) or console (human-readable, for local runs)")
	var over config.Listen
	fs.StringVar(&over.A2A, "listen-gateway", "", "address of the A2A gateway (host:port or unix:/path), in place of the config's listen.a2a")
	fs.StringVar(&over.ExtAuthz, "listen-extauthz", "", "address of the ext_authz gRPC server (host:port or unix:/path), in place of listen.extauthz")
	fs.StringVar(&over.Admin, "listen-admin", "", "address of the admin listener (host:port), in place of listen.admin")
	drain := fs.Duration("shutdown-timeout", server.DefaultShutdownTimeout, "how long to drain in-flight requests on SIGTERM/SIGINT")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	var lvl zapcore.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		return usageErr("--log-level: %v", err)
	}
	version, commit, _ := buildVersion()
	opts := server.Options{ShutdownTimeout: *drain, Version: version, Commit: commit}
	switch *only {
	case "":
	case "gateway":
		opts.Gateway = true
	case "extauthz":
		opts.ExtAuthz = true
	default:
		return usageErr("--only must be gateway or extauthz")
	}
	log, err := newLogger(env, lvl, *format)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	opts.Logger = log
	// go-redis logs through one logger per process (its own global, plain text on standard
	// error by default): this process's log stream is this logger's, so go-redis's lines go
	// there too, as JSON, bounded (redisstore.Log). Set here, once, and not in server.Run,
	// which may run several times in one process.
	redis.SetLogger(redisstore.NewLog(log.Named("redis")))
	if *format == logFormatConsole {
		// Decision events stay OPA's JSON, which tools read line by line.
		if opts.DecisionLogger, err = newLogger(env, lvl, logFormatJSON); err != nil {
			return err
		}
	}
	opts.AuditWriter = env.Stdout
	if *bundleLoc == "" && (*keyPath != "") {
		return usageErr("--bundle-verification-key needs --bundle")
	}
	var src reload.Source
	switch {
	case *bundleLoc != "":
		if *cfgPath == "" {
			return usageErr("--bundle needs --config: a bundle carries capabilities and policy, the config the listeners, authentication and handlers")
		}
		if *poll <= 0 {
			return usageErr("--bundle-poll must be positive")
		}
		bopts := reload.BundleOptions{Poll: *poll, Logger: log.Named("bundle"), Verify: compile.VerifyOptions{Alg: *keyAlg, KeyID: *keyID}}
		if *keyPath != "" {
			if bopts.Verify.PublicKey, err = os.ReadFile(*keyPath); err != nil {
				return usageErr("read bundle verification key: %v", err)
			}
		}
		if src, err = reload.NewBundle(*cfgPath, *bundleLoc, bopts); err != nil {
			return usageErr("%v", err)
		}
	case *cfgPath != "":
		src = reload.NewFiles(*cfgPath)
	}
	if *cfgPath != "" {
		// Before loading, so the limit bounds the peak of loading a large
		// registry; a broken config is reported by the load below.
		if cfg, err := config.Load(*cfgPath, settings.Checks()...); err == nil {
			server.ApplyMemoryLimit(cfg)
		}
	}
	var d *deployment.Deployment
	if src == nil {
		d, err = loadDeployment("")
		log.Warn("serving the embedded finance example with DEMO keys; pass --config for a real deployment")
	} else {
		d, err = src.Load(ctx)
		err = deploymentErr(err)
	}
	if err != nil {
		return err
	}
	if problems := d.Config.Listen.Override(over).Check(); len(problems) > 0 && over != (config.Listen{}) {
		msgs := make([]string, len(problems))
		for i, p := range problems {
			msgs[i] = listenFlag(p.Field, over) + ": " + p.Message
		}
		return usageErr("%s", strings.Join(msgs, "\n"))
	}
	opts.Listen = over
	opts.Deployment = d
	opts.Source = src
	if err := server.Run(ctx, opts); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// deploymentErr maps a failed start-up load to an input error (exit 2):
// validation problems are listed, a bundle that cannot be fetched, read or
// verified is named with the reason.
func deploymentErr(err error) error {
	if err == nil {
		return nil
	}
	var set *diag.Set
	if errors.As(err, &set) {
		return &exitError{code: ExitUsage, err: fmt.Errorf("invalid deployment:\n%w", err)}
	}
	return &exitError{code: ExitUsage, err: err}
}

// listenFlag names the flag (or, when no flag set it, the config field)
// a listen problem concerns.
func listenFlag(field string, over config.Listen) string {
	switch {
	case field == "listen.a2a" && over.A2A != "":
		return "--listen-gateway"
	case field == "listen.extauthz" && over.ExtAuthz != "":
		return "--listen-extauthz"
	case field == "listen.admin" && over.Admin != "":
		return "--listen-admin"
	}
	return field
}

// Log formats of serve's --log-format.
const (
	logFormatJSON    = "json"
	logFormatConsole = "console"
)

// newLogger builds the logger on standard output, where the audit stream
// (marked "stream":"audit") also goes unless audit.file is set: JSON, or
// zap's console encoder (tab-separated, human-readable) for local runs.
// The decision log is JSON in either case (it is OPA's format).
func newLogger(env Env, lvl zapcore.Level, format string) (*zap.Logger, error) {
	enc := zap.NewProductionEncoderConfig()
	enc.TimeKey = "ts"
	enc.EncodeTime = zapcore.TimeEncoderOfLayout(time.RFC3339Nano)
	var encoder zapcore.Encoder
	switch format {
	case logFormatJSON:
		encoder = zapcore.NewJSONEncoder(enc)
	case logFormatConsole:
		enc.EncodeLevel = zapcore.CapitalLevelEncoder
		enc.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
		encoder = zapcore.NewConsoleEncoder(enc)
	default:
		return nil, usageErr("--log-format must be %s or %s", logFormatJSON, logFormatConsole)
	}
	core := zapcore.NewCore(encoder, zapcore.Lock(zapcore.AddSync(env.Stdout)), lvl)
	return zap.New(core), nil
}
