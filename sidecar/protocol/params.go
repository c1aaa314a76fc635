package protocol

import (
	"bytes"
	"mime"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// Limits on identifiers read from params.
const (
	maxIDBytes     = 1024
	maxTenantBytes = 128
)

// readParams checks raw (the JSON-RPC params or the HTTP+JSON body; nil when absent, already
// validated by checkJSON) against op and fills r. Values r already holds (from an HTTP+JSON path)
// must agree with the body. restBody selects the 0.3 HTTP+JSON body shapes.
func readParams(v Version, op Operation, raw jsontext.Value, r *Request, restBody bool) *Error {
	var p object
	if raw != nil {
		if raw.Kind() != '{' {
			return Errorf(InvalidParams, "params must be an object")
		}
		var err *Error
		if p, err = readObject(raw, "params"); err != nil {
			return err
		}
	}
	if v == V1 {
		t, err := optTenant(p)
		if err != nil {
			return err
		}
		if r.Tenant, err = agree("tenant", r.Tenant, t); err != nil {
			return err
		}
	}
	switch op {
	case SendMessage, SendStreamingMessage:
		return readSend(v, p, r)
	case GetTask, CancelTask, SubscribeToTask:
		return field(p, "id", true, &r.TaskID)
	case ListTasks, GetExtendedAgentCard, GetAgentCard:
		return nil
	}
	// Push notification configs.
	if v == V1 {
		if err := field(p, "taskId", true, &r.TaskID); err != nil {
			return err
		}
		switch op {
		case CreateTaskPushNotificationConfig:
			if err := field(p, "id", false, &r.ConfigID); err != nil {
				return err
			}
			return requireURL(p, "url")
		case GetTaskPushNotificationConfig, DeleteTaskPushNotificationConfig:
			return field(p, "id", true, &r.ConfigID)
		}
		return nil
	}
	switch op {
	case CreateTaskPushNotificationConfig:
		if restBody { // 0.3 HTTP+JSON: the body is the PushNotificationConfig itself
			if err := field(p, "id", false, &r.ConfigID); err != nil {
				return err
			}
			return requireURL(p, "url")
		}
		if err := field(p, "taskId", true, &r.TaskID); err != nil {
			return err
		}
		cfgRaw := p.get("pushNotificationConfig")
		if cfgRaw == nil || cfgRaw.Kind() != '{' {
			return Errorf(InvalidParams, "pushNotificationConfig must be an object")
		}
		cfg, err := readObject(cfgRaw, "pushNotificationConfig")
		if err != nil {
			return err
		}
		if err := field(cfg, "id", false, &r.ConfigID); err != nil {
			return err
		}
		return requireURL(cfg, "url")
	case GetTaskPushNotificationConfig, DeleteTaskPushNotificationConfig:
		if err := field(p, "id", true, &r.TaskID); err != nil {
			return err
		}
		return field(p, "pushNotificationConfigId", op == DeleteTaskPushNotificationConfig, &r.ConfigID)
	case ListTaskPushNotificationConfigs:
		return field(p, "id", true, &r.TaskID)
	}
	return nil
}

// field reads the identifier name of p into *dst, which may already hold the value from an
// HTTP+JSON path; both must agree.
func field(p object, name string, required bool, dst *string) *Error {
	s, err := optString(p, name)
	if err != nil {
		return err
	}
	if s != "" {
		if err := checkIdentifier(name, s); err != nil {
			return err
		}
	}
	if *dst, err = agree(name, *dst, s); err != nil {
		return err
	}
	if required && *dst == "" {
		return Errorf(InvalidParams, "%s is required", name)
	}
	return nil
}

// agree merges a value from the path with the one from the body.
func agree(name, fromPath, fromBody string) (string, *Error) {
	switch {
	case fromBody == "":
		return fromPath, nil
	case fromPath != "" && fromPath != fromBody:
		return "", Errorf(InvalidParams, "%s in the body does not match the path", name)
	default:
		return fromBody, nil
	}
}

func checkIdentifier(name, s string) *Error {
	if len(s) > maxIDBytes {
		return Errorf(InvalidParams, "%s is longer than %d bytes", name, maxIDBytes)
	}
	if strings.IndexFunc(s, isControl) >= 0 {
		return Errorf(InvalidParams, "%s must not contain control characters", name)
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || (r >= 0x7f && r < 0xa0) }

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

func optTenant(p object) (string, *Error) {
	t, err := optString(p, "tenant")
	if err != nil || t == "" {
		return "", err
	}
	if !validTenant(t) {
		return "", Errorf(InvalidParams, "tenant must be 1 to %d characters of A-Z a-z 0-9 . _ - and not . or ..", maxTenantBytes)
	}
	return t, nil
}

// validTenant reports whether t is a single safe path segment.
func validTenant(t string) bool {
	if t == "" || t == "." || t == ".." || len(t) > maxTenantBytes {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func requireURL(p object, name string) *Error {
	s, err := optString(p, name)
	if err != nil {
		return err
	}
	if s == "" {
		return Errorf(InvalidParams, "%s is required", name)
	}
	return nil
}

func readSend(v Version, p object, r *Request) *Error {
	raw := p.get("message")
	if raw == nil {
		return Errorf(InvalidParams, "message is required")
	}
	if raw.Kind() != '{' {
		return Errorf(InvalidParams, "message must be an object")
	}
	msg, err := readObject(raw, "message")
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
	if _, err := optString(msg, "role"); err != nil {
		return prefix("message.", err)
	}
	if v == V03 {
		if k := msg.get("kind"); k != nil && !isString(k, "message") {
			return Errorf(InvalidParams, `message.kind must be "message"`)
		}
	}
	if info.Parts, err = readParts(v, msg.get("parts")); err != nil {
		return err
	}
	if info.SkillHint, err = skillHint(p.get("metadata"), "metadata"); err != nil {
		return err
	}
	if info.SkillHint == "" {
		if info.SkillHint, err = skillHint(msg.get("metadata"), "message.metadata"); err != nil {
			return err
		}
	}
	if cfg := p.get("configuration"); cfg != nil {
		if cfg.Kind() != '{' {
			return Errorf(InvalidParams, "configuration must be an object")
		}
		c, err := readObject(cfg, "configuration")
		if err != nil {
			return err
		}
		if info.AcceptedOutputModes, err = stringArray(c.get("acceptedOutputModes"), "configuration.acceptedOutputModes"); err != nil {
			return err
		}
	}
	r.TaskID = info.TaskID
	r.Message = info
	return nil
}

func prefix(p string, e *Error) *Error {
	e.Message = p + e.Message
	return e
}

// skillHint reads metadata.skillId. Metadata is a map: its keys are matched exactly.
func skillHint(raw jsontext.Value, where string) (string, *Error) {
	if raw == nil {
		return "", nil
	}
	if raw.Kind() != '{' {
		return "", Errorf(InvalidParams, "%s must be an object", where)
	}
	md, err := readObject(raw, where)
	if err != nil {
		return "", err
	}
	for _, m := range md {
		if m.name != "skillId" || m.value.Kind() == 'n' {
			continue
		}
		s, ok := str(m.value)
		if !ok {
			return "", Errorf(InvalidParams, "%s.skillId must be a string", where)
		}
		return s, nil
	}
	return "", nil
}

func stringArray(raw jsontext.Value, where string) ([]string, *Error) {
	if raw == nil {
		return nil, nil
	}
	elems, ok := readArray(raw)
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

// readArray splits a valid JSON array into its elements.
func readArray(raw jsontext.Value) ([]jsontext.Value, bool) {
	if raw.Kind() != '[' {
		return nil, false
	}
	dec := jsontext.NewDecoder(bytes.NewBuffer(raw), jsontext.AllowDuplicateNames(true))
	if _, err := dec.ReadToken(); err != nil {
		return nil, false
	}
	var out []jsontext.Value
	for dec.PeekKind() != ']' {
		v, err := dec.ReadValue()
		if err != nil {
			return nil, false
		}
		end := int(dec.InputOffset())
		out = append(out, jsontext.Value(raw[end-len(v):end]))
	}
	return out, true
}

func readParts(v Version, raw jsontext.Value) ([]PartInfo, *Error) {
	elems, ok := []jsontext.Value(nil), false
	if raw != nil {
		elems, ok = readArray(raw)
	}
	if !ok || len(elems) == 0 {
		return nil, Errorf(InvalidParams, "message.parts must be a non-empty array")
	}
	parts := make([]PartInfo, 0, len(elems))
	for i, e := range elems {
		where := "message.parts[" + strconv.Itoa(i) + "]"
		if e.Kind() != '{' {
			return nil, Errorf(InvalidParams, "%s must be an object", where)
		}
		obj, err := readObject(e, where)
		if err != nil {
			return nil, err
		}
		var p PartInfo
		if v == V1 {
			p, err = readPart10(obj, where)
		} else {
			p, err = readPart03(obj, where)
		}
		if err != nil {
			return nil, err
		}
		parts = append(parts, p)
	}
	return parts, nil
}

// readPart10 reads an A2A 1.0 part: exactly one of text, raw, url, data, and an optional mediaType.
func readPart10(obj object, where string) (PartInfo, *Error) {
	var p PartInfo
	n := 0
	for _, k := range [...]string{PartText, PartRaw, PartURL, PartData} {
		if obj.get(k) != nil {
			p.Kind = k
			n++
		}
	}
	if n != 1 {
		return p, Errorf(InvalidParams, "%s must have exactly one of text, raw, url, data", where)
	}
	switch p.Kind {
	case PartText, PartRaw, PartURL:
		s, ok := str(obj.get(p.Kind))
		if !ok {
			return p, Errorf(InvalidParams, "%s.%s must be a string", where, p.Kind)
		}
		if p.Kind == PartURL && s == "" {
			return p, Errorf(InvalidParams, "%s.url must not be empty", where)
		}
		if p.Kind == PartText {
			p.Text = s
		}
	}
	if _, err := optString(obj, "filename"); err != nil {
		return p, prefix(where+".", err)
	}
	mt, err := optString(obj, "mediaType")
	if err != nil {
		return p, prefix(where+".", err)
	}
	p.MediaType, err = mediaType(mt, p.Kind, where+".mediaType")
	return p, err
}

// readPart03 reads an A2A 0.3 part, discriminated by kind.
func readPart03(obj object, where string) (PartInfo, *Error) {
	var p PartInfo
	kind, ok := str(obj.get("kind"))
	if !ok {
		return p, Errorf(InvalidParams, `%s.kind must be "text", "file" or "data"`, where)
	}
	var mt string
	switch kind {
	case "text":
		s, ok := str(obj.get("text"))
		if !ok {
			return p, Errorf(InvalidParams, "%s.text must be a string", where)
		}
		p.Kind, p.Text = PartText, s
	case "data":
		if d := obj.get("data"); d == nil || d.Kind() != '{' {
			return p, Errorf(InvalidParams, "%s.data must be an object", where)
		}
		p.Kind = PartData
	case "file":
		raw := obj.get("file")
		if raw == nil || raw.Kind() != '{' {
			return p, Errorf(InvalidParams, "%s.file must be an object", where)
		}
		file, err := readObject(raw, where+".file")
		if err != nil {
			return p, err
		}
		hasBytes, hasURI := file.get("bytes") != nil, file.get("uri") != nil
		switch {
		case hasBytes == hasURI:
			return p, Errorf(InvalidParams, "%s.file must have exactly one of bytes, uri", where)
		case hasBytes:
			if _, ok := str(file.get("bytes")); !ok {
				return p, Errorf(InvalidParams, "%s.file.bytes must be a string", where)
			}
			p.Kind = PartRaw
		default:
			if s, ok := str(file.get("uri")); !ok || s == "" {
				return p, Errorf(InvalidParams, "%s.file.uri must be a non-empty string", where)
			}
			p.Kind = PartURL
		}
		if _, err := optString(file, "name"); err != nil {
			return p, prefix(where+".file.", err)
		}
		if mt, err = optString(file, "mimeType"); err != nil {
			return p, prefix(where+".file.", err)
		}
	default:
		return p, Errorf(InvalidParams, `%s.kind must be "text", "file" or "data"`, where)
	}
	var err *Error
	p.MediaType, err = mediaType(mt, p.Kind, where+".file.mimeType")
	return p, err
}

// mediaType normalises a declared media type, or supplies the default for the part kind.
func mediaType(declared, kind, where string) (string, *Error) {
	if declared == "" {
		switch kind {
		case PartText:
			return "text/plain", nil
		case PartData:
			return "application/json", nil
		default:
			return "application/octet-stream", nil
		}
	}
	mt, _, err := mime.ParseMediaType(declared)
	if err != nil || !strings.Contains(mt, "/") {
		return "", Errorf(InvalidParams, "%s is not a valid media type", where)
	}
	return mt, nil
}

// isString reports whether v is the JSON string s.
func isString(v jsontext.Value, s string) bool {
	got, ok := str(v)
	return ok && got == s
}
