package handler

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"go.uber.org/zap"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/httpjsonwire"
	"github.com/capgate/capgate/sidecar/protocol/jsonmodel"
)

// This file is the HTTP+JSON binding (A2A 1.0): an operation is the HTTP
// method and path of the proto's google.api.http annotations
// (httpjsonwire.HTTPCall), the params' path fields go in the path, the rest in
// the query (GET, DELETE) or the body (POST); a unary answer is the
// response message as ProtoJSON, an error a google.rpc.Status body, a
// stream Server-Sent Events of StreamResponse with error events.

// member is one member of a JSON object, in order.
type member struct {
	name  string
	value jsontext.Value
}

// members reads a JSON object's members (nil or null: none).
func members(obj jsontext.Value) ([]member, error) {
	if len(obj) == 0 || obj.Kind() == 'n' {
		return nil, nil
	}
	dec := jsontext.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, fmt.Errorf("params are not a JSON object")
	}
	var out []member
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, err
		}
		name := tok.String()
		v, err := dec.ReadValue()
		if err != nil {
			return nil, err
		}
		out = append(out, member{name, v.Clone()})
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	return out, nil
}

// newRESTRequest builds the HTTP+JSON request for req.
func newRESTRequest(ctx context.Context, t target, req Request, stream bool) (*http.Request, *protocol.Error) {
	op, _ := operation(req)
	ms, err := members(req.Params)
	if err != nil {
		return nil, protocol.Wrap(protocol.Internal, err, "the call to the skill's handler has malformed params")
	}
	taskField, configField := op.PathFields()
	var tenant, taskID, configID string
	rest := ms[:0:0]
	for _, m := range ms {
		var dst *string
		switch {
		case jsonmodel.SameField(m.name, "tenant"):
			dst = &tenant
		case taskField != "" && jsonmodel.SameField(m.name, taskField):
			dst = &taskID
		case configField != "" && jsonmodel.SameField(m.name, configField):
			dst = &configID
		default:
			// Not bound by the path (CreateTaskPushNotificationConfig's
			// own id among them): body or query.
			rest = append(rest, m)
			continue
		}
		s, ok := jsonString(m.value)
		if !ok {
			return nil, protocol.Errorf(protocol.InvalidParams, "params.%s must be a string", clip(m.name, 64))
		}
		*dst = s
	}
	if (taskField != "" && taskID == "") || (configField != "" && configID == "") {
		return nil, protocol.Errorf(protocol.InvalidParams, "the call to the skill's handler names no task")
	}
	method, path, ok := httpjsonwire.HTTPCall(op, tenant, taskID, configID)
	if !ok {
		return nil, protocol.Errorf(protocol.InvalidParams, "the task, push config or tenant id cannot be sent in an HTTP+JSON path")
	}
	u := strings.TrimSuffix(t.url, "/") + path
	var body []byte
	if method == http.MethodPost {
		body = []byte{'{'}
		for i, m := range rest {
			if i > 0 {
				body = append(body, ',')
			}
			body, _ = jsontext.AppendQuote(body, m.name)
			body = append(append(body, ':'), m.value...)
		}
		body = append(body, '}')
	} else if len(rest) > 0 {
		q, perr := restQuery(op, rest)
		if perr != nil {
			return nil, perr
		}
		u += "?" + q
	}
	hr, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return nil, protocol.Wrap(protocol.Internal, err, "the call to the skill's handler could not be built")
	}
	if body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	setHeaders(hr.Header, req, stream)
	return hr, nil
}

// restQuery writes the params a GET or DELETE route does not bind as its
// query: only the fields the route takes there, each a scalar.
func restQuery(op protocol.Operation, rest []member) (string, *protocol.Error) {
	fields := httpjsonwire.HTTPQueryFields(op)
	q := url.Values{}
	for _, m := range rest {
		i := slices.IndexFunc(fields, func(f string) bool { return jsonmodel.SameField(f, m.name) })
		if i < 0 {
			return "", protocol.Errorf(protocol.InvalidParams, "params.%s cannot be sent to this skill's handler over HTTP+JSON (%s takes no such query parameter)",
				clip(m.name, 64), op)
		}
		var v string
		switch m.value.Kind() {
		case '"':
			v, _ = jsonString(m.value)
		case '0', 't', 'f':
			v = string(m.value)
		case 'n':
			continue
		default:
			return "", protocol.Errorf(protocol.InvalidParams, "params.%s must be a string, number or boolean", clip(m.name, 64))
		}
		q.Set(fields[i], v)
	}
	return q.Encode(), nil
}

