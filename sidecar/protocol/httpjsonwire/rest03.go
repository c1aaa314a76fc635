package httpjsonwire

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2apb03 "github.com/a2aproject/a2a-go/a2apb"
	"github.com/a2aproject/a2a-go/a2apb/pbconv"
	"github.com/go-json-experiment/json/jsontext"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/jsonmodel"
)

// The A2A 0.3 specification's HTTP+JSON binding is its a2a.proto (package a2a.v1) transcoded by
// the proto's google.api.http annotations: the /v1/... routes, with the request and response
// messages in the ProtoJSON mapping — what the 0.3 reference SDKs (Python, JavaScript's
// legacyCompat transport) send and read. capgate answers a 0.3 request on a /v1/ route in that
// form (ProtoJSON03) and accepts a SendMessage body in it beside the 0.3 JSON-RPC params shape
// (kind-discriminated parts) it accepted before. Un-prefixed 0.3 routes, which a2a-go's 0.3
// compatibility handler serves, keep the JSON-RPC shapes both ways.
//
// The messages are a2a-go's generated 0.3 types (a2apb, converted by its pbconv) with one
// difference in JSON: the 0.3.0 proto names Message's parts `content` (field 5); a2a-go's
// proto, from a later 0.3 revision, names it `parts`. The ProtoJSON here is read and written
// with a copy of a2a-go's descriptors whose Message field 5 has the JSON name `content`, so the
// wire bytes are a2a-go's and only the name differs.

