package positionstest_test

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/capgate/capgate/test/ci"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/positionstest"
	"github.com/capgate/capgate/sidecar/protocol/wire"
)

const (
	sweptTask    = "task-swept"
	ownTask      = "task-own"
	sweptContext = "context-swept"
	sweptTenant  = "tenant-swept"
	ownTenant    = "tenant-own"
	hook         = "https://hooks.example.com/a2a"
)

type hdr http.Header

func (h hdr) Values(n string) []string { return http.Header(h).Values(n) }

func parse(t *testing.T, p positionstest.Position, swept, own string) (*protocol.Request, *protocol.Error) {
	t.Helper()
	method, target, h, body, err := positionstest.Request(p, swept, own, ownTenant, hook)
	require.NoError(t, err)
	path, query, _ := strings.Cut(target, "?")
	return wire.Parse(protocol.Envelope{Method: method, Path: path, Query: query, Header: hdr(h), Body: body, GRPC: true, Methods: positionstest.Methods()}, "", protocol.Limits{})
}

// TestParserReadsEveryPosition checks the parser against the catalogue: the value placed at each
// position is reported there (a task in Request.Tasks with the position's Where, a context in
// Request.Contexts, a tenant as Request.Tenant); a position that repeats another refuses a
// different value; and every task and context the parser reports is one the template placed, at
// a catalogued position.
func TestParserReadsEveryPosition(t *testing.T) {
	reported := map[string]map[string]bool{} // binding/version/op -> task and context Wheres reported
	for _, p := range positionstest.All() {
		t.Run(p.Name(), func(t *testing.T) {
			swept := sweptTask
			switch p.Kind {
			case positionstest.Tenant:
				swept = sweptTenant
			case positionstest.Context:
				swept = sweptContext
			}
			r, perr := parse(t, p, swept, ownTask)
			if p.MustAgree {
				require.NotNil(t, perr, "a value that disagrees with the position it repeats must be refused")
				require.Equal(t, protocol.InvalidParams, perr.Code, perr.Message)
				same := ownTask
				if p.Kind == positionstest.Tenant {
					same = ownTenant
				}
				_, perr = parse(t, p, same, ownTask)
				require.Nil(t, perr, "%v", perr)
				return
			}
			require.Nil(t, perr, "%v", perr)
			require.Equal(t, p.Binding, r.Binding)
			require.Equal(t, p.Version, r.Version)
			require.Equal(t, p.Operation, r.Operation)
			key := string(p.Binding) + "/" + string(p.Version) + "/" + string(p.Operation)
			if reported[key] == nil {
				reported[key] = map[string]bool{}
			}
			for _, ref := range r.Tasks {
				require.Contains(t, []string{sweptTask, ownTask}, ref.ID, "a task the template did not place, at %s", ref.Where)
				reported[key]["task "+ref.Where] = true
			}
			for _, ref := range r.Contexts {
				require.Equal(t, sweptContext, ref.ID, "a context the template did not place, at %s", ref.Where)
				reported[key][contextKey(ref.Where, ref.Filter)] = true
			}
			switch p.Kind {
			case positionstest.Task:
				require.Contains(t, r.Tasks, protocol.TaskRef{ID: sweptTask, Where: p.Where})
			case positionstest.Context:
				require.Equal(t, []protocol.ContextRef{{ID: sweptContext, Where: p.Where, Filter: p.Filter}}, r.Contexts,
					"a request names one context, at a filter position exactly where the catalogue has one")
			case positionstest.Tenant:
				require.Equal(t, sweptTenant, r.Tenant)
			}
		})
	}
	// Every task and context position the parser reported is a catalogued one.
	catalogued := map[string]map[string]bool{}
	for _, p := range positionstest.All() {
		key := string(p.Binding) + "/" + string(p.Version) + "/" + string(p.Operation)
		if catalogued[key] == nil {
			catalogued[key] = map[string]bool{}
		}
		switch {
		case p.Kind == positionstest.Context && !p.MustAgree:
			catalogued[key][contextKey(p.Where, p.Filter)] = true
		case p.Kind != positionstest.Tenant && !p.MustAgree:
			catalogued[key][string(p.Kind)+" "+p.Where] = true
		}
	}
	for key, wheres := range reported {
		for w := range wheres {
			require.True(t, catalogued[key][w], "%s: the parser reports a %s, which the catalogue does not sweep", key, w)
		}
	}
}

