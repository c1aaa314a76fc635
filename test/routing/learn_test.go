package routing_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/tasks"
	"github.com/capgate/capgate/sidecar/tasks/redisstore"
	"github.com/capgate/capgate/test/replicas/redisproc"
	"github.com/capgate/capgate/test/testutil"
)

// learnFirst is a vague first message carrying identifiers of every kind
// redaction removes; learnKept is what of it a candidate keeps.
const (
	learnFirst = "hello there, mail jane.doe@example.com about 4411 and INV-20931 at https://pay.example.com/x?id=7"
	learnKept  = "hello there, mail <email> about <number> and <id> at <url>"
)

// financeCaps are the capabilities of the finance example.
var financeCaps = []string{"apply-remittance", "extract-invoice-fields", "forecast-cashflow", "lookup-invoice",
	"lookup-invoice-v1", "purge-invoice-cache", "reconcile-invoice", "reconcile-invoice-v0"}

// allExamples lists every candidate of the finance capabilities in x.
func allExamples(t *testing.T, x tasks.Examples) map[string][]tasks.Example {
	t.Helper()
	out := map[string][]tasks.Example{}
	for _, id := range financeCaps {
		got, err := x.ExamplesOf(t.Context(), id, time.Hour)
		require.NoError(t, err)
		if len(got) > 0 {
			out[id] = got
		}
	}
	return out
}

// TestLearnFromClarifications (issue 36): with router.learn.capture on, a
// clarification answered through each binding (and by a stream) adds one
// candidate example — the first message's text, redacted, under the chosen
// capability, with nothing of the caller — on the memory and the Redis store;
// with it off nothing is stored; a capability's routing.learn overrides the
// deployment's setting either way.
func TestLearnFromClarifications(t *testing.T) {
	type storeCase struct {
		name string
		open func(t *testing.T) (tasks.Store, func() []string)
	}
	storesUnderTest := []storeCase{
		{"memory", func(*testing.T) (tasks.Store, func() []string) { return tasks.NewMemory(0), nil }},
		{"redis", func(t *testing.T) (tasks.Store, func() []string) {
			srv := redisproc.Start(t)
			r, err := redisstore.Dial(t.Context(), srv.URL(0))
			require.NoError(t, err)
			t.Cleanup(func() { _ = r.Close() })
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
			t.Cleanup(func() { _ = rdb.Close() })
			// dump is every key and value of the examples Redis holds.
			dump := func() []string {
				var out []string
				keys, err := rdb.Keys(t.Context(), "capgate:examples:*").Result()
				require.NoError(t, err)
				for _, k := range keys {
					out = append(out, k)
					if strings.HasSuffix(k, ":order") {
						ms, err := rdb.ZRange(t.Context(), k, 0, -1).Result()
						require.NoError(t, err)
						out = append(out, ms...)
						continue
					}
					h, err := rdb.HGetAll(t.Context(), k).Result()
					require.NoError(t, err)
					for f, v := range h {
						out = append(out, f, v)
					}
				}
				return out
			}
			return r, dump
		}},
	}
	bindings := []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON, a2a.TransportProtocolGRPC}
	tok := testutil.Token(t, partner)

	// answer sends the vague first message through c, answers the question
	// with its second candidate and returns that candidate's id.
	answer := func(t *testing.T, c *a2aclient.Client, stream bool) string {
		t.Helper()
		task := sendTask(t, c, text(learnFirst))
		require.Equal(t, a2a.TaskStateInputRequired, task.Status.State)
		b, err := json.Marshal(task.Status.Message.Parts[1].Content.(a2a.Data).Value)
		require.NoError(t, err)
		var list struct{ Candidates []struct{ ID string } }
		require.NoError(t, json.Unmarshal(b, &list))
		require.GreaterOrEqual(t, len(list.Candidates), 2)
		want := list.Candidates[1].ID
		reply := continuing(text("2"), task.ID)
		if !stream {
			res := sendTask(t, c, reply)
			require.Equal(t, want, reportOf(t, res).Capability)
			return want
		}
		n := 0
		for ev, err := range c.SendStreamingMessage(t.Context(), &a2a.SendMessageRequest{Message: reply}) {
			require.NoError(t, err)
			_ = ev
			n++
		}
		require.Positive(t, n)
		return want
	}

	for _, sc := range storesUnderTest {
		t.Run(sc.name, func(t *testing.T) {
			t.Run("capture on", func(t *testing.T) {
				store, dump := sc.open(t)
				srv := startWithStore(t, testutil.LoadDeployment(t, financeCopy(t, "router: {threshold: 0.6}", "router: {threshold: 0.6, learn: {capture: true}}")), store)
				x := store.(tasks.Examples)
				chosen := map[string]int{}
				for _, b := range bindings {
					c := srv.Client(t, b, testutil.Bearer(tok))
					chosen[answer(t, c, false)]++
				}
				chosen[answer(t, jsonrpc(t, srv, partner), true)]++
				got := allExamples(t, x)
				require.Len(t, got, len(chosen))
				for id, n := range chosen {
					require.Len(t, got[id], 1, id)
					require.Equal(t, learnKept, got[id][0].Text)
					require.Equal(t, n, got[id][0].Count, "one candidate per answer")
				}
				if dump != nil {
					for _, s := range dump() {
						for _, who := range []string{partner.Subject, "example.com", "4411", "20931", "jane"} {
							require.NotContains(t, s, who, "the store holds nothing of the caller or the identifiers")
						}
					}
				}
			})
			t.Run("capture off", func(t *testing.T) {
				store, dump := sc.open(t)
				srv := startWithStore(t, testutil.LoadDeployment(t, financeCopy(t)), store)
				for _, b := range bindings {
					answer(t, srv.Client(t, b, testutil.Bearer(tok)), false)
				}
				require.Empty(t, allExamples(t, store.(tasks.Examples)))
				if dump != nil {
					require.Empty(t, dump())
				}
			})
			t.Run("routing.learn overrides", func(t *testing.T) {
				store, _ := sc.open(t)
				// Off for the deployment, on for lookup-invoice; on for the deployment, off for lookup-invoice-v1.
				for _, tc := range []struct {
					capture  bool
					edit     string
					manifest string
					want     bool
				}{
					{false, "false", "lookup-invoice.yaml", true},
					{true, "false", "lookup-invoice-v1.yaml", false},
				} {
					cfg := financeCopy(t, "router: {threshold: 0.6}", "router: {threshold: 0.6, learn: {capture: "+map[bool]string{true: "true", false: "false"}[tc.capture]+"}}")
					id := strings.TrimSuffix(tc.manifest, ".yaml")
					testutil.EditFile(t, cfg, "capabilities/"+tc.manifest, func(s string) string {
						learnOn := map[bool]string{true: "true", false: "false"}[tc.want]
						return s + "routing: {learn: " + learnOn + "}\n"
					})
					srv := startWithStore(t, testutil.LoadDeployment(t, cfg), store)
					c := jsonrpc(t, srv, partner)
					task := sendTask(t, c, text(learnFirst))
					res := sendTask(t, c, continuing(text(id), task.ID))
					require.Equal(t, id, reportOf(t, res).Capability)
					got, err := store.(tasks.Examples).ExamplesOf(t.Context(), id, time.Hour)
					require.NoError(t, err)
					if tc.want {
						require.Len(t, got, 1)
					} else {
						require.Empty(t, got)
					}
				}
			})
		})
	}
}
