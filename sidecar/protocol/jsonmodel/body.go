package jsonmodel

import (
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/capgate/capgate/sidecar/protocol"
)

// CheckSize refuses a body over lim.MaxBodyBytes (lim with its defaults) as PayloadTooLarge: the
// first check of either JSON binding, made before anything in the body is read.
func CheckSize(body []byte, lim protocol.Limits) *protocol.Error {
	if int64(len(body)) > lim.MaxBodyBytes {
		return protocol.Errorf(protocol.PayloadTooLarge, "request body is larger than the limit of %d bytes", lim.MaxBodyBytes)
	}
	return nil
}

// CheckContentType accepts application/json and application/a2a+json, with parameters; a
// charset, when given, must be utf-8. Both JSON bindings read their bodies only so.
func CheckContentType(ct string) *protocol.Error {
	if ct == "application/json" || ct == "application/a2a+json" {
		return nil // what mime.ParseMediaType would accept below, without its allocations
	}
	if ct == "" {
		return protocol.Errorf(protocol.ContentTypeNotSupported, "Content-Type is not supported; use application/json")
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || (mt != "application/json" && mt != "application/a2a+json") {
		return protocol.Errorf(protocol.ContentTypeNotSupported, "Content-Type is not supported; use application/json")
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return protocol.Errorf(protocol.ContentTypeNotSupported, "Content-Type charset is not supported; use utf-8")
	}
	return nil
}

// TrimSpace is b without the JSON white space around it.
func TrimSpace(b []byte) []byte { return trimSpace(b) }

func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// WriteBody writes a JSON answer body with status: the JSON bindings' unary answers.
func WriteBody(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
