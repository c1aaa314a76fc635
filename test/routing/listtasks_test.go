package routing_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/tasks"
	"github.com/capgate/capgate/test/testutil"
)

// issuerB is a second issuer trusted beside the finance example's (same
// demo keys, another iss).
const issuerB = "https://idp-b.example.com"

// twoIssuers is the finance example trusting issuerB too.
func twoIssuers(t *testing.T) string {
	t.Helper()
	return financeCopy(t, "  scopes_claim: scope", `    - issuer: `+issuerB+`
      audiences: [finance-agent]
      jwks_file: ./keys/demo.jwks.json
      algorithms: [RS256, ES256]
  scopes_claim: scope`)
}

// lister is alice@acme of the default issuer, who holds recon.run.
var lister = testutil.TokenOptions{Subject: "alice", Tenant: "acme", Scopes: []string{"recon.run"}}

// lookupTask creates a completed task routed to lookup-invoice (by hint) in
// context ctxID ("" for a new one) and returns it.
func lookupTask(t *testing.T, c *a2aclient.Client, ctxID string) *a2a.Task {
	t.Helper()
	m := hinted(text("look up invoice INV-1"), "lookup-invoice")
	m.ContextID = ctxID
	task := sendTask(t, c, m)
	require.Equal(t, a2a.TaskStateCompleted, task.Status.State)
	return task
}

// pageIDs are the ids of a page's tasks.
func pageIDs(res *a2a.ListTasksResponse) []a2a.TaskID {
	out := []a2a.TaskID{}
	for _, task := range res.Tasks {
		out = append(out, task.ID)
	}
	return out
}

// TestListTasksPaging: seven tasks in pages of three come as 3 + 3 + 1,
// newest first, without duplicates, the last page with an empty
// nextPageToken, over JSON-RPC and HTTP+JSON; another caller's tasks are
// neither listed nor counted.
func TestListTasksPaging(t *testing.T) {
	srv := testutil.Start(t, testutil.LoadDeployment(t, ""))
	for _, binding := range []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON} {
		t.Run(string(binding), func(t *testing.T) {
			owner := testutil.TokenOptions{Subject: "pager-" + strings.ToLower(string(binding[:4])), Tenant: "acme", Scopes: []string{"recon.run"}}
			c := srv.Client(t, binding, testutil.Bearer(testutil.Token(t, owner)))
			var made []a2a.TaskID
			for range 7 {
				made = append(made, lookupTask(t, c, "").ID)
			}
			intruder := owner
			intruder.Subject += "-other"
			lookupTask(t, jsonrpc(t, srv, intruder), "")

			var got []a2a.TaskID
			var sizes []int
			token := ""
			for page := 0; ; page++ {
				require.Less(t, page, 4, "paging must end")
				res, err := c.ListTasks(t.Context(), &a2a.ListTasksRequest{PageSize: 3, PageToken: token})
				require.NoError(t, err)
				require.Equal(t, 7, res.TotalSize)
				require.Equal(t, len(res.Tasks), res.PageSize, "pageSize is the number returned")
				got = append(got, pageIDs(res)...)
				sizes = append(sizes, len(res.Tasks))
				token = res.NextPageToken
				if token == "" {
					break
				}
				require.NotContains(t, token, "=", "base64url without padding")
			}
			require.Equal(t, []int{3, 3, 1}, sizes)
			want := make([]a2a.TaskID, 0, len(made))
			for i := len(made) - 1; i >= 0; i-- {
				want = append(want, made[i])
			}
			require.Equal(t, want, got, "every task once, newest first")
		})
	}
}

