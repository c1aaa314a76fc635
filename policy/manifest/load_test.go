package manifest_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/diag"
	"github.com/capgate/capgate/policy/manifest"
)

// handlers is the handler set the test registries are checked against.
func handlers(names ...string) func(string) bool {
	return func(n string) bool {
		for _, v := range names {
			if v == n {
				return true
			}
		}
		return false
	}
}

func loadDir(t *testing.T, dir string, opts manifest.Options) (*manifest.Registry, error) {
	t.Helper()
	return manifest.Load([]manifest.Dir{{FS: os.DirFS(dir), Name: "capabilities"}}, opts)
}

func TestLoadInvalid(t *testing.T) {
	tests := map[string]string{
		"bad-id":                      `capabilities/bad-id.yaml:1: id: "Lookup_Invoice" does not match ^[a-z0-9][a-z0-9.-]{0,62}$`,
		"bad-media-type":              `capabilities/bad-media-type.yaml:9: skill.inputModes[1]: "pdf" is not a media type (want type/subtype, e.g. application/pdf)`,
		"bad-state":                   `capabilities/bad-state.yaml:2: state: "beta" is not one of preview, ga, deprecated, removed`,
		"bad-tenants":                 `capabilities/bad-tenants.yaml:12: tenants: "all" is not allowed: want "*" or a non-empty list of tenant ids`,
		"bad-visibility":              `capabilities/bad-visibility.yaml:3: visibility: "private" is not one of public, extended, internal`,
		"duplicate-id":                `capabilities/b.yaml:1: id: "lookup-invoice" is already defined in capabilities/a.yaml:1`,
		"duplicate-key":               `capabilities/duplicate-key.yaml:14: state: duplicate key (first defined at line 2)`,
		"empty-file":                  `capabilities/empty-file.yaml: empty file: want one document`,
		"empty-tenants":               `capabilities/empty-tenants.yaml:12: tenants: empty list: want "*" or a non-empty list of tenant ids`,
		"json-duplicate-key":          `capabilities/json-duplicate-key.json:5: state: duplicate key (first defined at line 3)`,
		"limits-not-mapping":          `capabilities/limits-not-mapping.yaml:14: limits: want a mapping, got a list`,
		"media-type-parameters":       `capabilities/media-type-parameters.yaml:9: skill.inputModes[0]: "text/plain; charset=utf-8" has parameters: list the bare media type (want type/subtype, e.g. application/pdf)`,
		"missing-handler":             `capabilities/missing-handler.yaml:1: handler: required`,
		"missing-id":                  `capabilities/missing-id.yaml:1: id: required`,
		"missing-skill":               `capabilities/missing-skill.yaml:1: skill: required`,
		"missing-skill-description":   `capabilities/missing-skill-description.yaml:4: skill.description: required`,
		"missing-skill-name":          `capabilities/missing-skill-name.yaml:4: skill.name: required`,
		"missing-skill-tags":          `capabilities/missing-skill-tags.yaml:4: skill.tags: required`,
		"missing-state":               `capabilities/missing-state.yaml:1: state: required: one of preview, ga, deprecated, removed`,
		"missing-tenants":             `capabilities/missing-tenants.yaml:1: tenants: required: "*" or a non-empty list`,
		"missing-visibility":          `capabilities/missing-visibility.yaml:1: visibility: required: one of public, extended, internal`,
		"not-a-mapping":               `capabilities/not-a-mapping.yaml:1: want a mapping (one capability manifest), got a list`,
		"removed-without-replaced-by": `capabilities/removed-without-replaced-by.yaml:1: replaced_by: required when state is removed`,
		"replaced-by-removed":         `capabilities/lookup-invoice.yaml:3: replaced_by: "lookup-invoice-v0" is itself removed: name a capability callers can use`,
		"quota-rate-misspelt":         `capabilities/quota-rate-misspelt.yaml:16: quota.unit: unknown field; did you mean units?`,
		"quota-bad-window":            `capabilities/quota-bad-window.yaml:15: quota.rate.per: 90ms: want whole seconds, at least 1s`,
		"quota-units-zero":            `capabilities/quota-units-zero.yaml:15: quota.units: 0: must be positive`,
		"routing-bad-mode":            `capabilities/routing-bad-mode.yaml:14: routing.mode: "never" is not one of auto, confirm, explicit`,
		"routing-bad-min-confidence":  `capabilities/routing-bad-min-confidence.yaml:16: routing.min_confidence: 1.5 is outside (0, 1]`,
		"routing-not-mapping":         `capabilities/routing-not-mapping.yaml:14: routing: want a mapping {mode: auto | confirm | explicit, min_confidence: 0..1}, got a string`,
		"syntax-error":                `capabilities/syntax-error.yaml:5: syntax error: did not find expected ',' or ']' (in the block from line 4)`,
		"two-documents":               `capabilities/two-documents.yaml:15: more than one document: put one document in each file`,
		"undefined-handler":           `capabilities/undefined-handler.yaml:13: handler: "invoices.find" is not defined in the deployment config (handlers)`,
		"unknown-field":               `capabilities/unknown-field.yaml:14: colour: unknown field; known fields are id, state, visibility, replaced_by, skill, requires_scopes, requires_any_of, tenants, handler, enforced_limits, limits, owner, routing, quota`,
		"unknown-replaced-by":         `capabilities/unknown-replaced-by.yaml:3: replaced_by: "lookup-invoice-v2" is not a capability id in this registry`,
		"unknown-skill-field":         `capabilities/unknown-skill-field.yaml:9: skill.input_modes: unknown field; did you mean inputModes?`,
		"wildcard-media-type":         `capabilities/wildcard-media-type.yaml:10: skill.outputModes[0]: "*/*" is a wildcard: list each concrete media type (want type/subtype, e.g. application/pdf)`,
		"wrong-type":                  `capabilities/wrong-type.yaml:7: skill.tags: want a list of strings, got a string`,
	}

	// Every folder under testdata/invalid is one rule and has a case here.
	ents, err := os.ReadDir("testdata/invalid")
	require.NoError(t, err)
	for _, e := range ents {
		require.Contains(t, tests, e.Name(), "testdata/invalid/%s has no test case", e.Name())
	}

	opts := manifest.Options{Handlers: handlers("invoices.lookup")}
	for name, want := range tests {
		t.Run(name, func(t *testing.T) {
			reg, err := loadDir(t, filepath.Join("testdata/invalid", name), opts)
			require.Nil(t, reg)
			require.EqualError(t, err, want)
			var set *diag.Set
			require.True(t, errors.As(err, &set))
			require.Len(t, set.Problems, 1)
		})
	}
}

