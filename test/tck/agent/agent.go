// Package agent is the reference agent the official A2A TCK runs against in `make tck`: an a2a-go
// v2 server whose executor acts on the messageId prefixes of the TCK's scenarios
// (../shared/a2a-tck/v1.0/scenarios/*.feature, the behaviour of its own SUTs in v1.0/sut and of
// v0.3/python-sut). It serves A2A 1.0 over JSON-RPC, HTTP+JSON and gRPC, and A2A 0.3 over
// JSON-RPC (a2a-go's a2av0 layer) and the 0.3 specification's HTTP+JSON binding (rest03), with push notifications and an extended card. The harness
// (package tck) runs the TCK against it alone, as the control, and with capgate in front.
package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	a2agrpc "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
	"google.golang.org/grpc"
)

// Paths of the bindings on the agent's HTTP listener.
const (
	// RESTPath is the base of the HTTP+JSON binding (the proto's paths follow it).
	RESTPath = "/rest"
)

// LongRunning is how long a "test-resubscribe-message-id" task stays working: the TCK subscribes
// to it meanwhile (2 × its streaming timeout, whose default is 2 s, as its SUTs do).
const LongRunning = 4 * time.Second

// Agent is the running reference agent.
type Agent struct {
	// URL is the HTTP listener's base URL: JSON-RPC at "/" (A2A 1.0 to requests with
	// A2A-Version 1.0, 0.3 to the others, as the spec's versioning says), HTTP+JSON under
	// RESTPath, the 1.0 card at /.well-known/agent-card.json. URL03 is a second listener for
	// A2A 0.3 callers, the same agent with the 0.3 card at /.well-known/agent-card.json (the 0.3
	// TCK reads that path and no other). GRPC is the gRPC listener's host:port.
	URL, URL03, GRPC string
	// Card is the public card (1.0).
	Card *a2a.AgentCard

	httpSrv, http03Srv *http.Server
	grpcSrv            *grpc.Server
}

// Start serves the agent on two loopback listeners the kernel chooses; Stop ends it.
func Start() (*Agent, error) {
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	hl03, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = hl.Close()
		return nil, err
	}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = hl.Close()
		_ = hl03.Close()
		return nil, err
	}
	a := &Agent{URL: "http://" + hl.Addr().String(), URL03: "http://" + hl03.Addr().String(), GRPC: gl.Addr().String()}
	a.Card = card(a.URL, a.GRPC)
	extended := *a.Card
	extended.Skills = append(extended.Skills[:len(extended.Skills):len(extended.Skills)], a2a.AgentSkill{
		ID: "tck-extended", Name: "TCK extended skill", Description: "Shown to authenticated callers only",
		Tags: []string{"tck"},
	})
	// One caller, as the TCK has one: a2a-go's store lists only an authenticated user's tasks.
	store := taskstore.NewInMemory(&taskstore.InMemoryStoreConfig{Authenticator: func(context.Context) (string, error) { return "tck", nil }})
	inner := a2asrv.NewHandler(executor{},
		a2asrv.WithTaskStore(store),
		a2asrv.WithPushNotifications(push.NewInMemoryStore(), push.NewHTTPPushSender(&push.HTTPSenderConfig{Timeout: 5 * time.Second})),
		a2asrv.WithExtendedAgentCard(&extended),
		a2asrv.WithCapabilityChecks(&a.Card.Capabilities),
		a2asrv.WithLogger(slog.New(slog.DiscardHandler)),
	)
	handler := subscribing{inner}
	jsonrpc := versioned{v1: terminalSubscribe{a2asrv.NewJSONRPCHandler(handler), handler, false}, v03: a2av0.NewJSONRPCHandler(handler)}
	card03 := a2asrv.NewAgentCardHandler(a2av0.NewStaticAgentCardProducer(card03(a.URL03 + "/")))
	mux := http.NewServeMux()
	cardHandler, err := cached(a.Card, a2asrv.NewStaticAgentCardHandler(a.Card))
	if err != nil {
		_, _, _ = hl.Close(), hl03.Close(), gl.Close()
		return nil, err
	}
	mux.Handle(a2asrv.WellKnownAgentCardPath, cardHandler)
	mux.Handle(RESTPath+"/", http.StripPrefix(RESTPath, terminalSubscribe{a2asrv.NewRESTHandler(handler), handler, true}))
	mux.Handle("/", jsonrpc)
	mux03 := http.NewServeMux()
	mux03.Handle(a2asrv.WellKnownAgentCardPath, card03)
	mux03.Handle(RESTPath03, rest03{jsonrpc: jsonrpc.v03, card: card03})
	mux03.Handle("/", jsonrpc)
	a.httpSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	a.http03Srv = &http.Server{Handler: mux03, ReadHeaderTimeout: 10 * time.Second}
	a.grpcSrv = grpc.NewServer()
	a2agrpc.NewHandler(handler).RegisterWith(a.grpcSrv)
	go func() { _ = a.httpSrv.Serve(hl) }()
	go func() { _ = a.http03Srv.Serve(hl03) }()
	go func() { _ = a.grpcSrv.Serve(gl) }()
	return a, nil
}

