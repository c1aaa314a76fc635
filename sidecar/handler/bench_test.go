package handler_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/sidecar/handler"
)

// BenchmarkCall is one unary SendMessage to a JSON-RPC handler on 127.0.0.1 that answers
// with a task at once: what capgate's side of a handler call costs, HTTP/1.1 round trip
// included (the gateway benchmark's handler call).
func BenchmarkCall(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID jsontext.Value `json:"id"`
		}
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &req, json.RejectUnknownMembers(false))
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"task":{"id":"t1"}}}`, req.ID)
	}))
	b.Cleanup(up.Close)
	inv, err := handler.NewInvoker(map[string]string{"up": up.URL})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = inv.Close() })
	req := call("up")
	b.ReportAllocs()
	for b.Loop() {
		if _, perr := inv.Call(b.Context(), req); perr != nil {
			b.Fatal(perr.Message)
		}
	}
}
