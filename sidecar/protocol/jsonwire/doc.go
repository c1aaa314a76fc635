// Package jsonwire is A2A's JSON bindings, JSON-RPC 2.0 and HTTP+JSON, in both versions (1.0,
// and 0.3 with its ProtoJSON form of HTTP+JSON): reading a request into the request model (the
// body checked whole before a member is read, every params member read against its version's
// schema, A2A 1.0 params also against the proto request message), how an admitted request is
// forwarded to a handler (protocol.Forwarder), and writing its answer, one JSON body or a
// stream of Server-Sent Events (Writer). The request model, the operation table, the error
// codes and the refusal shapes are protocol's; gRPC is grpcwire's; wire picks a request's
// binding.
package jsonwire
