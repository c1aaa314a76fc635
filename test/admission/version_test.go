package admission_test

import (
	"crypto/rand"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/positionstest"
)

// TestVersionNegotiationAtBothDoors: one version rule for the three bindings (A2A 1.0 §3.6).
// The version comes from the A2A-Version header or, on JSON-RPC and HTTP+JSON, the A2A-Version
// request parameter (§3.6.1), or on gRPC the a2a-version metadata; an unsupported version is
// VersionNotSupported on every binding; two different values are InvalidRequest; no value is
// 0.3, except on gRPC, where the service's package names the version (and 0.3 metadata on
// the 1.0 service is VersionNotSupported). Each case is the owner's
// GetTask of its own task, so a version read right is admitted; both doors must agree.
func TestVersionNegotiationAtBothDoors(t *testing.T) {
	e := startBoth(t)
	owner := classes(t, e)[0]
	type source struct {
		name          string
		header, param []string // values of the A2A-Version header lines and request parameters
	}
	sources := []source{
		{name: "none"},
		{name: "header 1.0", header: []string{"1.0"}},
		{name: "header 0.3", header: []string{"0.3"}},
		{name: "header 99.0", header: []string{"99.0"}},
		{name: "header twice", header: []string{"1.0", "1.0"}},
		{name: "param 1.0", param: []string{"1.0"}},
		{name: "param 99.0", param: []string{"99.0"}},
		{name: "param twice", param: []string{"1.0", "1.0"}},
		{name: "param and header agree", header: []string{"1.0"}, param: []string{"1.0"}},
		{name: "param and header differ", header: []string{"0.3"}, param: []string{"1.0"}},
	}
	// want is the rule, written out: the version a source names, or the refusal it gets.
	want := func(b protocol.Binding, s source) (v protocol.Version, reason string) {
		named := append(append([]string(nil), s.header...), s.param...)
		if b == protocol.GRPC {
			named = s.header // gRPC has no request parameters: the query is not read
		}
		switch {
		case len(named) > 1 && (b == protocol.GRPC || len(s.header) > 1 || len(s.param) > 1 || s.header[0] != s.param[0]):
			return "", "INVALID_REQUEST"
		case len(named) == 0 && b == protocol.GRPC:
			return protocol.V1, ""
		case len(named) == 0:
			return protocol.V03, ""
		}
		switch named[0] {
		case "1.0":
			return protocol.V1, ""
		case "0.3":
			if b == protocol.GRPC { // a 0.3 request to the 1.0 service is not served as 1.0
				return "", "VERSION_NOT_SUPPORTED"
			}
			return protocol.V03, ""
		}
		return "", "VERSION_NOT_SUPPORTED"
	}
	for _, p := range positionstest.All() {
		if p.Version != protocol.V1 || p.Operation != protocol.GetTask || p.Kind != positionstest.Task || p.MustAgree {
			continue
		}
		for _, s := range sources {
			t.Run(p.Name()+"/"+s.name, func(t *testing.T) {
				method, target, h, body, err := positionstest.RequestFor(p, owner.task, owner.task, owner.tenant, hook, "m-"+rand.Text())
				require.NoError(t, err)
				h.Del(protocol.VersionHeader)
				for _, v := range s.header {
					h.Add(protocol.VersionHeader, v)
				}
				if len(s.param) > 0 {
					q := url.Values{protocol.VersionParam: s.param}
					target += "?" + q.Encode()
				}
				h.Set("Authorization", "Bearer "+owner.token)
				gw, _ := e.door(t, method, target, h, string(body))
				v, reason := want(p.Binding, s)
				switch {
				case reason != "":
					require.Equal(t, reason, gw.reason, "%s", gw.body)
				case v == protocol.V1:
					require.True(t, gw.allowed, "read as 1.0, the owner's GetTask is admitted: %s", gw.body)
				case p.Binding == protocol.JSONRPC:
					// Read as 0.3, the 1.0 method name is not a 0.3 method.
					require.Equal(t, "METHOD_NOT_FOUND", gw.reason, "%s", gw.body)
				default:
					// HTTP+JSON: the 1.0 route is also a 0.3 route (a2a-go's 0.3 handler serves it).
					require.True(t, gw.allowed, "read as 0.3, the owner's GetTask is admitted: %s", gw.body)
				}
			})
		}
	}
}

// TestGRPCVersionMetadata: a gRPC call naming an unsupported version in its
// metadata never reaches a handler, and the refusal is the spec's VersionNotSupported.
func TestGRPCVersionMetadata(t *testing.T) {
	e := startBoth(t)
	owner := classes(t, e)[0]
	for _, p := range positionstest.All() {
		if p.Binding != protocol.GRPC || p.Version != protocol.V1 || p.Operation != protocol.SendMessage || p.MustAgree {
			continue
		}
		for _, v := range []string{"99.0", "0.3", "2.0"} {
			t.Run(p.Name()+"/"+v, func(t *testing.T) {
				method, target, h, body, err := positionstest.RequestFor(p, owner.task, owner.task, owner.tenant, hook, "m-"+rand.Text())
				require.NoError(t, err)
				h.Set(protocol.VersionHeader, v)
				h.Set("Authorization", "Bearer "+owner.token)
				gw, _ := e.door(t, method, target, h, string(body))
				require.Equal(t, "VERSION_NOT_SUPPORTED", gw.reason, "%s", gw.body)
			})
		}
		break
	}
}

// TestPublicCardPathsAtBothDoors: the public card's two paths — /.well-known/agent-card.json and
// /.well-known/agent.json, where A2A 0.3 clients look — are read by anyone with GET or HEAD at
// both doors (the Envoy configs skip the check for both; ext_authz admits both if asked), and
// any other method there is refused alike.
func TestPublicCardPathsAtBothDoors(t *testing.T) {
	e := startBoth(t)
	for _, path := range []string{protocol.AgentCardPath, protocol.AgentCardPathV03} {
		for _, tc := range []struct {
			method string
			allow  bool
		}{{http.MethodGet, true}, {http.MethodHead, true}, {http.MethodPost, false}, {http.MethodDelete, false}} {
			t.Run(tc.method+" "+path, func(t *testing.T) {
				gw, _ := e.door(t, tc.method, path, header(), "")
				require.Equal(t, tc.allow, gw.allowed, "%s", gw.body)
			})
		}
	}
}

// TestTenantRefusalNamesTheRequestsTenant: a message naming a tenant that is not the caller's is
// refused (Unauthorized, at both doors) with a message that names the tenant the request carried,
// so a client that sends one by mistake sees it: @a2a-js/sdk 1.3.0's gRPC transport writes an
// omitted tenant as "undefined" (docs/interop.md).
func TestTenantRefusalNamesTheRequestsTenant(t *testing.T) {
	e := startBoth(t)
	owner := classes(t, e)[0]
	n := 0
	for _, p := range positionstest.All() {
		if p.Version != protocol.V1 || p.Operation != protocol.SendMessage || p.Kind != positionstest.Tenant || p.MustAgree || p.Binding == protocol.GRPC {
			continue
		}
		t.Run(p.Name(), func(t *testing.T) {
			method, target, h, body, err := positionstest.RequestFor(p, "undefined", owner.task, "undefined", hook, "m-"+rand.Text())
			require.NoError(t, err)
			h.Set("Authorization", "Bearer "+owner.token)
			gw, _ := e.door(t, method, target, h, string(body))
			require.Equal(t, "UNAUTHORIZED", gw.reason, "%s", gw.body)
			require.Contains(t, gw.body, `names tenant \"undefined\", which is not the caller's`)
		})
		n++
	}
	require.Positive(t, n)
}
