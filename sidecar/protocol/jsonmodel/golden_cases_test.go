package jsonmodel

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/capgate/capgate/sidecar/protocol/bodytest"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/protocol"
)

// The golden corpus: realistic bodies of both JSON bindings and their mutations, and the fuzz
// seed corpus. The scanner's tests read its bodies here; the golden test (golden_test.go, in
// the external test package, which can import the binding packages) parses every case.

const ctJSON = bodytest.ContentType

// rpc builds a JSON-RPC request body.
var rpc = bodytest.RPC

// goldenCase is one parse: JSON-RPC when method is "", else HTTP+JSON.
type goldenCase struct {
	name   string
	v      protocol.Version
	ct     string
	method string
	target string
	body   string
	lim    protocol.Limits
}

// GoldenCase is a goldenCase as the external tests see it: JSON-RPC when Method is "", else
// HTTP+JSON.
type GoldenCase struct {
	Name, CT, Method, Target, Body string
	V                              protocol.Version
	Lim                            protocol.Limits
}

// GoldenCases is the golden corpus (goldenCases) for the external tests.
func GoldenCases(t testing.TB) []GoldenCase {
	cases := goldenCases(t)
	out := make([]GoldenCase, len(cases))
	for i, c := range cases {
		out[i] = GoldenCase{Name: c.name, CT: c.ct, Method: c.method, Target: c.target, Body: c.body, V: c.v, Lim: c.lim}
	}
	return out
}

// goldenBase is a body whose every member and element the corpus mutates.
type goldenBase struct {
	name   string
	v      protocol.Version
	method string // HTTP method; "" for JSON-RPC
	target string
	body   string
}

var goldenBases = []goldenBase{
	{name: "send10", v: protocol.V1, body: `{"jsonrpc":"2.0","id":"r1","method":"SendMessage","params":{"tenant":"acme","message":{"messageId":"m1","taskId":"t1","contextId":"c1","role":"ROLE_USER","parts":[` +
		`{"text":"hi"},{"raw":"JVBERi0=","mediaType":"Application/PDF","filename":"a.pdf"},{"data":{"a":1}}],"metadata":{"skillId":"msg-hint"}},` +
		`"configuration":{"acceptedOutputModes":["application/json","text/plain"]},"metadata":{"skillId":"s1","k":true}}}`},
	{name: "send03", v: protocol.V03, body: `{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"message":{"kind":"message","messageId":"m1","taskId":"t1","role":"user","parts":[` +
		`{"kind":"text","text":"hi"},{"kind":"file","file":{"bytes":"AA==","mimeType":"application/pdf","name":"a.pdf"}},{"kind":"file","file":{"uri":"https://x/y"}},{"kind":"data","data":{}}],` +
		`"metadata":{"skillId":"msg-hint"}},"configuration":{"acceptedOutputModes":["text/plain"],"blocking":true},"metadata":{"skillId":"s1"}}}`},
	{name: "get10", v: protocol.V1, body: `{"jsonrpc":"2.0","id":null,"method":"GetTask","params":{"id":"t1","tenant":"acme","historyLength":3}}`},
	{name: "pushset03", v: protocol.V03, body: `{"jsonrpc":"2.0","id":"p","method":"tasks/pushNotificationConfig/set","params":{"taskId":"t1","pushNotificationConfig":{"id":"c1","url":"https://hook","token":"x"}}}`},
	{name: "pushget03", v: protocol.V03, body: `{"jsonrpc":"2.0","id":-1.5e3,"method":"tasks/pushNotificationConfig/delete","params":{"id":"t1","pushNotificationConfigId":"c1"}}`},
	{name: "pushcreate10", v: protocol.V1, body: `{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"t1","id":"c1","url":"https://hook","tenant":"acme"}}`},
	{name: "http-send10", v: protocol.V1, method: "POST", target: "/acme/message:send", body: `{"tenant":"acme","message":{"messageId":"m1","taskId":"t1","parts":[{"text":"hi"},{"url":"https://x/a.pdf","mediaType":"application/pdf"}]},"metadata":{"skillId":"s"}}`},
	{name: "http-pushcreate03", v: protocol.V03, method: "POST", target: "/v1/tasks/t1/pushNotificationConfigs", body: `{"id":"c1","url":"https://hook"}`},
	{name: "http-cancel10", v: protocol.V1, method: "POST", target: "/tasks/t1:cancel", body: `{"id":"t1","metadata":{}}`},
}

