package protocol

import "testing"

// BenchmarkOperationLookup is the request path's use of the operation list: a JSON-RPC method
// and a gRPC method resolved to their operation, and the properties a door asks of it.
func BenchmarkOperationLookup(b *testing.B) {
	methods := []struct {
		v    Version
		name string
	}{{V1, "SendMessage"}, {V1, "GetTaskPushNotificationConfig"}, {V03, "message/send"}, {V03, "tasks/resubscribe"}}
	grpcMethods := []struct {
		v    Version
		name string
	}{{V1, "SendMessage"}, {V03, "TaskSubscription"}}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		for _, m := range methods {
			op, err := JSONRPCOperation(m.v, m.name)
			if err != nil {
				b.Fatal(err)
			}
			if op.Streaming() {
				n++
			}
			if op.Message() {
				n++
			}
		}
		for _, m := range grpcMethods {
			op, ok := GRPCOperation(m.v, m.name)
			if !ok {
				b.Fatal(m.name)
			}
			if op.Streaming() {
				n++
			}
		}
	}
	if n == 0 {
		b.Fatal("no operation streams")
	}
}
