package handler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"go.uber.org/zap"

	"github.com/capgate/capgate/sidecar/protocol"
)

var (
	errTimeout = errors.New("handler call timed out")
	errIdle    = errors.New("handler stream idle")
)

// Call sends req to its handler and returns the JSON-RPC result. Every
// failure is an A2A error fit for the client: the handler's own A2A error
// (same code, cleaned message), InvalidAgentResponse for anything that is
// not a JSON-RPC 2.0 response to this call, Internal when the handler is
// unknown, unreachable, or slower than the timeout.
func (i *Invoker) Call(ctx context.Context, req Request) (jsontext.Value, *protocol.Error) {
	t, perr := i.lookup(req)
	if perr != nil {
		return nil, perr
	}
	start := time.Now()
	id := newID()
	cctx, cancel := context.WithTimeoutCause(ctx, i.timeout, errTimeout)
	defer cancel()

	hr, perr := newRequest(cctx, t, req, id, false)
	if perr != nil {
		return nil, perr
	}
	resp, err := t.client.Do(hr)
	if err != nil {
		return nil, i.failure(cctx, t, req, err, errTimeout, i.timeoutMsg)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return nil, i.failure(cctx, t, req, err, errTimeout, i.timeoutMsg)
	}
	if len(body) > MaxResponseBytes {
		return nil, i.invalid(t, req, "response larger than 16 MiB")
	}
	result, perr := i.unaryOf(t, req, resp, body, id)
	i.log.Debug("handler called", zap.String("handler", t.name), zap.String("decision_id", req.DecisionID),
		zap.Duration("latency", time.Since(start)), zap.Bool("ok", perr == nil))
	return result, perr
}

// newRequest builds the call of req over t's binding.
func newRequest(ctx context.Context, t target, req Request, id string, stream bool) (*http.Request, *protocol.Error) {
	switch t.binding {
	case protocol.HTTPJSON:
		return newRESTRequest(ctx, t, req, stream)
	case protocol.GRPC:
		return newGRPCRequest(ctx, t, req)
	}
	hr, err := newHTTPRequest(ctx, t, req, id, stream)
	if err != nil {
		return nil, protocol.Wrap(protocol.Internal, err, "the call to the skill's handler could not be built")
	}
	return hr, nil
}

// unaryOf checks a whole answer of t's binding.
func (i *Invoker) unaryOf(t target, req Request, resp *http.Response, body []byte, id string) (jsontext.Value, *protocol.Error) {
	switch t.binding {
	case protocol.HTTPJSON:
		return i.restUnary(t, req, resp, body)
	case protocol.GRPC:
		return i.grpcUnary(t, req, resp, body)
	}
	return i.unary(t, req, resp, body, id)
}

// unary checks a whole JSON-RPC response body. An error response is
// accepted with any HTTP status; a result only with a 2xx.
func (i *Invoker) unary(t target, req Request, resp *http.Response, body []byte, id string) (jsontext.Value, *protocol.Error) {
	// The Content-Type is not trusted either way (a2a-go's 0.3 server sends
	// errors without one): the body must parse as a JSON-RPC response.
	r, why := parseResponse(body, id, emptyResult(req.Method))
	if why != "" {
		return nil, i.invalid(t, req, fmt.Sprintf("HTTP %d, content type %q: %s", resp.StatusCode, clip(mediaType(resp.Header), 64), why))
	}
	if r.rpcErr != nil {
		return nil, i.upstreamError(t, req, r.rpcErr)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, i.invalid(t, req, fmt.Sprintf("a result with HTTP %d", resp.StatusCode))
	}
	return r.result, nil
}

func (i *Invoker) upstreamError(t target, req Request, e *rpcError) *protocol.Error {
	code, ok := upstreamCode(*e.Code)
	if !ok {
		return i.invalid(t, req, fmt.Sprintf("error code %d is not an A2A error", *e.Code))
	}
	return i.fromUpstream(t, req, code, *e.Message, errorInfoMetadata(e.Data), e.Data, zap.Int64("code", *e.Code))
}

// emptyResult reports whether a method's result is google.protobuf.Empty.
func emptyResult(method string) bool {
	op, ok := protocol.MethodOperation(method)
	return ok && op.EmptyResult()
}
