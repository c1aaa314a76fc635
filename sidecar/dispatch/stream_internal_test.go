package dispatch

import (
	"context"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/sidecar/exchange"
	"github.com/capgate/capgate/sidecar/handler"
	"github.com/capgate/capgate/sidecar/protocol"
)

// eventsInvoker streams n copies of one event into one buffer, as
// handler.Invoker does.
type eventsInvoker struct {
	Invoker
	event []byte
	n     int
}

func (f *eventsInvoker) Stream(_ context.Context, _ handler.Request, yield func(jsontext.Value) error) *protocol.Error {
	buf := make([]byte, 0, len(f.event))
	for range f.n {
		buf = append(buf[:0], f.event...)
		if err := yield(buf); err != nil {
			return protocol.Wrap(protocol.Internal, err, "stream")
		}
	}
	return nil
}

// BenchmarkStreamRelay is what the dispatcher does for each event of a
// relayed stream (ns/op and allocs/op are per event): the event read once
// for its kind, task and context, and the task binding (the first event
// binds the task). The binding's writer adds its own (gateway's
// BenchmarkSSEEvents, BenchmarkGRPCEvents).
func BenchmarkStreamRelay(b *testing.B) {
	inv := &eventsInvoker{event: []byte(`{"statusUpdate":{"taskId":"019a-task-1","contextId":"ctx-1","status":{"state":"TASK_STATE_WORKING","timestamp":"2026-12-03T08:00:00.000001Z"}}}`)}
	d := New(nil, inv, nil)
	call := &exchange.Call{Request: &protocol.Request{ID: jsontext.Value(`"1"`), Version: protocol.V1}}
	bound, events := 0, 0
	bind := func(string, string) *protocol.Error { bound++; return nil }
	b.ReportAllocs()
	inv.n = b.N
	b.ResetTimer()
	if perr := d.stream(b.Context(), call, invocation{call: call}, bind, nil).Stream(func(exchange.Event) error { events++; return nil }); perr != nil {
		b.Fatal(perr)
	}
	if bound != 1 || events != b.N {
		b.Fatalf("bound %d times, %d events", bound, events)
	}
}
