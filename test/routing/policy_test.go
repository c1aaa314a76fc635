package routing_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/stretchr/testify/require"

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

		q = sendTask(t, c, text("please cancel my booking ABC123"))
		question(t, q)
		declined := sendTask(t, c, continuing(text("no"), q.ID))
		require.Equal(t, a2a.TaskStateCanceled, declined.Status.State)
		require.Empty(t, declined.Artifacts)

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
