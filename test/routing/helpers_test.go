// Package routing_test drives message routing and task operations end to
// end: capgate's server.Run on 127.0.0.1, the official a2a-go v2 client, the
// builtin echo handler and real upstream handlers (a2a-go servers and raw
// HTTP servers on 127.0.0.1).
package routing_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/sidecar/handler/echo"
	"github.com/capgate/capgate/sidecar/server"
	"github.com/capgate/capgate/sidecar/tasks"
	"github.com/capgate/capgate/test/testutil"
)

// Callers of the finance example. partner holds recon.run; public does not.
var (
	partner = testutil.Partner()
	public  = testutil.PublicCaller()
	other   = testutil.OtherPartner()
)

// jsonrpc returns an a2a-go 1.0 JSON-RPC client of srv for the caller o.
func jsonrpc(t testing.TB, srv *testutil.Server, o testutil.TokenOptions) *a2aclient.Client {
	t.Helper()
	return srv.Client(t, a2a.TransportProtocolJSONRPC, testutil.Bearer(testutil.Token(t, o)))
}

// pdfPart is a raw part of media type application/pdf.
func pdfPart() *a2a.Part {
	p := a2a.NewRawPart([]byte("%PDF-1.7\n% an invoice\n"))
	p.MediaType = "application/pdf"
	return p
}

// userMsg is a user message with parts.
func userMsg(parts ...*a2a.Part) *a2a.Message { return a2a.NewMessage(a2a.MessageRoleUser, parts...) }

// text is a user message with one text part.
func text(s string) *a2a.Message { return userMsg(a2a.NewTextPart(s)) }

// hinted sets the skill hint (message metadata skillId) on m.
func hinted(m *a2a.Message, skillID string) *a2a.Message {
	m.Metadata = map[string]any{"skillId": skillID}
	return m
}

// continuing puts m on task id.
func continuing(m *a2a.Message, id a2a.TaskID) *a2a.Message {
	m.TaskID = id
	return m
}

// sendTask sends m and requires a task in answer.
func sendTask(t testing.TB, c *a2aclient.Client, m *a2a.Message) *a2a.Task {
	t.Helper()
	res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: m})
	require.NoError(t, err)
	task, ok := res.(*a2a.Task)
	require.True(t, ok, "want a task, got %T", res)
	return task
}

// reportOf reads the echo's report from a task's artifacts.
func reportOf(t testing.TB, task *a2a.Task) echo.Report {
	t.Helper()
	require.Equal(t, a2a.TaskStateCompleted, task.Status.State)
	require.Len(t, task.Artifacts, 1)
	return reportOfParts(t, task.Artifacts[0].Parts)
}

func reportOfParts(t testing.TB, parts []*a2a.Part) echo.Report {
	t.Helper()
	require.Len(t, parts, 1)
	data, ok := parts[0].Content.(a2a.Data)
	require.True(t, ok, "want a data part, got %T", parts[0].Content)
	b, err := json.Marshal(data.Value)
	require.NoError(t, err)
	var r echo.Report
	require.NoError(t, json.Unmarshal(b, &r))
	return r
}

// routedTo sends m and returns the capability the echo reports.
func routedTo(t testing.TB, c *a2aclient.Client, m *a2a.Message) string {
	t.Helper()
	return reportOf(t, sendTask(t, c, m)).Capability
}

// errorInfo returns the ErrorInfo metadata of an a2a-go client error.
func errorInfo(t testing.TB, err error) map[string]string {
	t.Helper()
	var ae *a2a.Error
	require.True(t, errors.As(err, &ae), "want an *a2a.Error, got %T: %v", err, err)
	md, _ := ae.ErrorInfo().Value["metadata"].(map[string]string)
	return md
}