func goldenCases(t testing.TB) []goldenCase {
	var cases []goldenCase
	for _, base := range goldenBases {
		add := func(suffix, body string, lim protocol.Limits) {
			cases = append(cases, goldenCase{name: base.name + "/" + suffix, v: base.v, ct: ctJSON,
				method: base.method, target: base.target, body: body, lim: lim})
		}
		add("base", base.body, protocol.Limits{})
		root := parseJNode(t, base.body)
		for _, m := range root.mutations("") {
			add(strings.TrimPrefix(m.name, "/"), m.node.String(), protocol.Limits{})
		}
		// Whole-body variants.
		for i := 1; i < len(base.body); i += max(1, len(base.body)/8) {
			add("truncate@"+strconv.Itoa(i), base.body[:i], protocol.Limits{})
		}
		add("trailing-space", base.body+" \n\t", protocol.Limits{})
		add("trailing-x", base.body+" x", protocol.Limits{})
		add("trailing-value", base.body+"{}", protocol.Limits{})
		add("leading-space", "\r\n "+base.body, protocol.Limits{})
		add("batch", "["+base.body+"]", protocol.Limits{})
		add("bom", "\uFEFF"+base.body, protocol.Limits{})
		add("size=len", base.body, protocol.Limits{MaxBodyBytes: int64(len(base.body))})
		add("size=len-1", base.body, protocol.Limits{MaxBodyBytes: int64(len(base.body) - 1)})
		for d := 1; d <= 7; d += 3 {
			add("depth="+strconv.Itoa(d), base.body, protocol.Limits{MaxDepth: d})
		}
		if i := strings.Index(base.body, `":"`); i >= 0 {
			j := i + 3
			for _, ins := range []struct{ name, s string }{
				{"invalid-utf8", "\xff"}, {"surrogate-utf8", "\xed\xa0\x80"}, {"lone-surrogate", `\ud800`},
				{"pair-surrogate", `\ud83d\ude00`}, {"nul-escape", `\u0000`}, {"raw-control", "\x01"},
				{"bad-escape", `\x`}, {"kelvin", "\u212a"},
			} {
				add("insert-"+ins.name, base.body[:j]+ins.s+base.body[j:], protocol.Limits{})
			}
			add("late-invalid-utf8", base.body[:len(base.body)-1]+",\"z\":\"\xff\"}", protocol.Limits{})
			add("syntax-then-invalid-utf8", base.body[:j-1]+"x"+base.body[j:len(base.body)-1]+",\"z\":\"\xff\"}", protocol.Limits{})
		}
		if base.method == "" {
			other := protocol.V03
			if base.v == protocol.V03 {
				other = protocol.V1
			}
			cases = append(cases, goldenCase{name: base.name + "/other-version", v: other, ct: ctJSON, body: base.body})
		}
		for _, ct := range []string{"", "application/a2a+json", "application/json; charset=utf-8", "application/json;charset=UTF-8",
			"Application/JSON", "application/json; charset=latin1", "application/json;", "text/json", "application/json ; x=y"} {
			c := goldenCase{name: base.name + "/ct=" + strconv.Quote(ct), v: base.v, ct: ct,
				method: base.method, target: base.target, body: base.body}
			cases = append(cases, c)
		}
	}
	cases = append(cases, goldenExtras()...)
	cases = append(cases, goldenSeeds(t)...)
	return cases
}

