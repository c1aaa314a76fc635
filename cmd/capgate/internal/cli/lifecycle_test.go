package cli_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/lifecycle"
	"github.com/capgate/capgate/test/testnet"
	"github.com/capgate/capgate/test/testutil"
)

// lifecycleReport runs `capgate lifecycle --json` with args and decodes it.
func lifecycleReport(t *testing.T, args ...string) (lifecycle.Report, result) {
	t.Helper()
	r := run(t, append([]string{"lifecycle", "--json"}, args...)...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	var rep lifecycle.Report
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
	return rep, r
}

func entryOf(t *testing.T, rep lifecycle.Report, id string) lifecycle.Entry {
	t.Helper()
	for _, e := range rep.Entries {
		if e.Capability == id {
			return e
		}
	}
	require.FailNow(t, "capability not in the report", id)
	return lifecycle.Entry{}
}

// callHinted sends one authenticated message hinted at capability id and
// checks the echo handler ran it.
func callHinted(t *testing.T, srv *testutil.Server, id string) {
	t.Helper()
	c := srv.Client(t, a2a.TransportProtocolJSONRPC, testutil.Bearer(testutil.Token(t, testutil.TokenOptions{})))
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("Show me invoice INV-20931"))
	m.Metadata = map[string]any{"skillId": id}
	res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: m})
	require.NoError(t, err)
	task, ok := res.(*a2a.Task)
	require.True(t, ok, "want a task, got %T", res)
	require.Equal(t, a2a.TaskStateCompleted, task.Status.State)
	require.Len(t, task.Artifacts, 1)
	require.Len(t, task.Artifacts[0].Parts, 1)
	data, ok := task.Artifacts[0].Parts[0].Content.(a2a.Data)
	require.True(t, ok)
	b, err := json.Marshal(data.Value)
	require.NoError(t, err)
	require.Contains(t, string(b), `"capability":"`+id+`"`)
}

func TestLifecycleReportsUsageFromTheRunningServer(t *testing.T) {
	srv := testutil.Start(t, testutil.LoadDeployment(t, ""))
	callHinted(t, srv, "lookup-invoice-v1")
	callHinted(t, srv, "lookup-invoice-v1")
	start := time.Now().UTC()

	rep, _ := lifecycleReport(t, "--admin", srv.AdminURL)
	require.Empty(t, rep.UsageError)
	require.Equal(t, "admin "+srv.AdminURL, rep.UsageSource)
	v1 := entryOf(t, rep, "lookup-invoice-v1")
	require.Equal(t, "deprecated", v1.State)
	require.Equal(t, "lookup-invoice", v1.ReplacedBy)
	require.True(t, v1.UsageKnown)
	require.GreaterOrEqual(t, *v1.Calls30d, int64(2))
	require.GreaterOrEqual(t, *v1.Total, int64(2))
	require.NotNil(t, v1.LastUsed)
	require.WithinDuration(t, start, *v1.LastUsed, time.Minute)
	require.Equal(t, lifecycle.NotSafe, v1.SafeToRemove, v1.Reason)
	require.Empty(t, rep.SafeToRemove)

	// Nothing else was called, and only deprecated capabilities are ever safe.
	for _, e := range rep.Entries {
		require.True(t, e.UsageKnown, e.Capability)
		if e.Capability != "lookup-invoice-v1" {
			require.Zero(t, *e.Total, e.Capability)
			require.Nil(t, e.LastUsed, e.Capability)
		}
		if e.State != "deprecated" {
			require.Equal(t, lifecycle.NotSafe, e.SafeToRemove, e.Capability)
		}
	}
	require.Equal(t, lifecycle.NotSafe, entryOf(t, rep, "reconcile-invoice-v0").SafeToRemove, "a removed tombstone stays")

	// 31 days later the calls have left the window.
	later := time.Now().Add(31 * 24 * time.Hour).UTC().Format(time.RFC3339)
	rep, _ = lifecycleReport(t, "--admin", srv.AdminURL, "--now", later)
	v1 = entryOf(t, rep, "lookup-invoice-v1")
	require.Zero(t, *v1.Calls30d)
	require.GreaterOrEqual(t, *v1.Total, int64(2))
	require.Equal(t, lifecycle.Safe, v1.SafeToRemove, v1.Reason)
	require.Equal(t, []string{"lookup-invoice-v1"}, rep.SafeToRemove)

	// 29 days later they still count.
	sooner := time.Now().Add(29 * 24 * time.Hour).UTC().Format(time.RFC3339)
	rep, _ = lifecycleReport(t, "--admin", srv.AdminURL, "--now", sooner)
	require.Equal(t, lifecycle.NotSafe, entryOf(t, rep, "lookup-invoice-v1").SafeToRemove)
}

func TestLifecycleDeprecatedNeverCalledIsSafe(t *testing.T) {
	srv := testutil.Start(t, testutil.LoadDeployment(t, ""))
	callHinted(t, srv, "lookup-invoice-v1")

	// The report's registry is a copy in which extract-invoice-fields is
	// deprecated too; usage still comes from the running server.
	cfg := testutil.CopyFinance(t)
	testutil.EditFile(t, cfg, "capabilities/extract-invoice-fields.yaml", func(s string) string {
		return replaceOnce(t, s, "state: ga\n", "state: deprecated\nreplaced_by: lookup-invoice\n")
	})
	// The memory store has counted calls for moments: no verdict yet.
	rep, _ := lifecycleReport(t, "--config", cfg, "--admin", srv.AdminURL)
	e := entryOf(t, rep, "extract-invoice-fields")
	require.True(t, e.UsageKnown)
	require.Zero(t, *e.Total)
	require.Equal(t, lifecycle.NotEnoughHistory, e.SafeToRemove, e.Reason)
	require.Contains(t, e.Reason, "the rule needs 30 days")
	require.NotNil(t, rep.ObservedSince)
	require.Empty(t, rep.SafeToRemove)
	text := run(t, "lifecycle", "--config", cfg, "--admin", srv.AdminURL)
	require.Contains(t, text.stdout, "observation: calls counted since ")
	require.Contains(t, text.stdout, "not enough history (no calls seen in a window shorter than 720h0m0s): extract-invoice-fields")

	// Thirty-one days on, the window has been observed in full.
	later := time.Now().Add(31 * 24 * time.Hour).UTC().Format(time.RFC3339)
	rep, _ = lifecycleReport(t, "--config", cfg, "--admin", srv.AdminURL, "--now", later)
	e = entryOf(t, rep, "extract-invoice-fields")
	require.Equal(t, lifecycle.Safe, e.SafeToRemove)
	require.Equal(t, "deprecated and never called", e.Reason)
	require.Equal(t, []string{"extract-invoice-fields"}, rep.SafeToRemove[:1])
}