// Stop closes the listeners and every connection.
func (a *Agent) Stop() {
	a.grpcSrv.Stop()
	_ = a.httpSrv.Close()
	_ = a.http03Srv.Close()
}

// versioned serves A2A 1.0 JSON-RPC to requests that send A2A-Version 1.0, 0.3 to those that
// send 0.3 or no version (A2A 1.0, section 3.6.2: a request without one is 0.3), and
// VersionNotSupported (-32009) to the others. capgate calls its handlers so.
type versioned struct{ v1, v03 http.Handler }

func (v versioned) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	version := r.Header.Get("A2A-Version")
	if version == "" {
		version = r.URL.Query().Get("A2A-Version")
	}
	switch version {
	case "1.0":
		v.v1.ServeHTTP(w, r)
	case "", "0.3":
		v.v03.ServeHTTP(w, r)
	default:
		var req struct {
			ID any `json:"id"`
		}
		_ = json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{
			"code": -32009, "message": "this agent speaks A2A 1.0 and 0.3",
		}})
	}
}

// subscribing answers SubscribeToTask as A2A 1.0 section 3.1.6 says where a2a-go v2.3.1 answers
// TaskNotFound "no active execution" (its execution ends when a task waits for input): a task in
// an interrupted state (input or auth required) streams its current Task and ends, and a task in
// a terminal state is UnsupportedOperation. Tasks with an active execution are a2a-go's.
type subscribing struct{ a2asrv.RequestHandler }

func (h subscribing) SubscribeToTask(ctx context.Context, req *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		first := true
		for ev, err := range h.RequestHandler.SubscribeToTask(ctx, req) {
			if first && errors.Is(err, a2a.ErrTaskNotFound) {
				task, gerr := h.GetTask(ctx, &a2a.GetTaskRequest{Tenant: req.Tenant, ID: req.ID})
				switch {
				case gerr != nil:
				case task.Status.State.Terminal():
					yield(nil, fmt.Errorf("%w: task %s is in a terminal state", a2a.ErrUnsupportedOperation, task.ID))
					return
				default:
					yield(task, nil)
					return
				}
			}
			first = false
			if !yield(ev, err) {
				return
			}
		}
	}
}

// known is TaskNotFound unless the caller's task id exists: a push config names a task, and
// A2A (1.0 section 3.1.7-3.1.10, 0.3 section 7.5-7.8) answers TaskNotFound for one that does
// not exist, where a2a-go v2.3.1 keeps configs for any id.
func (h subscribing) known(ctx context.Context, tenant string, id a2a.TaskID) error {
	if id == "" {
		return nil // a2a-go says what is missing
	}
	_, err := h.GetTask(ctx, &a2a.GetTaskRequest{Tenant: tenant, ID: id})
	return err
}

