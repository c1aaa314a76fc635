package jsonmodel

import (
	"bytes"
	"mime"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/sidecar/protocol"
)

// readParams checks raw (the JSON-RPC params or the HTTP+JSON body; nil when absent, already
// validated by checkJSON) against op and fills r: every task id, tenant and push config it
// names is recorded (r.Tasks, r.Tenant, r.Push). Values r already holds (from an HTTP+JSON path)
// must agree with the body. restBody selects the 0.3 HTTP+JSON body shapes.
func (ps *parser) readParams(v protocol.Version, op protocol.Operation, raw jsontext.Value, r *protocol.Request, restBody bool) *protocol.Error {
	var p object
	if raw != nil {
		if raw.Kind() != '{' {
			return protocol.Errorf(protocol.InvalidParams, "params must be an object")
		}
		var err *protocol.Error
		if p, err = ps.readObject(raw); err != nil {
			return err
		}
	}
	if v == protocol.V03 {
		where := "params."
		if restBody {
			where = ""
		}
		if err := ps.check03(op, p, restBody, where); err != nil {
			return err
		}
	}
	if v == protocol.V1 {
		t, err := optTenant(p, "tenant")
		if err != nil {
			return err
		}
		if r.Tenant, err = protocol.Agree("tenant", r.Tenant, t); err != nil {
			return err
		}
	}
	fromPath := r.TaskID != ""
	// The members naming the target task and its push config, from the operation table.
	spec := op.Spec()
	taskField, configField := spec.TaskField, spec.ConfigField
	if v == protocol.V03 {
		taskField, configField = spec.TaskField03, spec.ConfigField03
	}
	target := func(name string) *protocol.Error {
		if err := field(p, name, true, &r.TaskID); err != nil {
			return err
		}
		if fromPath {
			r.AddTask(r.TaskID, "path")
		} else {
			r.AddTask(r.TaskID, "params."+name)
		}
		return nil
	}
	switch op {
	case protocol.SendMessage, protocol.SendStreamingMessage:
		return ps.readSend(v, p, r)
	case protocol.GetTask, protocol.CancelTask, protocol.SubscribeToTask:
		if err := target(taskField); err != nil {
			return err
		}
		if v == protocol.V03 && restBody {
			if err := taskName03(p, r); err != nil {
				return err
			}
		}
		n, err := historyLength(p, "historyLength")
		if op == protocol.GetTask {
			r.HistoryLength = n
		}
		return err
	case protocol.ListTasks:
		return ps.readList(p, r)
	case protocol.GetExtendedAgentCard, protocol.GetAgentCard:
		return nil
	case protocol.ExtensionMethod:
		return ps.readExtensionParams(v, p, r)
	}
	// Push notification configs.
	if v == protocol.V1 && op.Push() {
		if err := target(taskField); err != nil {
			return err
		}
		switch op {
		case protocol.CreateTaskPushNotificationConfig:
			if err := field(p, "id", false, &r.ConfigID); err != nil {
				return err
			}
			return addPush(r, p, "url", "params")
		case protocol.GetTaskPushNotificationConfig, protocol.DeleteTaskPushNotificationConfig:
			return field(p, configField, true, &r.ConfigID)
		}
		return nil
	}
	switch op {
	case protocol.CreateTaskPushNotificationConfig:
		if restBody && p.get("pushNotificationConfig") == nil {
			// 0.3 HTTP+JSON: the body is the PushNotificationConfig itself. A taskId in it
			// names a task too: it must be the path's. It has no name: a ProtoJSON reader
			// would take the task from one.
			if p.get("name") != nil {
				return protocol.Errorf(protocol.InvalidParams, "name is a field of TaskPushNotificationConfig, beside pushNotificationConfig; not of the config")
			}
			if err := field(p, "taskId", false, &r.TaskID); err != nil {
				return err
			}
			r.AddTask(r.TaskID, "path")
			if err := field(p, "id", false, &r.ConfigID); err != nil {
				return err
			}
			return addPush(r, p, "url", "params")
		}
		if err := target(taskField); err != nil {
			return err
		}
		nameConfig, err := configName03(p, r)
		if err != nil {
			return err
		}
		cfgRaw := p.get("pushNotificationConfig")
		if cfgRaw == nil || cfgRaw.Kind() != '{' {
			return protocol.Errorf(protocol.InvalidParams, "pushNotificationConfig must be an object")
		}
		cfg, err := ps.readObject(cfgRaw)
		if err != nil {
			return err
		}
		if err := field(cfg, "id", false, &r.ConfigID); err != nil {
			return err
		}
		if nameConfig != "" && nameConfig != r.ConfigID {
			return protocol.Errorf(protocol.InvalidParams, "name does not name pushNotificationConfig.id")
		}
		if err := noTaskField(cfg, "pushNotificationConfig"); err != nil {
			return err
		}
		return addPush(r, cfg, "url", "params.pushNotificationConfig")
	case protocol.GetTaskPushNotificationConfig, protocol.DeleteTaskPushNotificationConfig:
		if err := target(taskField); err != nil {
			return err
		}
		return field(p, configField, op == protocol.DeleteTaskPushNotificationConfig, &r.ConfigID)
	case protocol.ListTaskPushNotificationConfigs:
		return target(taskField)
	}
	// An operation of the table no case reads: refused, never admitted with params nobody read.
	return protocol.Errorf(protocol.UnsupportedOperation, "%s is not supported by capgate's reader", op)
}

