package protocol

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// AgentCardPath is the well-known path of the public agent card.
const AgentCardPath = "/.well-known/agent-card.json"

// route is one HTTP+JSON route matched by a path.
type route struct {
	op       Operation
	template string
	methods  []string
	// ops, when set, is the operation of each of methods (one path, several operations).
	ops      []Operation
	taskID   string
	configID string
}

// ParseHTTP parses one HTTP+JSON request of A2A version v. target is the request target as sent
// (escaped path, optionally with ?query), relative to the agent's base URL; body is the request
// body. The routes are those of the A2A 1.0 proto's google.api.http annotations, each also under
// a /{tenant} prefix (a tenant is one segment of A-Z a-z 0-9 . _ -). SubscribeToTask accepts GET
// (the proto) and POST (what a2a-go sends). For 0.3 the same routes are accepted (as a2a-go's
// 0.3 compatibility handler serves them) and also the 0.3 /v1/... forms, where /v1/card is the
// authenticated extended card; under 0.3 a first segment "v1" is that prefix, never a tenant.
// Anything else is NotFound: unknown routes, empty or dot segments, encoded slashes. A body is
// read only for POST; an empty body or JSON null counts as none.
func ParseHTTP(v Version, method, target, contentType string, body []byte, lim Limits) (*Request, *Error) {
	lim = lim.withDefaults()
	if err := checkSize(body, lim); err != nil {
		return nil, err
	}
	path, query, _ := strings.Cut(target, "?")
	rt, tenant, err := matchRoute(v, path)
	if err != nil {
		return nil, err
	}
	if !allowed(rt.methods, method) {
		return nil, Errorf(MethodNotAllowed, "method %q is not allowed for %s; use %s",
			clip(method), rt.template, strings.Join(rt.methods, " or ")).
			WithMetadata("allow", strings.Join(rt.methods, ", "))
	}
	for i, m := range rt.methods {
		if m == method && rt.ops != nil {
			rt.op = rt.ops[i]
		}
	}
	if err := checkQuery(query); err != nil {
		return nil, err
	}
	r := &Request{
		Binding:   HTTPJSON,
		Version:   v,
		Operation: rt.op,
		Method:    method + " " + rt.template,
		Tenant:    tenant,
		TaskID:    rt.taskID,
		ConfigID:  rt.configID,
	}
	p := newParser()
	defer p.release()
	// A body of JSON null is no body: a2a-go sends one with every GET and DELETE.
	if b := trimSpace(body); len(b) > 0 && string(b) != "null" {
		if method != http.MethodPost {
			return nil, Errorf(InvalidRequest, "%s requests must not have a body", method)
		}
		if err := checkContentType(contentType); err != nil {
			return nil, err
		}
		if err := p.checkJSON(body, lim.MaxDepth); err != nil {
			return nil, err
		}
		if b[0] != '{' {
			return nil, Errorf(InvalidRequest, "request body must be a JSON object")
		}
		r.Params = jsontext.Value(b)
	}
	if rt.op == GetAgentCard {
		return r, nil
	}
	if err := p.readParams(v, rt.op, r.Params, r, true); err != nil {
		return nil, err
	}
	return r, nil
}

func allowed(methods []string, m string) bool {
	for _, a := range methods {
		if a == m {
			return true
		}
	}
	return false
}

// matchRoute finds the route of an escaped path, with its tenant.
func matchRoute(v Version, path string) (route, string, *Error) {
	notFound := Errorf(NotFound, "no A2A route matches %q", clip(path))
	if path == AgentCardPath {
		return route{op: GetAgentCard, template: AgentCardPath, methods: []string{http.MethodGet, http.MethodHead}}, "", nil
	}
	if !strings.HasPrefix(path, "/") {
		return route{}, "", notFound
	}
	segs := strings.Split(path[1:], "/")
	for _, s := range segs {
		if s == "" {
			return route{}, "", notFound
		}
	}
	if v == V03 && segs[0] == "v1" {
		if len(segs) == 2 && segs[1] == "card" {
			return route{op: GetExtendedAgentCard, template: "/v1/card", methods: []string{http.MethodGet}}, "", nil
		}
		if rt, ok := matchSegments(segs[1:]); ok {
			rt.template = "/v1" + rt.template
			return rt, "", nil
		}
		return route{}, "", notFound
	}
	if rt, ok := matchSegments(segs); ok {
		return rt, "", nil
	}
	if len(segs) > 1 && validTenant(segs[0]) {
		if rt, ok := matchSegments(segs[1:]); ok {
			rt.template = "/{tenant}" + rt.template
			return rt, segs[0], nil
		}
	}
	return route{}, "", notFound
}