// TestListTasksPageTokenScope: a page token works for the caller and the
// parameters it was issued for only. Another subject, the same subject in
// another tenant or from another issuer, other filters, and the token
// altered in any one byte are refused as invalid params.
func TestListTasksPageTokenScope(t *testing.T) {
	srv := testutil.Start(t, testutil.LoadDeployment(t, twoIssuers(t)))
	owner := jsonrpc(t, srv, lister)
	lookupTask(t, owner, "ctx-other") // a context of the owner's, for a filter the token was not issued for
	for range 2 {
		lookupTask(t, owner, "")
	}
	first, err := owner.ListTasks(t.Context(), &a2a.ListTasksRequest{PageSize: 1})
	require.NoError(t, err)
	require.NotEmpty(t, first.NextPageToken)
	token := first.NextPageToken

	// Each replaying caller owns a task of their own, so a refusal is the token's doing.
	replays := map[string]testutil.TokenOptions{
		"other subject":                         {Subject: "bob", Tenant: "acme", Scopes: []string{"recon.run"}},
		"same subject, other tenant":            {Subject: "alice", Tenant: "globex", Scopes: []string{"recon.run"}},
		"same subject, no tenant":               {Subject: "alice", Scopes: []string{"recon.run"}},
		"same subject and tenant, other issuer": {Subject: "alice", Tenant: "acme", Scopes: []string{"recon.run"}, Issuer: issuerB},
	}
	refused := func(t *testing.T, err error) {
		t.Helper()
		require.ErrorIs(t, err, a2a.ErrInvalidParams)
		require.Contains(t, err.Error(), "pageToken is not valid for this request")
	}
	for name, tok := range replays {
		t.Run(name, func(t *testing.T) {
			c := jsonrpc(t, srv, tok)
			lookupTask(t, c, "")
			_, err := c.ListTasks(t.Context(), &a2a.ListTasksRequest{PageSize: 1, PageToken: token})
			refused(t, err)
			res, err := c.ListTasks(t.Context(), &a2a.ListTasksRequest{})
			require.NoError(t, err)
			require.Len(t, res.Tasks, 1, "their own task only")
		})
	}
	t.Run("other filters", func(t *testing.T) {
		for name, req := range map[string]*a2a.ListTasksRequest{
			"contextId":        {PageSize: 1, PageToken: token, ContextID: "ctx-other"},
			"status":           {PageSize: 1, PageToken: token, Status: a2a.TaskStateCompleted},
			"includeArtifacts": {PageSize: 1, PageToken: token, IncludeArtifacts: true},
		} {
			_, err := owner.ListTasks(t.Context(), req)
			refused(t, err)
			require.NotEmpty(t, name)
		}
	})
	t.Run("one byte altered", func(t *testing.T) {
		raw, err := base64.RawURLEncoding.DecodeString(token)
		require.NoError(t, err)
		for _, i := range []int{0, 1, len(raw) / 2, len(raw) - 1} {
			alt := append([]byte(nil), raw...)
			alt[i] ^= 0x01
			_, err := owner.ListTasks(t.Context(), &a2a.ListTasksRequest{PageSize: 1, PageToken: base64.RawURLEncoding.EncodeToString(alt)})
			refused(t, err)
		}
		_, err = owner.ListTasks(t.Context(), &a2a.ListTasksRequest{PageSize: 1, PageToken: token[:len(token)-1]})
		refused(t, err)
	})
	t.Run("the owner, another page size", func(t *testing.T) {
		res, err := owner.ListTasks(t.Context(), &a2a.ListTasksRequest{PageSize: 5, PageToken: token})
		require.NoError(t, err)
		require.Len(t, res.Tasks, 2)
		require.Empty(t, res.NextPageToken)
		require.NotContains(t, pageIDs(res), first.Tasks[0].ID)
	})
}

