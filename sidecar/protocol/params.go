package protocol

import (
	"bytes"
	"mime"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// Limits on identifiers read from params.
const (
	maxIDBytes     = 1024
	MaxTenantBytes = 128
)

// readParams checks raw (the JSON-RPC params or the HTTP+JSON body; nil when absent, already
// validated by checkJSON) against op and fills r: every task id, tenant and push config it
// names is recorded (r.Tasks, r.Tenant, r.Push). Values r already holds (from an HTTP+JSON path)
// must agree with the body. restBody selects the 0.3 HTTP+JSON body shapes.
func (ps *parser) readParams(v Version, op Operation, raw jsontext.Value, r *Request, restBody bool) *Error {
	var p object
	if raw != nil {
		if raw.Kind() != '{' {
			return Errorf(InvalidParams, "params must be an object")
		}
		var err *Error
		if p, err = ps.readObject(raw); err != nil {
			return err
		}
	}
	if v == V03 {
		where := "params."
		if restBody {
			where = ""
		}
		if err := ps.check03(op, p, restBody, where); err != nil {
			return err
		}
	}
	if v == V1 {
		t, err := optTenant(p, "tenant")
		if err != nil {
			return err
		}
		if r.Tenant, err = Agree("tenant", r.Tenant, t); err != nil {
			return err
		}
	}
	fromPath := r.TaskID != ""
	// The members naming the target task and its push config, from the operation table.
	spec := op.spec()
	taskField, configField := spec.TaskField, spec.ConfigField
	if v == V03 {
		taskField, configField = spec.TaskField03, spec.ConfigField03
	}
	target := func(name string) *Error {
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
	case SendMessage, SendStreamingMessage:
		return ps.readSend(v, p, r)
	case GetTask, CancelTask, SubscribeToTask:
		if err := target(taskField); err != nil {
			return err
		}
		if v == V03 && restBody {
			if err := taskName03(p, r); err != nil {
				return err
			}
		}
		return checkHistoryLength(p)
	case ListTasks:
		return ps.readList(p, r)
	case GetExtendedAgentCard, GetAgentCard:
		return nil
	case ExtensionMethod:
		return ps.readExtensionParams(v, p, r)
	}
	// Push notification configs.
	if v == V1 && op.Push() {
		if err := target(taskField); err != nil {
			return err
		}
		switch op {
		case CreateTaskPushNotificationConfig:
			if err := field(p, "id", false, &r.ConfigID); err != nil {
				return err
			}
			return r.addPush(p, "url", "params")
		case GetTaskPushNotificationConfig, DeleteTaskPushNotificationConfig:
			return field(p, configField, true, &r.ConfigID)
		}
		return nil
	}
	switch op {
	case CreateTaskPushNotificationConfig:
		if restBody && p.get("pushNotificationConfig") == nil {
			// 0.3 HTTP+JSON: the body is the PushNotificationConfig itself. A taskId in it
			// names a task too: it must be the path's. It has no name: a ProtoJSON reader
			// would take the task from one.
			if p.get("name") != nil {
				return Errorf(InvalidParams, "name is a field of TaskPushNotificationConfig, beside pushNotificationConfig; not of the config")
			}
			if err := field(p, "taskId", false, &r.TaskID); err != nil {
				return err
			}
			r.AddTask(r.TaskID, "path")
			if err := field(p, "id", false, &r.ConfigID); err != nil {
				return err
			}
			return r.addPush(p, "url", "params")
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
			return Errorf(InvalidParams, "pushNotificationConfig must be an object")
		}
		cfg, err := ps.readObject(cfgRaw)
		if err != nil {
			return err
		}
		if err := field(cfg, "id", false, &r.ConfigID); err != nil {
			return err
		}
		if nameConfig != "" && nameConfig != r.ConfigID {
			return Errorf(InvalidParams, "name does not name pushNotificationConfig.id")
		}
		if err := noTaskField(cfg, "pushNotificationConfig"); err != nil {
			return err
		}
		return r.addPush(cfg, "url", "params.pushNotificationConfig")
	case GetTaskPushNotificationConfig, DeleteTaskPushNotificationConfig:
		if err := target(taskField); err != nil {
			return err
		}
		return field(p, configField, op == DeleteTaskPushNotificationConfig, &r.ConfigID)
	case ListTaskPushNotificationConfigs:
		return target(taskField)
	}
	// An operation of the table no case reads: refused, never admitted with params nobody read.
	return Errorf(UnsupportedOperation, "%s is not supported by capgate's reader", op)
}

// configName03 reads the name of a 0.3 TaskPushNotificationConfig, as the 0.3 specification's
// HTTP+JSON binding sends it ("tasks/{id}/pushNotificationConfigs/{configId}"): it names the
// task again, which must be the one the path or taskId names, and the config, which must be
// pushNotificationConfig.id when that is given.
func configName03(p object, r *Request) (config string, perr *Error) {
	name, err := optString(p, "name")
	if err != nil || name == "" {
		return "", err
	}
	task, ok := TaskOfName(name)
	if !ok {
		return "", Errorf(InvalidParams, "name must be tasks/{id}/pushNotificationConfigs/{configId}")
	}
	if err := CheckIdentifier("name", name); err != nil {
		return "", err
	}
	if task != r.TaskID {
		return "", Errorf(InvalidParams, "name does not name the task the request names")
	}
	_, config, _ = strings.Cut(strings.TrimPrefix(name, "tasks/"+task), "/pushNotificationConfigs/")
	return config, nil
}

// taskName03 reads the name a 0.3 HTTP+JSON body may give its task ("tasks/{id}": the 0.3
// proto's CancelTaskRequest and TaskSubscriptionRequest, which the 0.3 Python client sends as
// the body): it must be the task the path names.
func taskName03(p object, r *Request) *Error {
	name, err := optString(p, "name")
	if err != nil || name == "" {
		return err
	}
	if id, ok := strings.CutPrefix(name, "tasks/"); !ok || id != r.TaskID {
		return Errorf(InvalidParams, "name must be tasks/{id}, naming the task the path names")
	}
	return nil
}

// noTaskField refuses a taskId inside an object where the protocol has none: a handler that
// reads one there would act on a task admission never saw.
func noTaskField(o object, where string) *Error {
	if o.get("taskId") != nil {
		return Errorf(InvalidParams, "%s.taskId is not a field of this object; name the task once, where the method does", where)
	}
	return nil
}

// addPush records the webhook URL of a push config object (required, a string).
func (r *Request) addPush(cfg object, name, where string) *Error {
	if err := requireURL(cfg, name); err != nil {
		return err
	}
	u, _ := str(cfg.get(name))
	if len(u) > maxIDBytes*2 {
		return Errorf(InvalidParams, "%s.%s is longer than %d bytes", where, name, maxIDBytes*2)
	}
	r.Push = append(r.Push, PushRef{URL: u, Where: where + "." + name})
	return nil
}

// checkHistoryLength checks the optional historyLength: a non-negative integer.
func checkHistoryLength(p object) *Error {
	_, err := optInt(p, "historyLength", 0, 1<<31-1)
	return err
}

// optInt reads an optional integer field within [min, max]; absent is nil.
func optInt(p object, name string, minV, maxV int) (*int, *Error) {
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
		return nil, Errorf(InvalidParams, "%s must be an integer from %d to %d", name, minV, maxV)
	}
	return &n, nil
}

