package protocol

import "testing"

// BenchmarkOperationLookup is the request path's use of the operation list: a JSON-RPC method
// and a gRPC :path resolved to their operation, and the properties a door asks of it.
func BenchmarkOperationLookup(b *testing.B) {
	methods := []struct {
		v    Version
		name string
	}{{V1, "SendMessage"}, {V1, "GetTaskPushNotificationConfig"}, {V03, "message/send"}, {V03, "tasks/resubscribe"}}
	paths := []string{"/lf.a2a.v1.A2AService/SendMessage", "/a2a.v1.A2AService/TaskSubscription"}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		for _, m := range methods {
			op, err := lookupMethod(m.v, m.name)
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
		for _, p := range paths {
			op, _, err := ParseGRPCPath(p)
			if err != nil {
				b.Fatal(err)
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
