package handler

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"io"
	"mime"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"go.uber.org/zap"

	"github.com/capgate/capgate/sidecar/protocol"
)

// newID returns a fresh JSON-RPC id, unguessable so that a response cannot
// be replayed from another call.
func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "capgate-" + base64.RawURLEncoding.EncodeToString(b[:])
}

// mediaType is the response's Content-Type without parameters, lower case.
func mediaType(h http.Header) string {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil {
		return ""
	}
	return mt
}

// response is one parsed JSON-RPC 2.0 response: exactly one of result and
// rpcErr is set.
type response struct {
	result jsontext.Value
	rpcErr *rpcError
}

type rpcError struct {
	Code    *int64         `json:"code"`
	Message *string        `json:"message"`
	Data    jsontext.Value `json:"data,omitempty"`
}

// parseResponse reads body as a JSON-RPC 2.0 response to the request with
// id. It refuses malformed JSON, duplicate keys, invalid UTF-8, trailing
// data, a wrong or missing jsonrpc or id, and anything but exactly one of
// result and error. An error response may carry a null id (JSON-RPC allows
// it when the server could not read the id). why says what was wrong, for
// logs.
//
// emptyOK reads a success with no result member as a null result: the answer
// of a method whose result is google.protobuf.Empty
// (DeleteTaskPushNotificationConfig), which a2a-go writes without one.
func parseResponse(body []byte, id string, emptyOK bool) (resp response, why string) {
	resp, why = parseEvent(body, id, emptyOK)
	resp.result = resp.result.Clone() // nil stays nil
	return resp, why
}

// parseEvent is parseResponse without copying the result: it is a slice of
// body, valid as long as body is. Stream reads every event into one buffer
// and relays each before reading the next, so that relaying an event
// allocates nothing (BenchmarkRelayEvents).
func parseEvent(body []byte, id string, emptyOK bool) (resp response, why string) {
	p := parsers.Get().(*parser)
	defer func() {
		p.dec.Reset(noInput) // keeps no reference to body
		p.in = bytes.Buffer{}
		parsers.Put(p)
	}()
	// A decoder reading a bytes.Buffer parses body in place.
	p.in = *bytes.NewBuffer(body)
	p.dec.Reset(&p.in)
	return parseResponseFrom(&p.dec, body, id, emptyOK)
}

// parser is a JSON decoder and its input, reused by parseEvent: a stream's
// every event is a response, and a new decoder per event was most of what
// relaying it allocated (BenchmarkRelayEvents; TestParseResponsePooled
// checks the reuse against fresh decoders).
type parser struct {
	dec jsontext.Decoder
	in  bytes.Buffer
}

var parsers = sync.Pool{New: func() any { return new(parser) }}

// noInput is what a pooled decoder is left reading.
var noInput = bytes.NewReader(nil)

// parseResponseFrom is parseEvent reading body from dec, a decoder with the
// default options (duplicate names and invalid UTF-8 are errors) at the
// start of body. The values it returns are slices of body.
func parseResponseFrom(dec *jsontext.Decoder, body []byte, id string, emptyOK bool) (resp response, why string) {
	tok, err := dec.ReadToken()
	if err != nil || tok.Kind() != '{' {
		return response{}, "not a JSON object"
	}
	var version, gotID, result, errObj jsontext.Value
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return response{}, "malformed JSON"
		}
		name := tok.String()
		v, err := dec.ReadValue()
		if err != nil {
			return response{}, "malformed JSON"
		}
		// The value as it stands in body (the decoder's own may be a
		// buffer it reuses).
		end := int(dec.InputOffset())
		v = body[end-len(v) : end : end]
		switch name {
		case "jsonrpc":
			version = v
		case "id":
			gotID = v
		case "result":
			result = v
		case "error":
			errObj = v
		}
	}
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '}' {
		return response{}, "malformed JSON"
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return response{}, "data after the JSON value"
	}
	if !isJSONString(version, "2.0") {
		return response{}, `jsonrpc is not "2.0"`
	}
	if result == nil && errObj == nil && emptyOK {
		result = jsontext.Value("null")
	}
	if (result == nil) == (errObj == nil) {
		return response{}, "not exactly one of result and error"
	}
	idOK := isJSONString(gotID, id)
	if errObj != nil {
		if !idOK && (gotID == nil || gotID.Kind() != 'n') {
			return response{}, "id does not match the request"
		}
		var e rpcError
		if err := json.Unmarshal(errObj, &e, json.RejectUnknownMembers(false)); err != nil || e.Code == nil || e.Message == nil {
			return response{}, "malformed error object"
		}
		e.Data = e.Data.Clone() // not a slice of body
		return response{rpcErr: &e}, ""
	}
	if !idOK {
		return response{}, "id does not match the request"
	}
	return response{result: result}, ""
}