// readList reads ListTasks' filters and paging.
func (ps *parser) readList(p object, r *Request) *Error {
	l := &ListParams{}
	var err *Error
	if err = field(p, "contextId", false, &l.ContextID); err != nil {
		return err
	}
	r.AddContextFilter(l.ContextID, "params.contextId")
	if l.Status, err = optString(p, "status"); err != nil {
		return err
	}
	if l.Status != "" && !ValidTaskState(l.Status) {
		return Errorf(InvalidParams, "status must be a task state such as TASK_STATE_WORKING")
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
	if len(l.PageToken) > maxIDBytes {
		return Errorf(InvalidParams, "pageToken is longer than %d bytes", maxIDBytes)
	}
	if l.HistoryLength, err = optInt(p, "historyLength", 0, 1<<31-1); err != nil {
		return err
	}
	if b := p.get("includeArtifacts"); b != nil {
		switch string(b) {
		case "true", `"true"`:
			l.IncludeArtifacts = true
		case "false", `"false"`:
		default:
			return Errorf(InvalidParams, "includeArtifacts must be a boolean")
		}
	}
	if l.StatusTimestampAfter, err = optString(p, "statusTimestampAfter"); err != nil {
		return err
	}
	if l.StatusTimestampAfter != "" {
		if _, perr := time.Parse(time.RFC3339Nano, l.StatusTimestampAfter); perr != nil {
			return Errorf(InvalidParams, "statusTimestampAfter must be an RFC 3339 timestamp")
		}
	}
	r.List = l
	return nil
}

// ValidTaskState reports whether s names a task state, in 1.0 (TASK_STATE_WORKING) or 0.3
// (working) form.
func ValidTaskState(s string) bool {
	switch s {
	case "TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED", "TASK_STATE_FAILED",
		"TASK_STATE_CANCELED", "TASK_STATE_INPUT_REQUIRED", "TASK_STATE_REJECTED", "TASK_STATE_AUTH_REQUIRED",
		"submitted", "working", "completed", "failed", "canceled", "input-required", "rejected", "auth-required":
		return true
	}
	return false
}

// field reads the identifier name of p into *dst, which may already hold the value from an
// HTTP+JSON path; both must agree.
func field(p object, name string, required bool, dst *string) *Error {
	s, err := optString(p, name)
	if err != nil {
		return err
	}
	if s != "" {
		if err := CheckIdentifier(name, s); err != nil {
			return err
		}
	}
	if *dst, err = Agree(name, *dst, s); err != nil {
		return err
	}
	if required && *dst == "" {
		return Errorf(InvalidParams, "%s is required", name)
	}
	return nil
}

// Agree merges a value from the path with the one from the body.
func Agree(name, fromPath, fromBody string) (string, *Error) {
	switch {
	case fromBody == "":
		return fromPath, nil
	case fromPath != "" && fromPath != fromBody:
		return "", Errorf(InvalidParams, "%s in the body does not match the path", name)
	default:
		return fromBody, nil
	}
}

// CheckIdentifier checks an identifier a request names (a task, context or config id) at
// position name: at most maxIDBytes, no control characters.
func CheckIdentifier(name, s string) *Error {
	if len(s) > maxIDBytes {
		return Errorf(InvalidParams, "%s is longer than %d bytes", name, maxIDBytes)
	}
	if hasControl(s) {
		return Errorf(InvalidParams, "%s must not contain control characters", name)
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || (r >= 0x7f && r < 0xa0) }

// hasControl reports whether s has a rune for which isControl holds, decoding runes only past
// the ASCII prefix.
func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= utf8.RuneSelf:
			return strings.IndexFunc(s[i:], isControl) >= 0
		case isControl(rune(c)):
			return true
		}
	}
	return false
}