// goldenExtras are single cases the mutations do not reach.
func goldenExtras() []goldenCase {
	long := func(n int) string { return strings.Repeat("i", n) }
	var cases []goldenCase
	rpcCase := func(name string, v protocol.Version, body string) {
		cases = append(cases, goldenCase{name: "extra/" + name, v: v, ct: ctJSON, body: body})
	}
	rpcCase("id-1024", protocol.V1, rpc(`1`, "GetTask", `{"id":"`+long(1024)+`"}`))
	rpcCase("id-1025", protocol.V1, rpc(`1`, "GetTask", `{"id":"`+long(1025)+`"}`))
	rpcCase("id-escaped-1025", protocol.V1, rpc(`1`, "GetTask", `{"id":"`+long(1023)+`\u00e9"}`))
	rpcCase("tenant-128", protocol.V1, rpc(`1`, "ListTasks", `{"tenant":"`+long(128)+`"}`))
	rpcCase("tenant-129", protocol.V1, rpc(`1`, "ListTasks", `{"tenant":"`+long(129)+`"}`))
	rpcCase("tenant-escaped", protocol.V1, rpc(`1`, "ListTasks", `{"tenant":"\u0061cme"}`))
	rpcCase("tenant-dot", protocol.V1, rpc(`1`, "ListTasks", `{"tenant":"."}`))
	rpcCase("id-c1-control", protocol.V1, rpc(`1`, "GetTask", `{"id":"a\u0085b"}`))
	rpcCase("id-del", protocol.V1, rpc(`1`, "GetTask", `{"id":"a\u007fb"}`))
	rpcCase("id-escaped-quote", protocol.V1, rpc(`"a\"b"`, "GetTask", `{"id":"a\"b\\"}`))
	rpcCase("method-escaped", protocol.V1, rpc(`1`, `Get\u0054ask`, `{"id":"t"}`))
	rpcCase("method-escaped-unknown", protocol.V03, rpc(`1`, `\u00e9`+long(70), `{"id":"t"}`))
	rpcCase("jsonrpc-escaped", protocol.V1, `{"jsonrpc":"2\u002e0","id":1,"method":"GetTask","params":{"id":"t"}}`)
	rpcCase("jsonrpc-empty", protocol.V1, `{"jsonrpc":"","id":1,"method":"GetTask","params":{"id":"t"}}`)
	rpcCase("id-true-no-jsonrpc", protocol.V1, `{"id":true}`)
	rpcCase("no-id-bad-jsonrpc", protocol.V1, `{"jsonrpc":1}`)
	rpcCase("empty-object", protocol.V1, `{}`)
	rpcCase("whitespace-everywhere", protocol.V1, " {\n \"jsonrpc\" : \"2.0\" ,\t\"id\" : 1 ,\r\n \"method\" : \"GetTask\" , \"params\" : { \"id\" : \"t\" } } ")
	rpcCase("number-id-exp", protocol.V1, rpc(`1E+2`, "GetTask", `{"id":"t"}`))
	rpcCase("number-id-bad", protocol.V1, rpc(`01`, "GetTask", `{"id":"t"}`))
	rpcCase("number-id-minus", protocol.V1, rpc(`-`, "GetTask", `{"id":"t"}`))
	rpcCase("literal-bad", protocol.V1, rpc(`nul`, "GetTask", `{"id":"t"}`))
	rpcCase("media-type-params", protocol.V1, rpc(`1`, "SendMessage", `{"message":{"messageId":"m","parts":[{"text":"x","mediaType":"Text/Plain; charset=\"utf-8\""}]}}`))
	rpcCase("media-type-no-slash", protocol.V1, rpc(`1`, "SendMessage", `{"message":{"messageId":"m","parts":[{"text":"x","mediaType":"text"}]}}`))
	rpcCase("media-type-spaces", protocol.V1, rpc(`1`, "SendMessage", `{"message":{"messageId":"m","parts":[{"text":"x","mediaType":" text/plain "}]}}`))
	rpcCase("media-type-slash-only", protocol.V1, rpc(`1`, "SendMessage", `{"message":{"messageId":"m","parts":[{"text":"x","mediaType":"/"}]}}`))
	rpcCase("media-type-two-slashes", protocol.V1, rpc(`1`, "SendMessage", `{"message":{"messageId":"m","parts":[{"text":"x","mediaType":"a/b/c"}]}}`))
	rpcCase("media-type-unicode", protocol.V1, rpc(`1`, "SendMessage", `{"message":{"messageId":"m","parts":[{"text":"x","mediaType":"text/pl\u00e4in"}]}}`))
	rpcCase("media-type-tspecial", protocol.V1, rpc(`1`, "SendMessage", `{"message":{"messageId":"m","parts":[{"text":"x","mediaType":"text/pl@in"}]}}`))
	rpcCase("media-type-rfc2231", protocol.V1, rpc(`1`, "SendMessage", `{"message":{"messageId":"m","parts":[{"text":"x","mediaType":"text/plain; a*0=b; a*1=c"}]}}`))
	rpcCase("media-type-bad-param", protocol.V1, rpc(`1`, "SendMessage", `{"message":{"messageId":"m","parts":[{"text":"x","mediaType":"text/plain; =b"}]}}`))
	rpcCase("mime-type-03-upper", protocol.V03, rpc(`1`, "message/send", `{"message":{"messageId":"m","parts":[{"kind":"file","file":{"uri":"u","mimeType":"IMAGE/PNG"}}]}}`))
	rpcCase("skill-null-then-message", protocol.V1, rpc(`1`, "SendMessage", `{"message":{"messageId":"m","parts":[{"text":"x"}],"metadata":{"skillId":"inner"}},"metadata":{"skillId":null}}`))
	rpcCase("skill-empty-then-message", protocol.V1, rpc(`1`, "SendMessage", `{"message":{"messageId":"m","parts":[{"text":"x"}],"metadata":{"skillId":"inner"}},"metadata":{"skillId":""}}`))
	rpcCase("skill-folded-not-read", protocol.V1, rpc(`1`, "SendMessage", `{"message":{"messageId":"m","parts":[{"text":"x"}]},"metadata":{"SkillId":"a","skill_id":"b"}}`))
	rpcCase("skill-escaped-name", protocol.V1, rpc(`1`, "SendMessage", `{"message":{"messageId":"m","parts":[{"text":"x"}]},"metadata":{"\u0073killId":"a"}}`))
	rpcCase("text-escapes", protocol.V1, rpc(`1`, "SendMessage", `{"message":{"messageId":"m","parts":[{"text":"a\u00e9\n\"\ud83d\ude00\/"}]}}`))
	rpcCase("many-members", protocol.V1, rpc(`1`, "GetTask", `{"id":"t"`+manyMembers(20)+`}`))
	rpcCase("many-members-fold", protocol.V1, rpc(`1`, "GetTask", `{"id":"t"`+manyMembers(20)+`,"I_D":"u"}`))
	rpcCase("many-members-exact", protocol.V1, rpc(`1`, "GetTask", `{"id":"t"`+manyMembers(20)+`,"k3":"u"}`))
	rpcCase("many-members-escaped", protocol.V1, rpc(`1`, "GetTask", `{"id":"t"`+manyMembers(20)+`,"\u006b3":"u"}`))
	rpcCase("many-parts", protocol.V1, rpc(`1`, "SendMessage", `{"message":{"messageId":"m","parts":[`+strings.Repeat(`{"text":"x"},`, 40)+`{"text":"y"}]}}`))
	rpcCase("deep-ok", protocol.V1, rpc(`1`, "GetTask", `{"id":"t","x":`+strings.Repeat(`[`, 62)+strings.Repeat(`]`, 62)+`}`))
	rpcCase("deep-over", protocol.V1, rpc(`1`, "GetTask", `{"id":"t","x":`+strings.Repeat(`[`, 63)+strings.Repeat(`]`, 63)+`}`))
	rpcCase("deep-over-unclosed", protocol.V1, rpc(`1`, "GetTask", `{"id":"t","x":`+strings.Repeat(`[`, 63)))
	rpcCase("dup-after-syntax-error", protocol.V1, `{"a":1,"a":2,}`)
	rpcCase("syntax-error-after-dup", protocol.V1, `{"a":1,"a":2 x}`)
	rpcCase("dup-after-depth", protocol.V1, `{"a":[[[[]]]],"a":1}`)
	rpcCase("fold-dup-envelope-vs-exact-dup-deep", protocol.V1, `{"id":1,"ID":2,"params":{"x":{"y":1,"y":2}}}`)
	rpcCase("fold-dup-params-vs-bad-id", protocol.V1, `{"jsonrpc":"2.0","id":{},"method":"GetTask","params":{"id":"t","ID":"u"}}`)
	cases = append(cases,
		goldenCase{name: "extra/depth-limit-huge", v: protocol.V1, ct: ctJSON, body: strings.Repeat("[", 10001) + strings.Repeat("]", 10001), lim: protocol.Limits{MaxDepth: 20000}},
		goldenCase{name: "extra/http-null-body", v: protocol.V1, ct: "", method: "DELETE", target: "/tasks/t/pushNotificationConfigs/c", body: " null "},
		goldenCase{name: "extra/http-bad-json-get", v: protocol.V1, ct: ctJSON, method: "GET", target: "/tasks/t", body: "{"},
		goldenCase{name: "extra/http-post-no-ct", v: protocol.V1, ct: "", method: "POST", target: "/tasks/t:cancel", body: "{}"},
		goldenCase{name: "extra/http-string-body", v: protocol.V1, ct: ctJSON, method: "POST", target: "/tasks/t:cancel", body: `"x"`},
		goldenCase{name: "extra/http-card", v: protocol.V1, ct: ctJSON, method: "GET", target: protocol.AgentCardPath, body: `{"a":1,"a":2}`},
		goldenCase{name: "extra/http-card-post-body", v: protocol.V1, ct: ctJSON, method: "POST", target: "/extendedAgentCard", body: `{"a":1}`},
	)
	return cases
}