func TestLoadValid(t *testing.T) {
	reg, err := loadDir(t, "testdata/valid", manifest.Options{Handlers: handlers("invoices.lookup", "recon.v3.reconcile")})
	require.NoError(t, err)
	require.Equal(t, 3, reg.Len())

	ids := make([]string, 0, reg.Len())
	for _, c := range reg.All() {
		ids = append(ids, c.ID)
	}
	require.Equal(t, []string{"lookup-invoice", "reconcile-invoice", "reconcile-invoice-v0"}, ids)

	rec, ok := reg.Get("reconcile-invoice")
	require.True(t, ok)
	require.Equal(t, manifest.Capability{
		ID:         "reconcile-invoice",
		State:      manifest.StateGA,
		Visibility: manifest.VisibilityExtended,
		Skill: manifest.Skill{
			Name:        "Reconcile an invoice",
			Description: "Matches an invoice to its purchase order and lists line-level differences.",
			Tags:        []string{"finance", "invoices"},
			Examples:    []string{"Reconcile invoice INV-20931 against its PO."},
			InputModes:  []string{"text/plain", "application/pdf"},
			OutputModes: []string{"application/json"},
		},
		RequiresScopes: []string{"recon.run"},
		Tenants:        manifest.Tenants{List: []string{"acme", "globex"}},
		Handler:        "recon.v3.reconcile",
		Limits: map[string]any{
			"max_pdf_pages": int64(200),
			"cost_class":    "medium",
			"nested":        map[string]any{"ok": true, "ratio": 0.5},
		},
		Owner:  "finance-agents-team",
		Source: manifest.Source{File: "capabilities/recon/reconcile-invoice.json", Line: 1, ScopesLine: 13},
	}, *rec)

	lookup, ok := reg.Get("lookup-invoice")
	require.True(t, ok)
	require.True(t, lookup.Tenants.All)
	require.Equal(t, []string{}, lookup.RequiresScopes)

	// A removed capability needs no handler and is exempt from the handler check.
	old, ok := reg.Get("reconcile-invoice-v0")
	require.True(t, ok)
	require.Equal(t, manifest.StateRemoved, old.State)
	require.Equal(t, "reconcile-invoice", old.ReplacedBy)
	require.Empty(t, old.Handler)
}