// configName03 reads the name of a 0.3 TaskPushNotificationConfig, as the 0.3 specification's
// HTTP+JSON binding sends it ("tasks/{id}/pushNotificationConfigs/{configId}"): it names the
// task again, which must be the one the path or taskId names, and the config, which must be
// pushNotificationConfig.id when that is given.
func configName03(p object, r *protocol.Request) (config string, perr *protocol.Error) {
	name, err := optString(p, "name")
	if err != nil || name == "" {
		return "", err
	}
	task, ok := protocol.TaskOfName(name)
	if !ok {
		return "", protocol.Errorf(protocol.InvalidParams, "name must be tasks/{id}/pushNotificationConfigs/{configId}")
	}
	if err := protocol.CheckIdentifier("name", name); err != nil {
		return "", err
	}
	if task != r.TaskID {
		return "", protocol.Errorf(protocol.InvalidParams, "name does not name the task the request names")
	}
	_, config, _ = strings.Cut(strings.TrimPrefix(name, "tasks/"+task), "/pushNotificationConfigs/")
	return config, nil
}

// taskName03 reads the name a 0.3 HTTP+JSON body may give its task ("tasks/{id}": the 0.3
// proto's CancelTaskRequest and TaskSubscriptionRequest, which the 0.3 Python client sends as
// the body): it must be the task the path names.
func taskName03(p object, r *protocol.Request) *protocol.Error {
	name, err := optString(p, "name")
	if err != nil || name == "" {
		return err
	}
	if id, ok := strings.CutPrefix(name, "tasks/"); !ok || id != r.TaskID {
		return protocol.Errorf(protocol.InvalidParams, "name must be tasks/{id}, naming the task the path names")
	}
	return nil
}

// noTaskField refuses a taskId inside an object where the protocol has none: a handler that
// reads one there would act on a task admission never saw.
func noTaskField(o object, where string) *protocol.Error {
	if o.get("taskId") != nil {
		return protocol.Errorf(protocol.InvalidParams, "%s.taskId is not a field of this object; name the task once, where the method does", where)
	}
	return nil
}

// addPush records the webhook URL of a push config object (required, a string).
func addPush(r *protocol.Request, cfg object, name, where string) *protocol.Error {
	if err := requireURL(cfg, name); err != nil {
		return err
	}
	u, _ := str(cfg.get(name))
	if len(u) > protocol.MaxIDBytes*2 {
		return protocol.Errorf(protocol.InvalidParams, "%s.%s is longer than %d bytes", where, name, protocol.MaxIDBytes*2)
	}
	r.Push = append(r.Push, protocol.PushRef{URL: u, Where: where + "." + name})
	return nil
}

// historyLength reads an optional historyLength (name, where the message says it is): a
// non-negative integer that fits an int32; absent is nil.
func historyLength(p object, name string) (*int, *protocol.Error) {
	n, err := optInt(p, "historyLength", 0, 1<<31-1)
	if err != nil {
		return nil, protocol.Errorf(protocol.InvalidParams, "%s must be an integer from 0 to %d", name, 1<<31-1)
	}
	return n, nil
}

