package admission_test

import (
	"crypto/rand"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/positionstest"
	"github.com/capgate/capgate/sidecar/push"
	"github.com/capgate/capgate/sidecar/push/pushtest"
)

// webhookWays are the ways to set a push config, one position per binding × version ×
// operation of the catalogue that carries a webhook URL (JSON-RPC and HTTP+JSON create,
// SendMessage's configuration, 0.3's /v1/ routes, gRPC), plus 0.3's SendMessage with a push
// config, which names no task and so is not in the catalogue.
func webhookWays() []positionstest.Position {
	var out []positionstest.Position
	seen := map[string]bool{}
	for _, p := range positionstest.All() {
		key := string(p.Binding) + string(p.Version) + string(p.Operation)
		if seen[key] || p.Kind != positionstest.Task || p.Operation == protocol.SendStreamingMessage ||
			!strings.Contains(p.Body, positionstest.URL) {
			continue
		}
		seen[key] = true
		out = append(out, p)
	}
	msg03 := `{"kind":"message","messageId":"m-1","role":"user","parts":[{"kind":"text","text":"look up invoice INV-1"}],"metadata":{"skillId":"lookup-invoice"}}`
	out = append(out,
		positionstest.Position{Binding: protocol.JSONRPC, Version: protocol.V03, Operation: protocol.SendMessage, Where: "params.configuration.pushNotificationConfig",
			Method: http.MethodPost, Target: "/", Body: `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":` + msg03 +
				`,"configuration":{"pushNotificationConfig":{"url":"` + positionstest.URL + `"}}}}`},
		positionstest.Position{Binding: protocol.HTTPJSON, Version: protocol.V03, Operation: protocol.SendMessage, Where: "configuration.pushNotificationConfig",
			Method: http.MethodPost, Target: "/v1/message:send", Body: `{"message":` + msg03 + `,"configuration":{"pushNotificationConfig":{"url":"` + positionstest.URL + `"}}}`})
	return out
}

// TestWebhookURLCorpusAtBothDoors drives the generated corpus of webhook URL spellings
// (sidecar/push/pushtest) through every way to set a push config, at both doors, with
// push.allowed_urls [pushtest.Prefix]. Both doors give the verdict push.Policy gives (tested
// against a normalising server's reading in sidecar/push), refuse alike as INVALID_PARAMS
// and forward nothing refused; what is admitted reaches the handler, and every webhook the
// handler then holds for the owner's task is in canonical form. The six URLs of issue 21 are
// refused everywhere.
func TestWebhookURLCorpusAtBothDoors(t *testing.T) {
	e := startAllowing(t, pushtest.Prefix)
	cs := classes(t, e)
	owner := cs[0]
	policy := push.Policy{Enabled: true, Allowed: []string{pushtest.Prefix}}
	ways := webhookWays()
	require.GreaterOrEqual(t, len(ways), 11, "a way to set a push config is missing")
	corpus := pushtest.Corpus()
	admitted := 0
	for _, p := range ways {
		t.Run(p.Name(), func(t *testing.T) {
			for _, u := range corpus {
				quoted, err := json.Marshal(u)
				require.NoError(t, err)
				method, target, h, body, err := positionstest.RequestFor(p, owner.task, owner.task, owner.tenant, string(quoted[1:len(quoted)-1]), "m-"+rand.Text())
				require.NoError(t, err, u)
				h.Set("Authorization", "Bearer "+owner.token)
				want := policy.CheckURL(u) == nil
				for _, v := range pushtest.Issue21 {
					if u == v {
						require.False(t, want)
					}
				}
				az := e.extauthz(t, method, target, h.Clone(), body)
				require.Equal(t, want, az.allowed, "ext_authz on %q: %s\n%s", u, az, az.body)
				gw := e.gateway(t, method, target, h.Clone(), body)
				if !want {
					require.Equal(t, "INVALID_PARAMS", az.reason, "ext_authz on %q: %s", u, az.body)
					require.Equal(t, az.reason, gw.reason, "the doors disagree on why %q is refused: %s", u, gw.body)
					require.Equal(t, az.status, gw.status, "the doors disagree on the status for %q", u)
					require.False(t, e.forwarded(gw.decision), "a refused webhook %q reached a handler", u)
					require.LessOrEqual(t, len(gw.body), 2048, "the refusal repeats the URL unbounded")
					continue
				}
				admitted++
				if p.Binding == protocol.GRPC && p.Version == protocol.V03 {
					require.Equal(t, "VERSION_NOT_SUPPORTED", gw.reason, "%q: %s", u, gw.body)
					continue
				}
				require.True(t, gw.allowed, "the gateway refused %q that ext_authz admitted: %s", u, gw.body)
				require.True(t, e.forwarded(gw.decision), "the admitted webhook %q did not reach the handler", u)
			}
		})
	}
	require.Positive(t, admitted, "the corpus admits nothing: the success path is untested")

	// What the handler stored for the owner's task: every URL canonical and under the prefix.
	r := e.srv.JSONRPC(t, `{"jsonrpc":"2.0","id":1,"method":"ListTaskPushNotificationConfigs","params":{"taskId":"`+owner.task+`"}}`,
		"Authorization", "Bearer "+owner.token, "A2A-Version", "1.0")
	var out any
	require.NoError(t, json.Unmarshal(r.Body, &out), "%s", r.Body)
	urls := urlsIn(out)
	require.Greater(t, len(urls), 1, "no webhook was stored: %s", r.Body)
	for _, u := range urls {
		c, err := push.Canonical(u)
		require.NoError(t, err, u)
		require.Equal(t, c, u, "the handler holds a webhook in a form capgate did not check")
		require.True(t, push.Matches(u, pushtest.Prefix), "the handler holds %q", u)
	}
}

// urlsIn collects every "url" member's string value in a decoded JSON document.
func urlsIn(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for k, m := range v {
			if s, ok := m.(string); ok && k == "url" {
				out = append(out, s)
			}
			out = append(out, urlsIn(m)...)
		}
	case []any:
		for _, m := range v {
			out = append(out, urlsIn(m)...)
		}
	}
	return out
}
