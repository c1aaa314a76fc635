package main

import (
	"crypto"
	"fmt"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/capgate/capgate/manifests"
	"github.com/capgate/capgate/sidecar/identity"
)

// Identity of the embedded finance example.
const (
	issuer   = "https://idp.example.com"
	audience = "finance-agent"
)

// sendMessageBody is an A2A 1.0 JSON-RPC SendMessage of about 400 bytes: a
// text part and a PDF by URL, as a partner's orchestrator sends it, in its own
// conversation contextID (a context is its owner's: callers do not share one);
// "" sends none, a new conversation.
func sendMessageBody(contextID string) string {
	ctx := ""
	if contextID != "" {
		ctx = `"contextId":"` + contextID + `",`
	}
	return `{"jsonrpc":"2.0","id":"req-7f3a9c","method":"SendMessage","params":{"message":{` +
		`"messageId":"5b1f8a52-3c0e-4d8e-9a51-0c2f7e9d1b44",` + ctx + `"role":"ROLE_USER",` +
		`"parts":[{"text":"Reconcile invoice INV-20931 against its purchase order and list line-level differences."},` +
		`{"url":"https://files.example.com/inv/INV-20931.pdf","mediaType":"application/pdf"}]},` +
		`"configuration":{"acceptedOutputModes":["application/json"]}}}`
}

// demoKey is the finance example's ES256 demo key.
func demoKey() (crypto.Signer, string, error) {
	pem, err := manifests.FS.ReadFile("finance/keys/demo-es256.key.pem")
	if err != nil {
		return nil, "", err
	}
	k, _, err := identity.LoadSigningKey(pem)
	return k, "demo-es256", err
}

// mint signs an ES256 token for sub.
func mint(key crypto.Signer, kid, sub, tenant, scope string) (string, error) {
	now := time.Now()
	return identity.SignDemoToken(key, "ES256", kid, map[string]any{
		"iss": issuer, "aud": audience, "sub": sub, "tenant": tenant, "scope": scope,
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(2 * time.Hour).Unix(),
	})
}

// checkRequest is the CheckRequest Envoy sends for the SendMessage above
// (in contextID; "" for none) with envoy/bootstrap.yaml: pseudo-headers and
// 12 ordinary headers, the body as raw bytes, peer addresses.
func checkRequest(token, contextID string, n int) *authv3.CheckRequest {
	body := sendMessageBody(contextID)
	h := map[string]string{
		":authority":                "finance-agent.example.com",
		":path":                     "/",
		":method":                   "POST",
		":scheme":                   "http",
		"content-type":              "application/json",
		"content-length":            fmt.Sprint(len(body)),
		"a2a-version":               "1.0",
		"authorization":             "Bearer " + token,
		"user-agent":                "a2a-go/2.3.1",
		"accept":                    "application/json",
		"accept-encoding":           "gzip",
		"x-request-id":              "d7c1f3e0-9a4b-4d21-8f0e-2b6a5c4e9f10",
		"x-forwarded-for":           "10.12.0.7",
		"x-forwarded-proto":         "http",
		"traceparent":               "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"x-envoy-auth-partial-body": "false",
	}
	addr := func(ip string, port uint32) *corev3.Address {
		return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: ip, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}}}}
	}
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Source:      &authv3.AttributeContext_Peer{Address: addr("10.12.0.7", 41822)},
		Destination: &authv3.AttributeContext_Peer{Address: addr("10.12.3.4", 8000)},
		Request: &authv3.AttributeContext_Request{Time: timestamppb.Now(), Http: &authv3.AttributeContext_HttpRequest{
			Id: fmt.Sprint(1000 + n), Method: "POST", Path: "/", Host: "finance-agent.example.com", Scheme: "http",
			Protocol: "HTTP/1.1", Headers: h, RawBody: []byte(body), Size: int64(len(body)),
		}},
	}}
}

// marshalled is a pre-encoded CheckRequest.
type marshalled []byte

func encode(r *authv3.CheckRequest) (marshalled, error) { return proto.Marshal(r) }

// result is what the generator reads of a CheckResponse: its status code.
type result struct{ code int32 }

// rawCodec sends pre-encoded requests and reads only the status code of the
// answer, so that the generator spends its CPU on sending, not on protobuf.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*marshalled), nil }

// Unmarshal reads CheckResponse.status (field 1) → google.rpc.Status.code (field 1).
func (rawCodec) Unmarshal(b []byte, v any) error {
	r := v.(*result)
	r.code = 0
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			st, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return protowire.ParseError(m)
			}
			for len(st) > 0 {
				sn, styp, k := protowire.ConsumeTag(st)
				if k < 0 {
					return protowire.ParseError(k)
				}
				st = st[k:]
				if sn == 1 && styp == protowire.VarintType {
					c, j := protowire.ConsumeVarint(st)
					if j < 0 {
						return protowire.ParseError(j)
					}
					r.code = int32(c)
					return nil
				}
				j := protowire.ConsumeFieldValue(sn, styp, st)
				if j < 0 {
					return protowire.ParseError(j)
				}
				st = st[j:]
			}
			return nil
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return protowire.ParseError(m)
		}
		b = b[m:]
	}
	return nil
}