func manyMembers(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(`,"k` + strconv.Itoa(i) + `":` + strconv.Itoa(i))
	}
	return b.String()
}

// goldenSeeds are the fuzz seed corpus files, run as their fuzz targets run them.
func goldenSeeds(t testing.TB) []goldenCase {
	var cases []goldenCase
	for _, target := range []string{"FuzzParseJSONRPC", "FuzzParseHTTP"} {
		dir := filepath.Join("testdata", "fuzz", target)
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			require.NoError(t, err)
			args := fuzzArgs(t, b)
			v, verr := protocol.ParseVersion(args[0])
			if verr != nil {
				continue
			}
			lim := protocol.Limits{MaxBodyBytes: 1 << 16, MaxDepth: 16}
			c := goldenCase{name: "seed/" + target + "/" + e.Name(), v: v, ct: ctJSON, lim: lim}
			if target == "FuzzParseJSONRPC" {
				c.body = args[1]
			} else {
				c.method, c.target, c.body = args[1], args[2], args[3]
			}
			cases = append(cases, c)
		}
	}
	return cases
}

// fuzzArgs reads a "go test fuzz v1" file of string arguments.
func fuzzArgs(t testing.TB, b []byte) []string {
	var out []string
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if i == 0 {
			require.Equal(t, "go test fuzz v1", line)
			continue
		}
		lit, ok := strings.CutPrefix(line, "string(")
		require.True(t, ok, line)
		s, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
		require.NoError(t, err)
		out = append(out, s)
	}
	return out
}

