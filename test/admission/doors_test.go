package admission_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/positionstest"
	"github.com/capgate/capgate/test/testutil"
)

// door sends one request to both doors and requires the same verdict and reason.
func (e *env) door(t *testing.T, method, target string, h http.Header, body string) (gw, az outcome) {
	t.Helper()
	az = e.extauthz(t, method, target, h.Clone(), []byte(body))
	gw = e.gateway(t, method, target, h.Clone(), []byte(body))
	require.Equal(t, az.allowed, gw.allowed, "the doors disagree: ext_authz %s, gateway %s\n%s", az, gw, gw.body)
	if !az.allowed {
		require.Equal(t, az.reason, gw.reason, "the doors disagree on why")
		require.Equal(t, az.status, gw.status, "the doors disagree on the HTTP status")
		require.False(t, e.forwarded(gw.decision), "a refused request reached a handler")
	}
	return gw, az
}

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// TestHeadersReadTheSameAtBothDoors: the headers that decide how a request is read or admitted
// (extension negotiation under either name, a repeated Content-Type or A2A-Version, a repeated
// credential) get one answer at both doors.
func TestHeadersReadTheSameAtBothDoors(t *testing.T) {
	cfg := testutil.CopyFinance(t)
	testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
		return strings.Replace(s, "required: false}", "required: true}", 1)
	})
	srv := testutil.Start(t, testutil.LoadDeployment(t, cfg), testutil.StartOptions{ExtAuthz: true})
	e := connect(t, srv)
	const ext = "https://example.com/ext/trace/v1"
	tok := "Bearer " + testutil.Token(t, testutil.TokenOptions{Scopes: []string{"recon.run"}})
	card10 := `{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard","params":{}}`
	card03 := `{"jsonrpc":"2.0","id":1,"method":"agent/getAuthenticatedExtendedCard","params":{}}`
	cases := []struct {
		name   string
		h      http.Header
		body   string
		allow  bool
		reason string
	}{
		{"1.0 with A2A-Extensions", header("A2A-Version", "1.0", "A2A-Extensions", ext), card10, true, ""},
		{"1.0 without the required extension", header("A2A-Version", "1.0"), card10, false, "EXTENSION_SUPPORT_REQUIRED"},
		{"1.0 naming it only under the 0.3 header", header("A2A-Version", "1.0", "X-A2A-Extensions", ext), card10, false, "EXTENSION_SUPPORT_REQUIRED"},
		{"0.3 with X-A2A-Extensions", header("X-A2A-Extensions", ext), card03, true, ""},
		{"0.3 with A2A-Extensions", header("A2A-Extensions", ext), card03, true, ""},
		{"0.3 without it", header(), card03, false, "EXTENSION_SUPPORT_REQUIRED"},
		{"extension among others, repeated header", header("A2A-Version", "1.0", "A2A-Extensions", "urn:x", "A2A-Extensions", ext), card10, true, ""},
		{"repeated Content-Type", header("A2A-Version", "1.0", "A2A-Extensions", ext, "Content-Type", "application/json"), card10, false, "INVALID_REQUEST"},
		{"repeated A2A-Version", header("A2A-Version", "1.0", "A2A-Version", "1.0", "A2A-Extensions", ext), card10, false, "INVALID_REQUEST"},
		{"repeated Authorization", header("A2A-Version", "1.0", "A2A-Extensions", ext, "Authorization", tok), card10, false, "UNAUTHENTICATED"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.h.Clone()
			h.Add("Content-Type", "application/json")
			h.Add("Authorization", tok)
			gw, _ := e.door(t, http.MethodPost, "/", h, tc.body)
			require.Equal(t, tc.allow, gw.allowed, "%s", gw.body)
			require.Equal(t, tc.reason, gw.reason)
		})
	}
}

