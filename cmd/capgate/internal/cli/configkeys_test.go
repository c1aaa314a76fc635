package cli_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"gopkg.in/yaml.v3"

	"github.com/capgate/capgate/cmd/capgate/internal/cli"
	"github.com/capgate/capgate/sidecar/reload"
	"github.com/capgate/capgate/sidecar/server"
	"github.com/capgate/capgate/test/testutil"
)

// documentedKeys reads the keys of docs/configuration.md's key table: each row's first column,
// with "a, b" and "a.x / y" rows expanded ("a.y"), and the row's default when it is one
// literal in backticks.
func documentedKeys(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "docs", "configuration.md"))
	require.NoError(t, err)
	doc := string(b)
	start := strings.Index(doc, "## Keys")
	require.Positive(t, start)
	doc = doc[start:]
	if end := strings.Index(doc[1:], "\n## "); end > 0 {
		doc = doc[:end+1]
	}
	tick := regexp.MustCompile("`([^`]+)`")
	keys := map[string]string{}
	for _, line := range strings.Split(doc, "\n") {
		cols := strings.Split(line, "|")
		if len(cols) < 4 || !strings.HasPrefix(strings.TrimSpace(cols[1]), "`") {
			continue
		}
		def := ""
		if m := tick.FindAllStringSubmatch(cols[2], -1); len(m) == 1 && strings.TrimSpace(cols[2]) == "`"+m[0][1]+"`" {
			def = m[0][1]
		}
		var prev string
		for _, m := range tick.FindAllStringSubmatch(cols[1], -1) {
			k := m[1]
			if !strings.Contains(k, ".") && prev != "" && strings.Contains(cols[1], "/ `"+k) {
				k = prev[:strings.LastIndex(prev, ".")+1] + k
			}
			keys[k], prev = def, k
		}
	}
	return keys
}

// setKey sets the dotted key (with "[]" for the first element of a list and "<name>" for the
// first handler) in the YAML document doc.
func setKey(t *testing.T, doc map[string]any, key string, value any) {
	t.Helper()
	segs := strings.Split(key, ".")
	var cur any = doc
	for i, s := range segs {
		last := i == len(segs)-1
		list := strings.HasSuffix(s, "[]")
		s = strings.TrimSuffix(s, "[]")
		m, ok := cur.(map[string]any)
		require.True(t, ok, "%s: %s is not a mapping", key, s)
		if s == "<name>" {
			s = "invoices.lookup"
		}
		if last && !list {
			m[s] = value
			return
		}
		next := m[s]
		if list {
			l, _ := next.([]any)
			if len(l) == 0 {
				l = []any{map[string]any{}}
			}
			m[s] = l
			if last {
				l[0] = value
				return
			}
			next = l[0]
		}
		if _, isMap := next.(map[string]any); !isMap {
			next = map[string]any{}
			m[s] = next
		}
		cur = next
	}
}

// TestEveryDocumentedKeyValidatesAndServes: every key docs/configuration.md documents, set to
// its documented default and to each empty form (null, "", {}, []), either passes validate and
// then serves to ready, or is refused by validate with a message naming the key. Never a
// panic, and never a config validate accepts that serve cannot start (issue 21: decision_logs
// with no sink passed validate and panicked in serve).
func TestEveryDocumentedKeyValidatesAndServes(t *testing.T) {
	keys := documentedKeys(t)
	require.Greater(t, len(keys), 60, "the key table looks truncated")
	cfg := testutil.CopyFinance(t)
	base, err := os.ReadFile(cfg)
	require.NoError(t, err)
	type form struct {
		name  string
		value any
	}
	extra := map[string][]form{
		"decision_logs": {{"reporting only", map[string]any{"reporting": map[string]any{"min_delay_seconds": 1}}},
			{"console off", map[string]any{"console": false}}, {"console", map[string]any{"console": true}}},
		"services": {{"one service", map[string]any{"s": map[string]any{"url": "http://127.0.0.1:1"}}}},
	}
	for key, def := range keys {
		forms := []form{{"null", nil}, {`""`, ""}, {"{}", map[string]any{}}, {"[]", []any{}}}
		if def != "" {
			var v any
			require.NoError(t, yaml.Unmarshal([]byte(def), &v), key)
			forms = append(forms, form{"default " + def, v})
		}
		forms = append(forms, extra[key]...)
		for _, f := range forms {
			t.Run(key+"="+f.name, func(t *testing.T) {
				var doc map[string]any
				require.NoError(t, yaml.Unmarshal(base, &doc))
				setKey(t, doc, key, f.value)
				out, err := yaml.Marshal(doc)
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(cfg, out, 0o644))
				r := validate(t, cfg)
				if r.code != cli.ExitOK {
					require.Contains(t, []int{cli.ExitCheck, cli.ExitUsage}, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
					leaf := strings.TrimSuffix(key[strings.LastIndex(key, ".")+1:], "[]")
					top := strings.TrimSuffix(strings.Split(key, ".")[0], "[]")
					msg := r.stdout + r.stderr
					require.True(t, strings.Contains(msg, leaf) || strings.Contains(msg, top),
						"validate refuses %s=%s without naming it:\n%s", key, f.name, msg)
					return
				}
				serveToReady(t, cfg)
			})
		}
	}
}

// validate runs capgate validate on cfg; a panic fails the test with the key.
func validate(t *testing.T, cfg string) (r result) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			require.Fail(t, "validate panicked", "%v", p)
		}
	}()
	return run(t, "validate", "--config", cfg)
}

// serveToReady loads cfg as serve does and runs the server until it is ready (listeners on
// loopback port 0), then stops it.
func serveToReady(t *testing.T, cfg string) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	src := reload.NewFiles(cfg)
	d, err := src.Load(ctx)
	require.NoError(t, err, "validate accepted what serve cannot load")
	d.Config.Listen.A2A, d.Config.Listen.ExtAuthz, d.Config.Listen.Admin = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	ready := false
	err = func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("serve panicked: %v", p)
			}
		}()
		return server.Run(ctx, server.Options{Deployment: d, Logger: zap.NewNop(), AuditWriter: io.Discard,
			OnReady: func(server.Addrs) { ready = true; cancel() }})
	}()
	require.NoError(t, err, "validate accepted what serve refuses")
	require.True(t, ready, "serve returned without becoming ready")
}
