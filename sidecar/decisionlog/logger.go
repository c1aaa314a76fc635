package decisionlog

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/loader"
	"github.com/open-policy-agent/opa/v1/logging"
	"github.com/open-policy-agent/opa/v1/plugins"
	"github.com/open-policy-agent/opa/v1/plugins/logs"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// maskPolicy is the decision-log mask policy (data.system.log.mask, OPA's
// default mask_decision) loaded into the plugin manager.
//
//go:embed mask.rego
var maskPolicy string

// Options configure the decision logger.
type Options struct {
	// Services and DecisionLogs are OPA's `services` and `decision_logs`
	// configuration, as in an OPA config file. Without DecisionLogs the
	// console sink is on and nothing is uploaded.
	Services     map[string]any
	DecisionLogs map[string]any
	// Labels are added to every event (OPA adds id and version; the
	// server adds LabelCapgateVersion).
	Labels map[string]string
	// Console receives the console sink's events (logger "decision");
	// Logger the plugin's own messages (upload failures, ...). Nil: discard.
	Console, Logger *zap.Logger
	// ID is the instance id in the events' labels (default: random).
	ID string
	// Queue bounds the decisions waiting for the plugin (default
	// DefaultQueue).
	Queue int
	// Plugin runs the default console sink through OPA's plugin too (the
	// differential test; slower).
	Plugin bool
}

// LabelCapgateVersion is the label naming capgate's version in every
// event, beside OPA's version (labels.version), which names the embedded
// OPA's.
const LabelCapgateVersion = "capgate_version"

// DefaultQueue is how many decisions may wait for the plugin before new
// ones are dropped (and counted): the decision path never waits for the
// decision log.
const DefaultQueue = 4096

// Logger records decision events through OPA's decision-log plugin. Log
// only queues the entry; one goroutine turns entries into events and hands
// them to the plugin, whose cost (building the event, the drop and mask
// queries: tens of µs, see docs/observability.md) stays off the decision
// path.
type Logger struct {
	fast    *fastConsole // the default console sink (no decision_logs): no plugin
	manager *plugins.Manager
	plugin  *logs.Plugin
	now     func() time.Time
	q       chan item
	stopped chan struct{}
	stop    sync.Once
	failed  atomic.Uint64
	dropped atomic.Uint64
}

// item is a queued entry, or (done set) a marker the worker closes once
// everything before it has been logged.
type item struct {
	e    Entry
	done chan struct{}
}

// New returns a logger with the console sink only, writing through z. With
// a nil z it discards, and runs nothing. It cannot fail: the configuration
// is fixed.
func New(z *zap.Logger) *Logger {
	if z == nil {
		return &Logger{}
	}
	l, err := Open(context.Background(), Options{Console: z})
	if err != nil {
		panic(fmt.Sprintf("decisionlog: the console-only configuration failed: %v", err)) // a programming error
	}
	return l
}

// SplitLabels takes decision_logs.labels (capgate's place for them; OPA
// reads labels from the top level of its config) out of decision_logs:
// a mapping of strings to strings, added to every event's labels beside
// OPA's id and version, which they cannot replace. The rest is OPA's
// decision_logs as given, or nil when labels was all it held (the default
// console sink, with the labels).
func SplitLabels(decisionLogs map[string]any) (map[string]any, map[string]string, error) {
	raw, ok := decisionLogs["labels"]
	if !ok {
		return decisionLogs, nil, nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, nil, errors.New("decision_logs.labels: want a mapping of label names to strings")
	}
	labels := make(map[string]string, len(m))
	for k, v := range m {
		s, ok := v.(string)
		if !ok {
			return nil, nil, fmt.Errorf("decision_logs.labels.%s: want a string (quote numbers and booleans)", k)
		}
		if k == "id" || k == "version" {
			return nil, nil, fmt.Errorf("decision_logs.labels.%s: reserved: OPA sets id (the instance) and version itself", k)
		}
		if k == LabelCapgateVersion {
			return nil, nil, fmt.Errorf("decision_logs.labels.%s: reserved: capgate sets it to its own version", k)
		}
		labels[k] = s
	}
	rest := maps.Clone(decisionLogs)
	delete(rest, "labels")
	if len(rest) == 0 {
		rest = nil
	}
	return rest, labels, nil
}

// config is the OPA configuration the manager is started with.
func (o Options) config() ([]byte, error) {
	dl := o.DecisionLogs
	if dl == nil {
		dl = map[string]any{"console": true}
	}
	raw := map[string]any{"decision_logs": dl}
	if o.Services != nil {
		raw["services"] = o.Services
	}
	if len(o.Labels) > 0 {
		raw["labels"] = o.Labels
	}
	return json.Marshal(raw)
}

// Check validates services and decision_logs as OPA would, without
// starting anything.
func Check(services, decisionLogs map[string]any) error {
	decisionLogs, _, err := SplitLabels(decisionLogs)
	if err != nil {
		return err
	}
	m, err := manager(Options{Services: services, DecisionLogs: decisionLogs})
	if err != nil {
		return err
	}
	defer m.Stop(context.Background()) // New started its status loop
	_, err = parseConfig(m)
	return err
}

