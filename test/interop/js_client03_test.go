package interop

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/capgate/capgate/test/ci"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/test/testutil"
)

// TestJSClient03 runs a genuine A2A 0.3 client, @a2a-js/sdk 0.3.14 (not the 1.x SDK's 0.3
// layer), over JSON-RPC and HTTP+JSON: it discovers the agent itself with createFromUrl, then
// sends, streams, reads and cancels. Discovery is what 0.3 fleets hit (#24): at
// /.well-known/agent.json it works out of the box; at the SDK's default path it needs
// cards.default_version: "0.3", and without it the SDK is handed the 1.0 card and fails.
func TestJSClient03(t *testing.T) {
	node := requireNode(t)
	if _, err := os.Stat(filepath.Join(jsDir, "node_modules", "a2a-js-sdk-03", "package.json")); err != nil {
		if ci.Required() {
			t.Fatal("a2a-js-sdk-03 (@a2a-js/sdk 0.3.14) is not installed: run `npm ci` in test/interop/js")
		}
		t.Skip("SKIPPING THE JS 0.3 CLIENT SUITE: a2a-js-sdk-03 is not installed: run `npm ci` in test/interop/js")
	}
	tok := testutil.Token(t, testutil.TokenOptions{Scopes: []string{"invoices.read", "recon.run"}})
	all := []string{"discover", "send", "stream", "get", "cancel", "getUnknown", "streamAnonymous"}
	type discovery struct {
		name, path, extra string
		works             bool
	}
	for _, d := range []discovery{
		{"agent.json", "/.well-known/agent.json", "", true},
		{"default path with cards.default_version 0.3", "", "cards: {default_version: \"0.3\"}\n", true},
		{"default path, 1.0 card by default", "", "", false},
	} {
		for _, transport := range []string{"JSONRPC", "HTTP+JSON"} {
			t.Run(d.name+"/"+transport, func(t *testing.T) {
				cfg := testutil.CopyFinance(t)
				testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string { return s + d.extra })
				srv := testutil.Start(t, testutil.LoadDeployment(t, cfg))
				got := runScript(t, node, "client03.mjs", plan{Base: srv.URL, Token: tok, Transport: transport,
					Steps: all, CardURL: srv.Deployment.Config.Agent.URL, Path: d.path})
				if !d.works {
					require.False(t, got["discover"].OK, "the 0.3 SDK reads a 1.0 card: %s", got["discover"].Result)
					return
				}
				ok := func(name string, into any) {
					t.Helper()
					s := got[name]
					require.True(t, s.OK, "%s: %+v", name, s.Error)
					require.NoError(t, json.Unmarshal(s.Result, into))
				}
				var card struct {
					ProtocolVersion, PreferredTransport string
					Skills                              []string
				}
				ok("discover", &card)
				require.Equal(t, "0.3.0", card.ProtocolVersion)
				// The SDK follows supportsAuthenticatedExtendedCard: with recon.run the caller's
				// extended card adds reconcile-invoice to the public skills.
				require.Subset(t, card.Skills, testutil.PublicSkills)
				require.Contains(t, card.Skills, "reconcile-invoice")
				var task struct{ Kind, ID, State string }
				ok("send", &task)
				require.Equal(t, "task", task.Kind)
				require.Equal(t, "completed", task.State)
				var stream struct{ Kinds []string }
				ok("stream", &stream)
				require.NotEmpty(t, stream.Kinds)
				for _, k := range stream.Kinds {
					require.Contains(t, []string{"task", "message", "status-update", "artifact-update"}, k)
				}
				var read struct{ Kind, ID, State string }
				ok("get", &read)
				require.Equal(t, task.ID, read.ID)
				require.False(t, got["cancel"].OK, "a completed task is not cancelable")
				require.False(t, got["getUnknown"].OK)
				require.Contains(t, got["getUnknown"].Error.Message, "not found")
				require.False(t, got["streamAnonymous"].OK, "a refused stream is an error, not an empty stream")
			})
		}
	}
}
