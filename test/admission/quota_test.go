package admission_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/positionstest"
	"github.com/capgate/capgate/test/testutil"
)

// startQuotas starts the finance deployment with two plans: "free" (scope plan.free) admits one
// call an hour per caller; "paid" (scope plan.paid) ten thousand.
func startQuotas(t *testing.T) *env {
	t.Helper()
	cfg := testutil.CopyFinance(t)
	testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
		s, _, _ = strings.Cut(s, "\nquotas:\n") // the example's plans end the file: replace them
		return s + `
quotas:
  plans:
    - id: free
      grant: {scopes: [plan.free]}
      budget: {calls: 1, per: 1h}
    - id: paid
      grant: {scopes: [plan.paid]}
      budget: {calls: 10000, per: 1h}
`
	})
	return connect(t, testutil.Start(t, testutil.LoadDeployment(t, cfg), testutil.StartOptions{ExtAuthz: true}))
}

// quotaPositions are the positions of the request model whose capability admission knows, so
// both doors count them: a message continuing a task (every binding and version) and a method
// an extension adds (admission.ChargedHere).
func quotaPositions(t *testing.T) []positionstest.Position {
	t.Helper()
	var out []positionstest.Position
	for _, p := range positionstest.All() {
		switch {
		case p.Kind != positionstest.Task:
		case p.Operation.Message() && continues(p),
			p.Operation == protocol.ExtensionMethod && p.Where == "params.taskId":
			out = append(out, p)
		}
	}
	bindings := map[protocol.Binding]bool{}
	for _, p := range out {
		bindings[p.Binding] = true
	}
	require.Len(t, bindings, 3, "every binding")
	return out
}

// continues reports whether p is the task id of a message continuing that task.
func continues(p positionstest.Position) bool {
	return strings.HasSuffix(p.Where, "message.taskId") || strings.HasSuffix(p.Where, "message.task_id") || p.Where == "request.task_id"
}

// TestQuotaBothDoors: for every binding × version × operation position where admission knows
// the capability, a caller on the free plan who has used its one call is refused at both doors
// before any handler, in the binding's shape — RESOURCE_EXHAUSTED: HTTP 429 (HTTP+JSON), a
// JSON-RPC error (HTTP 200; 429 for a 1.0 stream refused before it starts), gRPC status 8 — with the same reason and status at both doors, a
// Retry-After and the RateLimit fields naming plan.free; a caller on the paid plan is admitted
// at both, with the RateLimit fields of plan.paid. 0.3 gRPC is refused VERSION_NOT_SUPPORTED at
// both doors before any quota.
func TestQuotaBothDoors(t *testing.T) {
	e := startQuotas(t)
	n := 0
	caller := func(t *testing.T, plan string) *class {
		n++
		c := &class{name: plan + "-" + strconv.Itoa(n), issuer: issuerA, subject: "q-" + strconv.Itoa(n), tenant: "acme", authenticated: true}
		c.token = testutil.Token(t, testutil.TokenOptions{Issuer: c.issuer, Subject: c.subject, Tenant: c.tenant, Scopes: []string{"recon.run", plan}})
		c.task, c.context = e.createTaskIn(t, c, "") // the free plan's one call
		return c
	}
	for _, p := range quotaPositions(t) {
		t.Run(p.Name(), func(t *testing.T) {
			for _, plan := range []string{"plan.free", "plan.paid"} {
				c := caller(t, plan)
				method, target, h, body, err := positionstest.RequestFor(p, c.task, c.task, c.tenant, hook, "quota-"+strconv.Itoa(n))
				require.NoError(t, err)
				h.Set("Authorization", "Bearer "+c.token)
				if p.Operation == protocol.ExtensionMethod {
					h.Set(protocol.ExtensionsHeader, positionstest.ExtensionURI)
				}
				az := e.extauthz(t, method, target, h.Clone(), body)
				gw := e.gateway(t, method, target, h.Clone(), body)
				if p.Binding == protocol.GRPC && p.Version == protocol.V03 {
					// 0.3 gRPC is not served: refused at both doors before its quotas are counted.
					require.Equal(t, "VERSION_NOT_SUPPORTED", az.reason, "%s", az.body)
					require.Equal(t, az.reason, gw.reason, "the doors disagree on why")
					continue
				}
				if plan == "plan.paid" {
					require.True(t, az.allowed, "ext_authz: %s\n%s", az, az.body)
					require.Contains(t, az.header.Get(protocol.HeaderRateLimitPolicy), `"plan.paid";q=10000;w=3600`)
					require.NotEqual(t, "RESOURCE_EXHAUSTED", gw.reason, "the paid caller is not throttled at the gateway: %s", gw.body)
					continue
				}
				require.False(t, az.allowed, "ext_authz admitted an over-quota call")
				require.Equal(t, "RESOURCE_EXHAUSTED", az.reason, "%s", az.body)
				require.False(t, gw.allowed, "the gateway admitted an over-quota call")
				require.Equal(t, az.reason, gw.reason, "the doors disagree on why")
				require.Equal(t, az.status, gw.status, "the doors disagree on the status")
				switch p.Binding {
				case protocol.HTTPJSON:
					require.Equal(t, 429, az.status)
				case protocol.GRPC:
					require.Equal(t, 8, az.status, "gRPC RESOURCE_EXHAUSTED")
				case protocol.JSONRPC:
					want := 200
					if p.Operation.Streaming() && p.Version == protocol.V1 {
						want = 429 // a 1.0 stream refused before it starts: a plain error with its status
					}
					require.Equal(t, want, az.status)
					require.Contains(t, az.body, `"code":-32029`)
				}
				for door, o := range map[string]outcome{"extauthz": az, "gateway": gw} {
					require.NotEmpty(t, o.header.Get("Retry-After"), "%s: Retry-After", door)
					require.True(t, strings.HasPrefix(o.header.Get(protocol.HeaderRateLimit), `"plan.free";r=0;t=`), "%s: %v", door, o.header)
					require.False(t, e.forwarded(o.decision), "%s: the handler ran for a refused call", door)
				}
			}
		})
	}
}

