// Package handler calls skill handlers (builtin or upstream A2A servers) over the handler's own binding (JSON-RPC, HTTP+JSON or gRPC), unary or streamed, and checks what they answer.
package handler

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"go.uber.org/zap"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/jsonrpcwire"
)

// Defaults of the Invoker's options.
const (
	DefaultTimeout           = 30 * time.Second
	DefaultStreamIdleTimeout = 5 * time.Minute
	// MaxResponseBytes bounds a unary response body.
	MaxResponseBytes = 16 << 20
	// MaxEventBytes bounds one Server-Sent Event (its data and each line).
	MaxEventBytes = 1 << 20
	// maxErrorMessage bounds the upstream error message passed on to clients
	// (expose_errors) or logged.
	maxErrorMessage = 512
	// maxErrorData bounds the upstream error data logged.
	maxErrorData = 1024
	// maxErrorMetadata bounds the ErrorInfo metadata entries passed on.
	maxErrorMetadata = 16
)

// BuiltinPrefix marks a handler target served inside capgate ("builtin:echo").
const BuiltinPrefix = "builtin:"

// Request is one call to a handler.
type Request struct {
	Handler    string           // handler name (key of config handlers)
	Version    protocol.Version // A2A version to speak upstream (passed as A2A-Version header)
	Method     string           // JSON-RPC method name in that version ("SendMessage" / "message/send", ...); over HTTP+JSON and gRPC, the 1.0 operation
	Params     jsontext.Value   // JSON-RPC params to send
	Token      string           // bearer token for the handler: sent as Authorization: Bearer <Token>
	Extensions []string         // activated extension URIs: sent as A2A-Extensions
	DecisionID string           // sent as X-Capgate-Decision-Id
	// CallerAuthorization is the caller's own Authorization header, sent as
	// X-Capgate-Caller-Authorization only when the deployment asks for it
	// (identity.forward_caller_token); empty otherwise.
	CallerAuthorization string
}

// CallerAuthorizationHeader carries the caller's own credential when the
// deployment explicitly forwards it.
const CallerAuthorizationHeader = "X-Capgate-Caller-Authorization"

// DecisionIDHeader carries capgate's decision id to the handler.
const DecisionIDHeader = "X-Capgate-Decision-Id"

// Option configures an Invoker.
type Option func(*options)

type options struct {
	client   *http.Client
	timeout  time.Duration
	idle     time.Duration
	log      *zap.Logger
	builtins map[string]http.Handler
	wrap     func(http.RoundTripper) http.RoundTripper
	bindings map[string]protocol.Binding
	expose   map[string]bool
}

// WithBindings sets the binding each named upstream handler is called
// over; a handler not named is called over JSON-RPC, as every builtin is.
func WithBindings(b map[string]protocol.Binding) Option {
	return func(o *options) { o.bindings = b }
}

// WithExposedErrors names the handlers whose error messages and ErrorInfo
// metadata reach callers as the handler wrote them (cleaned and clipped):
// handlers.<name>.expose_errors, for handlers that promise client-safe
// messages. Every other handler's errors reach callers as the A2A code with
// capgate's own message; the handler's text is logged for operators.
func WithExposedErrors(names map[string]bool) Option {
	return func(o *options) { o.expose = names }
}

// WithHTTPClient sets the client for upstream (http/https) handlers. Its
// redirect policy is replaced: redirects are never followed, so a token is
// only ever sent to the configured URL. gRPC handlers are called through a
// clone of its *http.Transport (the default transport when it has another
// kind) that speaks HTTP/2 only.
func WithHTTPClient(c *http.Client) Option { return func(o *options) { o.client = c } }

// WithRoundTripper wraps the transport of every handler call, upstream and
// builtin (tracing: a client span, the trace context sent along).
func WithRoundTripper(wrap func(http.RoundTripper) http.RoundTripper) Option {
	return func(o *options) { o.wrap = wrap }
}

// WithTimeout bounds a unary call (default DefaultTimeout).
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithStreamIdleTimeout bounds the silence between two reads of a stream
// (default DefaultStreamIdleTimeout).
func WithStreamIdleTimeout(d time.Duration) Option { return func(o *options) { o.idle = d } }

// WithLogger sets the logger.
func WithLogger(l *zap.Logger) Option { return func(o *options) { o.log = l } }