// matchSegments matches escaped path segments against the routes. Literal segments must match
// exactly as sent; identifiers are unescaped and must be non-empty, not . or .., and free of
// / \ : and control characters.
func matchSegments(segs []string) (route, bool) {
	get, post, del := http.MethodGet, http.MethodPost, http.MethodDelete
	switch len(segs) {
	case 1:
		switch segs[0] {
		case "message:send":
			return route{op: SendMessage, template: "/message:send", methods: []string{post}}, true
		case "message:stream":
			return route{op: SendStreamingMessage, template: "/message:stream", methods: []string{post}}, true
		case "tasks":
			return route{op: ListTasks, template: "/tasks", methods: []string{get}}, true
		case "extendedAgentCard":
			return route{op: GetExtendedAgentCard, template: "/extendedAgentCard", methods: []string{get}}, true
		}
	case 2:
		if segs[0] != "tasks" {
			return route{}, false
		}
		rt := route{op: GetTask, template: "/tasks/{id}", methods: []string{get}}
		raw := segs[1]
		if id, ok := strings.CutSuffix(raw, ":cancel"); ok {
			rt, raw = route{op: CancelTask, template: "/tasks/{id}:cancel", methods: []string{post}}, id
		} else if id, ok := strings.CutSuffix(raw, ":subscribe"); ok {
			rt, raw = route{op: SubscribeToTask, template: "/tasks/{id}:subscribe", methods: []string{get, post}}, id
		}
		id, ok := pathID(raw)
		rt.taskID = id
		return rt, ok
	case 3, 4:
		if segs[0] != "tasks" || segs[2] != "pushNotificationConfigs" {
			return route{}, false
		}
		id, ok := pathID(segs[1])
		if !ok {
			return route{}, false
		}
		if len(segs) == 3 {
			return route{template: "/tasks/{taskId}/pushNotificationConfigs", methods: []string{post, get},
				ops: []Operation{CreateTaskPushNotificationConfig, ListTaskPushNotificationConfigs}, taskID: id}, true
		}
		cfg, ok := pathID(segs[3])
		return route{template: "/tasks/{taskId}/pushNotificationConfigs/{id}", methods: []string{get, del},
			ops: []Operation{GetTaskPushNotificationConfig, DeleteTaskPushNotificationConfig}, taskID: id, configID: cfg}, ok
	}
	return route{}, false
}

// pathID unescapes one identifier segment.
func pathID(raw string) (string, bool) {
	id, err := url.PathUnescape(raw)
	if err != nil || id == "" || id == "." || id == ".." || len(id) > maxIDBytes {
		return "", false
	}
	if strings.ContainsAny(id, `/\:`) || strings.IndexFunc(id, isControl) >= 0 {
		return "", false
	}
	return id, true
}

// checkQuery refuses malformed query strings, repeated parameters (readers disagree on which one
// wins) and parameters that would name a field the path already binds.
func checkQuery(q string) *Error {
	if q == "" {
		return nil
	}
	vals, err := url.ParseQuery(q)
	if err != nil {
		return Wrap(InvalidRequest, err, "query string is malformed")
	}
	for k, vs := range vals {
		if len(vs) > 1 {
			return Errorf(InvalidRequest, "query parameter %q is repeated", clip(k))
		}
		switch fieldKey(k) {
		case "TENANT", "ID", "TASKID", "NAME", "PARENT", "PUSHNOTIFICATIONCONFIGID":
			return Errorf(InvalidRequest, "query parameter %q is not allowed; the path names it", clip(k))
		}
	}
	return nil
}
