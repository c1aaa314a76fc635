package protocol

import (
	goscanner "go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	a2apb03 "github.com/a2aproject/a2a-go/a2apb"
	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
)

// TestOperationNamesUnique: a name, on one binding and version, is one operation's; the two
// JSON-RPC versions share no name (MethodOperation reads both); a route (HTTP method and path)
// is one operation's.
func TestOperationNamesUnique(t *testing.T) {
	names := map[string]map[string]Operation{}
	add := func(kind, name string, op Operation) {
		if name == "" {
			return
		}
		if names[kind] == nil {
			names[kind] = map[string]Operation{}
		}
		prev, dup := names[kind][name]
		require.False(t, dup, "%s name %q is %s's and %s's", kind, name, prev, op)
		names[kind][name] = op
	}
	for i := range operationTable {
		s := &operationTable[i]
		add("operation", string(s.Op), s.Op)
		add("JSON-RPC", s.JSONRPC, s.Op)
		add("JSON-RPC", s.JSONRPC03, s.Op)
		add("1.0 gRPC", s.GRPC, s.Op)
		add("0.3 gRPC", s.GRPC03, s.Op)
		for _, r := range s.REST {
			add("route", r.Method+" "+r.Path, s.Op)
		}
		for _, r := range s.REST03 {
			add("route", r.Method+" /v1"+r.Path, s.Op)
		}
		for _, r := range s.Fixed {
			add("route", r.Method+" "+r.Path, s.Op)
		}
	}
	require.Len(t, names["operation"], len(operationTable))
}

// TestOperationProperties: each property a door asks of an operation is its row's, and an
// operation not in the table has none.
func TestOperationProperties(t *testing.T) {
	for i := range operationTable {
		s := &operationTable[i]
		op := s.Op
		require.Equal(t, s.Streams, op.Streaming(), op)
		require.Equal(t, s.Message, op.Message(), op)
		require.Equal(t, s.TaskField != "", op.TargetsTask(), op)
		require.Equal(t, s.Push, op.Push(), op)
		require.Equal(t, s.Contexts, op.NamesContext(), op)
		require.Equal(t, s.Public, op.Public(), op)
		require.Equal(t, s.Result == KindEmpty, op.EmptyResult(), op)
		require.Equal(t, s.Result, op.Result(), op)
		task, config := op.PathFields()
		require.Equal(t, s.TaskField, task, op)
		require.Equal(t, s.ConfigField, config, op)
		require.NotEmpty(t, op.Label(), op)
		require.Equal(t, s.Store&StoreClaim != 0, op.Needs(StoreClaim), op)
		if s.ConfigField != "" || s.Push {
			require.NotEmpty(t, s.TaskField, "%s: a push config operation targets a task", op)
		}
		if s.Message {
			require.True(t, op.Needs(StoreClaim|StoreBind), op)
		}
	}
	for _, op := range []Operation{"", "unknown", "message/send", "sendMessage", "SendMessage "} {
		require.False(t, op.Known(), op)
		require.False(t, op.Streaming() || op.Message() || op.TargetsTask() || op.Push() || op.Public() ||
			op.EmptyResult() || op.Needs(StoreLookup), op)
		require.Equal(t, UnknownLabel, op.Label())
		require.Empty(t, MethodName(V1, op))
		require.Empty(t, GRPCMethod(V1, op))
	}
}

// wireNames are the names the operation table gives operations on the wire, as they would be
// spelled in a string literal: methods, gRPC full methods and route templates.
func wireNames() map[string]Operation {
	out := map[string]Operation{}
	for i := range operationTable {
		s := &operationTable[i]
		for _, n := range []string{s.JSONRPC, s.JSONRPC03, GRPCMethod(V1, s.Op), GRPCMethod(V03, s.Op)} {
			if n != "" {
				out[n] = s.Op
			}
		}
		// The 0.3 gRPC method names that are not also 1.0 names ("TaskSubscription").
		if s.GRPC03 != "" && s.GRPC03 != s.GRPC {
			if _, taken := specs.get(s.GRPC03); !taken {
				out[s.GRPC03] = s.Op
			}
		}
		for _, r := range s.REST {
			out[r.Path], out["/v1"+r.Path] = s.Op, s.Op
		}
		for _, r := range s.REST03 {
			out["/v1"+r.Path] = s.Op
		}
	}
	return out
}