// optString reads an optional string field; absent and null are "".
func optString(p object, name string) (string, *Error) {
	v := p.get(name)
	if v == nil {
		return "", nil
	}
	s, ok := str(v)
	if !ok {
		return "", Errorf(InvalidParams, "%s must be a string", name)
	}
	return s, nil
}

// checkOptString checks an optional string field that is not kept, as optString would.
func checkOptString(p object, name string) *Error {
	if v := p.get(name); v != nil && v.Kind() != '"' {
		return Errorf(InvalidParams, "%s must be a string", name)
	}
	return nil
}

func optTenant(p object, name string) (string, *Error) {
	t, err := optString(p, name)
	if err != nil || t == "" {
		return "", err
	}
	if !ValidTenant(t) {
		return "", InvalidTenant()
	}
	return t, nil
}

// InvalidTenant is the error for a tenant ValidTenant refuses.
func InvalidTenant() *Error {
	return Errorf(InvalidParams, "tenant must be 1 to %d characters of A-Z a-z 0-9 . _ - and not . or ..", MaxTenantBytes)
}

// ValidTenant reports whether t is a single safe path segment.
func ValidTenant(t string) bool {
	if t == "" || t == "." || t == ".." || len(t) > MaxTenantBytes {
		return false
	}
	for i := 0; i < len(t); i++ {
		if !tenantByte(t[i]) {
			return false
		}
	}
	return true
}

