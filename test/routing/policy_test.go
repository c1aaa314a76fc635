package routing_test

import (
	"iter"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/tasks"
	"github.com/capgate/capgate/sidecar/tasks/redisstore"
	"github.com/capgate/capgate/test/replicas/redisproc"
	"github.com/capgate/capgate/test/testutil"
)

// travelManifests is a small travel deployment: anyone may search flights;
// booking and cancelling need scopes and are marked confirm (issue 25).
var travelManifests = map[string]string{
	"search-flights.yaml": `id: search-flights
state: ga
visibility: public
skill:
  name: Search flights
  description: Finds flights between two cities on a date.
  tags: [travel, flights]
  examples: ["find flights from London to Paris", "search for flights to New York next Monday", "show me flights to Rome",
    "are there any flights to Berlin tomorrow", "what flights go to Madrid on Friday"]
  inputModes: [text/plain, application/pdf]
tenants: "*"
handler: travel.search
`,
	"book-flight.yaml": `id: book-flight
state: ga
visibility: extended
skill:
  name: Book a flight
  description: Books a seat on a flight.
  tags: [travel, booking]
  examples: ["book me on the 9am flight to Paris", "I want to book a seat on flight AF123", "reserve a flight to Rome for me",
    "book the cheapest flight to Berlin", "get me a ticket on that flight"]
requires_scopes: [travel.book]
tenants: "*"
handler: travel.book
routing: {mode: confirm}
`,
	"cancel-booking.yaml": `id: cancel-booking
state: ga
visibility: extended
skill:
  name: Cancel a booking
  description: Cancels a flight booking.
  tags: [travel, booking]
  examples: ["cancel my booking", "I'm not going", "cancel my reservation XYZ789", "please cancel my flight", "I need to cancel my trip"]
requires_scopes: [travel.cancel]
tenants: "*"
handler: travel.cancel
routing: {mode: confirm}
`,
}

// travel starts the travel deployment (the finance example's config with
// its capabilities replaced, the default router threshold) with a memory
// or Redis task store.
func travel(t *testing.T, store tasks.Store, edits ...string) *testutil.Server {
	t.Helper()
	cfg := financeCopy(t, append([]string{
		"router: {threshold: 0.6}\n", "",
		"  payments.remittance: builtin:echo", "  payments.remittance: builtin:echo\n  travel.search: builtin:echo\n  travel.book: builtin:echo\n  travel.cancel: builtin:echo",
		"invoices.read]", "invoices.read, travel.book, travel.cancel]",
	}, edits...)...)
	testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
		// The variance extension serves a finance capability this deployment lacks.
		i := strings.Index(s, "    # A method extension")
		j := strings.Index(s, "manifests:")
		return s[:i] + s[j:]
	})
	dir := filepath.Join(filepath.Dir(cfg), "capabilities")
	require.NoError(t, os.RemoveAll(dir))
	for name, body := range travelManifests {
		testutil.WriteFile(t, cfg, filepath.Join("capabilities", name), body)
	}
	return startWithStore(t, testutil.LoadDeployment(t, cfg), store)
}

// onTravel runs test on the travel deployment with each task store and
// over each binding.
func onTravel(t *testing.T, test func(t *testing.T, srv *testutil.Server, b a2a.TransportProtocol)) {
	for _, store := range stores(t) {
		srv := travel(t, store.s)
		for _, b := range bindings {
			t.Run(store.name+"/"+string(b), func(t *testing.T) { test(t, srv, b) })
		}
	}
}

// bindings are the two A2A bindings the a2a-go client speaks to capgate.
var bindings = []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON}

func travelClient(t *testing.T, srv *testutil.Server, b a2a.TransportProtocol, scopes ...string) *a2aclient.Client {
	t.Helper()
	return srv.Client(t, b, testutil.Bearer(testutil.Token(t, testutil.TokenOptions{Subject: "traveller-1", Scopes: scopes})))
}

// question requires an input-required task and returns its text and the
// capability ids it offers.
func question(t *testing.T, task *a2a.Task) (string, []string) {
	t.Helper()
	require.Equal(t, a2a.TaskStateInputRequired, task.Status.State, "asked, not routed")
	require.Empty(t, task.Artifacts, "nothing ran")
	msg := task.Status.Message
	require.NotNil(t, msg)
	var text string
	var ids []string
	for _, p := range msg.Parts {
		switch c := p.Content.(type) {
		case a2a.Text:
			text = string(c)
		case a2a.Data:
			list, _ := c.Value.(map[string]any)["candidates"].([]any)
			for _, e := range list {
				ids = append(ids, e.(map[string]any)["id"].(string))
			}
		}
	}
	return text, ids
}

