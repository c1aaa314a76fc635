package handler

import (
	"io"
	"net/http"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/positionstest"
	"github.com/capgate/capgate/sidecar/protocol/wire"
)

type header http.Header

func (h header) Values(n string) []string { return http.Header(h).Values(n) }

// TestForwardedParsesAsAdmitted is the differential test of issue 21: over the whole position
// catalogue, the call a handler receives on each handler binding — built by the same code that
// calls handlers — parses, with capgate's own parser, to the request model admission decided on:
// the same operation, version, tenant, tasks, config id, push webhooks, list filters and
// message. A member capgate did not read, or one a handler would read another way, cannot hide
// in the forwarded body without changing what this parse reports.
func TestForwardedParsesAsAdmitted(t *testing.T) {
	const (
		ownTask   = "task-own"
		ownTenant = "tenant-own"
		hook      = "https://hooks.example.com/a2a"
		base      = "/a2a"
	)
	checked := map[protocol.Binding]int{}
	for _, p := range positionstest.All() {
		swept := ownTask
		if p.Kind == positionstest.Tenant {
			swept = ownTenant
		}
		method, tgt, h, body, err := positionstest.Request(p, swept, ownTask, ownTenant, hook)
		require.NoError(t, err)
		path, query, _ := cut(tgt)
		admitted, perr := wire.Parse(protocol.Envelope{Method: method, Path: path, Query: query, Header: header(h), Body: body,
			GRPC: true, Methods: positionstest.Methods()}, "", protocol.Limits{})
		require.Nil(t, perr, "%s: %v", p.Name(), perr)
		if p.Binding == protocol.GRPC && p.Version == protocol.V03 {
			continue // the 0.3 gRPC service is authorized, never forwarded
		}
		params, perr := admitted.ForwardParams()
		require.Nil(t, perr, "%s: %v", p.Name(), perr)
		for _, b := range []protocol.Binding{protocol.JSONRPC, protocol.HTTPJSON, protocol.GRPC} {
			if b != protocol.JSONRPC && (admitted.Version != protocol.V1 || admitted.Operation == protocol.ExtensionMethod) {
				continue // HTTP+JSON and gRPC handlers speak A2A 1.0 and the core methods only
			}
			if admitted.Operation == protocol.ListTasks && (b == protocol.GRPC || admitted.Version != protocol.V1) {
				continue // capgate answers ListTasks itself (0.3 has no ListTasks method to forward)
			}
			t.Run(p.Name()+"/handler "+string(b), func(t *testing.T) {
				m := protocol.MethodName(admitted.Version, admitted.Operation)
				if admitted.Operation == protocol.ExtensionMethod {
					m = admitted.Method
				}
				url := "http://127.0.0.1:1" + base
				if b == protocol.GRPC {
					url = "http://127.0.0.1:1"
				}
				stream := admitted.Operation == protocol.SendStreamingMessage || admitted.Operation == protocol.SubscribeToTask
				hr, perr := newRequest(t.Context(), target{name: "up", url: url, binding: b}, Request{Handler: "up",
					Version: admitted.Version, Method: m, Params: params, Token: "tok", Extensions: []string{positionstest.ExtensionURI}}, "1", stream)
				require.Nil(t, perr, "%v", perr)
				var sent []byte
				if hr.Body != nil {
					sent, err = io.ReadAll(hr.Body)
					require.NoError(t, err)
				}
				received, perr := wire.Parse(protocol.Envelope{Method: hr.Method, Path: hr.URL.EscapedPath(), Query: hr.URL.RawQuery,
					Header: header(hr.Header), Body: sent, GRPC: true, Methods: positionstest.Methods()}, base, protocol.Limits{})
				require.Nil(t, perr, "the handler's call does not parse: %v\n%s %s\n%s", perr, hr.Method, hr.URL, sent)
				requireSameModel(t, admitted, received)
				checked[b]++
			})
		}
	}
	for _, b := range []protocol.Binding{protocol.JSONRPC, protocol.HTTPJSON, protocol.GRPC} {
		require.NotZero(t, checked[b], "no position was forwarded over %s", b)
	}
}

func cut(target string) (path, query string, ok bool) {
	for i := range len(target) {
		if target[i] == '?' {
			return target[:i], target[i+1:], true
		}
	}
	return target, "", false
}

// requireSameModel compares what admission decides on; where a resource was named differs by
// binding (path, params.id, task_id), what it names must not.
func requireSameModel(t *testing.T, want, got *protocol.Request) {
	t.Helper()
	require.Equal(t, want.Operation, got.Operation)
	require.Equal(t, want.Version, got.Version)
	require.Equal(t, want.Tenant, got.Tenant, "tenant")
	require.Equal(t, want.TaskID, got.TaskID, "target task")
	require.Equal(t, ids(want), ids(got), "tasks")
	require.Equal(t, want.ConfigID, got.ConfigID, "config id")
	require.Equal(t, urls(want), urls(got), "push webhooks")
	require.Equal(t, want.List, got.List, "list filters")
	if want.Message == nil {
		require.Nil(t, got.Message)
		return
	}
	require.NotNil(t, got.Message)
	w, g := *want.Message, *got.Message
	require.Equal(t, w.MessageID, g.MessageID)
	require.Equal(t, w.TaskID, g.TaskID)
	require.Equal(t, w.ContextID, g.ContextID)
	require.Equal(t, w.SkillHint, g.SkillHint)
	require.Equal(t, w.AcceptedOutputModes, g.AcceptedOutputModes)
	require.Equal(t, len(w.Parts), len(g.Parts))
	for i := range w.Parts {
		require.Equal(t, w.Parts[i].Kind, g.Parts[i].Kind)
		require.Equal(t, w.Parts[i].MediaType, g.Parts[i].MediaType)
		require.Equal(t, w.Parts[i].Text, g.Parts[i].Text)
		require.Equal(t, w.Parts[i].InlineBytes, g.Parts[i].InlineBytes)
		require.JSONEq(t, orNull(w.Parts[i].Data), orNull(g.Parts[i].Data))
	}
}

func orNull(b []byte) string {
	if len(b) == 0 {
		return "null"
	}
	return string(b)
}

func ids(r *protocol.Request) []string {
	var out []string
	for _, t := range r.Tasks {
		out = append(out, t.ID)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func urls(r *protocol.Request) []string {
	var out []string
	for _, p := range r.Push {
		out = append(out, p.URL)
	}
	slices.Sort(out)
	return out
}
