package access_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/access"
	"github.com/capgate/capgate/policy/engine"
)

func TestParseExpectations(t *testing.T) {
	x, err := access.ParseExpectations("x.yaml", []byte(`
callers:
  - name: ops
    claims: {sub: o, scope: ops.admin}
  - name: nobody
expectations:
  - name: ops only
    description: only ops purge
    callers: {without_scopes: ops.admin, anonymous: false, tenants: [acme, ""]}
    capabilities: {ids: [purge-invoice-cache], tags: [destructive], visibility: internal, states: [ga]}
    must: [refused, hidden]
    routing_at_least: explicit
`))
	require.NoError(t, err)
	require.Len(t, x.Callers, 2)
	require.Equal(t, "ops", x.Callers[0].Name)
	require.Len(t, x.List, 1)
	e := x.List[0]
	require.Equal(t, 7, e.Line)
	require.Equal(t, []string{"ops.admin"}, e.Callers.WithoutScopes, "a single string is a list of one")
	require.NotNil(t, e.Callers.Anonymous)
	require.False(t, *e.Callers.Anonymous)
	require.Equal(t, []string{"internal"}, e.Capabilities.Visibility)
	require.Equal(t, []access.Requirement{access.MustRefused, access.MustHidden}, e.Must)
	require.Equal(t, "explicit", string(e.RoutingAtLeast))

	_, err = access.ParseExpectations("x.yaml", []byte("expectations:\n  - name: a\n    must: [refused]\n  - name: a\n    must: [hidden]\n    callers: {anonymus: true}\n    capabilities: {visibility: [internl]}\n"))
	require.EqualError(t, err, `x.yaml:4: expectations[1].name: "a" is already the name of expectations[0]
x.yaml:6: expectations[1].callers.anonymus: unknown field; did you mean anonymous?
x.yaml:7: expectations[1].capabilities.visibility: "internl" is not one of public, extended, internal; did you mean internal?`)
	_, err = access.ParseExpectations("x.yaml", []byte("expectations:\n  - {}\n  - name: b\n    routing_at_least: [confirm]\n"))
	require.EqualError(t, err, `x.yaml:2: expectations[0]: states nothing: give must (visible, hidden, entitled, refused) or routing_at_least
x.yaml:2: expectations[0].name: required: a name the report shows when the expectation fails
x.yaml:3: expectations[1]: states nothing: give must (visible, hidden, entitled, refused) or routing_at_least
x.yaml:4: expectations[1].routing_at_least: want a string, got a list`)
	_, err = access.ParseExpectations("x.yaml", []byte("expectations: []\n"))
	require.ErrorContains(t, err, "x.yaml:1: expectations: want a non-empty list of expectations")
	_, err = access.ParseExpectations("x.yaml", []byte("callers: [{claims: {sub: x}}]\nexpectations:\n  - {name: a, must: [hidden]}\n"))
	require.ErrorContains(t, err, "x.yaml:1: callers: callers[0]: name is required")
}

// Every selector criterion narrows the cells checked; the violations name
// class, capability, requirement, level and the rules that broke it.
func TestCheckSelectsAndNamesTheRule(t *testing.T) {
	s := loadPath(t, "finance", filepath.Join("..", "..", "manifests", "finance", "capgate.yaml"))
	classes := access.Derive(s.d.Snapshot)
	x, err := access.ParseExpectations("x.yaml", []byte(`
expectations:
  - name: everyone runs purge
    callers: {anonymous: false, without_scopes: [ops.admin]}
    capabilities: {tags: [destructive]}
    must: [entitled]
  - name: ops sees no internal skill
    callers: {with_scopes: [ops.admin], tenants: [""]}
    capabilities: {visibility: [internal], states: [ga]}
    must: [hidden]
  - name: claims
    callers: {claims: {sub: ops-1, scope: ops.admin}}
    capabilities: {ids: [purge-invoice-cache]}
    must: [refused]
`))
	require.NoError(t, err)
	claims := x.ClaimsClasses(func(c map[string]any) engine.Caller {
		return engine.Caller{Authenticated: true, Subject: c["sub"].(string), Scopes: []string{c["scope"].(string)}}
	})
	require.Len(t, claims, 1)
	m, err := access.Build(context.Background(), s.e, append(classes, claims...))
	require.NoError(t, err)
	r, err := access.Check(x, m, s.d.Snapshot.Registry)
	require.NoError(t, err)
	require.Equal(t, 2, r.Failed())

	everyone := r.Outcomes[0]
	require.False(t, everyone.Held())
	require.Equal(t, "authenticated × purge-invoice-cache: must be entitled, is none (refused by scope.missing(ops.admin))", everyone.Violations[0].String())
	for _, v := range everyone.Violations {
		require.NotEqual(t, "anonymous", v.Class, "anonymous: false")
		require.NotEqual(t, "scopes:ops.admin", v.Class, "without_scopes")
	}
	require.True(t, r.Outcomes[1].Held(), "internal skills are never visible")
	require.Positive(t, r.Outcomes[1].Checks)
	claimsOut := r.Outcomes[2]
	require.Len(t, claimsOut.Violations, 1)
	require.Equal(t, access.ClaimsClass("claims"), claimsOut.Violations[0].Class)
	require.Equal(t, "granted by auth.authenticated scope.held(ops.admin) state.ga tenant.any", claimsOut.Violations[0].Rule)

	_, err = access.Check(&access.Expectations{List: []access.Expectation{{Name: "x", Line: 3, Callers: access.CallerSelector{Classes: []string{"anonymus"}}, Must: []access.Requirement{access.MustHidden}}}}, m, s.d.Snapshot.Registry)
	require.ErrorContains(t, err, `line 3: expectation "x": unknown caller class "anonymus"`)
	require.ErrorContains(t, err, "did you mean anonymous?")
}