// TestOneSkillCallerIsAsked: a caller entitled to search-flights only asks
// to book and to cancel; neither message runs search-flights: the caller is
// asked (issue 25, transcripts 1 and 2). A search still routes.
func TestOneSkillCallerIsAsked(t *testing.T) {
	onTravel(t, func(t *testing.T, srv *testutil.Server, b a2a.TransportProtocol) {
		c := travelClient(t, srv, b)
		for _, m := range []string{"Book me on flight BA304", "Cancel my booking ABC123"} {
			text, ids := question(t, sendTask(t, c, text(m)))
			require.Contains(t, text, "can only do one thing for you", m)
			require.Contains(t, text, "Search flights", m)
			require.Equal(t, []string{"search-flights"}, ids, m)
		}
		require.Equal(t, "search-flights", routedTo(t, c, text("find me flights from London to Lisbon on Friday")))
	})
}

// TestConfirmNeverGuesses: "I want to go to Lisbon" from a caller who may
// search, book and cancel never runs cancel-booking (marked confirm) on a
// guess (transcript 3); a confident cancel request is a question naming
// the skill, run on yes, dropped on no; a hint runs it at once.
func TestConfirmNeverGuesses(t *testing.T) {
	onTravel(t, func(t *testing.T, srv *testutil.Server, b a2a.TransportProtocol) {
		c := travelClient(t, srv, b, "travel.book", "travel.cancel")
		task := sendTask(t, c, text("I want to go to Lisbon"))
		if task.Status.State != a2a.TaskStateInputRequired {
			require.NotEqual(t, "cancel-booking", reportOf(t, task).Capability)
		}

		q := sendTask(t, c, text("please cancel my booking ABC123"))
		txt, ids := question(t, q)
		require.Equal(t, []string{"cancel-booking"}, ids)
		require.Contains(t, txt, "Cancel a booking?")
		require.Contains(t, txt, "Reply yes to go ahead")
		done := sendTask(t, c, continuing(text("yes"), q.ID))
		require.Equal(t, "cancel-booking", reportOf(t, done).Capability)

		m := text("please cancel my booking ABC123")
		q = sendTask(t, c, m)
		question(t, q)
		declined := sendTask(t, c, continuing(text("no"), q.ID))
		require.Equal(t, a2a.TaskStateCanceled, declined.Status.State)
		require.Empty(t, declined.Artifacts)
		requireHistory(t, declined, m, protocol.V1, nil)

		require.Equal(t, "cancel-booking", routedTo(t, c, hinted(text("please cancel my booking ABC123"), "cancel-booking")))
	})
}

// TestClarificationKeepsFirstMessage: the capability chosen in answer to a
// clarification receives the first message's parts (a PDF) with the answer.
func TestClarificationKeepsFirstMessage(t *testing.T) {
	onTravel(t, func(t *testing.T, srv *testutil.Server, b a2a.TransportProtocol) {
		c := travelClient(t, srv, b)
		q := sendTask(t, c, userMsg(a2a.NewTextPart("Book me on flight BA304"), pdfPart()))
		question(t, q)
		r := reportOf(t, sendTask(t, c, continuing(text("yes"), q.ID)))
		require.Equal(t, "search-flights", r.Capability)
		require.Contains(t, r.MediaTypes, "application/pdf", "the first message's file reaches the capability")
		require.Contains(t, r.MediaTypes, "text/plain")

		// Another caller cannot answer it, and gets nothing of it.
		q = sendTask(t, c, userMsg(a2a.NewTextPart("Book me on flight BA304"), pdfPart()))
		other := srv.Client(t, b, testutil.Bearer(testutil.Token(t, testutil.TokenOptions{Subject: "traveller-2"})))
		_, err := other.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: continuing(text("yes"), q.ID)})
		require.ErrorIs(t, err, a2a.ErrTaskNotFound)
	})
}

// TestAnonymousOneSkill: an anonymous caller gets the question as a message.
func TestAnonymousOneSkill(t *testing.T) {
	srv := travel(t, tasks.NewMemory(0), "anonymous_public: false", "anonymous_public: true")
	for _, b := range bindings {
		c := srv.Client(t, b)
		res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: text("Cancel my booking ABC123")})
		require.NoError(t, err)
		msg, ok := res.(*a2a.Message)
		require.True(t, ok, "a message, not a task: %T", res)
		require.Contains(t, msg.Parts[0].Content.(a2a.Text), "can only do one thing for you")
		require.Contains(t, msg.Parts[0].Content.(a2a.Text), "metadata.skillId set to search-flights")
	}
}

type namedStore struct {
	name string
	s    tasks.Store
}