func TestLoadReportsEveryProblem(t *testing.T) {
	_, err := loadDir(t, "testdata/many", manifest.Options{Handlers: handlers("forecast.run")})
	require.EqualError(t, err, `capabilities/a.yaml:2: state: "beta" is not one of preview, ga, deprecated, removed
capabilities/a.yaml:7: skill.tags: want a list of strings, got a string
capabilities/a.yaml:8: skill.colour: unknown field; known fields are name, description, tags, examples, inputModes, outputModes, data_schemas
capabilities/c.yml:1: id: "forecast-cashflow" is already defined in capabilities/a.yaml:1
capabilities/c.yml:3: visibility: "hidden" is not one of public, extended, internal
capabilities/c.yml:4: replaced_by: "forecast-cashflow-v2" is not a capability id in this registry
capabilities/c.yml:9: requires_scopes[0]: "forecast read" contains whitespace: list each scope separately
capabilities/c.yml:11: handler: "forecast.old" is not defined in the deployment config (handlers)
capabilities/nested/b.json:1: id: required
capabilities/nested/b.json:8: skill.inputModes[1]: "application/" is not a media type (want type/subtype, e.g. application/pdf)
capabilities/nested/b.json:11: tenants: empty list: want "*" or a non-empty list of tenant ids
capabilities/nested/b.json:12: handler: "invoices.extract" is not defined in the deployment config (handlers)`)
}

func TestLoadAcrossDirs(t *testing.T) {
	one := `id: lookup-invoice
state: ga
visibility: public
skill: {name: Look up, description: Finds an invoice., tags: [finance]}
tenants: "*"
handler: h
`
	dirs := []manifest.Dir{
		{FS: fstest.MapFS{"x.yaml": {Data: []byte(one)}, ".hidden/y.yaml": {Data: []byte("garbage: [")}, "notes.txt": {Data: []byte("x")}}, Name: "first"},
		{FS: fstest.MapFS{"sub/x.yml": {Data: []byte(one)}}, Name: "second"},
	}
	_, err := manifest.Load(dirs, manifest.Options{})
	require.EqualError(t, err, `second/sub/x.yml:1: id: "lookup-invoice" is already defined in first/x.yaml:1`)

	_, err = manifest.Load([]manifest.Dir{{FS: os.DirFS("testdata/does-not-exist"), Name: "missing"}}, manifest.Options{})
	require.EqualError(t, err, "missing: cannot read: no such file or directory")
}

