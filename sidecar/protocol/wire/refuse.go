package wire

import (
	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/grpcwire"
	"github.com/capgate/capgate/sidecar/protocol/httpjsonwire"
	"github.com/capgate/capgate/sidecar/protocol/jsonrpcwire"
)

// Refuse is the refusal of a request of binding b, as both doors answer it: the gateway writes
// it, the ext_authz server hands it to Envoy as the denied response. Each binding's package
// shapes its own (grpcwire.Refusal, jsonrpcwire.Refusal, httpjsonwire.Refusal — the last also
// for a request refused before its binding is known); every binding's carries the quota
// headers of a ResourceExhausted refusal (protocol.Error.QuotaHeaders). The JSON-RPC refusal
// reads v, shape, streaming, id and authStatus; the others only e.
func Refuse(b protocol.Binding, v protocol.Version, shape protocol.DataShape, streaming bool, id jsontext.Value, e *protocol.Error, authStatus bool) protocol.Refusal {
	var r protocol.Refusal
	switch b {
	case protocol.GRPC:
		r = grpcwire.Refusal(e)
	case protocol.JSONRPC:
		r = jsonrpcwire.Refusal(v, shape, streaming, id, e, authStatus)
	default:
		r = httpjsonwire.Refusal(e)
	}
	r.Header = append(r.Header, e.QuotaHeaders()...)
	return r
}