// CreateTaskPushConfig implements a2asrv.RequestHandler: for an existing task only.
func (h subscribing) CreateTaskPushConfig(ctx context.Context, req *a2a.PushConfig) (*a2a.PushConfig, error) {
	if err := h.known(ctx, req.Tenant, req.TaskID); err != nil {
		return nil, err
	}
	return h.RequestHandler.CreateTaskPushConfig(ctx, req)
}

// GetTaskPushConfig implements a2asrv.RequestHandler: for an existing task only.
func (h subscribing) GetTaskPushConfig(ctx context.Context, req *a2a.GetTaskPushConfigRequest) (*a2a.PushConfig, error) {
	if err := h.known(ctx, req.Tenant, req.TaskID); err != nil {
		return nil, err
	}
	return h.RequestHandler.GetTaskPushConfig(ctx, req)
}

// ListTaskPushConfigs implements a2asrv.RequestHandler: for an existing task only.
func (h subscribing) ListTaskPushConfigs(ctx context.Context, req *a2a.ListTaskPushConfigRequest) (*a2a.ListTaskPushConfigResponse, error) {
	if err := h.known(ctx, req.Tenant, req.TaskID); err != nil {
		return nil, err
	}
	return h.RequestHandler.ListTaskPushConfigs(ctx, req)
}

// DeleteTaskPushConfig implements a2asrv.RequestHandler: for an existing task only.
func (h subscribing) DeleteTaskPushConfig(ctx context.Context, req *a2a.DeleteTaskPushConfigRequest) error {
	if err := h.known(ctx, req.Tenant, req.TaskID); err != nil {
		return err
	}
	return h.RequestHandler.DeleteTaskPushConfig(ctx, req)
}

// terminalSubscribe refuses SubscribeToTask on a task in a terminal state before a2a-go's 1.0
// JSON-RPC or HTTP+JSON handler starts its stream (it answers with HTTP 200 and the error as an
// SSE event, which the TCK reads as success, STREAM-SUB-003): UnsupportedOperation as a plain
// JSON-RPC error, or HTTP 400 with a google.rpc.Status body (A2A 1.0 section 3.1.6, 5.4).
type terminalSubscribe struct {
	next http.Handler
	h    a2asrv.RequestHandler
	rest bool
}