func TestParse(t *testing.T) {
	c, err := manifest.Parse("x.yaml", []byte(`{id: a, state: preview, visibility: internal, skill: {name: A, description: B, tags: [c]}, tenants: [t1], handler: h}`))
	require.NoError(t, err)
	require.Equal(t, manifest.StatePreview, c.State)
	require.Equal(t, []string{"t1"}, c.Tenants.List)

	tests := map[string]struct {
		doc  string
		want string
	}{
		"tenant star in list": {`{id: a, state: ga, visibility: public, skill: {name: A, description: B, tags: [c]}, tenants: [t1, "*"], handler: h}`, `x.yaml:1: tenants[1]: "*" must stand alone (tenants: "*"), not inside a list`},
		"tenants a mapping":   {`{id: a, state: ga, visibility: public, skill: {name: A, description: B, tags: [c]}, tenants: {a: b}, handler: h}`, `x.yaml:1: tenants: want "*" or a non-empty list of tenant ids, got a mapping`},
		"id an integer":       {`{id: 12, state: ga, visibility: public, skill: {name: A, description: B, tags: [c]}, tenants: "*", handler: h}`, `x.yaml:1: id: want a string, got an integer`},
		"empty tags":          {`{id: a, state: ga, visibility: public, skill: {name: A, description: B, tags: []}, tenants: "*", handler: h}`, `x.yaml:1: skill.tags: must list at least one tag`},
		"upper-case media":    {`{id: a, state: ga, visibility: public, skill: {name: A, description: B, tags: [c], inputModes: [Text/Plain]}, tenants: "*", handler: h}`, `x.yaml:1: skill.inputModes[0]: "Text/Plain" must be written in lower case (text/plain)`},
		"media listed twice":  {`{id: a, state: ga, visibility: public, skill: {name: A, description: B, tags: [c], outputModes: [text/plain, text/plain]}, tenants: "*", handler: h}`, `x.yaml:1: skill.outputModes[1]: "text/plain" is listed twice`},
		"skill a string":      {`{id: a, state: ga, visibility: public, skill: lookup, tenants: "*", handler: h}`, `x.yaml:1: skill: want a mapping, got a string`},
		"empty name":          {`{id: a, state: ga, visibility: public, skill: {name: "", description: B, tags: [c]}, tenants: "*", handler: h}`, `x.yaml:1: skill.name: required`},
		"limits with NaN":     {`{id: a, state: ga, visibility: public, skill: {name: A, description: B, tags: [c]}, tenants: "*", handler: h, limits: {ratio: .nan}}`, `x.yaml:1: limits.ratio: ".nan" is not a finite number`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := manifest.Parse("x.yaml", []byte(tt.doc))
			require.Nil(t, c)
			require.EqualError(t, err, tt.want)
		})
	}
}

func TestLoadJSONArray(t *testing.T) {
	const file = "../../../shared/data/routing/manifests.json"
	data, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		t.Skipf("%s is absent", file)
	}
	require.NoError(t, err)
	reg, err := manifest.LoadJSONArray("manifests.json", data, manifest.Options{})
	require.NoError(t, err)
	require.Equal(t, 150, reg.Len())

	// The loaded registry agrees with a plain JSON decoding of the file.
	var raw []manifest.Capability
	require.NoError(t, json.Unmarshal(data, &raw))
	for _, want := range raw {
		got, ok := reg.Get(want.ID)
		require.True(t, ok, want.ID)
		got.Source = manifest.Source{}
		require.Equal(t, want, *got)
	}
}

func TestLoadJSONArrayInvalid(t *testing.T) {
	tests := map[string]struct {
		doc  string
		want string
	}{
		"not an array": {`{"id": "a"}`, `manifests.json:1: want a list of capability manifests, got a mapping`},
		"element not a mapping": {`[
  "lookup-invoice"
]`, `manifests.json:2: [0]: want a mapping (one capability manifest), got a string`},
		"duplicate id": {`[
  {"id": "a", "state": "ga", "visibility": "public", "skill": {"name": "A", "description": "B", "tags": ["c"]}, "tenants": "*", "handler": "h"},
  {"id": "a", "state": "ga", "visibility": "public", "skill": {"name": "A", "description": "B", "tags": ["c"]}, "tenants": "*", "handler": "h"}
]`, `manifests.json:3: [1].id: "a" is already defined in manifests.json:2 ([0])`},
		"bad state and handler": {`[
  {"id": "a", "state": "beta", "visibility": "public", "skill": {"name": "A", "description": "B", "tags": ["c"]}, "tenants": "*", "handler": "nope"}
]`, `manifests.json:2: [0].handler: "nope" is not defined in the deployment config (handlers)
manifests.json:2: [0].state: "beta" is not one of preview, ga, deprecated, removed`},
		"syntax": {`[{"id": "a",]`, `manifests.json: syntax error: did not find expected node content`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			reg, err := manifest.LoadJSONArray("manifests.json", []byte(tt.doc), manifest.Options{Handlers: handlers("h")})
			require.Nil(t, reg)
			require.EqualError(t, err, tt.want)
		})
	}
}