// contextKey names a context position, with its role: a target and a filter at the same place
// are different positions.
func contextKey(where string, filter bool) string {
	if filter {
		return "context filter " + where
	}
	return "context " + where
}

// TestCatalogueCoversTheProto walks the A2A 1.0 proto (../shared/spec/a2a.proto, normative)
// from each RPC's request message and requires a gRPC and a JSON-RPC position for every field
// that names a task, a context or a tenant: a field the spec adds cannot go unswept.
func TestCatalogueCoversTheProto(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "shared", "spec", "a2a.proto"))
	if err != nil {
		if ci.Required() {
			require.NoError(t, err, "the spec must be beside the repository in CI")
		}
		t.Skipf("../shared/spec/a2a.proto not found: %v", err)
	}
	msgs := protoMessages(string(b))
	rpcs := regexp.MustCompile(`rpc (\w+)\((\w+)\)`).FindAllStringSubmatch(string(b), -1)
	require.NotEmpty(t, rpcs)
	have := map[string]bool{}
	for _, p := range positionstest.All() {
		if p.Version == protocol.V1 && !p.MustAgree {
			have[string(p.Binding)+" "+string(p.Operation)+" "+p.Where] = true
		}
	}
	for _, rpc := range rpcs {
		op, req := rpc[1], rpc[2]
		for _, path := range namingFields(msgs, req, "", 0) {
			grpcWhere := strings.ReplaceAll(path, "reference_task_ids", "reference_task_ids[0]")
			require.True(t, have["grpc "+op+" "+grpcWhere], "%s: no gRPC position for %s.%s", op, req, path)
			rpcWhere := "params." + camel(grpcWhere)
			require.True(t, have["jsonrpc "+op+" "+rpcWhere], "%s: no JSON-RPC position for %s", op, rpcWhere)
		}
	}
}

type field struct{ name, typ string }

func protoMessages(src string) map[string][]field {
	out := map[string][]field{}
	re := regexp.MustCompile(`(?s)\nmessage (\w+) \{(.*?)\n\}`)
	fre := regexp.MustCompile(`(?m)^\s+(?:repeated |optional )?([\w.]+) (\w+) = \d+`)
	for _, m := range re.FindAllStringSubmatch(src, -1) {
		for _, f := range fre.FindAllStringSubmatch(m[2], -1) {
			out[m[1]] = append(out[m[1]], field{name: f[2], typ: f[1]})
		}
	}
	return out
}

// notTasks are fields named like a task reference that name something else.
var notTasks = map[string]bool{
	"TaskPushNotificationConfig.id":              true, // the config's own id
	"GetTaskPushNotificationConfigRequest.id":    true,
	"DeleteTaskPushNotificationConfigRequest.id": true,
}

// namingFields lists the paths under message m of fields that name a task, a context or a tenant.
func namingFields(msgs map[string][]field, m, prefix string, depth int) []string {
	if depth > 3 {
		return nil
	}
	var out []string
	for _, f := range msgs[m] {
		switch {
		case f.name == "tenant" || f.name == "task_id" || f.name == "reference_task_ids" || f.name == "context_id":
			out = append(out, prefix+f.name)
		case f.name == "id" && f.typ == "string" && !notTasks[m+".id"]:
			out = append(out, prefix+f.name)
		case msgs[f.typ] != nil && !slices.Contains([]string{"Part", "Artifact", "AuthenticationInfo", "TaskStatus"}, f.typ):
			out = append(out, namingFields(msgs, f.typ, prefix+f.name+".", depth+1)...)
		}
	}
	return out
}

// camel turns proto field names into JSON names along a path: task_push_notification_config →
// taskPushNotificationConfig.
func camel(path string) string {
	parts := strings.Split(path, "_")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}

// TestImportedByTestsOnly: the catalogue is test-only, as its name says: no product file (a
// non-test Go file outside test/) imports it.
func TestImportedByTestsOnly(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	const self = `"github.com/capgate/capgate/sidecar/protocol/positionstest"`
	var found []string
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == filepath.Join(root, "test") || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && path != root {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), self) {
			found = append(found, path)
		}
		return nil
	})
	require.NoError(t, err)
	require.Empty(t, found, "positionstest is for tests only")
}
