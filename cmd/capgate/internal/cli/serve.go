package cli

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/capgate/capgate/sidecar/server"
)

func runServe(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "serve", "serve [--config capgate.yaml] [--only gateway|extauthz] [--log-level info]")
	cfgPath := fs.String("config", "", "deployment config (default: the embedded finance example with demo keys)")
	only := fs.String("only", "", "run only the gateway or only the ext_authz server")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	drain := fs.Duration("shutdown-timeout", server.DefaultShutdownTimeout, "how long to drain in-flight requests on SIGTERM/SIGINT")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	var lvl zapcore.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		return usageErr("--log-level: %v", err)
	}
	opts := server.Options{ShutdownTimeout: *drain}
	switch *only {
	case "":
	case "gateway":
		opts.Gateway = true
	case "extauthz":
		opts.ExtAuthz = true
	default:
		return usageErr("--only must be gateway or extauthz")
	}
	log, err := newLogger(env, lvl)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	opts.Logger = log
	d, err := loadDeployment(*cfgPath)
	if err != nil {
		return err
	}
	if *cfgPath == "" {
		log.Warn("serving the embedded finance example with DEMO keys; pass --config for a real deployment")
	}
	opts.Deployment = d
	if err := server.Run(ctx, opts); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// newLogger builds the JSON logger on stderr.
func newLogger(env Env, lvl zapcore.Level) (*zap.Logger, error) {
	enc := zap.NewProductionEncoderConfig()
	enc.TimeKey = "ts"
	enc.EncodeTime = zapcore.TimeEncoderOfLayout(time.RFC3339Nano)
	core := zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.AddSync(env.Stderr), lvl)
	return zap.New(core), nil
}