// WithBuiltin registers h as the builtin handler name: targets
// "builtin:<name>" are served by h in process.
func WithBuiltin(name string, h http.Handler) Option {
	return func(o *options) {
		if o.builtins == nil {
			o.builtins = map[string]http.Handler{}
		}
		o.builtins[name] = h
	}
}

// target is where one handler name is served, and over which binding.
type target struct {
	name    string
	url     string
	binding protocol.Binding
	client  *http.Client
	// expose passes the handler's error messages and metadata on to callers.
	expose bool
}

// Invoker calls handlers. It is safe for concurrent use.
type Invoker struct {
	targets map[string]target
	timeout time.Duration
	idle    time.Duration
	// timeoutMsg and idleMsg are the errors of a call past timeout and of a stream idle
	// for idle: written once, not per call.
	timeoutMsg, idleMsg string
	log                 *zap.Logger
	clients             []*http.Client
}

// NewInvoker returns an Invoker for handlers (name → "builtin:<name>" or an
// absolute http(s) URL). A builtin target needs its handler registered with
// WithBuiltin.
func NewInvoker(handlers map[string]string, opts ...Option) (*Invoker, error) {
	o := options{timeout: DefaultTimeout, idle: DefaultStreamIdleTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	var errs []error
	if o.timeout <= 0 {
		errs = append(errs, errors.New("timeout must be positive"))
	}
	if o.idle <= 0 {
		errs = append(errs, errors.New("stream idle timeout must be positive"))
	}
	for name, h := range o.builtins {
		if h == nil {
			errs = append(errs, fmt.Errorf("builtin %q has a nil handler", name))
		}
	}
	i := &Invoker{targets: map[string]target{}, timeout: o.timeout, idle: o.idle, log: o.log,
		timeoutMsg: fmt.Sprintf("the skill's handler did not answer within %s", o.timeout),
		idleMsg:    fmt.Sprintf("the skill's handler sent nothing for %s", o.idle)}
	if i.log == nil {
		i.log = zap.NewNop()
	}
	i.log = i.log.Named("handler")

	upstream := upstreamClient(o.client)
	wrap := o.wrap
	if wrap == nil {
		wrap = func(rt http.RoundTripper) http.RoundTripper { return rt }
	}
	if upstream.Transport == nil {
		upstream.Transport = http.DefaultTransport
	}
	upstream.Transport = wrap(upstream.Transport)
	var h2 *http.Client // gRPC handlers' client, made on first use
	builtinClients := map[string]*http.Client{}
	for name, b := range o.bindings {
		if _, ok := handlers[name]; !ok {
			errs = append(errs, fmt.Errorf("handler %q has a binding but no target", name))
		}
		switch b {
		case protocol.JSONRPC, protocol.HTTPJSON, protocol.GRPC:
		default:
			errs = append(errs, fmt.Errorf("handler %q: %q is not a binding", name, b))
		}
	}
	for name := range o.expose {
		if _, ok := handlers[name]; !ok {
			errs = append(errs, fmt.Errorf("handler %q exposes its errors but has no target", name))
		}
	}
	for _, name := range sortedKeys(handlers) {
		raw := handlers[name]
		if name == "" {
			errs = append(errs, errors.New("a handler has an empty name"))
			continue
		}
		binding := o.bindings[name]
		if binding == "" {
			binding = protocol.JSONRPC
		}
		if b, ok := strings.CutPrefix(raw, BuiltinPrefix); ok {
			if binding != protocol.JSONRPC {
				errs = append(errs, fmt.Errorf("handler %q: builtin handlers are called over JSON-RPC only", name))
				continue
			}
			h := o.builtins[b]
			if h == nil {
				errs = append(errs, fmt.Errorf("handler %q: %q is not a registered builtin", name, raw))
				continue
			}
			c := builtinClients[b]
			if c == nil {
				c = &http.Client{Transport: wrap(inProcess{h: h}), CheckRedirect: noRedirect}
				builtinClients[b] = c
			}
			i.targets[name] = target{name: name, url: "http://" + b + ".builtin.invalid/", binding: protocol.JSONRPC, client: c, expose: o.expose[name]}
			continue
		}
		if err := checkURL(raw, binding); err != nil {
			errs = append(errs, fmt.Errorf("handler %q: %w", name, err))
			continue
		}
		t := target{name: name, url: raw, binding: binding, client: upstream, expose: o.expose[name]}
		if binding == protocol.GRPC {
			if h2 == nil {
				h2 = &http.Client{Transport: wrap(http2Transport(o.client)), CheckRedirect: noRedirect}
				i.clients = append(i.clients, h2)
			}
			t.client = h2
		}
		i.targets[name] = t
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("handler: %w", err)
	}
	i.clients = append(i.clients, upstream)
	return i, nil
}

// Close closes idle upstream connections.
func (i *Invoker) Close() error {
	for _, c := range i.clients {
		c.CloseIdleConnections()
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func checkURL(raw string, binding protocol.Binding) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%q is not a URL", raw)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%q is neither a builtin nor an http(s) URL", raw)
	case u.Host == "":
		return fmt.Errorf("%q has no host", raw)
	case u.User != nil:
		return fmt.Errorf("%q carries credentials; handlers get capgate's token instead", u.Redacted())
	case u.Fragment != "":
		return fmt.Errorf("%q has a fragment", raw)
	case binding == protocol.GRPC && (u.Port() == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != ""):
		return fmt.Errorf("%q: a gRPC handler is http://host:port (h2c) or https://host:port, without path or query", raw)
	case binding == protocol.HTTPJSON && u.RawQuery != "":
		return fmt.Errorf("%q: an HTTP+JSON handler's base URL has no query", raw)
	}
	return nil
}