// optInt reads an optional integer field within [min, max]; absent is nil.
func optInt(p object, name string, minV, maxV int) (*int, *protocol.Error) {
	v := p.get(name)
	if v == nil {
		return nil, nil
	}
	s := string(v)
	if v.Kind() == '"' { // protojson writes 64-bit integers as strings; accept both
		s = string(unquote(v))
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < minV || n > maxV {
		return nil, protocol.Errorf(protocol.InvalidParams, "%s must be an integer from %d to %d", name, minV, maxV)
	}
	return &n, nil
}

// readList reads ListTasks' filters and paging.
func (ps *parser) readList(p object, r *protocol.Request) *protocol.Error {
	l := &protocol.ListParams{}
	var err *protocol.Error
	if err = field(p, "contextId", false, &l.ContextID); err != nil {
		return err
	}
	r.AddContextFilter(l.ContextID, "params.contextId")
	if l.Status, err = optString(p, "status"); err != nil {
		return err
	}
	if l.Status != "" && !protocol.ValidTaskState(l.Status) {
		return protocol.Errorf(protocol.InvalidParams, "status must be a task state such as TASK_STATE_WORKING")
	}
	n, err := optInt(p, "pageSize", 0, 1<<31-1)
	if err != nil {
		return err
	}
	if n != nil {
		l.PageSize = *n
	}
	if l.PageToken, err = optString(p, "pageToken"); err != nil {
		return err
	}
	if len(l.PageToken) > protocol.MaxIDBytes {
		return protocol.Errorf(protocol.InvalidParams, "pageToken is longer than %d bytes", protocol.MaxIDBytes)
	}
	if l.HistoryLength, err = historyLength(p, "historyLength"); err != nil {
		return err
	}
	if b := p.get("includeArtifacts"); b != nil {
		switch string(b) {
		case "true", `"true"`:
			l.IncludeArtifacts = true
		case "false", `"false"`:
		default:
			return protocol.Errorf(protocol.InvalidParams, "includeArtifacts must be a boolean")
		}
	}
	if l.StatusTimestampAfter, err = optString(p, "statusTimestampAfter"); err != nil {
		return err
	}
	if l.StatusTimestampAfter != "" {
		if _, perr := time.Parse(time.RFC3339Nano, l.StatusTimestampAfter); perr != nil {
			return protocol.Errorf(protocol.InvalidParams, "statusTimestampAfter must be an RFC 3339 timestamp")
		}
	}
	r.List = l
	return nil
}

// field reads the identifier name of p into *dst, which may already hold the value from an
// HTTP+JSON path; both must agree.
func field(p object, name string, required bool, dst *string) *protocol.Error {
	s, err := optString(p, name)
	if err != nil {
		return err
	}
	if s != "" {
		if err := protocol.CheckIdentifier(name, s); err != nil {
			return err
		}
	}
	if *dst, err = protocol.Agree(name, *dst, s); err != nil {
		return err
	}
	if required && *dst == "" {
		return protocol.Errorf(protocol.InvalidParams, "%s is required", name)
	}
	return nil
}

// optString reads an optional string field; absent and null are "".
func optString(p object, name string) (string, *protocol.Error) {
	v := p.get(name)
	if v == nil {
		return "", nil
	}
	s, ok := str(v)
	if !ok {
		return "", protocol.Errorf(protocol.InvalidParams, "%s must be a string", name)
	}
	return s, nil
}

// checkOptString checks an optional string field that is not kept, as optString would.
func checkOptString(p object, name string) *protocol.Error {
	if v := p.get(name); v != nil && v.Kind() != '"' {
		return protocol.Errorf(protocol.InvalidParams, "%s must be a string", name)
	}
	return nil
}

func optTenant(p object, name string) (string, *protocol.Error) {
	t, err := optString(p, name)
	if err != nil || t == "" {
		return "", err
	}
	if !protocol.ValidTenant(t) {
		return "", protocol.InvalidTenant()
	}
	return t, nil
}

func requireURL(p object, name string) *protocol.Error {
	if err := checkOptString(p, name); err != nil {
		return err
	}
	if isEmptyString(p.get(name)) {
		return protocol.Errorf(protocol.InvalidParams, "%s is required", name)
	}
	return nil
}

// isEmptyString reports whether v is absent or the empty JSON string (escapes never decode to
// nothing).
func isEmptyString(v jsontext.Value) bool { return v == nil || string(v) == `""` }

func (ps *parser) readSend(v protocol.Version, p object, r *protocol.Request) *protocol.Error {
	raw := p.get("message")
	if raw == nil {
		return protocol.Errorf(protocol.InvalidParams, "message is required")
	}
	if raw.Kind() != '{' {
		return protocol.Errorf(protocol.InvalidParams, "message must be an object")
	}
	// request is the proto's name of message (0.3 ProtoJSON): a reader that takes either would
	// see a second message, never read here.
	if p.get("request") != nil {
		return protocol.Errorf(protocol.InvalidParams, "request is not a field beside message; send the message once, as message")
	}
	msg, err := ps.readObject(raw)
	if err != nil {
		return err
	}
	info := &protocol.MessageInfo{}
	if err := field(msg, "messageId", true, &info.MessageID); err != nil {
		return prefix("message.", err)
	}
	if err := field(msg, "taskId", false, &info.TaskID); err != nil {
		return prefix("message.", err)
	}
	if err := field(msg, "contextId", false, &info.ContextID); err != nil {
		return prefix("message.", err)
	}
	r.AddContext(info.ContextID, "params.message.contextId")
	if err := checkOptString(msg, "role"); err != nil {
		return prefix("message.", err)
	}
	if v == protocol.V03 {
		if k := msg.get("kind"); k != nil && !isString(k, "message") {
			return protocol.Errorf(protocol.InvalidParams, `message.kind must be "message"`)
		}
	}
	if info.Parts, err = ps.readParts(v, msg.get("parts")); err != nil {
		return err
	}
	if info.SkillHint, err = ps.skillHint(v, p.get("metadata"), "metadata"); err != nil {
		return err
	}
	if info.SkillHint == "" {
		if info.SkillHint, err = ps.skillHint(v, msg.get("metadata"), "message.metadata"); err != nil {
			return err
		}
	}
	r.TaskID = info.TaskID
	r.AddTask(info.TaskID, "params.message.taskId")
	refs, err := ps.stringArray(msg.get("referenceTaskIds"), "message.referenceTaskIds")
	if err != nil {
		return err
	}
	if len(refs) > protocol.MaxReferenceTasks {
		return protocol.Errorf(protocol.InvalidParams, "message.referenceTaskIds has more than %d entries", protocol.MaxReferenceTasks)
	}
	for i, id := range refs {
		where := "message.referenceTaskIds[" + strconv.Itoa(i) + "]"
		if id == "" {
			return protocol.Errorf(protocol.InvalidParams, "%s must not be empty", where)
		}
		if err := protocol.CheckIdentifier(where, id); err != nil {
			return err
		}
		r.AddTask(id, "params."+where)
	}
	if cfg := p.get("configuration"); cfg != nil {
		if cfg.Kind() != '{' {
			return protocol.Errorf(protocol.InvalidParams, "configuration must be an object")
		}
		c, err := ps.readObject(cfg)
		if err != nil {
			return err
		}
		if info.AcceptedOutputModes, err = ps.stringArray(c.get("acceptedOutputModes"), "configuration.acceptedOutputModes"); err != nil {
			return err
		}
		if r.HistoryLength, err = historyLength(c, "configuration.historyLength"); err != nil {
			return err
		}
		if err := ps.sendPushConfig(v, c, r); err != nil {
			return err
		}
	}
	r.Message = info
	return nil
}

// sendPushConfig reads the push notification config SendMessage's configuration may carry:
// 1.0's taskPushNotificationConfig (which names a task and a tenant of its own) or 0.3's
// pushNotificationConfig. Both spellings are refused in the other version, so a handler of
// either version reads only what was checked.
func (ps *parser) sendPushConfig(v protocol.Version, c object, r *protocol.Request) *protocol.Error {
	name, other := "taskPushNotificationConfig", "pushNotificationConfig"
	if v == protocol.V03 {
		name, other = other, name
	}
	// pushNotification is 0.3 ProtoJSON's name of the push config (rest03.go reads that form
	// before it gets here): a ProtoJSON reader takes it from any body, so it is refused, not
	// skipped.
	for _, o := range [...]string{other, "pushNotification"} {
		if c.get(o) != nil {
			return protocol.Errorf(protocol.InvalidParams, "configuration.%s is not an A2A %s field; use configuration.%s", o, v, name)
		}
	}
	raw := c.get(name)
	if raw == nil {
		return nil
	}
	where := "configuration." + name
	if raw.Kind() != '{' {
		return protocol.Errorf(protocol.InvalidParams, "%s must be an object", where)
	}
	cfg, err := ps.readObject(raw)
	if err != nil {
		return err
	}
	if v == protocol.V1 {
		t, err := optTenant(cfg, "tenant")
		if err != nil {
			return prefix(where+".", err)
		}
		if r.Tenant, err = protocol.Agree(where+".tenant", r.Tenant, t); err != nil {
			return err
		}
		var task string
		if err := field(cfg, "taskId", false, &task); err != nil {
			return prefix(where+".", err)
		}
		r.AddTask(task, "params."+where+".taskId")
	} else if err := noTaskField(cfg, where); err != nil {
		return err
	}
	return addPush(r, cfg, "url", "params."+where)
}

func prefix(p string, e *protocol.Error) *protocol.Error {
	e.Message = p + e.Message
	return e
}

// Skill hint keys of metadata. SkillHintAlias03 is an alias of SkillHintKey read in A2A 0.3
// requests only: a2a-go v2's 0.3 REST client (a2acompat/a2av0) snake-cases every JSON key it
// sends, metadata's included, so the skillId its caller set arrives as skill_id. The hint is a
// hint either way: the router honours it only for a capability the caller is entitled to.
const (
	SkillHintKey     = "skillId"
	SkillHintAlias03 = "skill_id"
)

// skillHint reads metadata.skillId (and in 0.3 its alias metadata.skill_id). Metadata is a map:
// its keys are matched exactly. The two never meet in one object: the parser refuses a key
// beside another spelling of the same name as a duplicate (checkJSON), as ProtoJSON readers
// would take either.
func (ps *parser) skillHint(v protocol.Version, raw jsontext.Value, where string) (string, *protocol.Error) {
	if raw == nil {
		return "", nil
	}
	if raw.Kind() != '{' {
		return "", protocol.Errorf(protocol.InvalidParams, "%s must be an object", where)
	}
	md, err := ps.readObject(raw)
	if err != nil {
		return "", err
	}
	for _, m := range md {
		alias := v == protocol.V03 && string(m.name) == SkillHintAlias03
		if (!alias && string(m.name) != SkillHintKey) || m.value.Kind() == 'n' {
			continue
		}
		s, ok := str(m.value)
		if !ok {
			name := SkillHintKey
			if alias {
				name = SkillHintAlias03
			}
			return "", protocol.Errorf(protocol.InvalidParams, "%s.%s must be a string", where, name)
		}
		return s, nil
	}
	return "", nil
}

func (ps *parser) stringArray(raw jsontext.Value, where string) ([]string, *protocol.Error) {
	if raw == nil {
		return nil, nil
	}
	elems, ok := ps.readArray(raw)
	if !ok {
		return nil, protocol.Errorf(protocol.InvalidParams, "%s must be an array of strings", where)
	}
	out := make([]string, 0, len(elems))
	for _, e := range elems {
		s, ok := str(e)
		if !ok {
			return nil, protocol.Errorf(protocol.InvalidParams, "%s must be an array of strings", where)
		}
		out = append(out, s)
	}
	return out, nil
}

func (ps *parser) readParts(v protocol.Version, raw jsontext.Value) ([]protocol.PartInfo, *protocol.Error) {
	elems, ok := []jsontext.Value(nil), false
	if raw != nil {
		elems, ok = ps.readArray(raw)
	}
	if !ok || len(elems) == 0 {
		return nil, protocol.Errorf(protocol.InvalidParams, "message.parts must be a non-empty array")
	}
	parts := make([]protocol.PartInfo, 0, len(elems))
	for i, e := range elems {
		if e.Kind() != '{' {
			return nil, protocol.Errorf(protocol.InvalidParams, "%s must be an object", partWhere(i))
		}
		obj, err := ps.readObject(e)
		if err != nil {
			return nil, err
		}
		var p protocol.PartInfo
		if v == protocol.V1 {
			p, err = readPart10(obj, i)
		} else {
			p, err = ps.readPart03(obj, i)
		}
		if err != nil {
			return nil, err
		}
		parts = append(parts, p)
	}
	return parts, nil
}

// partWhere names part i in messages; built only for an error.
func partWhere(i int) string { return "message.parts[" + strconv.Itoa(i) + "]" }

// readPart10 reads A2A 1.0 part i: exactly one of text, raw, url, data, and an optional mediaType.
func readPart10(obj object, i int) (protocol.PartInfo, *protocol.Error) {
	var p protocol.PartInfo
	n := 0
	for _, k := range [...]string{protocol.PartText, protocol.PartRaw, protocol.PartURL, protocol.PartData} {
		if obj.get(k) != nil {
			p.Kind = k
			n++
		}
	}
	if n != 1 {
		return p, protocol.Errorf(protocol.InvalidParams, "%s must have exactly one of text, raw, url, data", partWhere(i))
	}
	switch p.Kind {
	case protocol.PartText, protocol.PartRaw, protocol.PartURL:
		c := obj.get(p.Kind)
		if c.Kind() != '"' {
			return p, protocol.Errorf(protocol.InvalidParams, "%s.%s must be a string", partWhere(i), p.Kind)
		}
		if p.Kind == protocol.PartURL && isEmptyString(c) {
			return p, protocol.Errorf(protocol.InvalidParams, "%s.url must not be empty", partWhere(i))
		}
		if p.Kind == protocol.PartText {
			p.Text, _ = str(c)
		}
		if p.Kind == protocol.PartRaw {
			p.InlineBytes = base64Len(c)
		}
	case protocol.PartData:
		p.Data = bytes.Clone(obj.get(protocol.PartData))
	}
	if err := checkOptString(obj, "filename"); err != nil {
		return p, prefix(partWhere(i)+".", err)
	}
	mt, err := optString(obj, "mediaType")
	if err != nil {
		return p, prefix(partWhere(i)+".", err)
	}
	var ok bool
	if p.MediaType, ok = mediaType(mt, p.Kind); !ok {
		return p, invalidMediaType(partWhere(i) + ".mediaType")
	}
	return p, nil
}

// readPart03 reads A2A 0.3 part i, discriminated by kind.
func (ps *parser) readPart03(obj object, i int) (protocol.PartInfo, *protocol.Error) {
	var p protocol.PartInfo
	kindRaw := obj.get("kind")
	if kindRaw.Kind() != '"' {
		return p, protocol.Errorf(protocol.InvalidParams, `%s.kind must be "text", "file" or "data"`, partWhere(i))
	}
	var mt string
	switch string(unquote(kindRaw)) {
	case "text":
		s, ok := str(obj.get("text"))
		if !ok {
			return p, protocol.Errorf(protocol.InvalidParams, "%s.text must be a string", partWhere(i))
		}
		p.Kind, p.Text = protocol.PartText, s
	case "data":
		d := obj.get("data")
		if d == nil || d.Kind() != '{' {
			return p, protocol.Errorf(protocol.InvalidParams, "%s.data must be an object", partWhere(i))
		}
		p.Kind, p.Data = protocol.PartData, bytes.Clone(d)
	case "file":
		raw := obj.get("file")
		if raw == nil || raw.Kind() != '{' {
			return p, protocol.Errorf(protocol.InvalidParams, "%s.file must be an object", partWhere(i))
		}
		file, err := ps.readObject(raw)
		if err != nil {
			return p, err
		}
		bytesRaw, uriRaw := file.get("bytes"), file.get("uri")
		switch {
		case (bytesRaw != nil) == (uriRaw != nil):
			return p, protocol.Errorf(protocol.InvalidParams, "%s.file must have exactly one of bytes, uri", partWhere(i))
		case bytesRaw != nil:
			if bytesRaw.Kind() != '"' {
				return p, protocol.Errorf(protocol.InvalidParams, "%s.file.bytes must be a string", partWhere(i))
			}
			p.Kind, p.InlineBytes = protocol.PartRaw, base64Len(bytesRaw)
		default:
			if uriRaw.Kind() != '"' || isEmptyString(uriRaw) {
				return p, protocol.Errorf(protocol.InvalidParams, "%s.file.uri must be a non-empty string", partWhere(i))
			}
			p.Kind = protocol.PartURL
		}
		if err := checkOptString(file, "name"); err != nil {
			return p, prefix(partWhere(i)+".file.", err)
		}
		if mt, err = optString(file, "mimeType"); err != nil {
			return p, prefix(partWhere(i)+".file.", err)
		}
	default:
		return p, protocol.Errorf(protocol.InvalidParams, `%s.kind must be "text", "file" or "data"`, partWhere(i))
	}
	var ok bool
	if p.MediaType, ok = mediaType(mt, p.Kind); !ok {
		return p, invalidMediaType(partWhere(i) + ".file.mimeType")
	}
	return p, nil
}

// base64Len is the decoded size of the base64 text in the JSON string v: standard or URL
// alphabet, padded or not (protobuf JSON accepts all four). It counts the alphabet's characters
// rather than decoding; padding and line breaks do not count.
func base64Len(v jsontext.Value) int64 {
	var n int64
	for _, c := range unquote(v) {
		switch c {
		case '=', '\r', '\n', ' ', '\t':
		default:
			n++
		}
	}
	return n * 6 / 8
}

// mediaType normalises a declared media type, or supplies the default for the part kind. It
// reports false for a declared type that is not valid.
func mediaType(declared, kind string) (string, bool) {
	if declared == "" {
		switch kind {
		case protocol.PartText:
			return "text/plain", true
		case protocol.PartData:
			return "application/json", true
		default:
			return "application/octet-stream", true
		}
	}
	if isBareMediaType(declared) {
		return declared, true
	}
	mt, _, err := mime.ParseMediaType(declared)
	if err != nil || !strings.Contains(mt, "/") {
		return "", false
	}
	return mt, true
}

func invalidMediaType(where string) *protocol.Error {
	return protocol.Errorf(protocol.InvalidParams, "%s is not a valid media type", where)
}

// isBareMediaType reports whether s is a lower-case type/subtype without parameters, which
// mime.ParseMediaType returns unchanged: two non-empty tokens of the characters below.
func isBareMediaType(s string) bool {
	slash := -1
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case c == '/' && slash < 0:
			slash = i
		case strings.IndexByte("!#$%&'*+-.^_`{|}~", c) >= 0:
		default:
			return false
		}
	}
	return slash > 0 && slash < len(s)-1
}

