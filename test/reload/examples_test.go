package reload_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/reload"
	"github.com/capgate/capgate/test/testutil"
)

// TestExamplesFileReloads (issue 36): an accepted routing example applies on
// hot reload. lookup-invoice names an examples file that does not exist yet;
// a vague message is a clarification; once the file appears (as `capgate
// route examples accept` writes it, then deployed) the reloader picks it up
// and the same text routes to lookup-invoice; the card never shows it.
func TestExamplesFileReloads(t *testing.T) {
	cfg := financeCopy(t)
	testutil.EditFile(t, cfg, "capabilities/lookup-invoice.yaml", func(s string) string {
		return s + "routing: {examples_file: lookup-invoice.examples.txt}\n"
	})
	r := start(t, reload.NewFiles(cfg))
	tok := testutil.Token(t, testutil.Partner())
	n := 0
	send := func() string {
		n++
		msg := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"learn-` + strconv.Itoa(n) + `","role":"ROLE_USER",` +
			`"parts":[{"text":"where does my supplier bill stand"}]}}}`
		status, body, err := r.do(t.Context(), http.MethodPost, "/", msg, "Content-Type", "application/json", "A2A-Version", "1.0", "Authorization", "Bearer "+tok)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status)
		return string(body)
	}
	require.Contains(t, send(), "TASK_STATE_INPUT_REQUIRED")

	put(t, cfg, "capabilities/lookup-invoice.examples.txt", "# accepted with capgate route examples\nwhere does my supplier bill stand\n")
	r.waitReloads(t, 1, 0)
	body := send()
	require.NotContains(t, body, "TASK_STATE_INPUT_REQUIRED")
	require.Contains(t, body, `"capability":"lookup-invoice","handler":"invoices.lookup"`, "the echo handler of lookup-invoice answered: %s", body)
	for _, s := range r.skills(t) {
		require.False(t, strings.Contains(s, "supplier"))
	}
	status, card, err := r.do(t.Context(), http.MethodGet, "/.well-known/agent-card.json", "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	require.NotContains(t, string(card), "supplier bill")
}