// TestQuotaNewMessage: a new message's capability is the router's choice, so ext_authz admits
// it uncounted and the gateway counts it once routed, before the handler: a free caller who has
// used its one call is refused RESOURCE_EXHAUSTED at the gateway on every binding and version
// the gateway serves (a 0.3 gRPC request is answered VERSION_NOT_SUPPORTED first).
func TestQuotaNewMessage(t *testing.T) {
	e := startQuotas(t)
	n := 0
	seen := map[string]bool{}
	for _, p := range positionstest.All() {
		if !p.Operation.Message() || p.Kind != positionstest.Task || !strings.Contains(p.Where, "eference") || !strings.HasSuffix(p.Where, "[0]") {
			continue
		}
		t.Run(p.Name(), func(t *testing.T) {
			n++
			c := &class{name: "new-" + strconv.Itoa(n), issuer: issuerA, subject: "new-" + strconv.Itoa(n), tenant: "acme", authenticated: true}
			c.token = testutil.Token(t, testutil.TokenOptions{Issuer: c.issuer, Subject: c.subject, Tenant: c.tenant, Scopes: []string{"recon.run", "plan.free"}})
			c.task, c.context = e.createTaskIn(t, c, "")
			method, target, h, body, err := positionstest.RequestFor(p, c.task, c.task, c.tenant, hook, "new-quota-"+strconv.Itoa(n))
			require.NoError(t, err)
			h.Set("Authorization", "Bearer "+c.token)
			az := e.extauthz(t, method, target, h.Clone(), body)
			gw := e.gateway(t, method, target, h.Clone(), body)
			if p.Binding == protocol.GRPC && p.Version == protocol.V03 {
				require.Equal(t, "VERSION_NOT_SUPPORTED", az.reason, "0.3 gRPC is not served, at either door")
				require.Equal(t, "VERSION_NOT_SUPPORTED", gw.reason)
				return
			}
			require.True(t, az.allowed, "ext_authz cannot count a message it cannot route: %s", az)
			require.Equal(t, "RESOURCE_EXHAUSTED", gw.reason, "%s", gw.body)
			require.NotEmpty(t, gw.header.Get("Retry-After"))
			require.False(t, e.forwarded(gw.decision), "the handler ran for a refused call")
			seen[string(p.Binding)+"/"+string(p.Version)] = true
		})
	}
	require.Len(t, seen, 5, "jsonrpc, http+json in 1.0 and 0.3, grpc 1.0: %v", seen)
}

// TestQuotaCancelAndReads: cancelling and reading one's own task are free by default — a caller
// past its budget still gets through both doors — and charged against the task's capability
// with quotas.charge.cancel and quotas.charge.reads, when both doors refuse them alike.
func TestQuotaCancelAndReads(t *testing.T) {
	for _, charged := range []bool{false, true} {
		t.Run("charged="+strconv.FormatBool(charged), func(t *testing.T) {
			cfg := testutil.CopyFinance(t)
			testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
				s, _, _ = strings.Cut(s, "\nquotas:\n")
				s += "\nquotas:\n  plans:\n    - id: free\n      grant: {scopes: [plan.free]}\n      budget: {calls: 1, per: 1h}\n"
				if charged {
					s += "  charge: {cancel: true, reads: true}\n"
				}
				return s
			})
			e := connect(t, testutil.Start(t, testutil.LoadDeployment(t, cfg), testutil.StartOptions{ExtAuthz: true}))
			c := &class{name: "reader", issuer: issuerA, subject: "reader", tenant: "acme", authenticated: true}
			c.token = testutil.Token(t, testutil.TokenOptions{Issuer: c.issuer, Subject: c.subject, Tenant: c.tenant, Scopes: []string{"recon.run", "plan.free"}})
			c.task, _ = e.createTaskIn(t, c, "") // the one call
			for _, method := range []string{"GetTask", "CancelTask"} {
				body := []byte(`{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{"id":"` + c.task + `"}}`)
				h := http.Header{"Content-Type": {"application/json"}, "A2a-Version": {"1.0"}, "Authorization": {"Bearer " + c.token}}
				az := e.extauthz(t, http.MethodPost, "/", h.Clone(), body)
				gw := e.gateway(t, http.MethodPost, "/", h.Clone(), body)
				if !charged {
					require.True(t, az.allowed, "%s is free: %s", method, az)
					require.NotEqual(t, "RESOURCE_EXHAUSTED", gw.reason, "%s is free: %s", method, gw.body)
					continue
				}
				require.Equal(t, "RESOURCE_EXHAUSTED", az.reason, "%s: %s", method, az.body)
				require.Equal(t, az.reason, gw.reason, "%s: the doors disagree", method)
			}
		})
	}
}