// stores are the memory store and a Redis store on a real redis-server.
func stores(t *testing.T) []namedStore {
	t.Helper()
	return []namedStore{{"memory", tasks.NewMemory(0)}, {"redis", redisStore(t)}}
}

func redisStore(t *testing.T) tasks.Store {
	t.Helper()
	srv := redisproc.Start(t)
	r, err := redisstore.Dial(t.Context(), srv.URL(0))
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// historyCaller reaches capgate one way — a binding and an A2A version — through a2a-go v2's
// own client (its a2av0 transports for 0.3), as one caller.
type historyCaller struct {
	name string
	v    protocol.Version
	send func(t *testing.T, m *a2a.Message, historyLength *int, stream bool) *a2a.Task
	get  func(t *testing.T, id a2a.TaskID, historyLength *int) *a2a.Task
	// list is nil for 0.3, which has no ListTasks.
	list func(t *testing.T, historyLength *int) []*a2a.Task
}

// historyCallers are traveller-1 over every binding and version capgate serves: JSON-RPC and
// HTTP+JSON in 1.0 and 0.3, gRPC in 1.0.
func historyCallers(t *testing.T, srv *testutil.Server) []historyCaller {
	t.Helper()
	tok := testutil.Token(t, testutil.TokenOptions{Subject: "traveller-1"})
	var out []historyCaller
	for _, b := range []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON, a2a.TransportProtocolGRPC} {
		c := srv.Client(t, b, testutil.Bearer(tok))
		out = append(out, historyCaller{name: string(b) + " 1.0", v: protocol.V1,
			send: func(t *testing.T, m *a2a.Message, hl *int, stream bool) *a2a.Task {
				t.Helper()
				req := &a2a.SendMessageRequest{Message: m, Config: &a2a.SendMessageConfig{HistoryLength: hl}}
				if stream {
					return streamedTask(t, c.SendStreamingMessage(t.Context(), req))
				}
				return sentTask(t)(c.SendMessage(t.Context(), req))
			},
			get: func(t *testing.T, id a2a.TaskID, hl *int) *a2a.Task {
				t.Helper()
				task, err := c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: id, HistoryLength: hl})
				require.NoError(t, err)
				return task
			},
			list: func(t *testing.T, hl *int) []*a2a.Task {
				t.Helper()
				res, err := c.ListTasks(t.Context(), &a2a.ListTasksRequest{HistoryLength: hl})
				require.NoError(t, err)
				return res.Tasks
			},
		})
	}
	params := a2aclient.ServiceParams{"authorization": {"Bearer " + tok}, a2a.SvcParamVersion: {"0.3"}}
	rest, err := a2av0.NewRESTTransport(a2av0.RESTTransportConfig{URL: srv.URL, Client: srv.HTTP})
	require.NoError(t, err)
	for name, tr := range map[string]a2aclient.Transport{
		"JSONRPC 0.3":   a2av0.NewJSONRPCTransport(a2av0.JSONRPCTransportConfig{URL: srv.URL, Client: srv.HTTP}),
		"HTTP+JSON 0.3": rest,
	} {
		out = append(out, historyCaller{name: name, v: protocol.V03,
			send: func(t *testing.T, m *a2a.Message, hl *int, stream bool) *a2a.Task {
				t.Helper()
				req := &a2a.SendMessageRequest{Message: m, Config: &a2a.SendMessageConfig{HistoryLength: hl}}
				if stream {
					return streamedTask(t, tr.SendStreamingMessage(t.Context(), params, req))
				}
				return sentTask(t)(tr.SendMessage(t.Context(), params, req))
			},
			get: func(t *testing.T, id a2a.TaskID, hl *int) *a2a.Task {
				t.Helper()
				task, err := tr.GetTask(t.Context(), params, &a2a.GetTaskRequest{ID: id, HistoryLength: hl})
				require.NoError(t, err)
				return task
			},
		})
	}
	return out
}

// streamedTask requires a stream of exactly one event, a task, and returns it.
// sentTask is the task a SendMessage answered with (a client's or a transport's result).
func sentTask(t *testing.T) func(a2a.SendMessageResult, error) *a2a.Task {
	return func(res a2a.SendMessageResult, err error) *a2a.Task {
		t.Helper()
		require.NoError(t, err)
		task, ok := res.(*a2a.Task)
		require.True(t, ok, "want a task, got %T", res)
		return task
	}
}

func streamedTask(t *testing.T, events iter.Seq2[a2a.Event, error]) *a2a.Task {
	t.Helper()
	var got []a2a.Event
	for ev, err := range events {
		require.NoError(t, err)
		got = append(got, ev)
	}
	require.Len(t, got, 1)
	task, ok := got[0].(*a2a.Task)
	require.True(t, ok, "want a task, got %T", got[0])
	return task
}

