package agent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"

	a2alegacy "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2apb"
	"github.com/a2aproject/a2a-go/a2apb/pbconv"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"
)

// RESTPath03 is the base of the agent's A2A 0.3 HTTP+JSON binding on its 0.3 listener: the 0.3
// specification's routes (/v1/message:send, /v1/tasks/{id}, …) follow the interface URL.
const RESTPath03 = "/v1/"

// rest03 serves the A2A 0.3 specification's HTTP+JSON binding — the 0.3 a2a.proto (package
// a2a.v1) transcoded by its google.api.http annotations, bodies in ProtoJSON — as the 0.3 TCK's
// REST client and the 0.3 Python SDK's server speak it. a2a-go v2 serves 0.3 over JSON-RPC only
// (its a2av0 REST handler serves un-prefixed routes with the JSON-RPC types), so each request is
// converted with a2a-go v0.3.15's pbconv to the 0.3 JSON-RPC call it stands for, served by the
// same 0.3 JSON-RPC handler as the agent's JSON-RPC binding, and its result converted back.
type rest03 struct {
	jsonrpc http.Handler
	// card is the public 0.3 card the agent serves, read for GET /v1/card.
	card http.Handler
}

// The 0.3.0 proto (the TCK's a2a.proto) names Message's parts `content` (field 5); a2a-go
// v0.3.15's a2apb, from a later 0.3 revision, names it `parts`. ProtoJSON is read and written
// through a copy of a2apb's descriptors with 0.3.0's JSON name: the wire bytes are a2apb's.
var descriptors03 = sync.OnceValues(func() (protoreflect.FileDescriptor, error) {
	fdp := protodesc.ToFileDescriptorProto(a2apb.File_a2a_proto)
	for _, m := range fdp.GetMessageType() {
		if m.GetName() != "Message" {
			continue
		}
		for _, f := range m.GetField() {
			if f.GetNumber() == 5 {
				f.JsonName = proto.String("content")
			}
		}
	}
	return protodesc.NewFile(fdp, protoregistry.GlobalFiles)
})

func dynamic03(m proto.Message) (*dynamicpb.Message, error) {
	fd, err := descriptors03()
	if err != nil {
		return nil, err
	}
	md := fd.Messages().ByName(m.ProtoReflect().Descriptor().Name())
	if md == nil {
		return nil, errors.New("no such 0.3 message")
	}
	return dynamicpb.NewMessage(md), nil
}

// unmarshal03 reads ProtoJSON with 0.3.0's names into m.
func unmarshal03(b []byte, m proto.Message) error {
	dyn, err := dynamic03(m)
	if err != nil {
		return err
	}
	if err := protojson.Unmarshal(b, dyn); err != nil {
		return err
	}
	wire, err := proto.Marshal(dyn)
	if err != nil {
		return err
	}
	return proto.Unmarshal(wire, m)
}

// marshal03 writes m as ProtoJSON with 0.3.0's names.
func marshal03(m proto.Message) ([]byte, error) {
	dyn, err := dynamic03(m)
	if err != nil {
		return nil, err
	}
	wire, err := proto.Marshal(m)
	if err != nil {
		return nil, err
	}
	if err := proto.Unmarshal(wire, dyn); err != nil {
		return nil, err
	}
	return protojson.Marshal(dyn)
}

func (h rest03) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, "/v1")
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		restError(w, http.StatusBadRequest, "the body could not be read")
		return
	}
	switch {
	case path == "/message:send" && r.Method == http.MethodPost:
		h.send(w, body, "message/send", false)
	case path == "/message:stream" && r.Method == http.MethodPost:
		h.send(w, body, "message/stream", true)
	case path == "/card" && r.Method == http.MethodGet:
		h.getCard(w, r)
	case strings.HasPrefix(path, "/tasks/"):
		h.tasks(w, r, strings.TrimPrefix(path, "/tasks/"), body)
	default:
		restError(w, http.StatusNotFound, "no A2A 0.3 route matches")
	}
}

