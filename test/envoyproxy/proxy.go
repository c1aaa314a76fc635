// Package envoyproxy is an HTTP/1.1 reverse proxy that does what Envoy's
// ext_authz HTTP filter does with the settings of envoy/bootstrap.yaml: it
// buffers the body, asks an envoy.service.auth.v3 Authorization server, and
// forwards the request (with the answer's header mutations) or answers the
// denial itself. End-to-end tests put it in front of capgate where a real
// Envoy is not available; README.md lists what it does not do.
package envoyproxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"golang.org/x/net/http/httpguts"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Settings of envoy/bootstrap.yaml that the proxy reproduces.
const (
	// DefaultMaxRequestBytes is with_request_body.max_request_bytes.
	DefaultMaxRequestBytes = 1 << 20
	// DefaultTimeout is grpc_service.timeout.
	DefaultTimeout = 250 * time.Millisecond
	// DefaultStatusOnError is status_on_error (failure_mode_allow is false).
	DefaultStatusOnError = http.StatusServiceUnavailable
	// MaxRequestHeaderBytes is the connection manager's max_request_headers_kb.
	MaxRequestHeaderBytes = 60 << 10
	// RequestHeadersTimeout is the connection manager's request_headers_timeout.
	RequestHeadersTimeout = 10 * time.Second
	// PublicCardPath and PublicCardPathV03 (where 0.3 clients look) skip the check for GET
	// and HEAD (ExtAuthzPerRoute disabled).
	PublicCardPath    = "/.well-known/agent-card.json"
	PublicCardPathV03 = "/.well-known/agent.json"
	// HeaderPartialBody is the header Envoy adds to the check request when it
	// sends a body: "true" when the body was cut at max_request_bytes.
	HeaderPartialBody = "x-envoy-auth-partial-body"
)

// Check is one Authorization call as the proxy made it, for tests and logs.
type Check struct {
	Request  *authv3.CheckRequest
	Response *authv3.CheckResponse // nil when Err is set
	Err      error                 // transport error or timeout: answered with status_on_error
	// Skipped is set (Request and Response nil) for the public card route.
	Skipped bool
}

// Option configures a Proxy.
type Option func(*Proxy)

// WithMaxRequestBytes sets with_request_body.max_request_bytes (default 1 MiB).
func WithMaxRequestBytes(n int64) Option { return func(p *Proxy) { p.maxBody = n } }

// WithTimeout sets the Check timeout (default 250ms).
func WithTimeout(d time.Duration) Option { return func(p *Proxy) { p.timeout = d } }

// WithSourcePrincipal sets attributes.source.principal, as Envoy reports the
// URI SAN of a verified client certificate on an mTLS listener.
func WithSourcePrincipal(spiffeID string) Option {
	return func(p *Proxy) { p.sourcePrincipal = spiffeID }
}

// WithUpstreamSocket sends allowed requests over the Unix socket at path, as
// the bootstrap's capgate_gateway cluster does (its endpoint is a pipe); the
// upstream URL then only gives the scheme. Dial's addr may be "unix:/path"
// likewise for the capgate_extauthz cluster.
func WithUpstreamSocket(path string) Option { return func(p *Proxy) { p.upstreamSocket = path } }

// WithCheckObserver calls f after every check (or skipped check), before the
// request is forwarded or answered. f must be safe for concurrent use.
func WithCheckObserver(f func(Check)) Option { return func(p *Proxy) { p.observe = f } }

// Proxy is the ext_authz filter plus the router in front of one upstream.
// It is an http.Handler; Serve runs it with the connection manager's limits.
type Proxy struct {
	authz           authv3.AuthorizationClient
	upstream        *url.URL
	maxBody         int64
	timeout         time.Duration
	sourcePrincipal string
	upstreamSocket  string
	observe         func(Check)
	rp              *httputil.ReverseProxy
	streamID        atomic.Uint64
}

var _ http.Handler = (*Proxy)(nil)