// TestPushOffAtBothDoors: with push.enabled false (the default), every push-config method and a
// message carrying a push config are PushNotificationNotSupported at both doors, for the task's
// owner too, and nothing reaches a handler; the card says pushNotifications: false.
func TestPushOffAtBothDoors(t *testing.T) {
	srv := testutil.Start(t, testutil.LoadDeployment(t, ""), testutil.StartOptions{ExtAuthz: true})
	e := connect(t, srv)
	require.False(t, srv.PublicCard(t).Capabilities.PushNotifications)
	owner := &class{name: "owner", issuer: issuerA, subject: "alice", tenant: "acme", authenticated: true}
	owner.token = testutil.Token(t, testutil.TokenOptions{Subject: "alice", Tenant: "acme"})
	task := e.createTaskNoPush(t, owner)
	h := header("A2A-Version", "1.0", "Content-Type", "application/json", "Authorization", "Bearer "+owner.token)
	for name, body := range map[string]string{
		"create": `{"taskId":"` + task + `","url":"` + hook + `"}`,
		"get":    `{"taskId":"` + task + `","id":"c-1"}`,
		"list":   `{"taskId":"` + task + `"}`,
		"delete": `{"taskId":"` + task + `","id":"c-1"}`,
	} {
		method := map[string]string{"create": "CreateTaskPushNotificationConfig", "get": "GetTaskPushNotificationConfig",
			"list": "ListTaskPushNotificationConfigs", "delete": "DeleteTaskPushNotificationConfig"}[name]
		t.Run(name, func(t *testing.T) {
			gw, _ := e.door(t, http.MethodPost, "/", h, `{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":`+body+`}`)
			require.Equal(t, "PUSH_NOTIFICATION_NOT_SUPPORTED", gw.reason)
		})
	}
	t.Run("REST list", func(t *testing.T) {
		gw, _ := e.door(t, http.MethodGet, "/tasks/"+task+"/pushNotificationConfigs", header("A2A-Version", "1.0", "Authorization", "Bearer "+owner.token), "")
		require.Equal(t, "PUSH_NOTIFICATION_NOT_SUPPORTED", gw.reason)
	})
	t.Run("message with a push config", func(t *testing.T) {
		gw, _ := e.door(t, http.MethodPost, "/", h, `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m-9","role":"ROLE_USER","parts":[{"text":"look up invoice INV-1"}]},"configuration":{"taskPushNotificationConfig":{"url":"`+hook+`"}}}}`)
		require.Equal(t, "PUSH_NOTIFICATION_NOT_SUPPORTED", gw.reason)
	})
}

// TestPushURLPolicyAtBothDoors: with push on, a webhook outside push.allowed_urls, on a private
// or loopback address, or not https is refused at both doors, wherever the request carries it.
func TestPushURLPolicyAtBothDoors(t *testing.T) {
	e := startBoth(t)
	cs := classes(t, e)
	owner := cs[0]
	h := header("A2A-Version", "1.0", "Content-Type", "application/json", "Authorization", "Bearer "+owner.token)
	h03 := header("Content-Type", "application/json", "Authorization", "Bearer "+owner.token)
	for _, u := range []string{"https://evil.example.net/hook", "http://hooks.example.com/a2a", "https://127.0.0.1/hook",
		"https://169.254.169.254/latest/meta-data", "https://[::1]/x", "https://2130706433/x", "ftp://hooks.example.com/a2a",
		"https://hooks.example.com.evil.net/a2a", "https://user@hooks.example.com/a2a"} {
		t.Run(u, func(t *testing.T) {
			gw, _ := e.door(t, http.MethodPost, "/", h, `{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"`+owner.task+`","url":"`+u+`"}}`)
			require.Equal(t, "INVALID_PARAMS", gw.reason, "%s", gw.body)
			gw, _ = e.door(t, http.MethodPost, "/", h, `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m-9","role":"ROLE_USER","parts":[{"text":"look up invoice INV-1"}]},"configuration":{"taskPushNotificationConfig":{"url":"`+u+`"}}}}`)
			require.Equal(t, "INVALID_PARAMS", gw.reason, "%s", gw.body)
			// 0.3's HTTP+JSON binding: the JSON-RPC-shaped message with the push config under its
			// ProtoJSON name, which a ProtoJSON reader behind ext_authz takes from the same bytes.
			for _, name := range []string{"pushNotification", "push_notification"} {
				gw, _ = e.door(t, http.MethodPost, "/v1/message:send", h03, `{"message":{"kind":"message","messageId":"m-9","role":"user",`+
					`"parts":[{"kind":"text","text":"look up invoice INV-1"}]},"configuration":{"`+name+`":{"url":"`+u+`"}}}`)
				require.Equal(t, "INVALID_PARAMS", gw.reason, "%s", gw.body)
			}
		})
	}
	gw, _ := e.door(t, http.MethodPost, "/", h, `{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"`+owner.task+`","url":"`+hook+`/sub"}}`)
	require.True(t, gw.allowed, "%s", gw.body)
}