func TestLifecycleUnknownUsage(t *testing.T) {
	// A port nothing listens on: usage cannot be read, which is never "no calls".
	addr := testnet.RefusedAddr(t)

	rep, r := lifecycleReport(t, "--admin", "http://"+addr)
	require.NotEmpty(t, rep.UsageError)
	require.Contains(t, r.stderr, "usage unknown")
	v1 := entryOf(t, rep, "lookup-invoice-v1")
	require.False(t, v1.UsageKnown)
	require.Nil(t, v1.Calls30d)
	require.Equal(t, lifecycle.Unknown, v1.SafeToRemove)
	require.Empty(t, rep.SafeToRemove)
	require.Equal(t, []string{"lookup-invoice-v1"}, rep.UnknownUsage)

	text := run(t, "lifecycle", "--admin", "http://"+addr)
	require.Equal(t, 0, text.code)
	require.Contains(t, text.stdout, "safe to remove: none")
	require.Contains(t, text.stdout, "unknown (usage could not be read): lookup-invoice-v1")
	require.Regexp(t, `lookup-invoice-v1\s+deprecated\s+unknown\s+unknown\s+unknown\s+lookup-invoice\s+unknown`, text.stdout)
}

func TestLifecycleText(t *testing.T) {
	srv := testutil.Start(t, testutil.LoadDeployment(t, ""))
	callHinted(t, srv, "lookup-invoice-v1")
	r := run(t, "lifecycle", "--admin", srv.AdminURL)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "CAPABILITY")
	require.Regexp(t, `lookup-invoice-v1\s+deprecated\s+1\s+1\s+\S+\s+lookup-invoice\s+no`, r.stdout)
	require.Regexp(t, `extract-invoice-fields\s+ga\s+0\s+0\s+never\s+-\s+no`, r.stdout)
	require.Contains(t, r.stdout, "safe to remove: none")

	later := time.Now().Add(40 * 24 * time.Hour).UTC().Format(time.RFC3339)
	r = run(t, "lifecycle", "--admin", srv.AdminURL, "--now", later)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "safe to remove: lookup-invoice-v1")
}

func TestLifecycleUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"lifecycle", "--now", "yesterday"},
		{"lifecycle", "stray"},
		{"lifecycle", "--config", "/does/not/exist.yaml"},
	} {
		r := run(t, args...)
		require.Equal(t, 2, r.code, strings.Join(args, " "))
	}
}

func TestLifecycleRedisStoreUnreachable(t *testing.T) {
	addr := testnet.RefusedAddr(t)
	cfg := testutil.CopyFinance(t)
	testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
		return replaceOnce(t, s, "store: memory", "store: redis://"+addr+"/0?dial_timeout=200ms")
	})
	// The config's Redis store is read directly; down, usage is unknown.
	rep, _ := lifecycleReport(t, "--config", cfg)
	require.Equal(t, "store (config)", rep.UsageSource)
	require.NotEmpty(t, rep.UsageError)
	require.Equal(t, lifecycle.Unknown, entryOf(t, rep, "lookup-invoice-v1").SafeToRemove)
	require.Empty(t, rep.SafeToRemove)
}

// TestLifecycleWithAdminToken: with listen.admin_token_file, /v1/usage answers only callers
// sending the token; capgate lifecycle --config reads it from the same config and sends it,
// and without it the report says why usage is unknown.
func TestLifecycleWithAdminToken(t *testing.T) {
	cfg := testutil.CopyFinance(t)
	testutil.WriteFile(t, cfg, "keys/admin.token", "0123456789abcdef0123456789abcdef\n")
	testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
		return replaceOnce(t, s, "listen: {a2a: 127.0.0.1:8080, extauthz: 127.0.0.1:9191, admin: 127.0.0.1:9090}",
			"listen: {a2a: 127.0.0.1:8080, extauthz: 127.0.0.1:9191, admin: 127.0.0.1:9090, admin_token_file: ./keys/admin.token}")
	})
	srv := testutil.Start(t, testutil.LoadDeployment(t, cfg))
	callHinted(t, srv, "lookup-invoice-v1")

	rep, _ := lifecycleReport(t, "--config", cfg, "--admin", srv.AdminURL)
	require.Empty(t, rep.UsageError)
	require.EqualValues(t, 1, *entryOf(t, rep, "lookup-invoice-v1").Calls30d)

	rep, r := lifecycleReport(t, "--admin", srv.AdminURL) // the embedded config: no token
	require.Contains(t, rep.UsageError, "HTTP 401")
	require.Contains(t, r.stderr, "listen.admin_token_file")

	resp, err := srv.HTTP.Get(srv.AdminURL + "/v1/usage")
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, 401, resp.StatusCode, "a loopback peer needs the token too once it is set")
}