// New returns a proxy that asks authz and forwards allowed requests to
// upstream (an http:// base URL; its path is not used, as Envoy's cluster
// has none).
func New(authz authv3.AuthorizationClient, upstream *url.URL, opts ...Option) *Proxy {
	p := &Proxy{authz: authz, upstream: upstream, maxBody: DefaultMaxRequestBytes, timeout: DefaultTimeout}
	for _, o := range opts {
		o(p)
	}
	var seed [8]byte
	_, _ = rand.Read(seed[:])
	p.streamID.Store(uint64(seed[0])<<40 | uint64(seed[1])<<32 | uint64(seed[2])<<24)
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = upstream.Scheme
			pr.Out.URL.Host = upstream.Host
			pr.Out.Host = pr.In.Host // Envoy forwards :authority unchanged (no host_rewrite)
			// Rewrite drops the client's X-Forwarded-*; the proxy has already
			// set them on In as Envoy's connection manager does.
			for _, h := range []string{"X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host"} {
				if v, ok := pr.In.Header[h]; ok {
					pr.Out.Header[h] = v
				}
			}
		},
		FlushInterval: -1, // Server-Sent Events stream through unbuffered, as Envoy streams them
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) {
			localReply(w, http.StatusServiceUnavailable, "upstream connect error or disconnect/reset before headers")
		},
		ModifyResponse: func(resp *http.Response) error {
			resp.Header.Set("Server", "envoy") // server_header_transformation: OVERWRITE
			return nil
		},
	}
	if path := p.upstreamSocket; path != "" {
		p.rp.Transport = &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", path)
			},
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     time.Hour,
		}
	}
	return p
}

// Dial opens the gRPC connection to an Authorization server, as Envoy's
// capgate_extauthz cluster does (plain-text HTTP/2).
func Dial(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// Serve serves the proxy on ln with the connection manager's header limits
// until ctx is done.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           p,
		MaxHeaderBytes:    MaxRequestHeaderBytes, // Go answers 431 above it; Envoy too
		ReadHeaderTimeout: RequestHeadersTimeout,
		IdleTimeout:       time.Hour,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		_ = srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// ServeHTTP runs one request through the connection manager's sanitising,
// the ext_authz filter and the router.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Connection manager: headers_with_underscores_action: REJECT_REQUEST.
	for name := range r.Header {
		if strings.Contains(name, "_") {
			localReply(w, http.StatusBadRequest, "Bad Request")
			return
		}
	}
	// normalize_path, merge_slashes, path_with_escaped_slashes_action: REJECT_REQUEST.
	rawPath, query, hasQuery := strings.Cut(r.RequestURI, "?")
	if r.Method == http.MethodConnect || !strings.HasPrefix(rawPath, "/") {
		localReply(w, http.StatusBadRequest, "Bad Request")
		return
	}
	path, ok := normalizePath(rawPath)
	if !ok {
		localReply(w, http.StatusBadRequest, "Bad Request")
		return
	}
	pathQuery := path
	if hasQuery {
		pathQuery += "?" + query
	}
	u, err := url.ParseRequestURI(pathQuery)
	if err != nil {
		localReply(w, http.StatusBadRequest, "Bad Request")
		return
	}
	r.URL.Path, r.URL.RawPath, r.URL.RawQuery = u.Path, u.RawPath, u.RawQuery
	r.RequestURI = pathQuery
	p.sanitize(r)

	// Route: the public card skips ext_authz (GET/HEAD on the exact path;
	// Envoy's path match ignores the query).
	if (path == PublicCardPath || path == PublicCardPathV03) && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		if p.observe != nil {
			p.observe(Check{Skipped: true})
		}
		p.forward(w, r, nil, false, nil)
		return
	}

	// ext_authz with_request_body: buffer the whole body, refuse a larger one.
	var body []byte
	hasBody := r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
	if hasBody {
		b, err := io.ReadAll(io.LimitReader(r.Body, p.maxBody+1))
		if err != nil {
			localReply(w, http.StatusBadRequest, "Bad Request")
			return
		}
		if int64(len(b)) > p.maxBody {
			// allow_partial_message: false — the decoder buffer limit is hit.
			w.Header().Set("Connection", "close")
			localReply(w, http.StatusRequestEntityTooLarge, "Payload Too Large")
			return
		}
		body = b
	}

	req := p.checkRequest(r, pathQuery, body, hasBody)
	ctx, cancel := context.WithTimeout(r.Context(), p.timeout)
	resp, err := p.authz.Check(ctx, req)
	cancel()
	if p.observe != nil {
		p.observe(Check{Request: req, Response: resp, Err: err})
	}
	if err != nil {
		// failure_mode_allow: false → status_on_error, empty body.
		localReply(w, DefaultStatusOnError, "")
		return
	}
	if codes.Code(resp.GetStatus().GetCode()) != codes.OK {
		p.deny(w, resp.GetDeniedResponse())
		return
	}
	ok2 := resp.GetOkResponse()
	if err := applyRequestMutations(r, ok2); err != nil {
		// validate_mutations: true — an invalid mutation fails the request.
		localReply(w, http.StatusInternalServerError, "")
		return
	}
	var respHeaders func(http.Header)
	if add := ok2.GetResponseHeadersToAdd(); len(add) > 0 {
		respHeaders = func(h http.Header) { applyResponseHeaders(h, add) }
	}
	p.forward(w, r, body, hasBody, respHeaders)
}