// isJSONString reports whether v is a JSON string holding want. A string
// without escapes is compared as it stands, without decoding it.
func isJSONString(v jsontext.Value, want string) bool {
	if n := len(v); n >= 2 && v[0] == '"' && bytes.IndexByte(v, '\\') < 0 {
		return string(v[1:n-1]) == want
	}
	s, ok := jsonString(v)
	return ok && s == want
}

func jsonString(v jsontext.Value) (string, bool) {
	if v == nil || v.Kind() != '"' {
		return "", false
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", false
	}
	return s, true
}

// upstreamCode maps a JSON-RPC error code to its protocol code; false for
// a code that is not an A2A or JSON-RPC error.
func upstreamCode(code int64) (protocol.Code, bool) {
	switch code {
	case -32700:
		return protocol.ParseError, true
	case -32600:
		return protocol.InvalidRequest, true
	case -32601:
		return protocol.MethodNotFound, true
	case -32602:
		return protocol.InvalidParams, true
	case -32603:
		return protocol.Internal, true
	case -32001:
		return protocol.TaskNotFound, true
	case -32002:
		return protocol.TaskNotCancelable, true
	case -32003:
		return protocol.PushNotificationNotSupported, true
	case -32004:
		return protocol.UnsupportedOperation, true
	case -32005:
		return protocol.ContentTypeNotSupported, true
	case -32006:
		return protocol.InvalidAgentResponse, true
	case -32007:
		return protocol.ExtendedAgentCardNotConfigured, true
	case -32008:
		return protocol.ExtensionSupportRequired, true
	case -32009:
		return protocol.VersionNotSupported, true
	case -31401:
		return protocol.Unauthenticated, true
	case -31403:
		return protocol.Unauthorized, true
	default:
		return "", false
	}
}

// fromUpstream is the client's error for a handler's error of code, on any
// binding and in streams alike. The handler's message and data are logged
// for operators (cleaned, clipped, credentials masked); the caller gets the
// code with capgate's own message and the decision id, never the handler's
// text, which may name internal addresses, types or shards. A handler whose
// errors are exposed (handlers.<name>.expose_errors) passes its message
// (cleaned and clipped) and its ErrorInfo string metadata on instead. A
// handler refusing capgate's own credential is not the caller's
// authentication problem: it becomes an internal error either way.
func (i *Invoker) fromUpstream(t target, req Request, code protocol.Code, message string, metadata map[string]string,
	data []byte, fields ...zap.Field) *protocol.Error {
	i.log.Info("handler returned an error", append(fields, zap.String("handler", t.name),
		zap.String("decision_id", req.DecisionID), zap.String("error_code", string(code)),
		zap.String("handler_message", maskCredentials(clean(message, maxErrorMessage))),
		zap.String("handler_data", maskCredentials(clean(string(data), maxErrorData))))...)
	if code == protocol.Unauthenticated {
		return protocol.Errorf(protocol.Internal, "the skill's handler refused capgate's credential")
	}
	if !t.expose {
		out := protocol.Errorf(code, "%s", HandlerErrorMessage(code))
		if req.DecisionID != "" {
			out.Message += " (decision " + req.DecisionID + ")"
			out = out.WithMetadata("decision_id", req.DecisionID)
		}
		return out
	}
	msg := clean(message, maxErrorMessage)
	if msg == "" {
		msg = "the skill's handler failed"
	}
	out := protocol.Errorf(code, "%s", msg)
	for k, v := range metadata {
		out = out.WithMetadata(k, v)
	}
	return out
}

