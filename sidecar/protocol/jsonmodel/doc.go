// Package jsonmodel is the JSON form of A2A's request model that its two JSON bindings share:
// JSON-RPC's params and HTTP+JSON's body are one object in both versions, so one reader checks
// a body whole before a member is read (Reader.CheckBody), reads the params into the request
// model against the operation's schema (Reader.Params: the 1.0 proto request message, the 0.3
// JSON schema), makes an A2A 1.0 request forward its params re-encoded from the proto message it
// was checked as (Reader.Canonicalize, protocol.Forwarder), and writes the error details both
// bindings' error bodies carry (AppendErrorDetails). The bindings' envelopes, routes and
// answers are theirs: jsonrpcwire, httpjsonwire. A gRPC request's message is read through it too
// (MessageOf), so every binding reads a message's parts, media types and skill hint alike.
package jsonmodel