func TestTenantsJSON(t *testing.T) {
	tests := map[string]manifest.Tenants{
		`"*"`:          {All: true},
		`["acme","b"]`: {List: []string{"acme", "b"}},
	}
	for want, tn := range tests {
		t.Run(want, func(t *testing.T) {
			b, err := json.Marshal(tn)
			require.NoError(t, err)
			require.JSONEq(t, want, string(b))
			var back manifest.Tenants
			require.NoError(t, json.Unmarshal(b, &back))
			require.Equal(t, tn, back)
		})
	}
	var tn manifest.Tenants
	require.EqualError(t, json.Unmarshal([]byte(`"all"`), &tn), `tenants: want "*" or a list of tenant ids`)
}

func TestParseAliasBomb(t *testing.T) {
	doc := `id: a
state: ga
visibility: public
skill: {name: A, description: B, tags: [c]}
tenants: "*"
handler: h
limits:
  a: &a [x, x, x, x, x, x, x, x, x, x]
  b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]
  c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]
  d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]
  e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]
  f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]
  g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]
`
	c, err := manifest.Parse("x.yaml", []byte(doc))
	require.Nil(t, c)
	require.EqualError(t, err, "x.yaml:8: limits.e[7][8][8][8][9]: more than 100000 values (counting alias expansions)")
}

// A misspelt field is one problem, at its line, naming the field it most
// likely means, and the field it means is not reported missing as well; a
// misspelt value of a closed vocabulary names the value it likely means.
func TestMisspellingIsOneProblem(t *testing.T) {
	const doc = "id: a\nstate: ga\nvisibility: extended\nskill: {name: A, description: B, tags: [c]}\nrequires_scopes: [x]\ntenants: \"*\"\nhandler: h\n"
	tests := map[string]struct{ from, to, want string }{
		"visiblity":      {"visibility:", "visiblity:", "capabilities/a.yaml:3: visiblity: unknown field; did you mean visibility?"},
		"requires_scope": {"requires_scopes:", "requires_scope:", "capabilities/a.yaml:5: requires_scope: unknown field; did you mean requires_scopes?"},
		"handlr":         {"handler:", "handlr:", "capabilities/a.yaml:7: handlr: unknown field; did you mean handler?"},
		"stat":           {"state:", "stat:", "capabilities/a.yaml:2: stat: unknown field; did you mean state?"},
		"tennants":       {"tenants:", "tennants:", "capabilities/a.yaml:6: tennants: unknown field; did you mean tenants?"},
		"skil":           {"skill:", "skil:", "capabilities/a.yaml:4: skil: unknown field; did you mean skill?"},
		"skill.tag":      {"tags:", "tag:", "capabilities/a.yaml:4: skill.tag: unknown field; did you mean tags?"},
		"state value":    {"state: ga", "state: GA", `capabilities/a.yaml:2: state: "GA" is not one of preview, ga, deprecated, removed; did you mean ga?`},
		"state value 2":  {"state: ga", "state: deprecatd", `capabilities/a.yaml:2: state: "deprecatd" is not one of preview, ga, deprecated, removed; did you mean deprecated?`},
		"visibility":     {"visibility: extended", "visibility: extnded", `capabilities/a.yaml:3: visibility: "extnded" is not one of public, extended, internal; did you mean extended?`},
		"far value":      {"visibility: extended", "visibility: private", `capabilities/a.yaml:3: visibility: "private" is not one of public, extended, internal`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			src := strings.Replace(doc, tt.from, tt.to, 1)
			require.NotEqual(t, doc, src)
			reg, err := manifest.Load([]manifest.Dir{{FS: fstest.MapFS{"a.yaml": {Data: []byte(src)}}, Name: "capabilities"}}, manifest.Options{})
			require.Nil(t, reg)
			require.EqualError(t, err, tt.want)
		})
	}
}