// financeCopy copies the finance example to a temp dir, applies edits to
// capgate.yaml (old → new, each exactly once) and returns the config path.
func financeCopy(t testing.TB, edits ...string) string {
	t.Helper()
	require.Zero(t, len(edits)%2, "edits are old, new pairs")
	cfg := testutil.CopyFinance(t)
	testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
		for i := 0; i < len(edits); i += 2 {
			require.Equal(t, 1, strings.Count(s, edits[i]), "want exactly one %q in capgate.yaml", edits[i])
			s = strings.Replace(s, edits[i], edits[i+1], 1)
		}
		return s
	})
	return cfg
}

// startWithStore runs server.Run for d with the given task store (so that
// two deployments in a row can share task bindings) and returns a
// testutil.Server usable for clients. The server stops when the test ends.
func startWithStore(t testing.TB, d *deployment.Deployment, store tasks.Store) *testutil.Server {
	t.Helper()
	d.Config.Listen.A2A = "127.0.0.1:0"
	d.Config.Listen.Admin = "127.0.0.1:0"
	d.Config.Listen.ExtAuthz = "127.0.0.1:0"
	core, logs := observer.New(zapcore.DebugLevel)
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	ready := make(chan server.Addrs, 1)
	done := make(chan error, 1)
	go func() {
		done <- server.Run(ctx, server.Options{Deployment: d, Logger: zap.New(core), Gateway: true, Store: store,
			OnReady: func(a server.Addrs) { ready <- a }})
	}()
	s := &testutil.Server{Deployment: d, Logs: logs,
		HTTP: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone(), Timeout: 30 * time.Second}}
	select {
	case s.Addrs = <-ready:
	case err := <-done:
		cancel()
		require.FailNow(t, "capgate did not start", "server.Run: %v", err)
	}
	s.URL, s.AdminURL = "http://"+s.Addrs.A2A, "http://"+s.Addrs.Admin
	t.Cleanup(func() {
		s.HTTP.CloseIdleConnections()
		cancel()
		require.NoError(t, <-done)
	})
	return s
}

// rawStreamError sends a streaming JSON-RPC 1.0 request to srv and returns
// the A2A error it is answered with (as a plain JSON-RPC response or as an
// SSE event), mapped to a2a-go's sentinel by code; nil when no error came.
func rawStreamError(t testing.TB, srv *testutil.Server, bearer, method string, params any) error {
	t.Helper()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	require.NoError(t, err)
	r := srv.JSONRPC(t, string(body), "A2A-Version", "1.0", "Authorization", bearer, "Accept", "text/event-stream")
	if r.Header.Get("Content-Type") == "application/json" {
		// Refused before the stream: a plain JSON-RPC error with the error's HTTP status.
		require.GreaterOrEqual(t, r.Status, 400, "%s", r.Body)
	} else {
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	}
	frames := [][]byte{r.Body}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream") {
		frames = nil
		for _, line := range strings.Split(string(r.Body), "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				frames = append(frames, []byte(d))
			}
		}
	}
	for _, f := range frames {
		var env struct {
			Error *struct {
				Code    int                `json:"code"`
				Message string             `json:"message"`
				Data    testutil.ErrorData `json:"data"` // a list in 1.0, one object to 0.3 callers
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal(f, &env), "%s", f)
		if env.Error != nil {
			sentinel, ok := codeErrors[env.Error.Code]
			require.True(t, ok, "unexpected code %d", env.Error.Code)
			e := a2a.NewError(sentinel, env.Error.Message)
			for _, d := range env.Error.Data {
				if d.Metadata != nil {
					e = e.WithErrorInfoMeta(d.Metadata)
				}
			}
			return e
		}
	}
	return nil
}

// codeErrors maps JSON-RPC codes to a2a-go's errors (as its client does).
var codeErrors = map[int]error{
	-32001: a2a.ErrTaskNotFound,
	-32002: a2a.ErrTaskNotCancelable,
	-32004: a2a.ErrUnsupportedOperation,
	-32005: a2a.ErrUnsupportedContentType,
	-32006: a2a.ErrInvalidAgentResponse,
	-32602: a2a.ErrInvalidParams,
	-32603: a2a.ErrInternalError,
	-31401: a2a.ErrUnauthenticated,
	-31403: a2a.ErrUnauthorized,
}
