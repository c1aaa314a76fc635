package httpjsonwire

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/jsonmodel"
)

// route is one HTTP+JSON route matched by a path.
type route struct {
	op       protocol.Operation
	template string
	methods  []string
	// ops, when set, is the operation of each of methods (one path, several operations).
	ops      []protocol.Operation
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
func ParseHTTP(v protocol.Version, method, target, contentType string, body []byte, lim protocol.Limits) (*protocol.Request, *protocol.Error) {
	lim = lim.WithDefaults()
	if err := jsonmodel.CheckSize(body, lim); err != nil {
		return nil, err
	}
	path, query, _ := strings.Cut(target, "?")
	rt, tenant, err := matchRoute(v, path)
	if err != nil {
		return nil, err
	}
	if !allowed(rt.methods, method) {
		return nil, protocol.Errorf(protocol.MethodNotAllowed, "method %q is not allowed for %s; use %s",
			protocol.Clip(method), rt.template, strings.Join(rt.methods, " or ")).
			WithMetadata("allow", strings.Join(rt.methods, ", "))
	}
	for i, m := range rt.methods {
		if m == method && rt.ops != nil {
			rt.op = rt.ops[i]
		}
	}
	r := &protocol.Request{
		Binding:   protocol.HTTPJSON,
		Version:   v,
		Operation: rt.op,
		Method:    method + " " + rt.template,
		Tenant:    tenant,
		TaskID:    rt.taskID,
		ConfigID:  rt.configID,
		Forward:   jsonmodel.PathForwarder(tenant, rt.taskID, rt.configID),
	}
	p := jsonmodel.NewReader()
	defer p.Release()
	// A body of JSON null is no body: a2a-go sends one with every GET and DELETE.
	if b := jsonmodel.TrimSpace(body); len(b) > 0 && string(b) != "null" {
		if method != http.MethodPost {
			return nil, protocol.Errorf(protocol.InvalidRequest, "%s requests must not have a body", method)
		}
		if err := jsonmodel.CheckContentType(contentType); err != nil {
			return nil, err
		}
		if err := p.CheckBody(body, lim.MaxDepth); err != nil {
			return nil, err
		}
		if b[0] != '{' {
			return nil, protocol.Errorf(protocol.InvalidRequest, "request body must be a JSON object")
		}
		r.Params = jsontext.Value(b)
	}
	q, err := queryParams(rt.op, query, r.Params != nil)
	if err != nil {
		return nil, err
	}
	if q != nil {
		r.Params = q
	}
	if rt.op == protocol.GetAgentCard {
		return r, nil
	}
	if r.ProtoJSON03() && rt.op.Message() && r.Params != nil {
		// The 0.3 specification's binding: the body may be the SendMessageRequest in ProtoJSON,
		// read as the 0.3 JSON-RPC params it stands for (rest03.go).
		proto, err := isProtoSend03(p, r.Params)
		if err != nil {
			return nil, err
		}
		if proto {
			if r.Params, err = sendParams03(r.Params); err != nil {
				return nil, err
			}
			if err := p.CheckBody(r.Params, lim.MaxDepth); err != nil {
				return nil, err
			}
		}
	}
	if r.ProtoJSON03() && rt.op == protocol.CreateTaskPushNotificationConfig && r.Params != nil {
		// The whole CreateTaskPushNotificationConfigRequest, as the 0.3 Python SDK reads it
		// (rest03.go).
		if r.Params, err = pushRequest03(p, r.Params, r.TaskID); err != nil {
			return nil, err
		}
	}
	if err := p.Params(v, rt.op, r.Params, r, true); err != nil {
		return nil, err
	}
	if err := p.Canonicalize(r); err != nil {
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
func matchRoute(v protocol.Version, path string) (route, string, *protocol.Error) {
	rt, tenant, ok := matchPath(v, path)
	if !ok {
		return route{}, "", protocol.Errorf(protocol.NotFound, "no A2A route matches %q", protocol.Clip(path))
	}
	return rt, tenant, nil
}

// matchPath is matchRoute; ok is false when no route matches.
func matchPath(v protocol.Version, path string) (_ route, tenant string, ok bool) {
	if rt, ok := matchFixed(path); ok {
		return rt, "", true
	}
	if !strings.HasPrefix(path, "/") {
		return route{}, "", false
	}
	segs := strings.Split(path[1:], "/")
	for _, s := range segs {
		if s == "" {
			return route{}, "", false
		}
	}
	if v == protocol.V03 && segs[0] == "v1" {
		rt, ok := matchSegmentsOf(httpRoutes03, segs[1:])
		if !ok {
			rt, ok = matchSegmentsOf(httpRoutes, segs[1:])
		}
		if ok {
			rt.template = "/v1" + rt.template
			return rt, "", true
		}
		return route{}, "", false
	}
	if rt, ok := matchSegments(segs); ok {
		return rt, "", true
	}
	if len(segs) > 1 && protocol.ValidTenant(segs[0]) {
		if rt, ok := matchSegments(segs[1:]); ok {
			rt.template = "/{tenant}" + rt.template
			return rt, segs[0], true
		}
	}
	return route{}, "", false
}

// httpRoute is one route of the HTTP+JSON binding, an operation's Route (operations.go): an
// HTTP method and a path template (tenant prefix aside).
type httpRoute struct {
	op       protocol.Operation
	method   string
	template string
	// segs are the template's segments, split once (a split per route and request was most of
	// an HTTP+JSON request's allocations); taskVar: the template binds {taskId}, so an {id}
	// in it is the config's.
	segs    []string
	taskVar bool
	// call marks the route capgate uses to call a handler for op.
	call bool
}

// match matches escaped path segments against the route's template, returning the task and
// config ids its variables bind.
func (r httpRoute) match(segs []string) (task, config string, ok bool) {
	if len(r.segs) != len(segs) {
		return "", "", false
	}
	for i, ts := range r.segs {
		if !strings.HasPrefix(ts, "{") {
			if segs[i] != ts {
				return "", "", false
			}
			continue
		}
		name, suffix, _ := strings.Cut(ts[1:], "}")
		raw, found := strings.CutSuffix(segs[i], suffix)
		if !found {
			return "", "", false
		}
		id, ok := pathID(raw)
		if !ok {
			return "", "", false
		}
		if name == "id" && r.taskVar {
			config = id
		} else {
			task = id
		}
	}
	return task, config, true
}

// matchSegments matches escaped path segments against the routes. Literal segments must match
// exactly as sent; identifiers are unescaped and must be non-empty, not . or .., and free of
// / \ : and control characters (so one path matches one template).
func matchSegments(segs []string) (route, bool) { return matchSegmentsOf(httpRoutes, segs) }

// matchSegmentsOf matches escaped path segments against routes, as matchSegments does.
func matchSegmentsOf(routes []httpRoute, segs []string) (route, bool) {
	var rt route
	for _, r := range routes {
		task, config, ok := r.match(segs)
		if !ok {
			continue
		}
		if rt.template == "" {
			rt = route{op: r.op, template: r.template, taskID: task, configID: config}
		}
		rt.methods = append(rt.methods, r.method)
		rt.ops = append(rt.ops, r.op)
	}
	return rt, rt.template != ""
}

// HTTPCall is the HTTP method and escaped path capgate calls an HTTP+JSON handler with for op
// (A2A 1.0), its variables filled from taskID and configID, under /{tenant} when tenant is
// set. ok is false for an operation without a route, or ids a path cannot carry.
func HTTPCall(op protocol.Operation, tenant, taskID, configID string) (method, path string, ok bool) {
	for _, r := range httpRoutes {
		if r.op != op || !r.call {
			continue
		}
		var b strings.Builder
		if tenant != "" {
			if !protocol.ValidTenant(tenant) {
				return "", "", false
			}
			b.WriteString("/" + tenant)
		}
		for _, ts := range strings.Split(r.template[1:], "/") {
			b.WriteByte('/')
			if !strings.HasPrefix(ts, "{") {
				b.WriteString(ts)
				continue
			}
			name, suffix, _ := strings.Cut(ts[1:], "}")
			id := taskID
			if name == "id" && strings.Contains(r.template, "{taskId}") {
				id = configID
			}
			if _, ok := pathID(url.PathEscape(id)); !ok {
				return "", "", false
			}
			b.WriteString(url.PathEscape(id) + suffix)
		}
		return r.method, b.String(), true
	}
	return "", "", false
}

// HTTPQueryFields lists the params fields op takes in the query string of a GET route, by name.
func HTTPQueryFields(op protocol.Operation) []string {
	var out []string
	for name, qp := range op.Spec().Query {
		if name == qp.Field {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// matchFixed finds the route of a path that is one of the fixed routes' (the public card's).
func matchFixed(path string) (route, bool) {
	var rt route
	for _, r := range fixedRoutes {
		if r.template != path {
			continue
		}
		if rt.template == "" {
			rt = route{op: r.op, template: r.template}
		}
		rt.methods = append(rt.methods, r.method)
		rt.ops = append(rt.ops, r.op)
	}
	return rt, rt.template != ""
}

// pathID unescapes one identifier segment.
func pathID(raw string) (string, bool) {
	id, err := url.PathUnescape(raw)
	if err != nil || id == "" || id == "." || id == ".." || len(id) > protocol.MaxIDBytes {
		return "", false
	}
	if strings.ContainsAny(id, `/\:`) || protocol.HasControl(id) {
		return "", false
	}
	return id, true
}

// queryParams turns the query string of an HTTP+JSON request into the params object it stands
// for (nil when there is none). It refuses malformed query strings, repeated parameters (readers
// disagree on which one wins), parameters the operation does not take (among them any the path
// binds), and a query beside a body.
func queryParams(op protocol.Operation, q string, hasBody bool) (jsontext.Value, *protocol.Error) {
	if q == "" {
		return nil, nil
	}
	vals, err := url.ParseQuery(q)
	if err != nil {
		return nil, protocol.Wrap(protocol.InvalidRequest, err, "query string is malformed")
	}
	if len(vals) == 0 {
		return nil, nil
	}
	if hasBody {
		return nil, protocol.Errorf(protocol.InvalidRequest, "query parameters are not accepted with a request body; put them in the body")
	}
	known := op.Spec().Query
	keys := make([]string, 0, len(vals))
	for k, vs := range vals {
		if len(vs) > 1 {
			return nil, protocol.Errorf(protocol.InvalidRequest, "query parameter %q is repeated", protocol.Clip(k))
		}
		if _, ok := known[k]; !ok {
			switch jsonmodel.FieldKey(k) {
			case "TENANT", "ID", "TASKID", "NAME", "PARENT", "PUSHNOTIFICATIONCONFIGID":
				return nil, protocol.Errorf(protocol.InvalidRequest, "query parameter %q is not allowed; the path names it", protocol.Clip(k))
			}
			return nil, protocol.Errorf(protocol.InvalidRequest, "query parameter %q is not accepted by %s", protocol.Clip(k), op)
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b := []byte{'{'}
	seen := map[string]bool{}
	for _, k := range keys {
		qp, v := known[k], vals[k][0]
		if seen[qp.Field] {
			return nil, protocol.Errorf(protocol.InvalidRequest, "query parameter %q names the same field as another", protocol.Clip(k))
		}
		seen[qp.Field] = true
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = jsonmodel.AppendQuote(b, qp.Field)
		b = append(b, ':')
		switch qp.Kind {
		case protocol.QueryInt:
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return nil, protocol.Errorf(protocol.InvalidRequest, "query parameter %q must be a non-negative integer", k)
			}
			b = strconv.AppendInt(b, int64(n), 10)
		case protocol.QueryBool:
			t, err := strconv.ParseBool(v)
			if err != nil {
				return nil, protocol.Errorf(protocol.InvalidRequest, "query parameter %q must be true or false", k)
			}
			b = strconv.AppendBool(b, t)
		default:
			if len(v) > protocol.MaxIDBytes {
				return nil, protocol.Errorf(protocol.InvalidRequest, "query parameter %q is longer than %d bytes", k, protocol.MaxIDBytes)
			}
			if !utf8.ValidString(v) {
				return nil, protocol.Errorf(protocol.InvalidRequest, "query parameter %q is not valid UTF-8", k)
			}
			b = jsonmodel.AppendQuote(b, v)
		}
	}
	return append(b, '}'), nil
}

// restRoutes flattens the routes the table's rows give in field routes, in table order.
func restRoutes(routes func(*protocol.Spec) []protocol.Route) []httpRoute {
	var out []httpRoute
	for _, op := range protocol.Operations() {
		s := op.Spec()
		for _, r := range routes(s) {
			out = append(out, httpRoute{op: s.Op, method: r.Method, template: r.Path, call: r.Call,
				segs: strings.Split(r.Path[1:], "/"), taskVar: strings.Contains(r.Path, "{taskId}")})
		}
	}
	return out
}

// The HTTP+JSON routes, built once from the table.
var (
	// httpRoutes are the routes of the A2A 1.0 proto's google.api.http annotations, the one
	// list both directions read: ParseHTTP matches requests against it, HTTPCall builds the
	// requests capgate sends to an HTTP+JSON handler.
	httpRoutes = restRoutes(func(s *protocol.Spec) []protocol.Route { return s.REST })
	// httpRoutes03 are the routes only 0.3's /v1/ form has, relative to /v1.
	httpRoutes03 = restRoutes(func(s *protocol.Spec) []protocol.Route { return s.REST03 })
	// fixedRoutes are the routes at fixed paths.
	fixedRoutes = restRoutes(func(s *protocol.Spec) []protocol.Route { return s.Fixed })
)