// sanitize applies the connection manager's request header changes that
// happen before any filter: use_remote_address with xff_num_trusted_hops 0,
// generate_request_id without preserving the client's.
func (p *Proxy) sanitize(r *http.Request) {
	peer := r.RemoteAddr
	if host, _, err := net.SplitHostPort(peer); err == nil {
		peer = host
	}
	if prior := r.Header.Values("X-Forwarded-For"); len(prior) > 0 {
		r.Header.Set("X-Forwarded-For", strings.Join(prior, ", ")+", "+peer)
	} else {
		r.Header.Set("X-Forwarded-For", peer)
	}
	r.Header.Set("X-Forwarded-Proto", "http")
	r.Header.Set("X-Request-Id", newUUID())
	// Since Envoy 1.36 no address is internal unless internal_address_config
	// says so (the bootstrap sets none): every request is external, Envoy
	// never adds x-envoy-internal and removes a client's.
	r.Header.Del("X-Envoy-Internal")
}

// forward sends r upstream: with the buffered body when the filter read
// one (hasBody), else with the client's body as it arrives (the public card).
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, body []byte, hasBody bool, respHeaders func(http.Header)) {
	if hasBody {
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
	} else if r.ContentLength == 0 || r.Body == nil {
		r.Body = http.NoBody
	}
	if respHeaders != nil {
		w = &headerWriter{ResponseWriter: w, apply: respHeaders}
	}
	p.rp.ServeHTTP(w, r)
}

// checkRequest fills the CheckRequest as Envoy's CheckRequestUtils does for
// an HTTP/1.1 request. Header values may carry any byte but proto strings
// must be UTF-8: as Envoy (MessageUtil::sanitizeUtf8String) each byte that
// is not part of valid UTF-8 becomes '!' in the check, while the request
// forwarded upstream keeps its bytes.
func (p *Proxy) checkRequest(r *http.Request, pathQuery string, body []byte, hasBody bool) *authv3.CheckRequest {
	pathQuery, host := sanitizeUTF8(pathQuery), sanitizeUTF8(r.Host)
	headers := make(map[string]string, len(r.Header)+6)
	headers[":authority"] = host
	headers[":path"] = pathQuery
	headers[":method"] = r.Method
	headers[":scheme"] = "http"
	for name, vals := range r.Header {
		k := strings.ToLower(name)
		if k == HeaderPartialBody {
			continue // Envoy drops a client's copy of its own header
		}
		clean := make([]string, len(vals))
		for i, v := range vals {
			clean[i] = sanitizeUTF8(v)
		}
		headers[k] = strings.Join(clean, ",") // repeated headers joined with ","
	}
	if len(r.TransferEncoding) > 0 {
		headers["transfer-encoding"] = strings.Join(r.TransferEncoding, ",")
	}
	hr := &authv3.AttributeContext_HttpRequest{
		Id:       strconv.FormatUint(p.streamID.Add(1), 10),
		Method:   r.Method,
		Headers:  headers,
		Path:     pathQuery,
		Host:     host,
		Scheme:   "http",
		Protocol: "HTTP/1.1",
		Size:     int64(len(body)), // stream_info.bytesReceived(): the buffered body
	}
	if hasBody {
		hr.RawBody = body // pack_as_bytes: true
		headers[HeaderPartialBody] = "false"
	}
	attrs := &authv3.AttributeContext{
		Source:  &authv3.AttributeContext_Peer{Address: socketAddress(r.RemoteAddr), Principal: p.sourcePrincipal},
		Request: &authv3.AttributeContext_Request{Time: timestamppb.Now(), Http: hr},
	}
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		attrs.Destination = &authv3.AttributeContext_Peer{Address: socketAddress(la.String())}
	}
	return &authv3.CheckRequest{Attributes: attrs}
}