// jnode is a JSON value kept as written: object names and scalars are raw JSON text.
type jnode struct {
	kind  jsontext.Kind
	raw   string   // scalars
	names []string // objects: raw quoted names
	kids  []*jnode // object values or array elements
}

func parseJNode(t testing.TB, s string) *jnode {
	dec := jsontext.NewDecoder(strings.NewReader(s), jsontext.AllowDuplicateNames(true))
	n, err := readJNode(dec)
	require.NoError(t, err)
	return n
}

func readJNode(dec *jsontext.Decoder) (*jnode, error) {
	switch k := dec.PeekKind(); k {
	case '{', '[':
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		n := &jnode{kind: k}
		for dec.PeekKind() != k+2 { // '}' is '{'+2, ']' is '['+2
			if k == '{' {
				name, err := dec.ReadValue()
				if err != nil {
					return nil, err
				}
				n.names = append(n.names, string(name))
			}
			kid, err := readJNode(dec)
			if err != nil {
				return nil, err
			}
			n.kids = append(n.kids, kid)
		}
		_, err := dec.ReadToken()
		return n, err
	default:
		v, err := dec.ReadValue()
		return &jnode{kind: v.Kind(), raw: string(v)}, err
	}
}

func (n *jnode) clone() *jnode {
	c := *n
	c.names = slices.Clone(n.names)
	c.kids = make([]*jnode, len(n.kids))
	for i, k := range n.kids {
		c.kids[i] = k.clone()
	}
	return &c
}

func (n *jnode) String() string {
	var b bytes.Buffer
	n.write(&b)
	return b.String()
}

