package attacks_test

import (
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/capgate/capgate/manifests"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/test/testutil"
)

// want is the outcome a case must get on one path.
type want struct {
	// allow: the request must succeed (only for requests that are fine).
	allow bool
	// code: the A2A refusal it must get (JSON-RPC code, reason and, for
	// HTTP+JSON, the HTTP status all follow from it).
	code protocol.Code
	// status, when set, is the exact HTTP status (for refusals net/http
	// makes before capgate sees the request, e.g. 431).
	status int
	// mayAllow: ext_authz may let the request through because the decision
	// belongs to the gateway behind it (routing); the gateway's own outcome
	// is then what protects the capability.
	mayAllow bool
	// notReach: the request may succeed, but the echo handler must not
	// report this capability (a skill hint the caller is not entitled to).
	notReach string
	// grpcCode, when set, is the status the Check call itself must fail
	// with (Envoy then denies).
	grpcCode codes.Code
	// meta: ErrorInfo metadata the refusal must carry.
	meta map[string]string
	// then runs further checks on the answer.
	then func(t *testing.T, r response)
}

// attack is one hostile request and its outcomes on the two paths.
type attack struct {
	name string
	req  request
	gw   want
	// az is the ext_authz outcome; nil: the same as gw.
	az *want
	// gatewayOnly: the request cannot be expressed as a CheckRequest (e.g.
	// net/http refuses it before anything is parsed).
	gatewayOnly bool
}

const v1 = "1.0"

func rpc(method, params string) string {
	if params == "" {
		params = "{}"
	}
	return `{"jsonrpc":"2.0","id":1,"method":` + jsonString(method) + `,"params":` + params + `}`
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// post is a JSON-RPC 1.0 request with the token (none when "").
func post(tok, body string, extra ...string) request {
	h := []string{"Content-Type", "application/json", "A2A-Version", v1}
	if tok != "" {
		h = append(h, "Authorization", bearer(tok))
	}
	return request{method: http.MethodPost, target: "/", headers: append(h, extra...), body: body}
}

// rest is an HTTP+JSON 1.0 request with the token (none when "").
func rest(method, target, tok, body string, extra ...string) request {
	h := []string{"A2A-Version", v1}
	if body != "" {
		h = append(h, "Content-Type", "application/json")
	}
	if tok != "" {
		h = append(h, "Authorization", bearer(tok))
	}
	return request{method: method, target: target, headers: append(h, extra...), body: body}
}

// message is SendMessage params with text, an optional skill hint and task id.
func message(text, skill, taskID string) string {
	m := map[string]any{"messageId": "m-" + text[:min(len(text), 8)], "role": "ROLE_USER", "parts": []any{map[string]any{"text": text}}}
	if skill != "" {
		m["metadata"] = map[string]any{"skillId": skill}
	}
	if taskID != "" {
		m["taskId"] = taskID
	}
	b, _ := json.Marshal(map[string]any{"message": m})
	return string(b)
}

// inContext is SendMessage params with text in context contextID.
func inContext(text, contextID string) string {
	return strings.Replace(message(text, "", ""), `{"message":{`, `{"message":{"contextId":`+jsonString(contextID)+`,`, 1)
}

const getCard = `{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard","params":{}}`

// jwksRSAPublicPEM is the demo JWKS's RSA key as PEM, in the two encodings
// an HMAC-confusion attacker would try.
func jwksRSAPublicPEM(t *testing.T) (pkix, pkcs1 []byte) {
	t.Helper()
	raw, err := manifests.FS.ReadFile("finance/keys/demo.jwks.json")
	require.NoError(t, err)
	var set struct {
		Keys []struct{ Kty, Kid, N, E string } `json:"keys"`
	}
	require.NoError(t, json.Unmarshal(raw, &set))
	for _, k := range set.Keys {
		if k.Kty != "RSA" {
			continue
		}
		n, err := base64.RawURLEncoding.DecodeString(k.N)
		require.NoError(t, err)
		e, err := base64.RawURLEncoding.DecodeString(k.E)
		require.NoError(t, err)
		pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		der, err := x509.MarshalPKIXPublicKey(pub)
		require.NoError(t, err)
		return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(pub)})
	}
	require.FailNow(t, "no RSA key in the demo JWKS")
	return nil, nil
}