// parseConfig reads decision_logs as OPA does (the trigger mode is the
// config's own: periodic by default, or immediate or manual).
func parseConfig(m *plugins.Manager) (*logs.Config, error) {
	cfg, err := logs.NewConfigBuilder().WithBytes(m.Config.DecisionLogs).WithServices(m.Services()).Parse()
	if err != nil {
		return nil, fmt.Errorf("decision_logs: %w", err)
	}
	if cfg == nil {
		// OPA reads a decision_logs block naming no sink (no service, as when no services
		// are configured, no console, no plugin) as "decision logging off" and returns no
		// configuration; its plugin cannot start on that. capgate always logs decisions.
		return nil, errors.New("decision_logs: names no sink: set service (one of services), console: true, or plugin; " +
			"omit decision_logs for the console")
	}
	return cfg, nil
}

func manager(o Options) (*plugins.Manager, error) {
	raw, err := o.config()
	if err != nil {
		return nil, fmt.Errorf("decision_logs: %w", err)
	}
	mod, err := ast.ParseModule("capgate/decisionlog/mask.rego", maskPolicy)
	if err != nil {
		return nil, fmt.Errorf("decision-log mask policy: %w", err)
	}
	id := o.ID
	if id == "" {
		id = NewIDs().prefix
	}
	m, err := plugins.New(raw, id, inmem.New(),
		plugins.Logger(newOPALogger(o.Logger)),
		plugins.ConsoleLogger(&console{z: named(o.Console)}),
		plugins.InitFiles(loader.Result{Modules: map[string]*loader.RegoFile{
			"capgate/decisionlog/mask.rego": {Name: "capgate/decisionlog/mask.rego", Parsed: mod, Raw: []byte(maskPolicy)},
		}}),
	)
	if err != nil {
		return nil, fmt.Errorf("decision_logs: %w", err)
	}
	return m, nil
}

func named(z *zap.Logger) *zap.Logger {
	if z == nil {
		return zap.NewNop()
	}
	return z.Named("decision")
}

// Open starts an OPA plugin manager running the decision-log plugin with
// o's configuration. Stop it with Stop. Without DecisionLogs (and with
// Plugin unset) the default console sink writes the plugin's console event
// itself, on the decision path and at a small fraction of the cost (see
// fastConsole).
func Open(ctx context.Context, o Options) (*Logger, error) {
	dl, labels, err := SplitLabels(o.DecisionLogs)
	if err != nil {
		return nil, err
	}
	o.DecisionLogs = dl
	if len(labels) > 0 {
		merged := maps.Clone(labels)
		maps.Copy(merged, o.Labels) // the caller's labels over the config's
		o.Labels = merged
	}
	if o.DecisionLogs == nil && !o.Plugin {
		if err := Check(o.Services, nil); err != nil {
			return nil, err
		}
		id := o.ID
		if id == "" {
			id = NewIDs().prefix
		}
		return &Logger{fast: newFastConsole(named(o.Console), id, o.Labels), now: time.Now}, nil
	}
	m, err := manager(o)
	if err != nil {
		return nil, err
	}
	cfg, err := parseConfig(m)
	if err == nil {
		if err = m.Init(ctx); err != nil {
			err = fmt.Errorf("decision_logs: %w", err)
		}
	}
	var p *logs.Plugin
	if err == nil {
		p = logs.New(cfg, m)
		m.Register(logs.Name, p)
		if err = m.Start(ctx); err != nil {
			err = fmt.Errorf("decision_logs: %w", err)
		}
	}
	if err != nil {
		m.Stop(context.WithoutCancel(ctx))
		return nil, err
	}
	size := o.Queue
	if size <= 0 {
		size = DefaultQueue
	}
	l := &Logger{manager: m, plugin: p, now: time.Now, q: make(chan item, size), stopped: make(chan struct{})}
	go l.run()
	return l, nil
}

func (l *Logger) run() {
	for {
		select {
		case <-l.stopped:
			return
		case it := <-l.q:
			if it.done != nil {
				close(it.done)
				continue
			}
			if err := l.plugin.Log(context.Background(), it.e.info(l.now)); err != nil {
				l.failed.Add(1)
			}
		}
	}
}

// Log records e (a copy: the caller may reuse it). It never blocks: when
// the queue is full the entry is dropped and counted (Dropped). Uploads are
// the plugin's: buffered (the oldest dropped on overflow) and retried on its
// own loop, so a service outage never reaches the decision path.
func (l *Logger) Log(e *Entry) {
	if e.Span != nil {
		annotate(e)
	}
	if l.fast != nil {
		l.fast.log(e, l.now())
		return
	}
	if l.q == nil {
		return // discarding
	}
	select {
	case l.q <- item{e: *e}:
	default:
		l.dropped.Add(1)
	}
}