// requireFirstMessage requires task's history to be what historyLength (nil: not given) leaves
// of its one message in version v — the first message m, as the caller sent it (role user, its
// messageId and parts) in the task and its context — or no history.
func requireFirstMessage(t *testing.T, task *a2a.Task, m *a2a.Message, v protocol.Version, historyLength *int) {
	t.Helper()
	require.Equal(t, a2a.TaskStateInputRequired, task.Status.State)
	requireHistory(t, task, m, v, historyLength)
}

// requireHistory is requireFirstMessage in any state (a canceled clarification task's).
func requireHistory(t *testing.T, task *a2a.Task, m *a2a.Message, v protocol.Version, historyLength *int) {
	t.Helper()
	if protocol.HistoryKept(v, historyLength, 1) == 0 {
		require.Empty(t, task.History, "historyLength %d in %s", *historyLength, v)
		return
	}
	require.Len(t, task.History, 1)
	h := task.History[0]
	require.Equal(t, m.ID, h.ID, "the caller's own messageId")
	require.Equal(t, a2a.MessageRoleUser, h.Role)
	require.Equal(t, task.ID, h.TaskID)
	require.Equal(t, task.ContextID, h.ContextID)
	require.Len(t, h.Parts, len(m.Parts))
	for i, p := range m.Parts {
		require.Equal(t, p.Content, h.Parts[i].Content, "part %d", i)
		require.Equal(t, p.MediaType, h.Parts[i].MediaType, "part %d", i)
	}
}

// TestClarificationHistory: capgate's own clarification task carries the first message as its
// history — the caller's messageId, role user, its parts, the task and context — on every
// binding and version, in the answer that asks (SendMessage and its stream, with
// configuration.historyLength unset, 0, 1 and large), in GetTask and ListTasks (historyLength
// unset, 0, 1 and large), read in the version it was sent in and in the other one, after a
// reply too vague to decide, with the memory and the Redis store. A binding the previous
// release wrote (no message id) is read without history.
func TestClarificationHistory(t *testing.T) {
	n := func(i int) *int { return &i }
	lengths := []*int{nil, n(0), n(1), n(1 << 20)}
	for _, store := range stores(t) {
		srv := travel(t, store.s)
		callers := historyCallers(t, srv)
		for _, c := range callers {
			t.Run(store.name+"/"+c.name, func(t *testing.T) {
				first := func() *a2a.Message {
					return userMsg(a2a.NewTextPart("Book me on flight BA304"), pdfPart()) // a new messageId each time
				}
				var task *a2a.Task
				var m *a2a.Message
				for _, stream := range []bool{false, true} {
					for _, hl := range lengths {
						m = first()
						task = c.send(t, m, hl, stream)
						require.True(t, strings.HasPrefix(string(task.ID), "capgate-"), "capgate's own task: %s", task.ID)
						requireFirstMessage(t, task, m, c.v, hl)
					}
				}
				for _, hl := range lengths {
					requireFirstMessage(t, c.get(t, task.ID, hl), m, c.v, hl)
				}
				// Read by the same caller in every other binding and version.
				for _, r := range callers {
					requireFirstMessage(t, r.get(t, task.ID, nil), m, r.v, nil)
					if r.list != nil {
						for _, hl := range lengths {
							var found *a2a.Task
							for _, l := range r.list(t, hl) {
								if l.ID == task.ID {
									found = l
								}
							}
							require.NotNil(t, found, "%s lists the task", r.name)
							if hl == nil {
								hl = n(0) // a list's tasks are read with historyLength 0 unless it says
							}
							requireFirstMessage(t, found, m, r.v, hl)
						}
					}
				}

				// A reply too vague to decide asks again on the same task: the history is still the
				// first message.
				again := c.send(t, continuing(text("hmm, not sure"), task.ID), nil, false)
				require.Equal(t, task.ID, again.ID)
				requireFirstMessage(t, again, m, c.v, nil)
				requireFirstMessage(t, c.get(t, task.ID, n(1)), m, c.v, n(1))

				// As the previous release kept it, without the message id: no history, no error.
				b, ok, err := store.s.Lookup(t.Context(), string(task.ID))
				require.NoError(t, err)
				require.True(t, ok)
				require.NotEmpty(t, b.HeldMessageID)
				b.HeldMessageID = ""
				require.NoError(t, store.s.BindPending(t.Context(), b, time.Minute, 100))
				require.Empty(t, c.get(t, task.ID, nil).History)
			})
		}
	}
}