func hs256(t *testing.T, secret []byte, kid string, c map[string]any) string {
	t.Helper()
	in := b64(mustJSON(t, map[string]any{"alg": "HS256", "typ": "JWT", "kid": kid})) + "." + b64(mustJSON(t, c))
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(in))
	return in + "." + b64(m.Sum(nil))
}

// fixture is the state the task cases attack: a task owned by the victim, in
// the victim's context.
type fixture struct {
	victimTask    string
	victimContext string
	attacker      string // token of another subject in the victim's tenant
	otherTen      string // token of the victim's subject in another tenant
	partner       string // authenticated, no scopes
	recon         string // holds recon.run
}

func setup(t *testing.T, tg *target) fixture {
	t.Helper()
	victim := rs256(t, map[string]any{"alg": "RS256", "kid": testutil.KeyRS256, "typ": "JWT"}, claims("victim", "acme"))
	r := tg.sendHTTP(t, post(victim, rpc("SendMessage", message("What is the status of invoice INV-20931?", "lookup-invoice", ""))))
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var env struct {
		Result struct {
			Task struct {
				ID        string `json:"id"`
				ContextID string `json:"contextId"`
			} `json:"task"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(r.body, &env), "%s", r.body)
	require.NotEmpty(t, env.Result.Task.ID, "%s", r.body)
	require.NotEmpty(t, env.Result.Task.ContextID, "%s", r.body)
	tok := func(sub, tenant string, scopes ...string) string {
		return rs256(t, map[string]any{"alg": "RS256", "kid": testutil.KeyRS256, "typ": "JWT"}, claims(sub, tenant, scopes...))
	}
	return fixture{
		victimTask:    env.Result.Task.ID,
		victimContext: env.Result.Task.ContextID,
		attacker:      tok("attacker", "acme"),
		otherTen:      tok("victim", "globex"),
		partner:       tok("partner-1", "acme"),
		recon:         tok("partner-1", "acme", "recon.run"),
	}
}

func cases(t *testing.T, f fixture) []attack {
	now := time.Now()
	hdr := map[string]any{"alg": "RS256", "kid": testutil.KeyRS256, "typ": "JWT"}
	withKid := func(kid any) map[string]any { return map[string]any{"alg": "RS256", "kid": kid, "typ": "JWT"} }
	good := claims("partner-1", "acme")
	edit := func(k string, v any) map[string]any {
		c := claims("partner-1", "acme")
		c[k] = v
		return c
	}
	pkix, pkcs1 := jwksRSAPublicPEM(t)
	unauth := want{code: protocol.Unauthenticated}
	notFound := want{code: protocol.NotFound}
	methodNotFound := want{code: protocol.MethodNotFound}
	taskNotFound := want{code: protocol.TaskNotFound}
	parseErr := want{code: protocol.ParseError}

	var out []attack
	add := func(a ...attack) { out = append(out, a...) }

	// --- tokens ---
	add(
		attack{name: "jwt/alg none", req: post(b64([]byte(`{"alg":"none","typ":"JWT"}`))+"."+b64(mustJSON(t, good))+".", getCard), gw: unauth},
		attack{name: "jwt/alg none with kid", req: post(b64([]byte(`{"alg":"none","kid":"demo-rs256"}`))+"."+b64(mustJSON(t, good))+".", getCard), gw: unauth},
		attack{name: "jwt/alg NONE", req: post(b64([]byte(`{"alg":"NONE","kid":"demo-rs256"}`))+"."+b64(mustJSON(t, good))+".", getCard), gw: unauth},
		attack{name: "jwt/HS256 keyed with the RSA public key (PKIX PEM)", req: post(hs256(t, pkix, testutil.KeyRS256, good), getCard), gw: unauth},
		attack{name: "jwt/HS256 keyed with the RSA public key (PKCS1 PEM)", req: post(hs256(t, pkcs1, testutil.KeyRS256, good), getCard), gw: unauth},
		attack{name: "jwt/kid unknown", req: post(rs256(t, withKid("other-key"), good), getCard), gw: unauth},
		attack{name: "jwt/kid path traversal", req: post(rs256(t, withKid("../../etc/passwd"), good), getCard), gw: unauth},
		attack{name: "jwt/kid SQL injection", req: post(rs256(t, withKid("x' OR 1=1"), good), getCard), gw: unauth},
		attack{name: "jwt/kid JSON text", req: post(rs256(t, withKid(`{"a":1}`), good), getCard), gw: unauth},
		attack{name: "jwt/kid JSON object", req: post(rs256(t, withKid(map[string]any{"a": 1}), good), getCard), gw: unauth},
		attack{name: "jwt/expired", req: post(rs256(t, hdr, edit("exp", now.Add(-time.Hour).Unix())), getCard), gw: unauth},
		attack{name: "jwt/not yet valid", req: post(rs256(t, hdr, edit("nbf", now.Add(time.Hour).Unix())), getCard), gw: unauth},
		attack{name: "jwt/wrong issuer", req: post(rs256(t, hdr, edit("iss", "https://evil.example.com")), getCard), gw: unauth},
		attack{name: "jwt/wrong audience", req: post(rs256(t, hdr, edit("aud", "other-agent")), getCard), gw: unauth},
		attack{name: "jwt/1 MiB token", req: post(strings.Repeat("a", 1<<20), getCard), gw: unauth},
		attack{name: "jwt/1 MiB token of dots", req: post(strings.Repeat(".", 1<<20), getCard), gw: unauth},
		attack{name: "jwt/signed token near 1 MiB", req: post(rs256(t, hdr, edit("pad", strings.Repeat("x", 700<<10))), getCard), gw: unauth},
		// Beyond net/http's header limit the server refuses before capgate
		// reads anything; Envoy's own header limit plays that part there.
		attack{name: "jwt/2 MiB token", req: post(strings.Repeat("a", 2<<20), getCard), gw: want{status: http.StatusRequestHeaderFieldsTooLarge},
			// A CheckRequest this large exceeds the gRPC message limit: the call
			// fails and Envoy (failure_mode_allow: false) denies.
			az: &want{grpcCode: codes.ResourceExhausted}},
		attack{name: "jwt/two Authorization headers", req: post(f.partner, getCard, "Authorization", bearer(f.recon)), gw: unauth},
	)

	// --- JSON ---
	add(
		attack{name: "json/method twice", req: post(f.partner, `{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard","method":"SendMessage","params":{}}`), gw: parseErr},
		attack{name: "json/params twice", req: post(f.partner, `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":`+message("hi", "", "")+`,"params":`+message("hi", "reconcile-invoice", "")+`}`), gw: parseErr},
		attack{name: "json/skillId twice", req: post(f.partner, `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"x","role":"ROLE_USER","parts":[{"text":"hi"}],"metadata":{"skillId":"lookup-invoice","skillId":"reconcile-invoice"}}}}`), gw: parseErr},
		attack{name: "json/nesting 10000 deep", req: post(f.partner, `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"x":`+strings.Repeat("[", 10000)+strings.Repeat("]", 10000)+`}}`), gw: want{code: protocol.InvalidRequest}},
		attack{name: "json/body over the limit", req: post(f.partner, `{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard","params":{"pad":"`+strings.Repeat("x", 1<<20)+`"}}`), gw: want{code: protocol.PayloadTooLarge}},
	)

	// --- versions and method names ---
	add(
		attack{name: "version/0.3 name under 1.0", req: post(f.partner, rpc("message/send", message("hi", "", ""))), gw: methodNotFound},
		attack{name: "version/1.0 name without A2A-Version (0.3)", req: request{method: "POST", target: "/", headers: []string{"Content-Type", "application/json", "Authorization", bearer(f.partner)}, body: rpc("GetTask", `{"id":"`+f.victimTask+`"}`)}, gw: methodNotFound},
		attack{name: "version/1.0 name under A2A-Version 0.3", req: request{method: "POST", target: "/", headers: []string{"Content-Type", "application/json", "A2A-Version", "0.3", "Authorization", bearer(f.partner)}, body: getCard}, gw: methodNotFound},
		attack{name: "version/unsupported 2.0", req: request{method: "POST", target: "/", headers: []string{"Content-Type", "application/json", "A2A-Version", "2.0", "Authorization", bearer(f.partner)}, body: getCard}, gw: want{code: protocol.VersionNotSupported}},
		attack{name: "version/unsupported 9.9 with 0.3 names", req: request{method: "POST", target: "/", headers: []string{"Content-Type", "application/json", "A2A-Version", "9.9", "Authorization", bearer(f.partner)}, body: rpc("message/send", message("hi", "", ""))}, gw: want{code: protocol.VersionNotSupported}},
		attack{name: "version/1.0 with a suffix", req: request{method: "POST", target: "/", headers: []string{"Content-Type", "application/json", "A2A-Version", "1.0; q=1", "Authorization", bearer(f.partner)}, body: getCard}, gw: want{code: protocol.VersionNotSupported}},
		// Envoy joins repeated headers: ext_authz sees "1.0,0.3".
		attack{name: "version/header twice", req: post(f.partner, getCard, "A2A-Version", "0.3"), gw: want{code: protocol.InvalidRequest}},
		attack{name: "version/a list", req: request{method: "POST", target: "/", headers: []string{"Content-Type", "application/json", "A2A-Version", "1.0, 0.3", "Authorization", bearer(f.partner)}, body: getCard}, gw: want{code: protocol.InvalidRequest}},
	)
	for name, m := range map[string]string{
		"lower case":               "getextendedagentcard",
		"upper case":               "GETEXTENDEDAGENTCARD",
		"camel case":               "getExtendedAgentCard",
		"Cyrillic a":               "GetExtendedАgentCard",
		"fullwidth":                "ＧetExtendedAgentCard",
		"zero-width joiner":        "GetExtended\u200dAgentCard",
		"zero-width space":         "\u200bGetExtendedAgentCard",
		"trailing space":           "GetExtendedAgentCard ",
		"NUL suffix":               "GetExtendedAgentCard\u0000",
		"0.3 name with odd case":   "Agent/GetAuthenticatedExtendedCard",
		"0.3 name with Cyrillic e": "agent/gеtAuthenticatedExtendedCard",
	} {
		add(attack{name: "method/" + name, req: post(f.partner, rpc(m, "")), gw: methodNotFound})
	}
	add(attack{name: "method/0.3 odd case without version", req: request{method: "POST", target: "/", headers: []string{"Content-Type", "application/json", "Authorization", bearer(f.partner)}, body: rpc("Message/Send", message("hi", "", ""))}, gw: methodNotFound})

	// --- /{tenant} prefixes that try to escape ---
	for name, target := range map[string]string{
		"dot dot":              "/acme/../extendedAgentCard",
		"leading dot dot":      "/../extendedAgentCard",
		"encoded dot dot":      "/acme/%2e%2e/extendedAgentCard",
		"encoded upper DOT":    "/acme/%2E%2E/extendedAgentCard",
		"encoded slash":        "/acme%2F..%2FextendedAgentCard",
		"encoded slash tenant": "/acme%2fglobex/extendedAgentCard",
		"double slash":         "//extendedAgentCard",
		"double slash tenant":  "/acme//extendedAgentCard",
		"backslash":            "/acme\\..\\extendedAgentCard",
		"encoded backslash":    "/acme%5C..%5CextendedAgentCard",
		"dot":                  "/./extendedAgentCard",
		"tasks via dot dot":    "/acme/../tasks/" + f.victimTask,
		"semicolon":            "/acme;x=1/extendedAgentCard",
		"encoded NUL":          "/acme%00/extendedAgentCard",
	} {
		add(attack{name: "tenant/" + name, req: rest(http.MethodGet, target, f.partner, ""), gw: notFound})
	}

	// --- spoofed capgate headers ---
	spoof := []string{"X-Capgate-Principal", "admin", "X-Capgate-Tenant", "acme", "X-Capgate-Decision-Id", "forged", "X-Capgate-Scopes", "recon.run ops.admin"}
	add(
		attack{name: "spoof/anonymous with principal headers", req: post("", getCard, spoof...), gw: unauth},
		attack{name: "spoof/attacker claims the victim", req: post(f.attacker, rpc("GetTask", `{"id":"`+f.victimTask+`"}`), "X-Capgate-Principal", "victim", "X-Capgate-Tenant", "acme"), gw: taskNotFound},
		attack{name: "spoof/scopes header does not entitle", req: post(f.partner, rpc("SendMessage", message("Reconcile invoice INV-20931 against its PO.", "reconcile-invoice", "")), spoof...),
			gw: want{notReach: "reconcile-invoice"}, az: &want{mayAllow: true, then: spoofStripped}},
		attack{name: "spoof/public card with principal headers", req: rest(http.MethodGet, "/.well-known/agent-card.json", "", "", spoof...),
			gw: want{allow: true}, az: &want{allow: true, then: spoofStripped}},
	)

	// --- another caller's task, every task operation ---
	task := f.victimTask
	for _, who := range []struct{ name, tok string }{{"other subject", f.attacker}, {"other tenant", f.otherTen}} {
		p := "task/" + who.name + "/"
		add(
			attack{name: p + "GetTask", req: post(who.tok, rpc("GetTask", `{"id":"`+task+`"}`)), gw: taskNotFound},
			attack{name: p + "CancelTask", req: post(who.tok, rpc("CancelTask", `{"id":"`+task+`"}`)), gw: taskNotFound},
			attack{name: p + "SubscribeToTask", req: post(who.tok, rpc("SubscribeToTask", `{"id":"`+task+`"}`)), gw: taskNotFound},
			attack{name: p + "CreateTaskPushNotificationConfig", req: post(who.tok, rpc("CreateTaskPushNotificationConfig", `{"taskId":"`+task+`","url":"https://evil.example.com/hook"}`)), gw: taskNotFound},
			attack{name: p + "GetTaskPushNotificationConfig", req: post(who.tok, rpc("GetTaskPushNotificationConfig", `{"taskId":"`+task+`","id":"c1"}`)), gw: taskNotFound},
			attack{name: p + "ListTaskPushNotificationConfigs", req: post(who.tok, rpc("ListTaskPushNotificationConfigs", `{"taskId":"`+task+`"}`)), gw: taskNotFound},
			attack{name: p + "DeleteTaskPushNotificationConfig", req: post(who.tok, rpc("DeleteTaskPushNotificationConfig", `{"taskId":"`+task+`","id":"c1"}`)), gw: taskNotFound},
			attack{name: p + "SendMessage with taskId", req: post(who.tok, rpc("SendMessage", message("continue", "", task))), gw: taskNotFound},
			attack{name: p + "SendStreamingMessage with taskId", req: post(who.tok, rpc("SendStreamingMessage", message("continue", "", task))), gw: taskNotFound},
			attack{name: p + "REST GET /tasks/{id}", req: rest(http.MethodGet, "/tasks/"+task, who.tok, ""), gw: taskNotFound},
			attack{name: p + "REST cancel", req: rest(http.MethodPost, "/tasks/"+task+":cancel", who.tok, `{}`), gw: taskNotFound},
			attack{name: p + "REST subscribe", req: rest(http.MethodGet, "/tasks/"+task+":subscribe", who.tok, ""), gw: taskNotFound},
			attack{name: p + "REST tenant-prefixed GET", req: rest(http.MethodGet, "/acme/tasks/"+task, who.tok, ""), gw: taskNotFound},
			attack{name: p + "REST push configs list", req: rest(http.MethodGet, "/tasks/"+task+"/pushNotificationConfigs", who.tok, ""), gw: taskNotFound},
			attack{name: p + "REST push config create", req: rest(http.MethodPost, "/tasks/"+task+"/pushNotificationConfigs", who.tok, `{"url":"https://evil.example.com/hook"}`), gw: taskNotFound},
			attack{name: p + "REST push config get", req: rest(http.MethodGet, "/tasks/"+task+"/pushNotificationConfigs/c1", who.tok, ""), gw: taskNotFound},
			attack{name: p + "REST push config delete", req: rest(http.MethodDelete, "/tasks/"+task+"/pushNotificationConfigs/c1", who.tok, ""), gw: taskNotFound},
			attack{name: p + "REST send with taskId", req: rest(http.MethodPost, "/message:send", who.tok, message("continue", "", task)), gw: taskNotFound},
		)
		// The victim's conversation: a message in its context, or a list filtered by it.
		vc := f.victimContext
		add(
			attack{name: p + "SendMessage in the victim's context", req: post(who.tok, rpc("SendMessage", inContext("what did we discuss", vc))), gw: taskNotFound},
			attack{name: p + "SendStreamingMessage in the victim's context", req: post(who.tok, rpc("SendStreamingMessage", inContext("what did we discuss", vc))), gw: taskNotFound},
			attack{name: p + "REST send in the victim's context", req: rest(http.MethodPost, "/message:send", who.tok, inContext("what did we discuss", vc)), gw: taskNotFound},
			// A filter narrows the caller's own tasks: an empty page, as for a context nobody
			// holds (test/admission compares the bytes).
			attack{name: p + "ListTasks of the victim's context", req: post(who.tok, rpc("ListTasks", `{"contextId":`+jsonString(vc)+`}`)),
				gw: want{allow: true, then: emptyPage}, az: &want{allow: true}},
			attack{name: p + "REST list of the victim's context", req: rest(http.MethodGet, "/tasks?contextId="+url.QueryEscape(vc), who.tok, ""),
				gw: want{allow: true, then: emptyPage}, az: &want{allow: true}},
		)
	}
	add(attack{name: "context/anonymous SendMessage in the victim's context", req: post("", rpc("SendMessage", inContext("what did we discuss", f.victimContext))), gw: unauth})
	// An anonymous caller owns no task: both ask for a credential, before
	// looking the task up, so neither tells whether it exists.
	add(attack{name: "task/anonymous GetTask", req: post("", rpc("GetTask", `{"id":"`+task+`"}`)), gw: unauth})
	// A task that does not exist gets the same answer as someone else's.
	for name, id := range map[string]string{"nonexistent": "00000000-0000-0000-0000-000000000000", "traversal": "../" + task} {
		add(attack{name: "task/" + name + " id GetTask", req: post(f.attacker, rpc("GetTask", `{"id":"`+id+`"}`)), gw: taskNotFound})
	}
	add(attack{name: "task/empty id GetTask", req: post(f.attacker, rpc("GetTask", `{"id":""}`)), gw: want{code: protocol.InvalidParams}})
	add(attack{name: "task/NUL-suffixed id GetTask", req: post(f.attacker, rpc("GetTask", `{"id":"`+task+`\u0000"}`)), gw: want{code: protocol.InvalidParams}})

	// --- skill hints ---
	add(
		attack{name: "hint/extended capability without its scope", req: post(f.partner, rpc("SendMessage", message("Reconcile invoice INV-20931 against its PO.", "reconcile-invoice", ""))),
			gw: want{notReach: "reconcile-invoice"}, az: &want{mayAllow: true}},
		attack{name: "hint/internal capability", req: post(f.recon, rpc("SendMessage", message("Purge the invoice cache", "purge-invoice-cache", ""))),
			gw: want{notReach: "purge-invoice-cache"}, az: &want{mayAllow: true}},
		attack{name: "hint/preview capability not opted in", req: post(f.recon, rpc("SendMessage", message("Forecast our cash flow for the next quarter", "forecast-cashflow", ""))),
			gw: want{notReach: "forecast-cashflow"}, az: &want{mayAllow: true}},
		attack{name: "hint/unknown capability", req: post(f.partner, rpc("SendMessage", message("Show me invoice INV-20931", "../../etc/passwd", ""))),
			gw: want{notReach: "../../etc/passwd"}, az: &want{mayAllow: true}},
		attack{name: "hint/Cyrillic look-alike of an entitled id", req: post(f.partner, rpc("SendMessage", message("Reconcile invoice INV-20931 against its PO.", "reconcile-invoicе", ""))),
			gw: want{notReach: "reconcile-invoice"}, az: &want{mayAllow: true}},
		attack{name: "hint/removed capability", req: post(f.recon, rpc("SendMessage", message("Compare the invoice total with the PO total", "reconcile-invoice-v0", ""))),
			gw: want{code: protocol.UnsupportedOperation, meta: map[string]string{"replacedBy": "reconcile-invoice"}}, az: &want{mayAllow: true}},
	)
	return out
}

// emptyPage: a ListTasks answer (JSON-RPC or HTTP+JSON) lists no task.
func emptyPage(t *testing.T, r response) {
	t.Helper()
	var page struct {
		Tasks  *[]json.RawMessage `json:"tasks"`
		Result *struct {
			Tasks *[]json.RawMessage `json:"tasks"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(r.body, &page), "%s", r.body)
	if page.Result != nil {
		page.Tasks = page.Result.Tasks
	}
	require.NotNil(t, page.Tasks, "not a page: %s", r.body)
	require.Empty(t, *page.Tasks, "%s", r.body)
}

// spoofStripped: when ext_authz allows, every client-sent x-capgate-*
// header is removed and capgate's own are set from the verified caller.
func spoofStripped(t *testing.T, r response) {
	t.Helper()
	if !r.allowed {
		return
	}
	for _, h := range []string{"x-capgate-principal", "x-capgate-tenant", "x-capgate-decision-id", "x-capgate-scopes"} {
		_, set := r.allowHeaders[h]
		require.True(t, set || slices.Contains(r.removed, h), "client-sent %s is neither overwritten nor removed (set %v, removed %v)", h, r.allowHeaders, r.removed)
	}
	require.NotEqual(t, "admin", r.allowHeaders["x-capgate-principal"])
	require.NotEqual(t, "forged", r.allowHeaders["x-capgate-decision-id"])
}