func (t terminalSubscribe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var id string
	var rpcID json.RawMessage
	if t.rest {
		if task, ok := strings.CutSuffix(r.URL.Path, ":subscribe"); ok && (r.Method == http.MethodPost || r.Method == http.MethodGet) {
			_, id, _ = strings.Cut(task, "/tasks/")
		}
	} else if r.Method == http.MethodPost {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "the body could not be read", http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ID string `json:"id"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &req) == nil && req.Method == "SubscribeToTask" {
			id, rpcID = req.Params.ID, req.ID
		}
	}
	if id == "" {
		t.next.ServeHTTP(w, r)
		return
	}
	task, err := t.h.GetTask(r.Context(), &a2a.GetTaskRequest{ID: a2a.TaskID(id)})
	if err != nil || !task.Status.State.Terminal() {
		t.next.ServeHTTP(w, r)
		return
	}
	msg := fmt.Sprintf("task %s is in a terminal state", id)
	w.Header().Set("Content-Type", "application/json")
	if t.rest {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": 400, "status": "FAILED_PRECONDITION", "message": msg,
			"details": []any{map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "UNSUPPORTED_OPERATION", "domain": "a2a-protocol.org"}}}})
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": rpcID, "error": map[string]any{"code": -32004, "message": msg}})
}

// cached serves the card with the caching headers A2A 1.0 section 8.6.1 asks of a card endpoint
// (Cache-Control with max-age, ETag; Last-Modified, a MAY) and answers a matching
// If-None-Match with 304.
func cached(card *a2a.AgentCard, next http.Handler) (http.Handler, error) {
	b, err := json.Marshal(card)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	modified := time.Now().UTC().Format(http.TimeFormat)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=300")
		w.Header().Set("ETag", etag)
		w.Header().Set("Last-Modified", modified)
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		next.ServeHTTP(w, r)
	}), nil
}

// card is the public 1.0 card: the three bindings, streaming, push notifications and an
// extended card. The gRPC interface is host:port, the form gRPC libraries dial (as the TCK's own
// SUTs advertise it).
func card(base, grpcAddr string) *a2a.AgentCard {
	return &a2a.AgentCard{
		Name:        "capgate TCK reference agent",
		Description: "Acts on the messageId prefixes of the A2A TCK's scenarios",
		Version:     "1.0.0",
		Provider:    &a2a.AgentProvider{Org: "capgate", URL: "https://github.com/capgate/capgate"},
		SupportedInterfaces: []*a2a.AgentInterface{
			a2a.NewAgentInterface(base, a2a.TransportProtocolJSONRPC),
			a2a.NewAgentInterface(base+RESTPath, a2a.TransportProtocolHTTPJSON),
			a2a.NewAgentInterface(grpcAddr, a2a.TransportProtocolGRPC),
		},
		Capabilities:       a2a.AgentCapabilities{Streaming: true, PushNotifications: true, ExtendedAgentCard: true},
		DefaultInputModes:  []string{"text/plain"},
		DefaultOutputModes: []string{"text/plain"},
		Skills: []a2a.AgentSkill{{
			ID: "tck", Name: "TCK conformance", Description: "Handles the TCK's conformance messages",
			Tags: []string{"tck"},
		}},
	}
}

// card03 is the card a2av0 serves to A2A 0.3 callers: the JSON-RPC endpoint at url, and the 0.3
// HTTP+JSON binding (rest03) whose /v1/… routes follow the same url.
func card03(url string) *a2a.AgentCard {
	c := card(url, "")
	c.SupportedInterfaces = []*a2a.AgentInterface{
		{URL: url, ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: "0.3"},
		{URL: strings.TrimSuffix(url, "/"), ProtocolBinding: a2a.TransportProtocolHTTPJSON, ProtocolVersion: "0.3"},
	}
	c.Capabilities.ExtendedAgentCard = false
	return c
}

// executor answers by the message's messageId prefix, as the TCK's scenarios say.
type executor struct{}

var (
	_ a2asrv.AgentExecutor  = executor{}
	_ a2asrv.RequestHandler = subscribing{}
)

// scenario is what the executor does for one prefix: the events after the task exists.
type scenario func(ec *a2asrv.ExecutorContext) []a2a.Event

func text(s string) *a2a.Part { return a2a.NewTextPart(s) }

func agentMessage(ec *a2asrv.ExecutorContext, s string) *a2a.Message {
	return a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, text(s))
}

func status(ec *a2asrv.ExecutorContext, state a2a.TaskState, msg *a2a.Message) a2a.Event {
	return a2a.NewStatusUpdateEvent(ec, state, msg)
}

func artifact(ec *a2asrv.ExecutorContext, parts ...*a2a.Part) a2a.Event {
	return a2a.NewArtifactEvent(ec, parts...)
}

func filePart() *a2a.Part {
	p := a2a.NewRawPart([]byte("tck"))
	p.Filename, p.MediaType = "output.txt", "text/plain"
	return p
}

// working, then an artifact of parts, then completed: the streaming scenarios' shape.
func streamed(parts ...*a2a.Part) scenario {
	return func(ec *a2asrv.ExecutorContext) []a2a.Event {
		return []a2a.Event{status(ec, a2a.TaskStateWorking, nil), artifact(ec, parts...), status(ec, a2a.TaskStateCompleted, nil)}
	}
}

// an artifact, then completed: the artifact scenarios' shape.
func withArtifact(parts ...*a2a.Part) scenario {
	return func(ec *a2asrv.ExecutorContext) []a2a.Event {
		return []a2a.Event{artifact(ec, parts...), status(ec, a2a.TaskStateCompleted, nil)}
	}
}

// scenarios by prefix, longest first where one prefix starts another (tck-artifact-file-url
// before tck-artifact-file, tck-stream-artifact-* before tck-stream-*).
var scenarios = []struct {
	prefix string
	run    scenario
}{
	{"tck-stream-artifact-chunked", func(ec *a2asrv.ExecutorContext) []a2a.Event {
		first := a2a.NewArtifactEvent(ec, text("chunk-1 "))
		first.Append = true
		last := a2a.NewArtifactUpdateEvent(ec, first.Artifact.ID, text("chunk-2"))
		last.Append, last.LastChunk = true, true
		return []a2a.Event{status(ec, a2a.TaskStateWorking, nil), first, last, status(ec, a2a.TaskStateCompleted, nil)}
	}},
	{"tck-stream-artifact-text", streamed(text("Streamed text content"))},
	{"tck-stream-artifact-file", streamed(filePart())},
	{"tck-stream-ordering-001", streamed(text("Ordered output"))},
	{"tck-stream-001", streamed(text("Stream hello from TCK"))},
	{"tck-stream-002", func(ec *a2asrv.ExecutorContext) []a2a.Event {
		return []a2a.Event{status(ec, a2a.TaskStateCompleted, nil)}
	}},
	{"tck-stream-003", streamed(text("Stream task lifecycle"))},
	{"tck-artifact-file-url", withArtifact(func() *a2a.Part {
		p := a2a.NewFileURLPart("https://example.com/output.txt", "text/plain")
		p.Filename = "output.txt"
		return p
	}())},
	{"tck-artifact-text", withArtifact(text("Generated text content"))},
	{"tck-artifact-file", withArtifact(filePart())},
	{"tck-artifact-data", withArtifact(a2a.NewDataPart(map[string]any{"key": "value", "count": 42}))},
	{"tck-input-required", func(ec *a2asrv.ExecutorContext) []a2a.Event {
		return []a2a.Event{status(ec, a2a.TaskStateInputRequired, agentMessage(ec, "More input is needed"))}
	}},
	{"tck-complete-task", func(ec *a2asrv.ExecutorContext) []a2a.Event {
		return []a2a.Event{status(ec, a2a.TaskStateCompleted, agentMessage(ec, "Hello from TCK"))}
	}},
}

// Execute implements a2asrv.AgentExecutor.
func (executor) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		id := ""
		if ec.Message != nil {
			id = ec.Message.ID
		}
		switch {
		case strings.HasPrefix(id, "tck-message-response"):
			yield(a2a.NewMessage(a2a.MessageRoleAgent, text("Direct message response")), nil)
			return
		case strings.HasPrefix(id, "tck-reject-task"):
			yield(nil, errors.New("rejected"))
			return
		}
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		if strings.HasPrefix(id, "test-resubscribe-message-id") {
			if !yield(status(ec, a2a.TaskStateWorking, nil), nil) {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(LongRunning):
			}
			yield(status(ec, a2a.TaskStateCompleted, nil), nil)
			return
		}
		events := []a2a.Event{status(ec, a2a.TaskStateCompleted, agentMessage(ec, "Unhandled messageId prefix: "+id))}
		if !strings.HasPrefix(id, "tck-") {
			// The 0.3 TCK's messages ("<purpose>-message-id-<uuid>"; the 1.0 TCK's all start
			// "tck-") expect a task that is still open when message/send returns: one they can
			// continue, cancel and configure pushes for.
			events = []a2a.Event{status(ec, a2a.TaskStateInputRequired, agentMessage(ec, "Hello World! Send more, or cancel the task."))}
		}
		for _, s := range scenarios {
			if strings.HasPrefix(id, s.prefix) {
				events = s.run(ec)
				break
			}
		}
		for _, e := range events {
			if !yield(e, nil) {
				return
			}
		}
	}
}

// Cancel implements a2asrv.AgentExecutor: the task is canceled.
func (executor) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(status(ec, a2a.TaskStateCanceled, nil), nil)
	}
}