// TestJSONRPCAuthStatusAtBothDoors: with auth.jsonrpc_http_status 401, a JSON-RPC authentication
// or authorization failure takes its HTTP status at both doors (the body stays the JSON-RPC error).
func TestJSONRPCAuthStatusAtBothDoors(t *testing.T) {
	cfg := testutil.CopyFinance(t)
	testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
		return strings.Replace(s, "  anonymous_public: false", "  anonymous_public: false\n  jsonrpc_http_status: 401", 1)
	})
	e := connect(t, testutil.Start(t, testutil.LoadDeployment(t, cfg), testutil.StartOptions{ExtAuthz: true}))
	card := `{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard","params":{}}`
	gw, _ := e.door(t, http.MethodPost, "/", header("A2A-Version", "1.0", "Content-Type", "application/json"), card)
	require.Equal(t, http.StatusUnauthorized, gw.status)
	require.Equal(t, "UNAUTHENTICATED", gw.reason)
	send := `{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`
	gw, _ = e.door(t, http.MethodPost, "/", header("A2A-Version", "1.0", "Content-Type", "application/json"), send)
	require.Equal(t, http.StatusUnauthorized, gw.status, "a streaming call gets the plain body with the status")
}

// TestLimitsOfAKnownCapabilityAtBothDoors: when a request's capability is known before routing —
// a message continuing a bound task — its limits (here apply-remittance's max_parts: 4) are
// refused alike at both doors, naming the limit; within them the message is served.
func TestLimitsOfAKnownCapabilityAtBothDoors(t *testing.T) {
	e := connect(t, testutil.Start(t, testutil.LoadDeployment(t, ""), testutil.StartOptions{ExtAuthz: true}))
	tok := testutil.Token(t, testutil.TokenOptions{Subject: "alice", Tenant: "acme", Scopes: []string{"payments.apply"}})
	h := header("A2A-Version", "1.0", "Content-Type", "application/json", "Authorization", "Bearer "+tok)
	first := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m-1","role":"ROLE_USER",` +
		`"parts":[{"text":"apply this remittance advice"}],"metadata":{"skillId":"apply-remittance"}}}}`
	r := e.srv.JSONRPC(t, first, "A2A-Version", "1.0", "Authorization", "Bearer "+tok)
	var out struct {
		Result struct {
			Task struct {
				ID string `json:"id"`
			} `json:"task"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &out), "%s", r.Body)
	require.NotEmpty(t, out.Result.Task.ID, "%s", r.Body)
	parts := func(n int) string {
		ps := make([]string, n)
		for i := range ps {
			ps[i] = `{"text":"line ` + strconv.Itoa(i) + `"}`
		}
		return `{"jsonrpc":"2.0","id":2,"method":"SendMessage","params":{"message":{"messageId":"m-2","role":"ROLE_USER","taskId":"` +
			out.Result.Task.ID + `","parts":[` + strings.Join(ps, ",") + `]}}}`
	}
	gw, _ := e.door(t, http.MethodPost, "/", h, parts(5))
	require.False(t, gw.allowed)
	require.Contains(t, gw.body, "max_parts", "the refusal names the limit")
	// Within the limit: admitted at ext_authz, and forwarded by the gateway (the echo's task is
	// complete, so the handler itself then refuses to continue it).
	require.True(t, e.extauthz(t, http.MethodPost, "/", h.Clone(), []byte(parts(4))).allowed)
	gw = e.gateway(t, http.MethodPost, "/", h.Clone(), []byte(parts(4)))
	require.True(t, e.forwarded(gw.decision), "forwarded: %s", gw.body)
}

// TestGRPCOffAtBothDoors: with agent.grpc false, every gRPC call — either service, every
// operation and position, with a credential or without — is refused at both doors alike
// (UNIMPLEMENTED, METHOD_NOT_FOUND): the served-binding rule is admission's, not the gateway's.
func TestGRPCOffAtBothDoors(t *testing.T) {
	d := testutil.LoadDeployment(t, "")
	off := false
	d.Config.Agent.GRPC = &off
	e := connect(t, testutil.Start(t, d, testutil.StartOptions{ExtAuthz: true}))
	token := testutil.Token(t, testutil.Partner())
	n := 0
	for _, p := range positionstest.All() {
		if p.Binding != protocol.GRPC {
			continue
		}
		for _, authorized := range []bool{true, false} {
			t.Run(p.Name()+"/"+strconv.FormatBool(authorized), func(t *testing.T) {
				n++
				method, target, h, body, err := positionstest.RequestFor(p, "t-1", "t-1", testutil.Partner().Tenant, hook, "grpc-off-"+strconv.Itoa(n))
				require.NoError(t, err)
				if authorized {
					h.Set("Authorization", "Bearer "+token)
				}
				gw, _ := e.door(t, method, target, h, string(body))
				require.Equal(t, "METHOD_NOT_FOUND", gw.reason, "%s", gw.body)
			})
		}
	}
}