// tasks serves the /v1/tasks/{id}… routes; rest is the path after /v1/tasks/.
func (h rest03) tasks(w http.ResponseWriter, r *http.Request, rest string, body []byte) {
	id, sub, _ := strings.Cut(rest, "/")
	if id == "" {
		restError(w, http.StatusNotFound, "no task id")
		return
	}
	if task, action, ok := strings.Cut(id, ":"); ok && sub == "" {
		switch {
		case action == "cancel" && r.Method == http.MethodPost:
			h.unary(w, "tasks/cancel", map[string]any{"id": task}, func(raw json.RawMessage) (proto.Message, error) {
				return taskProto(raw)
			})
		case action == "subscribe" && (r.Method == http.MethodGet || r.Method == http.MethodPost):
			h.stream(w, "tasks/resubscribe", map[string]any{"id": task})
		default:
			restError(w, http.StatusNotFound, "no A2A 0.3 route matches")
		}
		return
	}
	switch {
	case sub == "" && r.Method == http.MethodGet:
		params := map[string]any{"id": id}
		q := r.URL.Query()
		for _, name := range []string{"historyLength", "history_length"} {
			if v := q.Get(name); v != "" {
				n, err := strconv.Atoi(v)
				if err != nil || n < 0 {
					restError(w, http.StatusBadRequest, name+" must be a non-negative integer")
					return
				}
				params["historyLength"] = n
			}
		}
		h.unary(w, "tasks/get", params, func(raw json.RawMessage) (proto.Message, error) { return taskProto(raw) })
	case sub == "pushNotificationConfigs" && r.Method == http.MethodPost:
		h.setPush(w, id, body)
	case sub == "pushNotificationConfigs" && r.Method == http.MethodGet:
		h.unary(w, "tasks/pushNotificationConfig/list", map[string]any{"id": id}, func(raw json.RawMessage) (proto.Message, error) {
			var cfgs []*a2alegacy.TaskPushConfig
			if err := json.Unmarshal(raw, &cfgs); err != nil {
				return nil, err
			}
			return pbconv.ToProtoListTaskPushConfig(cfgs)
		})
	case strings.HasPrefix(sub, "pushNotificationConfigs/") && r.Method == http.MethodGet:
		params := map[string]any{"id": id, "pushNotificationConfigId": strings.TrimPrefix(sub, "pushNotificationConfigs/")}
		h.unary(w, "tasks/pushNotificationConfig/get", params, pushProto)
	case strings.HasPrefix(sub, "pushNotificationConfigs/") && r.Method == http.MethodDelete:
		params := map[string]any{"id": id, "pushNotificationConfigId": strings.TrimPrefix(sub, "pushNotificationConfigs/")}
		h.unary(w, "tasks/pushNotificationConfig/delete", params, func(json.RawMessage) (proto.Message, error) { return nil, nil })
	default:
		restError(w, http.StatusNotFound, "no A2A 0.3 route matches")
	}
}

// send serves message:send and message:stream: the body is the SendMessageRequest.
func (h rest03) send(w http.ResponseWriter, body []byte, method string, streaming bool) {
	var req a2apb.SendMessageRequest
	if err := unmarshal03(body, &req); err != nil {
		restError(w, http.StatusBadRequest, "the body is not a 0.3 SendMessageRequest")
		return
	}
	params, err := pbconv.FromProtoSendMessageRequest(&req)
	if err != nil {
		restError(w, http.StatusBadRequest, "the message could not be read")
		return
	}
	if streaming {
		h.stream(w, method, params)
		return
	}
	h.unary(w, method, params, func(raw json.RawMessage) (proto.Message, error) {
		ev, err := event(raw)
		if err != nil {
			return nil, err
		}
		res, ok := ev.(a2alegacy.SendMessageResult)
		if !ok {
			return nil, errors.New("not a task or message")
		}
		return pbconv.ToProtoSendMessageResponse(res)
	})
}