func (n *jnode) write(b *bytes.Buffer) {
	switch n.kind {
	case '{', '[':
		b.WriteByte(byte(n.kind))
		for i, k := range n.kids {
			if i > 0 {
				b.WriteByte(',')
			}
			if n.kind == '{' {
				b.WriteString(n.names[i] + ":")
			}
			k.write(b)
		}
		b.WriteByte(byte(n.kind) + 2)
	default:
		b.WriteString(n.raw)
	}
}

type mutation struct {
	name string
	node *jnode // the whole mutated document
}

// replacements are the values every member and element is replaced by in turn.
var replacements = []struct {
	name, raw   string
	stringsOnly bool // replaces string values only
}{
	{"null", "null", false}, {"num", "1", false}, {"str", `"x"`, false}, {"obj", "{}", false}, {"arr", "[]", false},
	{"empty", `""`, true}, {"ctl", `"a\nb"`, true},
}

// mutations returns the document n with, in turn, each member and element of each nested
// value deleted, replaced, duplicated or (members) respelled; path names n's position.
func (n *jnode) mutations(path string) []mutation {
	var out []mutation
	// each applies f to a fresh copy of the document and records it.
	each := func(name string, f func(c *jnode)) {
		c := n.clone()
		f(c)
		out = append(out, mutation{name: path + "/" + name, node: c})
	}
	switch n.kind {
	case '{':
		for i, name := range n.names {
			field := strings.Trim(name, `"`)
			at := field + ":"
			each(at+"del", func(c *jnode) {
				c.names = slices.Delete(c.names, i, i+1)
				c.kids = slices.Delete(c.kids, i, i+1)
			})
			for _, r := range replacements {
				if r.stringsOnly && n.kids[i].kind != '"' {
					continue
				}
				each(at+r.name, func(c *jnode) { c.kids[i] = &jnode{kind: jsontext.Value(r.raw).Kind(), raw: r.raw} })
			}
			each(at+"dup", func(c *jnode) {
				c.names = append(c.names, name)
				c.kids = append(c.kids, &jnode{kind: '"', raw: `"dup"`})
			})
			each(at+"dup-escaped", func(c *jnode) {
				c.names = append(c.names, `"\u`+fmt.Sprintf("%04x", field[0])+field[1:]+`"`)
				c.kids = append(c.kids, &jnode{kind: 'n', raw: "null"})
			})
			each(at+"upper", func(c *jnode) { c.names[i] = strings.ToUpper(name) })
			each(at+"snake", func(c *jnode) { c.names[i] = `"` + snake(field) + `"` })
			each(at+"fold-dup", func(c *jnode) {
				c.names = append(c.names, strings.ToUpper(name))
				c.kids = append(c.kids, &jnode{kind: '"', raw: `"z"`})
			})
			if strings.ContainsAny(field, "kKsS") {
				each(at+"unicode-fold", func(c *jnode) {
					c.names[i] = strings.NewReplacer("k", "\u212a", "K", "\u212a", "s", "\u017f", "S", "\u017f").Replace(name)
				})
			}
			for _, m := range n.kids[i].mutations(path + "/" + field) {
				c := n.clone()
				c.kids[i] = m.node
				out = append(out, mutation{name: m.name, node: c})
			}
		}
		each("add-unknown", func(c *jnode) {
			c.names = append(c.names, `"unknownField"`)
			c.kids = append(c.kids, &jnode{kind: '[', kids: []*jnode{{kind: '{'}}})
		})
	case '[':
		for i := range n.kids {
			at := "[" + strconv.Itoa(i) + "]:"
			each(at+"del", func(c *jnode) { c.kids = slices.Delete(c.kids, i, i+1) })
			for _, r := range replacements[:5] {
				each(at+r.name, func(c *jnode) { c.kids[i] = &jnode{kind: jsontext.Value(r.raw).Kind(), raw: r.raw} })
			}
			each(at+"dup", func(c *jnode) { c.kids = slices.Insert(c.kids, i, c.kids[i].clone()) })
			for _, m := range n.kids[i].mutations(path + "/" + strconv.Itoa(i)) {
				c := n.clone()
				c.kids[i] = m.node
				out = append(out, mutation{name: m.name, node: c})
			}
		}
	}
	return out
}

// snake is the proto-name spelling of a camelCase field.
func snake(s string) string {
	var b strings.Builder
	for _, r := range s {
		if 'A' <= r && r <= 'Z' {
			b.WriteByte('_')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}