// TestWireNamesOnlyInTable: no product source file but the table's spells an operation's wire
// name as a string literal, so the table is the only list of them. Tests and test-only
// packages such as the catalogue sidecar/protocol/positionstest, which checks the parser against an independent
// spelling of every position, are not product code.
func TestWireNamesOnlyInTable(t *testing.T) {
	names := wireNames()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	table, err := filepath.Abs("operations.go")
	require.NoError(t, err)
	// test/ holds programs and suites; a package named ...test (positionstest, as httptest)
	// is imported by tests alone.
	skipDirs := map[string]bool{filepath.Join(root, "test"): true}
	var found []string
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skipDirs[path] || strings.HasSuffix(d.Name(), "test") || d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".") && path != root {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || path == table {
			return nil
		}
		files++
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		// go/scanner, not a parse: the literals are all the test needs, and a parse of every
		// file leaves garbage that would make the package's allocation tests flaky.
		fset := token.NewFileSet()
		file := fset.AddFile(path, -1, len(src))
		var sc goscanner.Scanner
		sc.Init(file, src, nil, 0)
		for {
			pos, tok, lit := sc.Scan()
			if tok == token.EOF {
				break
			}
			if tok != token.STRING {
				continue
			}
			if s, err := strconv.Unquote(lit); err == nil {
				if op, ok := names[s]; ok {
					rel, _ := filepath.Rel(root, path)
					found = append(found, rel+":"+strconv.Itoa(fset.Position(pos).Line)+": "+lit+" ("+string(op)+")")
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, files, 100, "the walk found the product sources")
	require.Empty(t, found, "operation names belong in sidecar/protocol/operations.go; read them from the table")
}

// TestWireNamesScanFindsLiterals: the scan's name list holds each kind of name it looks for.
func TestWireNamesScanFindsLiterals(t *testing.T) {
	names := wireNames()
	for _, n := range []string{"SendMessage", "tasks/pushNotificationConfig/set", "TaskSubscription",
		"/lf.a2a.v1.A2AService/SendMessage", "/a2a.v1.A2AService/GetAgentCard", "/tasks/{id}:subscribe",
		"/v1/card", "/v1/message:send"} {
		require.Contains(t, names, n)
	}
}

// TestResultKindMatchesResponse: a row's result kind is the kind its 1.0 response message holds,
// so the table says one thing twice in agreement; every unary row with a response message has a
// kind, except a message's (a task or a message, decided as it runs).
func TestResultKindMatchesResponse(t *testing.T) {
	want := map[Kind]string{
		KindTask: "lf.a2a.v1.Task", KindTaskList: "lf.a2a.v1.ListTasksResponse", KindPushConfig: "lf.a2a.v1.TaskPushNotificationConfig",
		KindPushConfigList: "lf.a2a.v1.ListTaskPushNotificationConfigsResponse", KindEmpty: "google.protobuf.Empty", KindCard: "lf.a2a.v1.AgentCard",
	}
	for _, s := range operationTable {
		m := ResponseMessage(s.Op)
		switch {
		case s.Result != 0 && m != nil:
			require.Equal(t, want[s.Result], string(m.ProtoReflect().Descriptor().FullName()), s.Op)
		case m != nil && !s.Streams && !s.Message:
			t.Errorf("%s has a response message and no result kind", s.Op)
		}
	}
}

// TestRequestMessagesAreTheServices: each row's gRPC request message (both versions) and 1.0
// response message are the input and output types its method has in the A2A proto's service
// descriptor, so the readers can trust the row's factory (and read it through its getters).
func TestRequestMessagesAreTheServices(t *testing.T) {
	for _, c := range []struct {
		v    Version
		file protoreflect.FileDescriptor
		req  func(Operation) proto.Message
	}{{V1, a2apb.File_a2av1_proto, RequestMessage}, {V03, a2apb03.File_a2a_proto, RequestMessage03}} {
		svc := c.file.Services().Get(0)
		for _, s := range operationTable {
			name := s.GRPC
			if c.v == V03 {
				name = s.GRPC03
			}
			m := c.req(s.Op)
			if name == "" {
				require.Nil(t, m, "%s has no %s gRPC method", s.Op, c.v)
				continue
			}
			md := svc.Methods().ByName(protoreflect.Name(name))
			require.NotNil(t, md, "%s %s", c.v, name)
			if m == nil {
				require.Equal(t, GetExtendedAgentCard, s.Op, "only 0.3's card call is not read") // its request is empty
				continue
			}
			require.Equal(t, md.Input().FullName(), m.ProtoReflect().Descriptor().FullName(), "%s %s", c.v, name)
			if c.v == V1 {
				require.Equal(t, md.Output().FullName(), ResponseMessage(s.Op).ProtoReflect().Descriptor().FullName(), "%s %s", c.v, name)
			}
		}
	}
}
