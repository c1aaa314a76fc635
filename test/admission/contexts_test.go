package admission_test

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/test/testutil"
)

// send10 is a JSON-RPC 1.0 SendMessage routed to lookup-invoice, with extra message members.
func send10(extra string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m-c","role":"ROLE_USER",` + extra +
		`"parts":[{"text":"look up invoice INV-1"}],"metadata":{"skillId":"lookup-invoice"}}}}`
}

func bearer10(tok string) http.Header {
	return header("A2A-Version", "1.0", "Content-Type", "application/json", "Authorization", "Bearer "+tok)
}

// TestContextRefusalsLookLikeUnknownTasks: another owner's context gets, at both doors, the very
// answer an id nobody holds gets (for a filter: an empty page) or an unknown task gets (for a
// message): nothing tells a caller that the context exists. A message continuing the caller's own task in another
// of the caller's own contexts is InvalidParams; in another owner's, TaskNotFound as above.
func TestContextRefusalsLookLikeUnknownTasks(t *testing.T) {
	e := startBoth(t)
	cs := classes(t, e)
	owner, other := cs[0], cs[1]
	h := bearer10(other.token)
	same := func(t *testing.T, a, b string) (outcome, outcome) {
		t.Helper()
		ga, _ := e.door(t, http.MethodPost, "/", h, a)
		gb, _ := e.door(t, http.MethodPost, "/", h, b)
		require.False(t, ga.allowed, "%s", ga.body)
		require.Equal(t, "TASK_NOT_FOUND", ga.reason, "%s", ga.body)
		require.Equal(t, gb.reason, ga.reason)
		require.Equal(t, gb.status, ga.status)
		require.Equal(t, gb.body, ga.body, "the answers differ")
		return ga, gb
	}
	list := func(id string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"contextId":"` + id + `"}}`
	}
	t.Run("ListTasks filter", func(t *testing.T) {
		ga, _ := e.door(t, http.MethodPost, "/", h, list(owner.context))
		gb, _ := e.door(t, http.MethodPost, "/", h, list("ctx-nobody-holds"))
		require.True(t, ga.allowed, "%s", ga.body)
		require.JSONEq(t, `{"jsonrpc":"2.0","id":1,"result":{"tasks":[],"nextPageToken":"","pageSize":0,"totalSize":0}}`, ga.body)
		require.Equal(t, gb.body, ga.body, "the answers differ")
		gw, _ := e.door(t, http.MethodGet, "/tasks?contextId="+owner.context, header("A2A-Version", "1.0", "Authorization", "Bearer "+other.token), "")
		unknown, _ := e.door(t, http.MethodGet, "/tasks?contextId=ctx-nobody-holds", header("A2A-Version", "1.0", "Authorization", "Bearer "+other.token), "")
		require.True(t, gw.allowed, "%s", gw.body)
		require.Equal(t, unknown.status, gw.status)
		require.Equal(t, unknown.body, gw.body)
	})
	t.Run("new message in another owner's context", func(t *testing.T) {
		same(t, send10(`"contextId":"`+owner.context+`",`), send10(`"taskId":"task-nobody-holds",`))
	})
	t.Run("own task, another owner's context", func(t *testing.T) {
		same(t, send10(`"taskId":"`+other.task+`","contextId":"`+owner.context+`",`), send10(`"taskId":"`+other.task+`","contextId":"ctx-nobody-holds",`))
	})
	t.Run("own task, another own context", func(t *testing.T) {
		_, mine := e.createTaskIn(t, other, "")
		require.NotEqual(t, other.context, mine)
		gw, _ := e.door(t, http.MethodPost, "/", h, send10(`"taskId":"`+other.task+`","contextId":"`+mine+`",`))
		require.Equal(t, "INVALID_PARAMS", gw.reason, "%s", gw.body)
		require.Contains(t, gw.body, "not the context of the task")
	})
	t.Run("the owner is served in it", func(t *testing.T) {
		task, ctx := e.createTaskIn(t, owner, owner.context)
		require.Equal(t, owner.context, ctx)
		require.NotEqual(t, owner.task, task)
		gw, _ := e.door(t, http.MethodPost, "/", bearer10(owner.token), list(owner.context))
		require.True(t, gw.allowed, "%s", gw.body)
		require.Contains(t, gw.body, owner.task)
		require.Contains(t, gw.body, task)
	})
}

// TestNewContextClaimedOnce: callers racing through both doors to start a conversation under
// the same new context id: exactly one is admitted and holds it; every other is refused as for
// a task that does not exist, then and on every later try, while the holder goes on in it.
func TestNewContextClaimedOnce(t *testing.T) {
	e := startBoth(t)
	const n = 12
	toks := make([]string, n)
	for i := range toks {
		toks[i] = testutil.Token(t, testutil.TokenOptions{Issuer: issuerA, Subject: "racer-" + strconv.Itoa(i), Tenant: "acme", Scopes: []string{"recon.run"}})
	}
	body := []byte(send10(`"contextId":"ctx-contested",`))
	got := make([]outcome, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			h := bearer10(toks[i])
			if i%2 == 0 {
				got[i] = e.extauthz(t, http.MethodPost, "/", h, body)
			} else {
				got[i] = e.gateway(t, http.MethodPost, "/", h, body)
			}
		})
	}
	wg.Wait()
	winner := -1
	for i, o := range got {
		if o.allowed {
			require.Equal(t, -1, winner, "two callers were admitted to one new context")
			winner = i
			continue
		}
		require.Equal(t, "TASK_NOT_FOUND", o.reason, "%s", o.body)
	}
	require.NotEqual(t, -1, winner, "nobody was admitted")
	for i := range n {
		gw, _ := e.door(t, http.MethodPost, "/", bearer10(toks[i]), string(body))
		require.Equal(t, i == winner, gw.allowed, "caller %d: %s", i, gw.body)
	}
}

// TestAnonymousCallersNameNoContext: with anonymous_public, an anonymous caller may send a
// message, but one naming a context needs a credential, like one naming a task: an anonymous
// caller owns nothing, so the conversation would be every anonymous caller's. Refused, the id is
// not claimed: a caller with a credential may still start it.
func TestAnonymousCallersNameNoContext(t *testing.T) {
	cfg := testutil.CopyFinance(t)
	testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
		return strings.Replace(s, "anonymous_public: false", "anonymous_public: true", 1)
	})
	e := connect(t, testutil.Start(t, testutil.LoadDeployment(t, cfg), testutil.StartOptions{ExtAuthz: true}))
	anon := header("A2A-Version", "1.0", "Content-Type", "application/json")
	gw, _ := e.door(t, http.MethodPost, "/", anon, send10(""))
	require.True(t, gw.allowed, "%s", gw.body)
	gw, _ = e.door(t, http.MethodPost, "/", anon, send10(`"contextId":"ctx-anon-1",`))
	require.Equal(t, "UNAUTHENTICATED", gw.reason, "%s", gw.body)
	tok := testutil.Token(t, testutil.TokenOptions{Subject: "alice", Tenant: "acme", Scopes: []string{"recon.run"}})
	gw, _ = e.door(t, http.MethodPost, "/", bearer10(tok), send10(`"contextId":"ctx-anon-1",`))
	require.True(t, gw.allowed, "%s", gw.body)
}