// tenantByte reports whether c may appear in a tenant: ASCII letters and
// digits, '.', '_' and '-'.
func tenantByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
}

func requireURL(p object, name string) *Error {
	if err := checkOptString(p, name); err != nil {
		return err
	}
	if isEmptyString(p.get(name)) {
		return Errorf(InvalidParams, "%s is required", name)
	}
	return nil
}

// isEmptyString reports whether v is absent or the empty JSON string (escapes never decode to
// nothing).
func isEmptyString(v jsontext.Value) bool { return v == nil || string(v) == `""` }

func (ps *parser) readSend(v Version, p object, r *Request) *Error {
	raw := p.get("message")
	if raw == nil {
		return Errorf(InvalidParams, "message is required")
	}
	if raw.Kind() != '{' {
		return Errorf(InvalidParams, "message must be an object")
	}
	// request is the proto's name of message (0.3 ProtoJSON): a reader that takes either would
	// see a second message, never read here.
	if p.get("request") != nil {
		return Errorf(InvalidParams, "request is not a field beside message; send the message once, as message")
	}
	msg, err := ps.readObject(raw)
	if err != nil {
		return err
	}
	info := &MessageInfo{}
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
	if v == V03 {
		if k := msg.get("kind"); k != nil && !isString(k, "message") {
			return Errorf(InvalidParams, `message.kind must be "message"`)
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
	if len(refs) > MaxReferenceTasks {
		return Errorf(InvalidParams, "message.referenceTaskIds has more than %d entries", MaxReferenceTasks)
	}
	for i, id := range refs {
		where := "message.referenceTaskIds[" + strconv.Itoa(i) + "]"
		if id == "" {
			return Errorf(InvalidParams, "%s must not be empty", where)
		}
		if err := CheckIdentifier(where, id); err != nil {
			return err
		}
		r.AddTask(id, "params."+where)
	}
	if cfg := p.get("configuration"); cfg != nil {
		if cfg.Kind() != '{' {
			return Errorf(InvalidParams, "configuration must be an object")
		}
		c, err := ps.readObject(cfg)
		if err != nil {
			return err
		}
		if info.AcceptedOutputModes, err = ps.stringArray(c.get("acceptedOutputModes"), "configuration.acceptedOutputModes"); err != nil {
			return err
		}
		if err := ps.sendPushConfig(v, c, r); err != nil {
			return err
		}
	}
	r.Message = info
	return nil
}

// MaxReferenceTasks bounds message.referenceTaskIds: each one is an ownership lookup.
const MaxReferenceTasks = 32

// sendPushConfig reads the push notification config SendMessage's configuration may carry:
// 1.0's taskPushNotificationConfig (which names a task and a tenant of its own) or 0.3's
// pushNotificationConfig. Both spellings are refused in the other version, so a handler of
// either version reads only what was checked.
func (ps *parser) sendPushConfig(v Version, c object, r *Request) *Error {
	name, other := "taskPushNotificationConfig", "pushNotificationConfig"
	if v == V03 {
		name, other = other, name
	}
	// pushNotification is 0.3 ProtoJSON's name of the push config (rest03.go reads that form
	// before it gets here): a ProtoJSON reader takes it from any body, so it is refused, not
	// skipped.
	for _, o := range [...]string{other, "pushNotification"} {
		if c.get(o) != nil {
			return Errorf(InvalidParams, "configuration.%s is not an A2A %s field; use configuration.%s", o, v, name)
		}
	}
	raw := c.get(name)
	if raw == nil {
		return nil
	}
	where := "configuration." + name
	if raw.Kind() != '{' {
		return Errorf(InvalidParams, "%s must be an object", where)
	}
	cfg, err := ps.readObject(raw)
	if err != nil {
		return err
	}
	if v == V1 {
		t, err := optTenant(cfg, "tenant")
		if err != nil {
			return prefix(where+".", err)
		}
		if r.Tenant, err = Agree(where+".tenant", r.Tenant, t); err != nil {
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
	return r.addPush(cfg, "url", "params."+where)
}

func prefix(p string, e *Error) *Error {
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
func (ps *parser) skillHint(v Version, raw jsontext.Value, where string) (string, *Error) {
	if raw == nil {
		return "", nil
	}
	if raw.Kind() != '{' {
		return "", Errorf(InvalidParams, "%s must be an object", where)
	}
	md, err := ps.readObject(raw)
	if err != nil {
		return "", err
	}
	for _, m := range md {
		alias := v == V03 && string(m.name) == SkillHintAlias03
		if (!alias && string(m.name) != SkillHintKey) || m.value.Kind() == 'n' {
			continue
		}
		s, ok := str(m.value)
		if !ok {
			name := SkillHintKey
			if alias {
				name = SkillHintAlias03
			}
			return "", Errorf(InvalidParams, "%s.%s must be a string", where, name)
		}
		return s, nil
	}
	return "", nil
}

func (ps *parser) stringArray(raw jsontext.Value, where string) ([]string, *Error) {
	if raw == nil {
		return nil, nil
	}
	elems, ok := ps.readArray(raw)
	if !ok {
		return nil, Errorf(InvalidParams, "%s must be an array of strings", where)
	}
	out := make([]string, 0, len(elems))
	for _, e := range elems {
		s, ok := str(e)
		if !ok {
			return nil, Errorf(InvalidParams, "%s must be an array of strings", where)
		}
		out = append(out, s)
	}
	return out, nil
}

func (ps *parser) readParts(v Version, raw jsontext.Value) ([]PartInfo, *Error) {
	elems, ok := []jsontext.Value(nil), false
	if raw != nil {
		elems, ok = ps.readArray(raw)
	}
	if !ok || len(elems) == 0 {
		return nil, Errorf(InvalidParams, "message.parts must be a non-empty array")
	}
	parts := make([]PartInfo, 0, len(elems))
	for i, e := range elems {
		if e.Kind() != '{' {
			return nil, Errorf(InvalidParams, "%s must be an object", partWhere(i))
		}
		obj, err := ps.readObject(e)
		if err != nil {
			return nil, err
		}
		var p PartInfo
		if v == V1 {
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
func readPart10(obj object, i int) (PartInfo, *Error) {
	var p PartInfo
	n := 0
	for _, k := range [...]string{PartText, PartRaw, PartURL, PartData} {
		if obj.get(k) != nil {
			p.Kind = k
			n++
		}
	}
	if n != 1 {
		return p, Errorf(InvalidParams, "%s must have exactly one of text, raw, url, data", partWhere(i))
	}
	switch p.Kind {
	case PartText, PartRaw, PartURL:
		c := obj.get(p.Kind)
		if c.Kind() != '"' {
			return p, Errorf(InvalidParams, "%s.%s must be a string", partWhere(i), p.Kind)
		}
		if p.Kind == PartURL && isEmptyString(c) {
			return p, Errorf(InvalidParams, "%s.url must not be empty", partWhere(i))
		}
		if p.Kind == PartText {
			p.Text, _ = str(c)
		}
		if p.Kind == PartRaw {
			p.InlineBytes = base64Len(c)
		}
	case PartData:
		p.Data = bytes.Clone(obj.get(PartData))
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
func (ps *parser) readPart03(obj object, i int) (PartInfo, *Error) {
	var p PartInfo
	kindRaw := obj.get("kind")
	if kindRaw.Kind() != '"' {
		return p, Errorf(InvalidParams, `%s.kind must be "text", "file" or "data"`, partWhere(i))
	}
	var mt string
	switch string(unquote(kindRaw)) {
	case "text":
		s, ok := str(obj.get("text"))
		if !ok {
			return p, Errorf(InvalidParams, "%s.text must be a string", partWhere(i))
		}
		p.Kind, p.Text = PartText, s
	case "data":
		d := obj.get("data")
		if d == nil || d.Kind() != '{' {
			return p, Errorf(InvalidParams, "%s.data must be an object", partWhere(i))
		}
		p.Kind, p.Data = PartData, bytes.Clone(d)
	case "file":
		raw := obj.get("file")
		if raw == nil || raw.Kind() != '{' {
			return p, Errorf(InvalidParams, "%s.file must be an object", partWhere(i))
		}
		file, err := ps.readObject(raw)
		if err != nil {
			return p, err
		}
		bytesRaw, uriRaw := file.get("bytes"), file.get("uri")
		switch {
		case (bytesRaw != nil) == (uriRaw != nil):
			return p, Errorf(InvalidParams, "%s.file must have exactly one of bytes, uri", partWhere(i))
		case bytesRaw != nil:
			if bytesRaw.Kind() != '"' {
				return p, Errorf(InvalidParams, "%s.file.bytes must be a string", partWhere(i))
			}
			p.Kind, p.InlineBytes = PartRaw, base64Len(bytesRaw)
		default:
			if uriRaw.Kind() != '"' || isEmptyString(uriRaw) {
				return p, Errorf(InvalidParams, "%s.file.uri must be a non-empty string", partWhere(i))
			}
			p.Kind = PartURL
		}
		if err := checkOptString(file, "name"); err != nil {
			return p, prefix(partWhere(i)+".file.", err)
		}
		if mt, err = optString(file, "mimeType"); err != nil {
			return p, prefix(partWhere(i)+".file.", err)
		}
	default:
		return p, Errorf(InvalidParams, `%s.kind must be "text", "file" or "data"`, partWhere(i))
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
		case PartText:
			return "text/plain", true
		case PartData:
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

func invalidMediaType(where string) *Error {
	return Errorf(InvalidParams, "%s is not a valid media type", where)
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

// MediaTypeMatches reports whether media type t matches the pattern p: equal, */*, or type/* —
// the one rule for a part's or an output's media type against a skill's modes or a caller's
// accepted output modes.
func MediaTypeMatches(p, t string) bool {
	if p == t || p == "*/*" {
		return true
	}
	if base, ok := strings.CutSuffix(p, "/*"); ok {
		return strings.HasPrefix(t, base+"/")
	}
	return false
}

// readExtensionParams reads the params of a method an extension adds. They are the extension's
// own, but a task, context or tenant they name follows the core rules: `taskId` and
// `referenceTaskIds` name tasks and `contextId` a context (the caller must own them), and
// `tenant` names the request's tenant (1.0, read above). Extension authors name tasks and
// contexts there; other fields are not read.
func (ps *parser) readExtensionParams(v Version, p object, r *Request) *Error {
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
	if len(refs) > MaxReferenceTasks {
		return Errorf(InvalidParams, "referenceTaskIds has more than %d entries", MaxReferenceTasks)
	}
	for i, id := range refs {
		where := "referenceTaskIds[" + strconv.Itoa(i) + "]"
		if id == "" {
			return Errorf(InvalidParams, "%s must not be empty", where)
		}
		if err := CheckIdentifier(where, id); err != nil {
			return err
		}
		r.AddTask(id, "params."+where)
	}
	if v == V03 { // 0.3 has no tenant field; an extension's own is refused rather than ignored
		if p.get("tenant") != nil {
			return Errorf(InvalidParams, "tenant is not an A2A 0.3 field")
		}
	}
	return nil
}

// MessageOf reads the message of A2A 1.0 SendMessage params (JSON, as the JSON-RPC binding
// carries them) the way the JSON bindings read theirs: the same parts, media types, skill hint
// and accepted output modes, and the same checks (message id, part shapes, depth). A binding
// whose messages are not JSON (gRPC) reads its message's ProtoJSON with it.
func MessageOf(params jsontext.Value, lim Limits) (*MessageInfo, *Error) {
	ps := newParser()
	defer ps.release()
	if err := ps.checkJSON(params, lim.WithDefaults().MaxDepth); err != nil {
		return nil, err
	}
	p, err := ps.readObject(params)
	if err != nil {
		return nil, err
	}
	scratch := &Request{Version: V1}
	if err := ps.readSend(V1, p, scratch); err != nil {
		return nil, err
	}
	return scratch.Message, nil
}

// TaskOfName extracts {id} (A2A 0.3 resource names) from "tasks/{id}" or "tasks/{id}/pushNotificationConfigs/{c}".
func TaskOfName(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, "tasks/")
	if !ok {
		return "", false
	}
	id, sub, hasSub := strings.Cut(rest, "/")
	if id == "" || (hasSub && !strings.HasPrefix(sub, "pushNotificationConfigs/")) {
		return "", false
	}
	return id, true
}