// descriptors03 are a2a-go's a2a.v1 message descriptors with 0.3.0's JSON name for
// Message.content.
var descriptors03 = sync.OnceValues(func() (protoreflect.FileDescriptor, error) {
	fdp := protodesc.ToFileDescriptorProto(a2apb03.File_a2a_proto)
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

// dynamic03 is an empty dynamic message of the a2a.v1 type named name, read and written with
// 0.3.0's JSON names.
func dynamic03(name protoreflect.Name) (*dynamicpb.Message, error) {
	fd, err := descriptors03()
	if err != nil {
		return nil, err
	}
	md := fd.Messages().ByName(name)
	if md == nil {
		return nil, fmt.Errorf("no message %s", name)
	}
	return dynamicpb.NewMessage(md), nil
}

// sendParams03 turns a SendMessageRequest in 0.3 ProtoJSON ({"message": {"content": [...],
// "role": "ROLE_USER"}, ...}) into the 0.3 JSON-RPC params it stands for. Unknown fields,
// a field given under both its names, and values of the wrong type are refused.
func sendParams03(body []byte) (jsontext.Value, *protocol.Error) {
	dyn, err := dynamic03("SendMessageRequest")
	if err != nil {
		return nil, protocol.Wrap(protocol.Internal, err, "the 0.3 message types are not available")
	}
	if err := protojson.Unmarshal(body, dyn); err != nil {
		// The reader's own text is not passed on (it names its package and offsets).
		return nil, protocol.Wrap(protocol.InvalidParams, err, "the body is not a 0.3 SendMessageRequest: every field must be one of its "+
			"fields (ProtoJSON or proto name, given once) with a value of the field's type")
	}
	var m a2apb03.SendMessageRequest
	if err := wireCopy(dyn, &m); err != nil {
		return nil, protocol.Wrap(protocol.Internal, err, "the 0.3 message could not be converted")
	}
	params, err := pbconv.FromProtoSendMessageRequest(&m)
	if err != nil || params.Message == nil {
		return nil, protocol.Errorf(protocol.InvalidParams, "message is required")
	}
	// pbconv keeps file bytes as the raw bytes; the JSON-RPC shape carries them in base64.
	_ = mapFileBytes(params.Message.Parts, func(b string) (string, error) {
		return base64.StdEncoding.EncodeToString([]byte(b)), nil
	})
	b, err := json.Marshal(params)
	if err != nil {
		return nil, protocol.Wrap(protocol.Internal, err, "the 0.3 message could not be converted")
	}
	return jsontext.Value(b), nil
}

// isProtoSend03 reports whether a 0.3 SendMessage body is in ProtoJSON: its message (proto
// field request, JSON name message) has content rather than the JSON-RPC shape's parts, or it
// names the message by the proto field name.
func isProtoSend03(ps jsonmodel.Reader, body jsontext.Value) (bool, *protocol.Error) {
	p, err := ps.Object(body)
	if err != nil {
		return false, err
	}
	msg := p.Get("message")
	if msg == nil {
		return p.Get("request") != nil, nil
	}
	if msg.Kind() != '{' {
		return false, nil
	}
	m, err := ps.Object(msg)
	if err != nil {
		return false, err
	}
	return m.Get("content") != nil, nil
}

// pushRequest03 reads a 0.3 push config create body on a /v1/ route. The 0.3 proto's
// annotation makes the body the TaskPushNotificationConfig (body: "config"), which the JS SDK's
// legacyCompat transport sends; the 0.3 Python SDK's server reads the whole
// CreateTaskPushNotificationConfigRequest instead ({"parent": "tasks/{id}", "configId": …,
// "config": {…}}), and the 0.3 TCK sends that. A body with a config member is that request: its
// parent, when given, must name the path's task, its configId the config's
// pushNotificationConfig.id when both are given, and no other member is accepted; the config is
// then read as the body. Any other body is returned as it is.
func pushRequest03(ps jsonmodel.Reader, body jsontext.Value, task string) (jsontext.Value, *protocol.Error) {
	p, err := ps.Object(body)
	if err != nil {
		return nil, err
	}
	cfg := p.Get("config")
	if cfg == nil {
		return body, nil
	}
	if cfg.Kind() != '{' {
		return nil, protocol.Errorf(protocol.InvalidParams, "config must be an object (a TaskPushNotificationConfig)")
	}
	for i := range p.Len() {
		if !p.NameIs(i, "parent") && !p.NameIs(i, "configId") && !p.NameIs(i, "config") {
			return nil, protocol.Errorf(protocol.InvalidParams, "%s is not a field of the A2A 0.3 CreateTaskPushNotificationConfigRequest", protocol.Clip(string(p.Name(i))))
		}
	}
	parent, err := p.String("parent")
	if err != nil {
		return nil, err
	}
	if parent != "" && parent != "tasks/"+task {
		return nil, protocol.Errorf(protocol.InvalidParams, "parent must be tasks/{id}, naming the task the path names")
	}
	configID, err := p.String("configId")
	if err != nil {
		return nil, err
	}
	c, err := ps.Object(cfg)
	if err != nil {
		return nil, err
	}
	if inner := c.Get("pushNotificationConfig"); configID != "" && inner != nil && inner.Kind() == '{' {
		pc, err := ps.Object(inner)
		if err != nil {
			return nil, err
		}
		if id, err := pc.String("id"); err != nil {
			return nil, err
		} else if id != "" && id != configID {
			return nil, protocol.Errorf(protocol.InvalidParams, "configId does not name config.pushNotificationConfig.id")
		}
	}
	return cfg, nil
}

// wireCopy copies src into dst through the wire format (the two share field numbers).
func wireCopy(src, dst proto.Message) error {
	b, err := proto.Marshal(src)
	if err != nil {
		return err
	}
	return proto.Unmarshal(b, dst)
}

// mapFileBytes rewrites the inline content of every file part.
func mapFileBytes(parts a2a03.ContentParts, f func(string) (string, error)) error {
	for i, p := range parts {
		fp, ok := p.(a2a03.FilePart)
		if !ok {
			continue
		}
		if fb, ok := fp.File.(a2a03.FileBytes); ok {
			b, err := f(fb.Bytes)
			if err != nil {
				return err
			}
			fb.Bytes = b
			fp.File = fb
			parts[i] = fp
		}
	}
	return nil
}

// decodedBytes turns base64 file content back into the raw bytes pbconv expects.
func decodedBytes(s string) (string, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	return string(b), err
}

func rawMessage(m *a2a03.Message) error {
	if m == nil {
		return nil
	}
	return mapFileBytes(m.Parts, decodedBytes)
}

func rawArtifact(a *a2a03.Artifact) error {
	if a == nil {
		return nil
	}
	return mapFileBytes(a.Parts, decodedBytes)
}

// rawTask decodes the file content of every message and artifact of t.
func rawTask(t *a2a03.Task) error {
	errs := []error{rawMessage(t.Status.Message)}
	for _, m := range t.History {
		errs = append(errs, rawMessage(m))
	}
	for _, a := range t.Artifacts {
		errs = append(errs, rawArtifact(a))
	}
	return errors.Join(errs...)
}

// rawEvent decodes the file content of a stream event or SendMessage result.
func rawEvent(ev a2a03.Event) error {
	switch e := ev.(type) {
	case *a2a03.Task:
		return rawTask(e)
	case *a2a03.Message:
		return rawMessage(e)
	case *a2a03.TaskStatusUpdateEvent:
		return rawMessage(e.Status.Message)
	case *a2a03.TaskArtifactUpdateEvent:
		return rawArtifact(e.Artifact)
	}
	return nil
}

// ProtoJSON03Response turns a handler's 0.3 JSON-RPC result for op into the 0.3 ProtoJSON
// response the 0.3 HTTP+JSON binding answers: SendMessageResponse ({"task": …} or
// {"message": …}), Task, TaskPushNotificationConfig ({"name": "tasks/{id}/pushNotificationConfigs/{id}",
// …}), ListTaskPushNotificationConfigResponse ({"configs": […]}). Other results (cards, Empty)
// are returned unchanged. A result that is not the method's is InvalidAgentResponse.
func ProtoJSON03Response(op protocol.Operation, result []byte) ([]byte, *protocol.Error) {
	var (
		m   proto.Message
		err error
	)
	switch op {
	case protocol.SendMessage:
		var ev a2a03.Event
		if ev, err = a2a03.UnmarshalEventJSON(result); err == nil {
			switch res := ev.(type) {
			case a2a03.SendMessageResult:
				if err = rawEvent(ev); err == nil {
					m, err = pbconv.ToProtoSendMessageResponse(res)
				}
			default:
				err = fmt.Errorf("a %T is not a SendMessage result", ev)
			}
		}
	case protocol.GetTask, protocol.CancelTask:
		var t a2a03.Task
		if err = json.Unmarshal(result, &t); err == nil {
			if err = rawTask(&t); err == nil {
				m, err = pbconv.ToProtoTask(&t)
			}
		}
	case protocol.CreateTaskPushNotificationConfig, protocol.GetTaskPushNotificationConfig:
		var c a2a03.TaskPushConfig
		if err = json.Unmarshal(result, &c); err == nil {
			m, err = pbconv.ToProtoTaskPushConfig(&c)
		}
	case protocol.ListTaskPushNotificationConfigs:
		var cs []*a2a03.TaskPushConfig
		if r := string(jsonmodel.TrimSpace(result)); r == "null" || r == "{}" {
			// No configs: a2a-go's 0.3 handler writes the empty list as null, which the
			// HTTP+JSON path has already turned into {} (google.protobuf.Empty).
			result = []byte("[]")
		}
		if err = json.Unmarshal(result, &cs); err == nil {
			m, err = pbconv.ToProtoListTaskPushConfig(cs)
		}
	default:
		return result, nil
	}
	if err != nil {
		return nil, protocol.Wrap(protocol.InvalidAgentResponse, err, "the agent's 0.3 response cannot be expressed in the 0.3 HTTP+JSON binding")
	}
	return protoJSON03(m)
}

// ProtoJSON03Card turns a 0.3 agent card (the JSON-RPC binding's shape) into the 0.3 proto's
// AgentCard in ProtoJSON, as the 0.3 HTTP+JSON binding answers GET /v1/card: security schemes as
// the proto's oneof ({"httpAuthSecurityScheme": …}), requirements as {"schemes": {name:
// {"list": […]}}}. Sign the result, not its input: a signature covers the bytes served.
func ProtoJSON03Card(card []byte) ([]byte, *protocol.Error) {
	var c a2a03.AgentCard
	if err := json.Unmarshal(card, &c); err != nil {
		return nil, protocol.Wrap(protocol.Internal, err, "the 0.3 agent card could not be read")
	}
	m, err := pbconv.ToProtoAgentCard(&c)
	if err != nil {
		return nil, protocol.Wrap(protocol.Internal, err, "the 0.3 agent card could not be converted")
	}
	return protoJSON03(m)
}

// ProtoJSON03Event turns one 0.3 JSON-RPC stream event (a task, message, status-update or
// artifact-update) into the 0.3 ProtoJSON StreamResponse.
func ProtoJSON03Event(result []byte) ([]byte, *protocol.Error) {
	ev, err := a2a03.UnmarshalEventJSON(result)
	if err != nil {
		return nil, protocol.Wrap(protocol.InvalidAgentResponse, err, "the agent's 0.3 stream event cannot be read")
	}
	if err := rawEvent(ev); err != nil {
		return nil, protocol.Wrap(protocol.InvalidAgentResponse, err, "the agent's 0.3 stream event has file content that is not base64")
	}
	m, err := pbconv.ToProtoStreamResponse(ev)
	if err != nil {
		return nil, protocol.Wrap(protocol.InvalidAgentResponse, err, "the agent's 0.3 stream event cannot be expressed in the 0.3 HTTP+JSON binding")
	}
	return protoJSON03(m)
}

// protoJSON03 writes m as ProtoJSON with 0.3.0's JSON names.
func protoJSON03(m proto.Message) ([]byte, *protocol.Error) {
	dyn, err := dynamic03(m.ProtoReflect().Descriptor().Name())
	if err == nil {
		err = wireCopy(m, dyn)
	}
	var b []byte
	if err == nil {
		b, err = protojson.Marshal(dyn)
	}
	if err != nil {
		return nil, protocol.Wrap(protocol.Internal, err, "the 0.3 response could not be encoded")
	}
	return b, nil
}
