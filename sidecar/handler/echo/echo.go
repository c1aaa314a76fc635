// Package echo is the builtin:echo handler: a real A2A server that answers every message with a completed task reporting the identity and media types it was given.
package echo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
	"github.com/go-json-experiment/json/jsontext"
	"go.uber.org/zap"

	"github.com/capgate/capgate/sidecar/handlerauth"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/jsonrpcwire"
)

// MaxBodyBytes bounds a request body.
const MaxBodyBytes = 16 << 20

// Option configures the echo handler.
type Option func(*options)

type options struct{ log *zap.Logger }

// WithLogger sets the logger (refused tokens are logged, never the token or
// message content).
func WithLogger(l *zap.Logger) Option { return func(o *options) { o.log = l } }

// Report is the data part of the echo's artifact: what the call was given.
type Report struct {
	Capability string   `json:"capability"`
	Handler    string   `json:"handler"`
	Principal  string   `json:"principal"`
	Tenant     string   `json:"tenant"`
	Scopes     []string `json:"scopes"`
	MediaTypes []string `json:"mediaTypes"`
	// Limits are the capability's limits from the token (handlerauth
	// Claims.Limits); absent when it has none.
	Limits map[string]any `json:"limits,omitempty"`
}

// New returns the echo A2A server. verify authenticates every call's
// Authorization header (capgate's handler token, e.g. a handlerauth
// Verifier's Verify); a call it refuses, or whose token has no subject or
// capability claim, gets UNAUTHENTICATED (-31401). A2A 1.0 is spoken to
// requests with A2A-Version 1.0 and 0.3 to those without the header or with
// 0.3, over JSON-RPC, both views of one task store. Tasks are kept in memory
// for their owner (tenant and subject): GetTask, ListTasks, CancelTask and
// SubscribeToTask work on them.
func New(verify func(ctx context.Context, bearer string) (handlerauth.Claims, error), opts ...Option) http.Handler {
	auth, rh, panics := build(verify, opts)
	return &server{
		auth: auth,
		v1:   a2asrv.NewJSONRPCHandler(rh, a2asrv.WithTransportPanicHandler(panics)),
		v03:  a2av0.NewJSONRPCHandler(rh, a2asrv.WithTransportPanicHandler(panics)),
	}
}

// NewRequestHandler is the echo's a2a-go request handler, for serving it over
// another binding (a2asrv.NewRESTHandler, a2agrpc's handler): the same
// verification, tasks and report as New's, without the extension methods.
func NewRequestHandler(verify func(ctx context.Context, bearer string) (handlerauth.Claims, error), opts ...Option) a2asrv.RequestHandler {
	_, rh, _ := build(verify, opts)
	return rh
}

// build makes the echo's authenticator and request handler.
func build(verify func(ctx context.Context, bearer string) (handlerauth.Claims, error), opts []Option) (handlerauth.Authenticator, a2asrv.RequestHandler, func(any) error) {
	o := options{}
	for _, opt := range opts {
		opt(&o)
	}
	if o.log == nil {
		o.log = zap.NewNop()
	}
	log := o.log.Named("echo")
	auth := handlerauth.VerifyFunc(func(ctx context.Context, bearer string) (handlerauth.Claims, error) {
		if verify == nil {
			return handlerauth.Claims{}, errors.New("echo: no verifier configured")
		}
		c, err := verify(ctx, bearer)
		if err == nil && (c.Subject == "" || c.Capability == "") {
			err = fmt.Errorf("%w: token has no subject or capability", handlerauth.ErrInvalidToken)
		}
		if err != nil {
			log.Info("token refused", zap.Error(err))
			return handlerauth.Claims{}, err
		}
		return c, nil
	})
	store := &ownedStore{
		Store:  taskstore.NewInMemory(&taskstore.InMemoryStoreConfig{Authenticator: owner}),
		owners: map[a2a.TaskID]string{},
	}
	panics := func(r any) error {
		log.Error("a2a server panicked", zap.Any("panic", r))
		return a2a.ErrInternalError
	}
	rh := a2asrv.NewHandler(executor{},
		a2asrv.WithTaskStore(store),
		a2asrv.WithCallInterceptors(handlerauth.NewServerInterceptor(auth)),
		a2asrv.WithLogger(slog.New(slog.DiscardHandler)),
		a2asrv.WithExecutionPanicHandler(panics),
		// Push configs are kept per task so that their CRUD can be tried
		// end to end; the echo never calls a webhook back.
		a2asrv.WithPushNotifications(push.NewInMemoryStore(), noCallbacks{}),
	)
	return auth, rh, panics
}

type server struct {
	auth    handlerauth.Authenticator
	v1, v03 http.Handler
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	v, perr := protocol.ParseVersion(r.Header.Get(protocol.VersionHeader))
	if perr != nil {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(jsonrpcwire.MarshalError(perr, nil))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(jsonrpcwire.MarshalError(protocol.Errorf(protocol.InvalidRequest, "the request body could not be read"), nil))
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var call struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(body, &call) == nil && call.Method != "" && !jsonrpcwire.IsA2AMethod(call.Method) {
		s.extensionMethod(w, r, call.ID, call.Method, call.Params)
		return
	}
	if v == protocol.V1 {
		s.v1.ServeHTTP(w, r)
		return
	}
	s.v03.ServeHTTP(w, r)
}

// extensionMethod answers a method an extension adds (capgate forwards one only to the
// capability that serves it): the method, the verified caller and the params, as the echo's
// report. Unknown A2A-looking names were refused by capgate before.
func (s *server) extensionMethod(w http.ResponseWriter, r *http.Request, id json.RawMessage, method string, params json.RawMessage) {
	w.Header().Set("Content-Type", "application/json")
	c, err := s.auth.Verify(r.Context(), r.Header.Get("Authorization"))
	if err != nil {
		_, _ = w.Write(jsonrpcwire.MarshalError(protocol.Errorf(protocol.Unauthenticated, "the bearer token is not valid"), jsontext.Value(id)))
		return
	}
	if len(params) == 0 {
		params = json.RawMessage("null")
	}
	out, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": map[string]any{
		"method": method, "params": params,
		"report": Report{Capability: c.Capability, Handler: c.Audience, Principal: c.Subject, Tenant: c.Tenant, Scopes: c.Scopes},
	}})
	if err != nil {
		_, _ = w.Write(jsonrpcwire.MarshalError(protocol.Errorf(protocol.Internal, "the answer could not be written"), jsontext.Value(id)))
		return
	}
	_, _ = w.Write(out)
}

