// Package httpjsonwire is A2A's HTTP+JSON binding, both versions: the 1.0 routes (the A2A 1.0
// proto's google.api.http annotations, each also under a /{tenant} prefix) and 0.3's — the same
// routes, as a2a-go's 0.3 compatibility handler serves them, and the 0.3 specification's /v1/
// routes, whose bodies are the 0.3 proto's messages in ProtoJSON (rest03.go). It reads a
// request into the request model (ParseHTTP: the route, the query, and the body through the
// JSON reading both JSON bindings share, jsonmodel), builds the requests capgate sends an
// HTTP+JSON handler (HTTPCall, HTTPQueryFields), and writes the answer (Writer: one JSON body
// or a stream of Server-Sent Events), its error body (MarshalStatus: google.rpc.Status) and
// its refusal (Refusal). The request model, the operation table and the error codes are
// protocol's; the other bindings are jsonrpcwire's and grpcwire's; wire picks a request's.
package httpjsonwire