// http2Transport is the transport of gRPC handlers: c's transport (or the
// default one) speaking HTTP/2 only, with prior knowledge (h2c) for http://.
func http2Transport(c *http.Client) http.RoundTripper {
	base, ok := http.DefaultTransport.(*http.Transport)
	if c != nil {
		if tr, isTr := c.Transport.(*http.Transport); isTr {
			base, ok = tr, true
		}
	}
	var t *http.Transport
	if ok {
		t = base.Clone()
	} else {
		t = &http.Transport{}
	}
	var p http.Protocols
	p.SetHTTP2(true)
	p.SetUnencryptedHTTP2(true)
	t.Protocols = &p
	t.ResponseHeaderTimeout = 0 // bounded by the call's context
	return t
}

// upstreamClient copies c (or builds a client) that never follows redirects.
func upstreamClient(c *http.Client) *http.Client {
	if c == nil {
		tr, ok := http.DefaultTransport.(*http.Transport)
		rt := http.DefaultTransport
		if ok {
			t := tr.Clone()
			t.MaxIdleConnsPerHost = 32
			t.ResponseHeaderTimeout = 0 // bounded by the call's context
			rt = t
		}
		return &http.Client{Transport: rt, CheckRedirect: noRedirect}
	}
	cp := *c
	cp.CheckRedirect = noRedirect
	return &cp
}

func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// lookup returns the target of req.Handler and checks req.
func (i *Invoker) lookup(req Request) (target, *protocol.Error) {
	t, ok := i.targets[req.Handler]
	if !ok {
		return target{}, protocol.Errorf(protocol.Internal, "no handler named %s is configured", clip(req.Handler, 128))
	}
	switch {
	case req.Version != protocol.V1 && req.Version != protocol.V03:
		return target{}, protocol.Errorf(protocol.Internal, "the call to the skill's handler has no A2A version")
	case req.Method == "":
		return target{}, protocol.Errorf(protocol.Internal, "the call to the skill's handler has no method")
	case req.Token == "":
		return target{}, protocol.Errorf(protocol.Internal, "the call to the skill's handler has no credential")
	case len(req.Params) > 0 && !req.Params.IsValid():
		return target{}, protocol.Errorf(protocol.Internal, "the call to the skill's handler has malformed params")
	}
	if t.binding == protocol.JSONRPC {
		return t, nil
	}
	if _, ok := operation(req); !ok {
		if jsonrpcwire.IsA2AMethod(req.Method) && req.Version != protocol.V1 {
			return target{}, protocol.Errorf(protocol.VersionNotSupported,
				"this skill's handler is called over %s, which capgate speaks in A2A 1.0 only; send A2A-Version: 1.0", bindingName(t.binding))
		}
		return target{}, protocol.Errorf(protocol.UnsupportedOperation,
			"this skill's handler is called over %s; extension methods reach handlers over JSON-RPC only", bindingName(t.binding))
	}
	return t, nil
}