// restUnary checks a whole HTTP+JSON answer: a 2xx is the result, a JSON
// object (the empty answer of DeleteTaskPushNotificationConfig is null);
// anything else must be a google.rpc.Status error body.
func (i *Invoker) restUnary(t target, req Request, resp *http.Response, body []byte) (jsontext.Value, *protocol.Error) {
	b := bytes.TrimSpace(body)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		e, why := parseStatus(b)
		if why != "" {
			return nil, i.invalid(t, req, fmt.Sprintf("HTTP %d, content type %q: %s", resp.StatusCode, clip(mediaType(resp.Header), 64), why))
		}
		return nil, i.statusError(t, req, e)
	}
	if len(b) == 0 && emptyResult(req.Method) {
		return jsontext.Value("null"), nil
	}
	v := jsontext.Value(b)
	if !v.IsValid() || v.Kind() != '{' {
		return nil, i.invalid(t, req, fmt.Sprintf("HTTP %d: the body is not a JSON object", resp.StatusCode))
	}
	if emptyResult(req.Method) {
		return jsontext.Value("null"), nil
	}
	return v.Clone(), nil
}

// restEvent reads one Server-Sent Event of an HTTP+JSON stream: a
// StreamResponse, or an error (an "error" event, or data that is a
// google.rpc.Status body, as a2a-go's server writes it).
func (i *Invoker) restEvent(t target, req Request, name string, data []byte, n int) (jsontext.Value, *protocol.Error) {
	v := jsontext.Value(bytes.TrimSpace(data))
	if !v.IsValid() || v.Kind() != '{' {
		return nil, i.invalid(t, req, fmt.Sprintf("event %d: not a JSON object", n))
	}
	if name == "error" || hasMember(v, "error") {
		e, why := parseStatus(v)
		if why != "" {
			return nil, i.invalid(t, req, fmt.Sprintf("event %d: %s", n, why))
		}
		return nil, i.statusError(t, req, e)
	}
	return v, nil // a slice of data: valid until the next event, as Stream says
}

// hasMember reports whether the JSON object v has a top-level member name.
func hasMember(v jsontext.Value, name string) bool {
	ms, err := members(v)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(ms, func(m member) bool { return m.name == name })
}

// upstreamStatus is a handler's error in google.rpc.Status terms, whichever
// binding carried it.
type upstreamStatus struct {
	status   string // google.rpc.Code name
	message  string
	reason   string // ErrorInfo reason in the A2A domain, if any
	metadata map[string]string
	details  []byte // the status's details as sent, for logs only
}

// parseStatus reads a google.rpc.Status error body:
// {"error":{"code","status","message","details":[ErrorInfo...]}}.
func parseStatus(body []byte) (upstreamStatus, string) {
	var s struct {
		Error *struct {
			Code    *int64         `json:"code"`
			Status  string         `json:"status"`
			Message *string        `json:"message"`
			Details jsontext.Value `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &s, json.RejectUnknownMembers(false)); err != nil || s.Error == nil || s.Error.Message == nil {
		return upstreamStatus{}, "not a google.rpc.Status error body"
	}
	out := upstreamStatus{status: s.Error.Status, message: *s.Error.Message, details: s.Error.Details.Clone()}
	out.reason, out.metadata = errorInfo(s.Error.Details)
	return out, ""
}

// errorInfo reads the reason and string metadata of the A2A
// google.rpc.ErrorInfo in details (a JSON array of typed details).
func errorInfo(details jsontext.Value) (string, map[string]string) {
	if len(details) == 0 || details.Kind() != '[' {
		return "", nil
	}
	var ds []map[string]jsontext.Value
	if err := json.Unmarshal(details, &ds); err != nil {
		return "", nil
	}
	for _, d := range ds {
		typ, _ := jsonString(d["@type"])
		domain, _ := jsonString(d["domain"])
		if typ != protocol.ErrorInfoType || (domain != "" && domain != protocol.Domain) {
			continue
		}
		reason, _ := jsonString(d["reason"])
		return reason, errorInfoMetadata(details)
	}
	return "", nil
}

// statusError turns a handler's status into the client's error, as
// upstreamError does for JSON-RPC: the A2A code of the ErrorInfo reason; a
// status without one is an internal error.
func (i *Invoker) statusError(t target, req Request, s upstreamStatus) *protocol.Error {
	code, ok := protocol.CodeOfReason(s.reason)
	if !ok {
		code = protocol.Internal
		if s.status == "UNAUTHENTICATED" {
			code = protocol.Unauthenticated
		}
	}
	return i.fromUpstream(t, req, code, s.message, s.metadata, s.details,
		zap.String("status", clip(s.status, 64)), zap.String("reason", clip(s.reason, 64)))
}