// setPush serves the push config create route. Its body is read in both forms found in the
// 0.3 ecosystem: the proto annotation's (body: "config", a TaskPushNotificationConfig), and the
// whole CreateTaskPushNotificationConfigRequest ({"parent", "config_id", "config"}), which the
// 0.3 Python SDK's server reads and the 0.3 TCK sends.
func (h rest03) setPush(w http.ResponseWriter, task string, body []byte) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(body, &probe); err != nil {
		restError(w, http.StatusBadRequest, "the body must be a JSON object")
		return
	}
	req := &a2apb.CreateTaskPushNotificationConfigRequest{}
	if _, whole := probe["config"]; whole {
		if err := unmarshal03(body, req); err != nil {
			restError(w, http.StatusBadRequest, "the body is not a 0.3 CreateTaskPushNotificationConfigRequest")
			return
		}
	} else {
		req.Config = &a2apb.TaskPushNotificationConfig{}
		if err := unmarshal03(body, req.Config); err != nil {
			restError(w, http.StatusBadRequest, "the body is not a 0.3 TaskPushNotificationConfig")
			return
		}
	}
	req.Parent = pbconv.MakeTaskName(a2alegacy.TaskID(task))
	cfg, err := pbconv.FromProtoCreateTaskPushConfigRequest(req)
	if err != nil {
		restError(w, http.StatusBadRequest, "the push notification config could not be read")
		return
	}
	h.unary(w, "tasks/pushNotificationConfig/set", cfg, pushProto)
}

// getCard serves the public 0.3 card as the proto's AgentCard.
func (h rest03) getCard(w http.ResponseWriter, r *http.Request) {
	rec := httptest.NewRecorder()
	h.card.ServeHTTP(rec, httptest.NewRequestWithContext(r.Context(), http.MethodGet, "/.well-known/agent-card.json", nil))
	var card a2alegacy.AgentCard
	if err := json.Unmarshal(rec.Body.Bytes(), &card); err != nil {
		restError(w, http.StatusInternalServerError, "the card could not be read")
		return
	}
	pc, err := pbconv.ToProtoAgentCard(&card)
	if err != nil {
		restError(w, http.StatusInternalServerError, "the card could not be converted")
		return
	}
	writeProto(w, http.StatusOK, pc)
}

// rpcAnswer is one JSON-RPC response.
type rpcAnswer struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func rpcRequest(method string, params any) (*http.Request, error) {
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	return req, nil
}

// unary calls method and writes its result converted by conv (nil: no body).
func (h rest03) unary(w http.ResponseWriter, method string, params any, conv func(json.RawMessage) (proto.Message, error)) {
	req, err := rpcRequest(method, params)
	if err != nil {
		restError(w, http.StatusInternalServerError, "the request could not be built")
		return
	}
	rec := httptest.NewRecorder()
	h.jsonrpc.ServeHTTP(rec, req)
	var ans rpcAnswer
	if err := json.Unmarshal(rec.Body.Bytes(), &ans); err != nil {
		restError(w, http.StatusInternalServerError, "the JSON-RPC answer could not be read")
		return
	}
	if ans.Error != nil {
		restError(w, statusOf(ans.Error.Code), ans.Error.Message)
		return
	}
	m, err := conv(ans.Result)
	if err != nil {
		restError(w, http.StatusInternalServerError, "the result could not be converted")
		return
	}
	if m == nil {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("{}"))
		return
	}
	writeProto(w, http.StatusOK, m)
}

