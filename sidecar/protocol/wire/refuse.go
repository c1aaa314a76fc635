package wire

import (
	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/grpcwire"
)

// Refuse is the refusal of a request of binding b, as both doors answer it: the gateway writes
// it, the ext_authz server hands it to Envoy as the denied response. Each binding's package
// shapes its own (grpcwire.Refusal; the JSON bindings' through protocol.Refuse); every binding's
// carries the quota headers of a ResourceExhausted refusal (protocol.Error.QuotaHeaders).
func Refuse(b protocol.Binding, v protocol.Version, shape protocol.DataShape, streaming bool, id jsontext.Value, e *protocol.Error, authStatus bool) protocol.Refusal {
	if b == protocol.GRPC {
		r := grpcwire.Refusal(e)
		r.Header = append(r.Header, e.QuotaHeaders()...)
		return r
	}
	return protocol.Refuse(b, v, shape, streaming, id, e, authStatus)
}