// HandlerErrorMessage is capgate's own message for a handler's error of
// code: what the code means, in the caller's terms.
func HandlerErrorMessage(code protocol.Code) string {
	switch code {
	case protocol.TaskNotFound:
		return "the skill's handler has no such task"
	case protocol.TaskNotCancelable:
		return "the task cannot be canceled in its current state"
	case protocol.PushNotificationNotSupported:
		return "the skill's handler does not support push notifications"
	case protocol.UnsupportedOperation:
		return "the skill's handler does not support this operation"
	case protocol.ContentTypeNotSupported:
		return "the skill's handler does not accept a content type of this request"
	case protocol.InvalidParams:
		return "the skill's handler refused the request's parameters"
	case protocol.InvalidRequest, protocol.ParseError:
		return "the skill's handler refused the request"
	case protocol.MethodNotFound:
		return "the skill's handler does not serve this method"
	case protocol.ExtendedAgentCardNotConfigured:
		return "the skill's handler has no extended agent card"
	case protocol.ExtensionSupportRequired:
		return "the skill's handler requires an extension this request does not activate"
	case protocol.VersionNotSupported:
		return "the skill's handler does not support this A2A version"
	case protocol.Unauthorized:
		return "the skill's handler refused the request for this caller"
	case protocol.InvalidAgentResponse:
		return "the skill's handler reported an invalid agent response"
	default:
		return "the skill's handler failed"
	}
}

// maskCredentials hides what looks like a credential in handler text before
// it is logged: the value after "Bearer" or "Basic", and JWT-shaped words
// (three base64url segments, the first a JSON header).
func maskCredentials(s string) string {
	s = credentialScheme.ReplaceAllString(s, "$1 [masked]")
	return jwtShaped.ReplaceAllString(s, "[masked]")
}

var (
	credentialScheme = regexp.MustCompile(`(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+`)
	jwtShaped        = regexp.MustCompile(`eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*`)
)

// errorInfoMetadata reads the string metadata of a google.rpc.ErrorInfo in
// data (an array of typed details); anything else yields nothing.
func errorInfoMetadata(data jsontext.Value) map[string]string {
	if len(data) == 0 || data.Kind() != '[' {
		return nil
	}
	var details []map[string]jsontext.Value
	if err := json.Unmarshal(data, &details); err != nil {
		return nil
	}
	for _, d := range details {
		typ, _ := jsonString(d["@type"])
		if typ != protocol.ErrorInfoType {
			continue
		}
		raw := d["metadata"]
		if len(raw) == 0 || raw.Kind() != '{' {
			return nil
		}
		var meta map[string]jsontext.Value
		if err := json.Unmarshal(raw, &meta); err != nil {
			return nil
		}
		out := map[string]string{}
		for k, v := range meta {
			s, ok := jsonString(v)
			k = clean(k, 64)
			if !ok || k == "" {
				continue
			}
			out[k] = clean(s, 256)
			if len(out) == maxErrorMetadata {
				break
			}
		}
		return out
	}
	return nil
}

// clean makes upstream text safe to show: valid UTF-8, control characters
// removed (line breaks and tabs become spaces), trimmed, at most max bytes.
func clean(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			return ' '
		case r < 0x20 || (r >= 0x7f && r < 0xa0) || r == '\u2028' || r == '\u2029':
			return -1
		}
		return r
	}, s)
	return clip(strings.TrimSpace(s), max)
}

// clip cuts s to at most max bytes on a rune boundary, marking the cut.
func clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