// annotate puts the decision on its request's span (when recording) and
// the span's ids in the entry: the event and the trace find each other.
// Never the text or a token: the same facts as the event's input.
func annotate(e *Entry) {
	sc := e.Span.SpanContext()
	if !sc.IsValid() {
		return
	}
	e.TraceID, e.SpanID = sc.TraceID().String(), sc.SpanID().String()
	if !e.Span.IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{
		attribute.String("capgate.decision_id", e.DecisionID),
		attribute.String("capgate.result", e.Result),
		attribute.String("capgate.component", e.Component),
	}
	add := func(k, v string) {
		if v != "" {
			attrs = append(attrs, attribute.String(k, v))
		}
	}
	if e.Component == "gateway" && e.Binding == "jsonrpc" {
		// The gateway's span is the JSON-RPC call's (ext_authz's is the
		// gRPC Check's: its rpc.* stay).
		add("rpc.system", "jsonrpc")
		add("rpc.method", e.Operation)
	}
	add("capgate.operation", e.Operation)
	add("capgate.binding", e.Binding)
	add("capgate.capability", e.Capability)
	add("capgate.policy.revision", e.Revision)
	add("capgate.code", e.Code)
	add("capgate.routing.layer", e.Layer)
	if e.hasConfidence() {
		attrs = append(attrs, attribute.Float64("capgate.routing.confidence", e.Confidence))
	}
	e.Span.SetAttributes(attrs...)
}

// Dropped is how many decisions were not logged because the queue was full.
func (l *Logger) Dropped() uint64 { return l.dropped.Load() }

// Failed is how many events the plugin refused (a drop or mask policy that
// failed to evaluate, …).
func (l *Logger) Failed() uint64 { return l.failed.Load() }

// Sync waits until every decision logged before it has reached the plugin
// (the console sink has written it), or ctx ends.
func (l *Logger) Sync(ctx context.Context) error {
	if l.q == nil {
		return nil
	}
	done := make(chan struct{})
	select {
	case l.q <- item{done: done}:
	case <-l.stopped:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
		return nil
	case <-l.stopped:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Flush syncs, then uploads what is buffered now (nothing to upload
// without a service).
func (l *Logger) Flush(ctx context.Context) error {
	if err := l.Sync(ctx); err != nil {
		return err
	}
	if l.plugin == nil || l.plugin.Config().Service == "" {
		return nil
	}
	return l.plugin.Trigger(ctx)
}

// Stop logs what is queued, then stops the plugin, which uploads what it
// holds within ctx's deadline. Decisions logged after Stop are dropped.
func (l *Logger) Stop(ctx context.Context) {
	if l.manager == nil {
		return
	}
	_ = l.Sync(ctx)
	l.stop.Do(func() { close(l.stopped) })
	l.manager.Stop(ctx)
}

// console is the plugin's console sink: one zap entry per event (logger
// "decision", message "decision"), its fields those of OPA's console
// decision log (decision_id, input, result, bundles, labels, metrics, …).
type console struct {
	z      *zap.Logger
	fields map[string]any
}

func (c *console) WithFields(f map[string]any) logging.Logger {
	merged := make(map[string]any, len(c.fields)+len(f))
	for k, v := range c.fields {
		merged[k] = v
	}
	for k, v := range f {
		merged[k] = v
	}
	return &console{z: c.z, fields: merged}
}

func (c *console) Info(string, ...any) {
	ce := c.z.Check(zapcore.InfoLevel, "decision")
	if ce == nil {
		return
	}
	keys := make([]string, 0, len(c.fields))
	for k := range c.fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fs := make([]zap.Field, 0, len(keys))
	for _, k := range keys {
		fs = append(fs, zap.Any(k, c.fields[k]))
	}
	ce.Write(fs...)
}

func (c *console) Debug(string, ...any)    {}
func (c *console) Warn(string, ...any)     {}
func (c *console) Error(string, ...any)    {}
func (c *console) GetLevel() logging.Level { return logging.Info }
func (c *console) SetLevel(logging.Level)  {}

// opaLogger carries the plugin's own messages to zap.
type opaLogger struct {
	z *zap.SugaredLogger
}

func newOPALogger(z *zap.Logger) logging.Logger {
	if z == nil {
		z = zap.NewNop()
	}
	return &opaLogger{z: z.Named("decision_logs").Sugar()}
}

func (o *opaLogger) WithFields(f map[string]any) logging.Logger {
	args := make([]any, 0, 2*len(f))
	for k, v := range f {
		args = append(args, k, v)
	}
	return &opaLogger{z: o.z.With(args...)}
}

func (o *opaLogger) Debug(f string, a ...any) { o.z.Debugf(f, a...) }
func (o *opaLogger) Info(f string, a ...any)  { o.z.Infof(f, a...) }
func (o *opaLogger) Warn(f string, a ...any)  { o.z.Warnf(f, a...) }
func (o *opaLogger) Error(f string, a ...any) { o.z.Errorf(f, a...) }
func (o *opaLogger) GetLevel() logging.Level  { return logging.Debug }
func (o *opaLogger) SetLevel(logging.Level)   {}