func socketAddress(hostport string) *corev3.Address {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return &corev3.Address{}
	}
	n, _ := strconv.ParseUint(port, 10, 32)
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(n)},
	}}}
}

// deny writes the denied_response as Envoy's local reply: its status (403
// when unset), its headers and its body. The request is never forwarded.
// As Envoy's ext_authz filter does, every header named in the denial first
// replaces the local reply's own, then each copy is added in order, so a
// repeated header (two WWW-Authenticate challenges, several Set-Cookie)
// keeps every copy whatever its append action.
func (p *Proxy) deny(w http.ResponseWriter, d *authv3.DeniedHttpResponse) {
	status := http.StatusForbidden
	if c := int(d.GetStatus().GetCode()); c > 0 {
		status = c
	}
	h := w.Header()
	type kv struct{ k, v string }
	var set []kv
	for _, o := range d.GetHeaders() {
		k, v := o.GetHeader().GetKey(), headerValue(o.GetHeader())
		if validHeader(k, v) {
			set = append(set, kv{k, v})
		}
	}
	for _, x := range set {
		h.Del(x.k)
	}
	for _, x := range set {
		h.Add(x.k, x.v)
	}
	h.Set("Server", "envoy")
	body := d.GetBody()
	if body != "" && h.Get("Content-Type") == "" {
		h.Set("Content-Type", "text/plain")
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// applyRequestMutations applies ok_response to the request forwarded
// upstream: headers (by their append action), then headers_to_remove, then
// the query parameter changes. Pseudo-headers and Host cannot be changed or
// removed this way. Any invalid name or value fails the whole request.
func applyRequestMutations(r *http.Request, ok *authv3.OkHttpResponse) error {
	for _, o := range ok.GetHeaders() {
		k, v := o.GetHeader().GetKey(), headerValue(o.GetHeader())
		if !validHeader(k, v) {
			return errors.New("invalid header mutation")
		}
		if strings.HasPrefix(k, ":") || strings.EqualFold(k, "host") {
			continue
		}
		switch appendAction(o) {
		case corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD:
			r.Header.Add(k, v)
		case corev3.HeaderValueOption_ADD_IF_ABSENT:
			if _, exists := r.Header[http.CanonicalHeaderKey(k)]; !exists {
				r.Header.Set(k, v)
			}
		case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS:
			if _, exists := r.Header[http.CanonicalHeaderKey(k)]; exists {
				r.Header.Set(k, v)
			}
		default:
			r.Header.Set(k, v)
		}
	}
	for _, k := range ok.GetHeadersToRemove() {
		if !httpguts.ValidHeaderFieldName(k) && !strings.HasPrefix(k, ":") {
			return errors.New("invalid header removal")
		}
		if strings.HasPrefix(k, ":") || strings.EqualFold(k, "host") {
			continue
		}
		r.Header.Del(k)
	}
	if len(ok.GetQueryParametersToSet()) > 0 || len(ok.GetQueryParametersToRemove()) > 0 {
		q := r.URL.Query()
		for _, kv := range ok.GetQueryParametersToSet() {
			q.Set(kv.GetKey(), kv.GetValue())
		}
		for _, k := range ok.GetQueryParametersToRemove() {
			q.Del(k)
		}
		r.URL.RawQuery = q.Encode()
	}
	return nil
}

func applyResponseHeaders(h http.Header, opts []*corev3.HeaderValueOption) {
	for _, o := range opts {
		k, v := o.GetHeader().GetKey(), headerValue(o.GetHeader())
		if !validHeader(k, v) {
			continue
		}
		if appendAction(o) == corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD {
			h.Add(k, v)
		} else {
			h.Set(k, v)
		}
	}
}

// appendAction resolves the deprecated append field as Envoy does: when
// set, it wins (true → append, false → overwrite).
func appendAction(o *corev3.HeaderValueOption) corev3.HeaderValueOption_HeaderAppendAction {
	if o.GetAppend() != nil { //nolint:staticcheck // Envoy still honours the deprecated append field alongside append_action; the emulation must too.
		if o.GetAppend().GetValue() { //nolint:staticcheck // Envoy still honours the deprecated append field alongside append_action; the emulation must too.
			return corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD
		}
		return corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD
	}
	return o.GetAppendAction()
}

func headerValue(h *corev3.HeaderValue) string {
	if b := h.GetRawValue(); len(b) > 0 {
		return string(b)
	}
	return h.GetValue()
}

func validHeader(k, v string) bool {
	if strings.HasPrefix(k, ":") {
		return httpguts.ValidHeaderFieldName(k[1:]) && httpguts.ValidHeaderFieldValue(v)
	}
	return httpguts.ValidHeaderFieldName(k) && httpguts.ValidHeaderFieldValue(v)
}

// headerWriter applies response_headers_to_add before the upstream's
// response headers are written.
type headerWriter struct {
	http.ResponseWriter
	apply func(http.Header)
	done  bool
}

func (hw *headerWriter) WriteHeader(code int) {
	if !hw.done {
		hw.done = true
		hw.apply(hw.Header())
	}
	hw.ResponseWriter.WriteHeader(code)
}

func (hw *headerWriter) Write(b []byte) (int, error) {
	if !hw.done {
		hw.WriteHeader(http.StatusOK)
	}
	return hw.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush on the real writer.
func (hw *headerWriter) Unwrap() http.ResponseWriter { return hw.ResponseWriter }

// Flush forwards flushes (SSE).
func (hw *headerWriter) Flush() {
	if f, ok := hw.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// localReply answers as Envoy's sendLocalReply does without a local reply
// config: the status, text/plain body when there is one.
func localReply(w http.ResponseWriter, status int, body string) {
	h := w.Header()
	h.Set("Server", "envoy")
	if body != "" {
		h.Set("Content-Type", "text/plain")
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// normalizePath applies path_with_escaped_slashes_action: REJECT_REQUEST
// (%2F, %5C refused), normalize_path (RFC 3986 dot segments, backslashes
// are not slashes) and merge_slashes. ok is false for a refused path.
func normalizePath(p string) (string, bool) {
	lower := strings.ToLower(p)
	if strings.Contains(lower, "%2f") || strings.Contains(lower, "%5c") {
		return "", false
	}
	trailing := strings.HasSuffix(p, "/") || strings.HasSuffix(p, "/.") || strings.HasSuffix(p, "/..")
	var out []string
	for _, seg := range strings.Split(p, "/") {
		switch seg {
		case "", ".": // "" merges slashes
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, seg)
		}
	}
	res := "/" + strings.Join(out, "/")
	if trailing && res != "/" {
		res += "/"
	}
	return res, true
}

// sanitizeUTF8 replaces each byte of s that is not part of valid UTF-8 with
// '!', as Envoy's MessageUtil::sanitizeUtf8String does.
func sanitizeUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	b := []byte(s)
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			b[i] = '!'
		}
		i += size
	}
	return string(b)
}

// newUUID is a random (version 4) UUID, as Envoy generates x-request-id.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}