// noCallbacks is the echo's push sender: it records nothing and calls no
// webhook, since the echo is a test and demo handler.
type noCallbacks struct{}

func (noCallbacks) SendPush(context.Context, *a2a.PushConfig, a2a.Event) error { return nil }

// owner names the task owner of ctx's call: tenant and subject.
func owner(ctx context.Context) (string, error) {
	c, ok := handlerauth.FromContext(ctx)
	if !ok || c.Subject == "" {
		return "", a2a.ErrUnauthenticated
	}
	return strconv.Quote(c.Tenant) + " " + strconv.Quote(c.Subject), nil
}

// ownedStore lets only a task's owner read it: someone else's task id is
// TaskNotFound, as if it did not exist.
type ownedStore struct {
	taskstore.Store
	mu     sync.RWMutex
	owners map[a2a.TaskID]string
}

func (s *ownedStore) Create(ctx context.Context, task *a2a.Task) (taskstore.TaskVersion, error) {
	who, err := owner(ctx)
	if err != nil {
		return taskstore.TaskVersionMissing, err
	}
	v, err := s.Store.Create(ctx, task)
	if err != nil {
		return v, err
	}
	s.mu.Lock()
	s.owners[task.ID] = who
	s.mu.Unlock()
	return v, nil
}

func (s *ownedStore) Get(ctx context.Context, id a2a.TaskID) (*taskstore.StoredTask, error) {
	who, err := owner(ctx)
	if err != nil {
		return nil, a2a.ErrTaskNotFound
	}
	s.mu.RLock()
	have, ok := s.owners[id]
	s.mu.RUnlock()
	if !ok || have != who {
		return nil, a2a.ErrTaskNotFound
	}
	return s.Store.Get(ctx, id)
}

// executor answers every message with a completed task whose one artifact
// is the Report.
type executor struct{}

var _ a2asrv.AgentExecutor = executor{}

func (executor) Execute(ctx context.Context, execCtx *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		c, ok := handlerauth.FromContext(ctx)
		if !ok || c.Subject == "" || c.Capability == "" {
			yield(nil, a2a.ErrUnauthenticated)
			return
		}
		if execCtx.StoredTask == nil {
			if !yield(a2a.NewSubmittedTask(execCtx, execCtx.Message), nil) {
				return
			}
		}
		report := ReportOf(c, execCtx.Message)
		// JSON-shaped values ([]any, not []string), so that the part
		// converts to a protobuf Struct when served over gRPC.
		data := map[string]any{
			"capability": report.Capability,
			"handler":    report.Handler,
			"principal":  report.Principal,
			"tenant":     report.Tenant,
			"scopes":     anys(report.Scopes),
			"mediaTypes": anys(report.MediaTypes),
		}
		if len(report.Limits) > 0 {
			data["limits"] = report.Limits
		}
		art := a2a.NewArtifactEvent(execCtx, a2a.NewDataPart(data))
		art.Artifact.Name = "echo"
		if !yield(art, nil) {
			return
		}
		yield(a2a.NewStatusUpdateEvent(execCtx, a2a.TaskStateCompleted, nil), nil)
	}
}

func (executor) Cancel(_ context.Context, execCtx *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(execCtx, a2a.TaskStateCanceled, nil), nil)
	}
}

func anys(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// ReportOf is what the echo reports for a call with claims c carrying msg.
func ReportOf(c handlerauth.Claims, msg *a2a.Message) Report {
	r := Report{
		Capability: c.Capability,
		Handler:    c.Audience,
		Principal:  c.Subject,
		Tenant:     c.Tenant,
		Scopes:     slices.Sorted(slices.Values(c.Scopes)),
		MediaTypes: []string{},
	}
	if len(c.Limits) > 0 {
		r.Limits = c.Limits
	}
	r.Scopes = slices.Compact(r.Scopes)
	if r.Scopes == nil {
		r.Scopes = []string{}
	}
	if msg != nil {
		for _, p := range msg.Parts {
			r.MediaTypes = append(r.MediaTypes, partMediaType(p))
		}
	}
	slices.Sort(r.MediaTypes)
	r.MediaTypes = slices.Compact(r.MediaTypes)
	return r
}

// partMediaType is text/plain for text, the declared type otherwise, with
// application/json for data and application/octet-stream for raw and URL
// parts that declare none.
func partMediaType(p *a2a.Part) string {
	if p == nil {
		return "application/octet-stream"
	}
	switch p.Content.(type) {
	case a2a.Text:
		return "text/plain"
	case a2a.Data:
		return normalise(p.MediaType, "application/json")
	default:
		return normalise(p.MediaType, "application/octet-stream")
	}
}

func normalise(declared, def string) string {
	if strings.TrimSpace(declared) == "" {
		return def
	}
	if mt, _, err := mime.ParseMediaType(declared); err == nil {
		return mt
	}
	return strings.ToLower(strings.TrimSpace(declared))
}
