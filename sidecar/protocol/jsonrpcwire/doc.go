// Package jsonrpcwire is A2A's JSON-RPC 2.0 binding, both versions (1.0's method names and
// 0.3's): it reads a request's envelope (ParseJSONRPC: id, jsonrpc, method) and its params
// through the JSON reading both JSON bindings share (jsonmodel), and writes the binding's
// envelope — a result (AppendResult), an error in the data shape the caller reads
// (MarshalError, MarshalErrorIn), a request capgate sends a handler (MarshalRequest) —, its
// answers (Writer: one response, or a stream of Server-Sent Events each holding one) and its
// refusal (Refusal). The request model, the operation table and the error codes are
// protocol's; the other bindings are httpjsonwire's and grpcwire's; wire picks a request's.
package jsonrpcwire