// stream calls a streaming method and relays each event as a StreamResponse. An error before
// the first event is a plain HTTP error; a later one ends the stream with an error event.
func (h rest03) stream(w http.ResponseWriter, method string, params any) {
	req, err := rpcRequest(method, params)
	if err != nil {
		restError(w, http.StatusInternalServerError, "the request could not be built")
		return
	}
	pr, pw := io.Pipe()
	pipe := &pipeWriter{header: http.Header{}, w: pw}
	go func() {
		h.jsonrpc.ServeHTTP(pipe, req)
		_ = pw.Close()
	}()
	defer func() { _ = pr.Close() }()
	sc := bufio.NewScanner(pr)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	flusher, _ := w.(http.Flusher)
	started := false
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data:")
		if !ok {
			continue
		}
		var ans rpcAnswer
		if err := json.Unmarshal([]byte(strings.TrimSpace(data)), &ans); err != nil {
			continue
		}
		var out []byte
		switch {
		case ans.Error != nil && !started:
			restError(w, statusOf(ans.Error.Code), ans.Error.Message)
			return
		case ans.Error != nil:
			b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": statusOf(ans.Error.Code), "message": ans.Error.Message}})
			_, _ = w.Write(append(append([]byte("event: error\ndata: "), b...), "\n\n"...))
			return
		}
		ev, err := event(ans.Result)
		if err == nil {
			var sr *a2apb.StreamResponse
			if sr, err = pbconv.ToProtoStreamResponse(ev); err == nil {
				out, err = marshal03(sr)
			}
		}
		if err != nil {
			continue
		}
		if !started {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-cache")
			w.WriteHeader(http.StatusOK)
			started = true
		}
		_, _ = w.Write(append(append([]byte("data: "), out...), "\n\n"...))
		if flusher != nil {
			flusher.Flush()
		}
	}
	if !started {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
	}
}

// pipeWriter is the http.ResponseWriter the JSON-RPC handler streams into.
type pipeWriter struct {
	header http.Header
	w      io.Writer
}

func (p *pipeWriter) Header() http.Header         { return p.header }
func (p *pipeWriter) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p *pipeWriter) WriteHeader(int)             {}
func (p *pipeWriter) Flush()                      {}

// event reads a 0.3 JSON-RPC result (a task, message or task update, by kind).
func event(raw json.RawMessage) (a2alegacy.Event, error) {
	var kind struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(raw, &kind); err != nil {
		return nil, err
	}
	var ev a2alegacy.Event
	switch kind.Kind {
	case "task":
		ev = &a2alegacy.Task{}
	case "message":
		ev = &a2alegacy.Message{}
	case "status-update":
		ev = &a2alegacy.TaskStatusUpdateEvent{}
	case "artifact-update":
		ev = &a2alegacy.TaskArtifactUpdateEvent{}
	default:
		return nil, errors.New("unknown event kind")
	}
	if err := json.Unmarshal(raw, ev); err != nil {
		return nil, err
	}
	return ev, nil
}

func taskProto(raw json.RawMessage) (proto.Message, error) {
	var t a2alegacy.Task
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, err
	}
	return pbconv.ToProtoTask(&t)
}

func pushProto(raw json.RawMessage) (proto.Message, error) {
	var c a2alegacy.TaskPushConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	return pbconv.ToProtoTaskPushConfig(&c)
}

func writeProto(w http.ResponseWriter, status int, m proto.Message) {
	b, err := marshal03(m)
	if err != nil {
		restError(w, http.StatusInternalServerError, "the answer could not be written")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// statusOf is the HTTP status of a 0.3 JSON-RPC error code (A2A 0.3, section 3.2.3's table).
func statusOf(code int) int {
	switch code {
	case -32001, -32601:
		return http.StatusNotFound
	case -32002:
		return http.StatusConflict
	case -32600, -32602, -32700, -32003, -32004:
		return http.StatusBadRequest
	case -32005:
		return http.StatusUnsupportedMediaType
	case -32006:
		return http.StatusBadGateway
	}
	return http.StatusInternalServerError
}

// restError writes a google.rpc.Status-shaped error body.
func restError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": status, "status": http.StatusText(status), "message": msg}})
	_, _ = w.Write(b)
}