// TestListTasksFilters: contextId, status (1.0 and 0.3 names) and
// includeArtifacts.
func TestListTasksFilters(t *testing.T) {
	srv := testutil.Start(t, testutil.LoadDeployment(t, ""))
	c := jsonrpc(t, srv, lister)
	a1 := lookupTask(t, c, "ctx-a")
	a2 := lookupTask(t, c, "ctx-a")
	b1 := lookupTask(t, c, "ctx-b")
	clar := sendTask(t, c, text("hello there"))
	require.Equal(t, a2a.TaskStateInputRequired, clar.Status.State)

	list := func(t *testing.T, req *a2a.ListTasksRequest) *a2a.ListTasksResponse {
		t.Helper()
		res, err := c.ListTasks(t.Context(), req)
		require.NoError(t, err)
		return res
	}
	t.Run("contextId", func(t *testing.T) {
		res := list(t, &a2a.ListTasksRequest{ContextID: "ctx-a"})
		require.Equal(t, []a2a.TaskID{a2.ID, a1.ID}, pageIDs(res))
		require.Equal(t, 2, res.TotalSize)
		res = list(t, &a2a.ListTasksRequest{ContextID: "ctx-b"})
		require.Equal(t, []a2a.TaskID{b1.ID}, pageIDs(res))
		// A context the caller does not hold — unknown, or another owner's — narrows the
		// list to nothing, the same answer for both (test/admission sweeps the latter).
		res = list(t, &a2a.ListTasksRequest{ContextID: "ctx-none"})
		require.Empty(t, res.Tasks)
		require.Equal(t, 0, res.TotalSize)
	})
	t.Run("status", func(t *testing.T) {
		res := list(t, &a2a.ListTasksRequest{Status: a2a.TaskStateInputRequired})
		require.Equal(t, []a2a.TaskID{clar.ID}, pageIDs(res))
		res = list(t, &a2a.ListTasksRequest{Status: a2a.TaskStateCompleted})
		require.Equal(t, []a2a.TaskID{b1.ID, a2.ID, a1.ID}, pageIDs(res))
		require.Empty(t, list(t, &a2a.ListTasksRequest{Status: a2a.TaskStateWorking}).Tasks)
		res = list(t, &a2a.ListTasksRequest{Status: a2a.TaskStateCompleted, ContextID: "ctx-b"})
		require.Equal(t, []a2a.TaskID{b1.ID}, pageIDs(res))
	})
	t.Run("status in 0.3 form", func(t *testing.T) {
		for state, want := range map[string][]string{"completed": {string(b1.ID), string(a2.ID), string(a1.ID)}, "input-required": {string(clar.ID)}} {
			ids, _, _ := rawList(t, srv, lister, fmt.Sprintf(`{"status":%q}`, state))
			require.Equal(t, want, ids, state)
		}
	})
	t.Run("status, paged", func(t *testing.T) {
		res := list(t, &a2a.ListTasksRequest{Status: a2a.TaskStateCompleted, PageSize: 2})
		require.Equal(t, []a2a.TaskID{b1.ID, a2.ID}, pageIDs(res))
		require.NotEmpty(t, res.NextPageToken)
		res = list(t, &a2a.ListTasksRequest{Status: a2a.TaskStateCompleted, PageSize: 2, PageToken: res.NextPageToken})
		require.Equal(t, []a2a.TaskID{a1.ID}, pageIDs(res))
	})
	t.Run("statusTimestampAfter", func(t *testing.T) {
		after := b1.Status.Timestamp
		require.NotNil(t, after)
		ids, _, _ := rawList(t, srv, lister, fmt.Sprintf(`{"statusTimestampAfter":%q}`, after.Format(time.RFC3339Nano)))
		require.Contains(t, ids, string(b1.ID))
		require.Contains(t, ids, string(clar.ID))
		require.NotContains(t, ids, string(a1.ID))
		ids, _, _ = rawList(t, srv, lister, `{"statusTimestampAfter":"2999-01-01T00:00:00Z"}`)
		require.Empty(t, ids)
	})
	t.Run("includeArtifacts", func(t *testing.T) {
		for _, task := range list(t, &a2a.ListTasksRequest{ContextID: "ctx-a"}).Tasks {
			require.Empty(t, task.Artifacts, "artifacts only when asked for")
		}
		res := list(t, &a2a.ListTasksRequest{ContextID: "ctx-a", IncludeArtifacts: true})
		require.Len(t, res.Tasks, 2)
		for _, task := range res.Tasks {
			require.Equal(t, "lookup-invoice", reportOf(t, task).Capability)
		}
	})
	t.Run("a caller sees only their own", func(t *testing.T) {
		mine := pageIDs(list(t, &a2a.ListTasksRequest{}))
		require.ElementsMatch(t, []a2a.TaskID{a1.ID, a2.ID, b1.ID, clar.ID}, mine)
		for _, o := range []testutil.TokenOptions{
			{Subject: "bob", Tenant: "acme", Scopes: []string{"recon.run"}},
			{Subject: "alice", Tenant: "globex", Scopes: []string{"recon.run"}},
		} {
			res, err := jsonrpc(t, srv, o).ListTasks(t.Context(), &a2a.ListTasksRequest{})
			require.NoError(t, err)
			require.Empty(t, res.Tasks)
			require.Zero(t, res.TotalSize)
		}
	})
}

