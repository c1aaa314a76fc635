package dispatch

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/tasks"
)

func TestPageToken(t *testing.T) {
	d := &Dispatcher{pageKey: newPageKey()}
	owner := tasks.Owner{Issuer: "https://idp.example.com", Subject: "alice", Tenant: "acme"}
	q := listQuery{contextID: "ctx-1", state: "TASK_STATE_COMPLETED", pageSize: 3}
	b := tasks.Binding{TaskID: "task-7", CreatedAt: time.Date(2026, 12, 3, 8, 0, 0, 123456789, time.UTC)}
	pos := tasks.PositionOf(b)
	scope := tokenScope(owner, q)
	tok := d.sealPage(scope, pos)

	got, perr := d.openPage(scope, tok)
	require.Nil(t, perr)
	require.Equal(t, pos, got)
	require.Len(t, tok, base64.RawURLEncoding.EncodedLen(pageTokenBytes))

	after := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	hist := 2
	others := map[string][]byte{
		"other issuer":           tokenScope(tasks.Owner{Issuer: "https://idp-b.example.com", Subject: "alice", Tenant: "acme"}, q),
		"other subject":          tokenScope(tasks.Owner{Issuer: owner.Issuer, Subject: "bob", Tenant: "acme"}, q),
		"other tenant":           tokenScope(tasks.Owner{Issuer: owner.Issuer, Subject: "alice", Tenant: "globex"}, q),
		"no tenant":              tokenScope(tasks.Owner{Issuer: owner.Issuer, Subject: "alice"}, q),
		"other context":          tokenScope(owner, listQuery{contextID: "ctx-2", state: q.state}),
		"other status":           tokenScope(owner, listQuery{contextID: q.contextID, state: "TASK_STATE_WORKING"}),
		"no status":              tokenScope(owner, listQuery{contextID: q.contextID}),
		"statusTimestampAfter":   tokenScope(owner, listQuery{contextID: q.contextID, state: q.state, after: &after}),
		"historyLength":          tokenScope(owner, listQuery{contextID: q.contextID, state: q.state, historyLength: &hist}),
		"includeArtifacts":       tokenScope(owner, listQuery{contextID: q.contextID, state: q.state, includeArtifacts: true}),
		"fields shifted":         tokenScope(tasks.Owner{Issuer: owner.Issuer, Subject: "alic", Tenant: "eacme"}, q),
		"another dispatcher key": nil,
	}
	for name, s := range others {
		t.Run(name, func(t *testing.T) {
			dd := d
			if s == nil {
				dd, s = &Dispatcher{pageKey: newPageKey()}, scope
			}
			_, perr := dd.openPage(s, tok)
			require.NotNil(t, perr)
			require.Equal(t, protocol.InvalidParams, perr.Code)
			require.Equal(t, "pageToken is not valid for this request", perr.Message)
		})
	}
	// The page size is not part of the scope: a client may change it between pages.
	_, perr = d.openPage(tokenScope(owner, listQuery{contextID: q.contextID, state: q.state, pageSize: 50}), tok)
	require.Nil(t, perr)

	t.Run("every byte altered", func(t *testing.T) {
		raw, err := base64.RawURLEncoding.DecodeString(tok)
		require.NoError(t, err)
		for i := range raw {
			for _, flip := range []byte{0x01, 0x80} {
				alt := append([]byte(nil), raw...)
				alt[i] ^= flip
				_, perr := d.openPage(scope, base64.RawURLEncoding.EncodeToString(alt))
				require.NotNil(t, perr, "byte %d ^ %#x", i, flip)
			}
		}
	})
	for name, bad := range map[string]string{
		"empty":      "",
		"truncated":  tok[:len(tok)-1],
		"longer":     tok + "A",
		"padded":     tok + "=",
		"std base64": base64.StdEncoding.EncodeToString([]byte(tok)),
		"not base64": "not a token!",
	} {
		t.Run(name, func(t *testing.T) {
			_, perr := d.openPage(scope, bad)
			require.NotNil(t, perr)
			require.Equal(t, protocol.InvalidParams, perr.Code)
		})
	}
}

func TestPositionOrder(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	older := tasks.PositionOf(tasks.Binding{TaskID: "a", CreatedAt: t0})
	newer := tasks.PositionOf(tasks.Binding{TaskID: "a", CreatedAt: t0.Add(time.Nanosecond)})
	require.Equal(t, -1, newer.Compare(older), "newest first")
	require.Equal(t, 1, older.Compare(newer))
	require.Equal(t, 0, older.Compare(older))
	x, y := tasks.PositionOf(tasks.Binding{TaskID: "x", CreatedAt: t0}), tasks.PositionOf(tasks.Binding{TaskID: "y", CreatedAt: t0})
	require.NotEqual(t, 0, x.Compare(y), "same time: ordered by task id digest")
	require.Equal(t, -x.Compare(y), y.Compare(x))
	// Times before 1970 and the zero time (bindings without a creation time) order too.
	zero := tasks.PositionOf(tasks.Binding{TaskID: "z"})
	require.Equal(t, 1, zero.Compare(older))
}

func TestListQuery(t *testing.T) {
	for _, tc := range []struct {
		in   int
		want int
	}{{0, DefaultListPageSize}, {1, 1}, {100, 100}, {101, MaxListTasks}, {1000, MaxListTasks}} {
		require.Equal(t, tc.want, listQueryOf(&protocol.ListParams{PageSize: tc.in}).pageSize, tc.in)
	}
	require.Equal(t, DefaultListPageSize, listQueryOf(nil).pageSize)
	for in, want := range map[string]string{
		"TASK_STATE_WORKING": "TASK_STATE_WORKING", "working": "TASK_STATE_WORKING",
		"input-required": "TASK_STATE_INPUT_REQUIRED", "auth-required": "TASK_STATE_AUTH_REQUIRED",
		"canceled": "TASK_STATE_CANCELED", "": "",
	} {
		require.Equal(t, want, normState(in), in)
	}
}