// operation is the A2A 1.0 operation req calls; false for a 0.3 method or
// an extension's own.
func operation(req Request) (protocol.Operation, bool) {
	if req.Version != protocol.V1 {
		return "", false
	}
	op, ok := protocol.MethodOperation(req.Method)
	if !ok || protocol.MethodName(protocol.V1, op) != req.Method {
		return "", false
	}
	return op, true
}

// ParseBinding reads a binding as the A2A specification (and capgate's
// config) names it: JSONRPC, HTTP+JSON or GRPC.
func ParseBinding(name string) (protocol.Binding, bool) {
	switch name {
	case "JSONRPC":
		return protocol.JSONRPC, true
	case "HTTP+JSON":
		return protocol.HTTPJSON, true
	case "GRPC":
		return protocol.GRPC, true
	}
	return "", false
}

// bindingName is a binding as the A2A specification names it.
func bindingName(b protocol.Binding) string {
	switch b {
	case protocol.HTTPJSON:
		return "HTTP+JSON"
	case protocol.GRPC:
		return "GRPC"
	default:
		return "JSONRPC"
	}
}

// newHTTPRequest builds the JSON-RPC POST for req with a fresh id.
func newHTTPRequest(ctx context.Context, t target, req Request, id string, stream bool) (*http.Request, error) {
	body, err := jsonrpcwire.MarshalRequest(id, req.Method, req.Params)
	if err != nil {
		return nil, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	setHeaders(hr.Header, req, stream)
	return hr, nil
}

// setHeaders sets what every call carries, on every binding (gRPC sends
// them as metadata): the A2A service parameters, capgate's credential, the
// decision id and, when forwarded, the caller's own credential.
func setHeaders(h http.Header, req Request, stream bool) {
	if stream {
		h.Set("Accept", "text/event-stream")
	} else {
		h.Set("Accept", "application/json")
	}
	h.Set(protocol.VersionHeader, string(req.Version))
	if len(req.Extensions) > 0 {
		ext := strings.Join(req.Extensions, ", ")
		h.Set(protocol.ExtensionsHeader, ext)
		if req.Version == protocol.V03 {
			h.Set("X-"+protocol.ExtensionsHeader, ext) // the 0.3 header name
		}
	}
	h.Set("Authorization", "Bearer "+req.Token)
	if req.CallerAuthorization != "" {
		h.Set(CallerAuthorizationHeader, req.CallerAuthorization)
	}
	if req.DecisionID != "" {
		h.Set(DecisionIDHeader, req.DecisionID)
	}
	h.Set("User-Agent", "capgate")
}

// failure classifies a transport error: the caller's cancellation, our
// deadline (timeoutMsg), or an unreachable handler. The raw error is logged,
// never returned to clients.
func (i *Invoker) failure(ctx context.Context, t target, req Request, err error, deadline error, deadlineMsg string) *protocol.Error {
	fields := []zap.Field{zap.String("handler", t.name), zap.String("decision_id", req.DecisionID), zap.Error(err)}
	cause := context.Cause(ctx)
	switch {
	case cause != nil && errors.Is(cause, deadline):
		i.log.Warn("handler timed out", fields...)
		return protocol.Wrap(protocol.Internal, err, deadlineMsg)
	case cause != nil:
		i.log.Info("handler call cancelled", fields...)
		return protocol.Wrap(protocol.Internal, err, "the call to the skill's handler was cancelled")
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		i.log.Warn("handler timed out", fields...)
		return protocol.Wrap(protocol.Internal, err, deadlineMsg)
	}
	i.log.Warn("handler unavailable", fields...)
	return protocol.Wrap(protocol.Internal, err, "the skill's handler is unavailable")
}

// invalid is the error for any answer that is not a well-formed A2A
// JSON-RPC response; why is logged only.
func (i *Invoker) invalid(t target, req Request, why string) *protocol.Error {
	i.log.Warn("handler returned an invalid response", zap.String("handler", t.name),
		zap.String("decision_id", req.DecisionID), zap.String("reason", why))
	return protocol.Errorf(protocol.InvalidAgentResponse, "the skill's handler returned an invalid A2A response")
}