// rawList sends a JSON-RPC ListTasks with params as the caller o and
// returns the task ids, pageSize and nextPageToken of the answer.
func rawList(t *testing.T, srv *testutil.Server, o testutil.TokenOptions, params string) ([]string, int, string) {
	t.Helper()
	r := srv.JSONRPC(t, `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":`+params+`}`,
		"Authorization", "Bearer "+testutil.Token(t, o), "A2A-Version", "1.0")
	var out struct {
		Result *struct {
			Tasks []struct {
				ID string `json:"id"`
			} `json:"tasks"`
			PageSize      int    `json:"pageSize"`
			TotalSize     int    `json:"totalSize"`
			NextPageToken string `json:"nextPageToken"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &out), "%s", r.Body)
	require.NotNil(t, out.Result, "%s", r.Body)
	ids := []string{}
	for _, task := range out.Result.Tasks {
		ids = append(ids, task.ID)
	}
	return ids, out.Result.PageSize, out.Result.NextPageToken
}

// TestListTasksPageSizeClamped: a pageSize above 100 is coerced to 100
// (AIP-158; the proto gives 100 as the maximum), with a token for the rest.
// The 101 tasks are clarification tasks written to the store, which capgate
// answers without a handler.
func TestListTasksPageSizeClamped(t *testing.T) {
	store := tasks.NewMemory(0)
	t0 := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	for i := range 101 {
		require.NoError(t, store.Bind(t.Context(), tasks.Binding{
			TaskID: fmt.Sprintf("pending-%03d", i), Capability: "lookup-invoice", Pending: true,
			Candidates: []string{"lookup-invoice", "reconcile-invoice"},
			Issuer:     testutil.Issuer, Subject: lister.Subject, Tenant: lister.Tenant,
			CreatedAt: t0.Add(time.Duration(i) * time.Second),
		}))
	}
	srv := startWithStore(t, testutil.LoadDeployment(t, ""), store)
	ids, size, next := rawList(t, srv, lister, `{"pageSize":1000}`)
	require.Len(t, ids, 100)
	require.Equal(t, 100, size)
	require.Equal(t, "pending-100", ids[0], "newest first")
	require.NotEmpty(t, next)
	ids, size, next = rawList(t, srv, lister, `{"pageSize":1000,"pageToken":"`+next+`"}`)
	require.Equal(t, []string{"pending-000"}, ids)
	require.Equal(t, 1, size)
	require.Empty(t, next)
	ids, _, _ = rawList(t, srv, lister, `{}`)
	require.Len(t, ids, 50, "the default page size")
}

// TestListTasksPageTokenAcrossReplicas: two capgates sharing a task store
// and identity.signing_key_file accept each other's page tokens; one with
// another (generated) signing key refuses them. The tasks are
// clarification tasks in the shared store, so no handler state is involved.
func TestListTasksPageTokenAcrossReplicas(t *testing.T) {
	store := tasks.NewMemory(0)
	t0 := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	for i := range 3 {
		require.NoError(t, store.Bind(t.Context(), tasks.Binding{
			TaskID: fmt.Sprintf("pending-%d", i), Capability: "lookup-invoice", Pending: true,
			Candidates: []string{"lookup-invoice", "reconcile-invoice"},
			Issuer:     testutil.Issuer, Subject: lister.Subject, Tenant: lister.Tenant,
			CreatedAt: t0.Add(time.Duration(i) * time.Second),
		}))
	}
	signed := financeCopy(t)
	testutil.EditFile(t, signed, "capgate.yaml", func(s string) string {
		return s + "\nidentity:\n  signing_key_file: ./keys/demo-es256.key.pem\n"
	})
	a := startWithStore(t, testutil.LoadDeployment(t, signed), store)
	b := startWithStore(t, testutil.LoadDeployment(t, signed), store)
	generated := startWithStore(t, testutil.LoadDeployment(t, ""), store)

	ids, _, next := rawList(t, a, lister, `{"pageSize":2}`)
	require.Equal(t, []string{"pending-2", "pending-1"}, ids)
	require.NotEmpty(t, next)
	ids, _, last := rawList(t, b, lister, `{"pageSize":2,"pageToken":"`+next+`"}`)
	require.Equal(t, []string{"pending-0"}, ids, "replica B continues A's listing")
	require.Empty(t, last)

	r := generated.JSONRPC(t, `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"pageSize":2,"pageToken":"`+next+`"}}`,
		"Authorization", "Bearer "+testutil.Token(t, lister), "A2A-Version", "1.0")
	require.Contains(t, string(r.Body), "pageToken is not valid for this request")
	require.Contains(t, string(r.Body), "-32602")
}

// TestListTasksHandlerFaults: a task whose handler fails GetTask, or
// answers with another task, is left out of the list and logged with its
// id cut to 128 bytes; the caller's other tasks are listed.
func TestListTasksHandlerFaults(t *testing.T) {
	failing := "t-fail-" + strings.Repeat("x", 300)
	ids := []string{"t-ok", failing, "t-other"}
	sent := 0
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ID string `json:"id"`
			} `json:"params"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		task := func(id string) string {
			return `{"id":"` + id + `","contextId":"ctx","status":{"state":"TASK_STATE_COMPLETED","timestamp":"2026-12-03T08:00:00Z"}}`
		}
		w.Header().Set("Content-Type", "application/json")
		switch {
		case req.Method == "SendMessage":
			id := ids[sent%len(ids)]
			sent++
			_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"task":%s}}`, req.ID, task(id))
		case req.Method == "GetTask" && req.Params.ID == failing:
			_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"boom"}}`, req.ID)
		case req.Method == "GetTask" && req.Params.ID == "t-other":
			_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, req.ID, task("t-ok"))
		case req.Method == "GetTask":
			_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, req.ID, task(req.Params.ID))
		default:
			_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no"}}`, req.ID)
		}
	}))
	t.Cleanup(up.Close)
	srv := reconAt(t, up.URL)
	c := jsonrpc(t, srv, partner)
	for range ids {
		sendTask(t, c, referenceMessage())
	}
	res, err := c.ListTasks(t.Context(), &a2a.ListTasksRequest{})
	require.NoError(t, err)
	require.Equal(t, []a2a.TaskID{"t-ok"}, pageIDs(res))
	require.Equal(t, 3, res.TotalSize, "an upper bound when a handler fails")

	omitted := srv.Logs.FilterMessage("task omitted from list").All()
	require.Len(t, omitted, 2)
	var logged []string
	for _, e := range omitted {
		task := e.ContextMap()["task"].(string)
		require.LessOrEqual(t, len(task), 128+len("…"))
		logged = append(logged, task)
	}
	require.Contains(t, logged, "t-other")
	require.Contains(t, logged, failing[:128]+"…")
}