// readExtensionParams reads the params of a method an extension adds. They are the extension's
// own, but a task, context or tenant they name follows the core rules: `taskId` and
// `referenceTaskIds` name tasks and `contextId` a context (the caller must own them), and
// `tenant` names the request's tenant (1.0, read above). Extension authors name tasks and
// contexts there; other fields are not read.
func (ps *parser) readExtensionParams(v protocol.Version, p object, r *protocol.Request) *protocol.Error {
	var task, contextID string
	if err := field(p, "taskId", false, &task); err != nil {
		return err
	}
	if err := field(p, "contextId", false, &contextID); err != nil {
		return err
	}
	r.AddContext(contextID, "params.contextId")
	r.TaskID = task
	r.AddTask(task, "params.taskId")
	refs, err := ps.stringArray(p.get("referenceTaskIds"), "referenceTaskIds")
	if err != nil {
		return err
	}
	if len(refs) > protocol.MaxReferenceTasks {
		return protocol.Errorf(protocol.InvalidParams, "referenceTaskIds has more than %d entries", protocol.MaxReferenceTasks)
	}
	for i, id := range refs {
		where := "referenceTaskIds[" + strconv.Itoa(i) + "]"
		if id == "" {
			return protocol.Errorf(protocol.InvalidParams, "%s must not be empty", where)
		}
		if err := protocol.CheckIdentifier(where, id); err != nil {
			return err
		}
		r.AddTask(id, "params."+where)
	}
	if v == protocol.V03 { // 0.3 has no tenant field; an extension's own is refused rather than ignored
		if p.get("tenant") != nil {
			return protocol.Errorf(protocol.InvalidParams, "tenant is not an A2A 0.3 field")
		}
	}
	return nil
}

// MessageOf reads the message of A2A 1.0 SendMessage params (JSON, as the JSON-RPC binding
// carries them) the way the JSON bindings read theirs: the same parts, media types, skill hint
// and accepted output modes, and the same checks (message id, part shapes, depth). A binding
// whose messages are not JSON (gRPC) reads its message's ProtoJSON with it.
func MessageOf(params jsontext.Value, lim protocol.Limits) (*protocol.MessageInfo, *protocol.Error) {
	ps := newParser()
	defer ps.release()
	if err := ps.checkJSON(params, lim.WithDefaults().MaxDepth); err != nil {
		return nil, err
	}
	p, err := ps.readObject(params)
	if err != nil {
		return nil, err
	}
	scratch := &protocol.Request{Version: protocol.V1}
	if err := ps.readSend(protocol.V1, p, scratch); err != nil {
		return nil, err
	}
	return scratch.Message, nil
}
