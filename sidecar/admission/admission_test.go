package admission_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/sidecar/admission"
	"github.com/capgate/capgate/sidecar/decisionlog"
	"github.com/capgate/capgate/sidecar/identity"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/wire"
	"github.com/capgate/capgate/sidecar/revision"
	"github.com/capgate/capgate/sidecar/tasks"
	"github.com/capgate/capgate/sidecar/tasks/redisstore"
	"github.com/capgate/capgate/test/testutil"
)

// The finance example's method extension (manifests/finance/capgate.yaml): finance/explainVariance,
// served by reconcile-invoice.
const varianceExtension = "https://example.com/ext/variance/v1"

// fixture is an Admitter over a real memory task store, at a revision of the finance example
// built as the servers build it.
type fixture struct {
	rev   *revision.State
	store *tasks.Memory
	adm   *admission.Admitter
}

func newFixture(t *testing.T, d *deployment.Deployment) *fixture {
	t.Helper()
	rev, err := revision.Build(t.Context(), d, revision.Options{NoGateway: true})
	require.NoError(t, err)
	store := tasks.NewMemory(0)
	return &fixture{rev: rev, store: store, adm: admission.New(store, nil)}
}

func finance(t *testing.T) *fixture { return newFixture(t, testutil.LoadDeployment(t, "")) }

// edited is the finance example with its config edited (old → new) and some capability files
// removed.
func edited(t *testing.T, old, replacement string, drop ...string) *fixture {
	t.Helper()
	cfg := testutil.CopyFinance(t)
	if old != "" {
		testutil.EditFile(t, cfg, "capgate.yaml", func(s string) string {
			require.Contains(t, s, old)
			return strings.Replace(s, old, replacement, 1)
		})
	}
	for _, f := range drop {
		testutil.RemoveFile(t, cfg, "capabilities/"+f)
	}
	return newFixture(t, testutil.LoadDeployment(t, cfg))
}

// caller is one credential, as the Authorization header carries it ("" for none).
type caller string

func bearer(t *testing.T, o testutil.TokenOptions) caller {
	return caller("Bearer " + testutil.Token(t, o))
}

const anonymous caller = ""

// admit parses a JSON-RPC 1.0 request as the doors do (wire.Parse) and admits it.
func (f *fixture) admit(t *testing.T, c caller, method, params string, extra ...string) admission.Verdict {
	t.Helper()
	h := http.Header{"A2a-Version": {"1.0"}, "Content-Type": {"application/json"}}
	if c != anonymous {
		h.Set("Authorization", string(c))
	}
	for i := 0; i+1 < len(extra); i += 2 {
		h.Add(extra[i], extra[i+1])
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`
	r, perr := wire.Parse(protocol.Envelope{Method: http.MethodPost, Path: "/", Header: protocol.HTTPHeader(h),
		Body: []byte(body), Methods: f.rev.Methods}, "", protocol.Limits{})
	require.Nil(t, perr, "parse %s", body)
	return f.adm.Admit(t.Context(), f.rev, admission.Input{Request: r, Header: protocol.HTTPHeader(h)})
}

// bind binds a task to the owner of the token options o, as the dispatcher does.
func (f *fixture) bind(t *testing.T, o testutil.TokenOptions, taskID, contextID, capID string) tasks.Binding {
	t.Helper()
	b := tasks.Binding{TaskID: taskID, ContextID: contextID, Capability: capID, Handler: "h", Issuer: testutil.Issuer,
		Subject: o.Subject, Tenant: o.Tenant}
	require.NoError(t, f.store.Bind(t.Context(), b))
	if contextID != "" {
		_, err := f.store.ClaimContext(t.Context(), tasks.Context{ContextID: contextID, Issuer: testutil.Issuer, Subject: o.Subject, Tenant: o.Tenant})
		require.NoError(t, err)
	}
	got, ok, err := f.store.Lookup(t.Context(), taskID)
	require.NoError(t, err)
	require.True(t, ok)
	return got
}

// refused asserts a refusal with code, message and decision-log rule.
func refused(t *testing.T, v admission.Verdict, code protocol.Code, msg, rule string) {
	t.Helper()
	require.False(t, v.Allowed, "admitted")
	require.NotNil(t, v.Err)
	require.Equal(t, code, v.Err.Code, "%v", v.Err)
	require.Equal(t, msg, v.Err.Message)
	require.Equal(t, rule, v.Err.Rule())
}

func allowed(t *testing.T, v admission.Verdict) {
	t.Helper()
	require.Nil(t, v.Err)
	require.True(t, v.Allowed)
}

func send(extra string) string {
	return `{"message":{"messageId":"m-1","role":"ROLE_USER",` + extra + `"parts":[{"text":"look up invoice INV-1"}]}}`
}

func alice() testutil.TokenOptions { return testutil.Partner() }      // partner-1, acme, recon.run
func bob() testutil.TokenOptions   { return testutil.OtherPartner() } // partner-2, acme, recon.run

func TestPublicCardNeedsNothing(t *testing.T) {
	f := finance(t)
	r, perr := wire.Parse(protocol.Envelope{Method: http.MethodGet, Path: protocol.AgentCardPath, Header: protocol.HTTPHeader{}}, "", protocol.Limits{})
	require.Nil(t, perr)
	v := f.adm.Admit(t.Context(), f.rev, admission.Input{Request: r, Header: protocol.HTTPHeader{}})
	allowed(t, v)
	require.False(t, v.Principal.Authenticated)
}

func TestCredentials(t *testing.T) {
	f := finance(t)
	t.Run("none, for an operation that needs one", func(t *testing.T) {
		for _, op := range []struct{ method, params string }{
			{"GetTask", `{"id":"t-1"}`},
			{"ListTasks", `{}`},
			{"SendMessage", send("")},
			{"GetExtendedAgentCard", `{}`},
		} {
			v := f.admit(t, anonymous, op.method, op.params)
			refused(t, v, protocol.Unauthenticated, "authentication required", decisionlog.RuleCredential)
			require.Equal(t, "Bearer", v.Err.WWWAuthenticate(), op.method)
		}
	})
	t.Run("a token the verifier refuses", func(t *testing.T) {
		o := alice()
		o.Key, o.KeyID = testutil.UnknownKey(t), "unknown"
		v := f.admit(t, bearer(t, o), "GetTask", `{"id":"t-1"}`)
		require.False(t, v.Allowed)
		require.Equal(t, protocol.Unauthenticated, v.Err.Code)
		require.NotEqual(t, "Bearer", v.Err.WWWAuthenticate(), "a bad token is not a missing one")
	})
	t.Run("a valid token is the principal", func(t *testing.T) {
		v := f.admit(t, bearer(t, alice()), "ListTasks", `{}`)
		allowed(t, v)
		require.True(t, v.Principal.Authenticated)
		require.Equal(t, "partner-1", v.Principal.Subject)
		require.Equal(t, "acme", v.Principal.Tenant)
		require.Equal(t, testutil.Issuer, v.Principal.Issuer)
	})
	t.Run("an operation nobody knows", func(t *testing.T) {
		r := &protocol.Request{Binding: protocol.JSONRPC, Version: protocol.V1, Operation: "Bogus"}
		v := f.adm.Admit(t.Context(), f.rev, admission.Input{Request: r, Header: protocol.HTTPHeader{}})
		refused(t, v, protocol.MethodNotFound, `operation "Bogus" is not recognised`, "")
	})
}

func TestAnonymousPublic(t *testing.T) {
	f := edited(t, "anonymous_public: false", "anonymous_public: true")
	allowed(t, f.admit(t, anonymous, "SendMessage", send("")))
	// A task or a context would be every anonymous caller's: a credential is still needed.
	v := f.admit(t, anonymous, "SendMessage", send(`"contextId":"ctx-anon",`))
	refused(t, v, protocol.Unauthenticated, "authentication required", decisionlog.RuleCredential)
	v = f.admit(t, anonymous, "SendMessage", send(`"taskId":"t-anon",`))
	refused(t, v, protocol.Unauthenticated, "authentication required", decisionlog.RuleCredential)
	v = f.admit(t, anonymous, "GetTask", `{"id":"t-anon"}`)
	refused(t, v, protocol.Unauthenticated, "authentication required", decisionlog.RuleCredential)
	_, held, err := f.store.LookupContext(t.Context(), "ctx-anon")
	require.NoError(t, err)
	require.False(t, held, "a refused message claimed its context")
}

// TestTaskOwnership: the owner is admitted to its task on every operation that names one, with
// the binding in the verdict; anyone else, and any unknown task, gets one and the same answer.
func TestTaskOwnership(t *testing.T) {
	f := finance(t)
	want := f.bind(t, alice(), "task-a", "ctx-a", "reconcile-invoice")
	ops := []struct{ method, params string }{
		{"GetTask", `{"id":"task-a"}`},
		{"CancelTask", `{"id":"task-a"}`},
		{"SubscribeToTask", `{"id":"task-a"}`},
		{"SendMessage", send(`"taskId":"task-a",`)},
		{"SendStreamingMessage", send(`"taskId":"task-a",`)},
	}
	for _, op := range ops {
		t.Run(op.method, func(t *testing.T) {
			v := f.admit(t, bearer(t, alice()), op.method, op.params)
			allowed(t, v)
			require.NotNil(t, v.Task)
			require.Equal(t, want, *v.Task)

			unknown := f.admit(t, bearer(t, alice()), op.method, strings.ReplaceAll(op.params, "task-a", "task-nobody"))
			refused(t, unknown, protocol.TaskNotFound, "task not found", decisionlog.RuleTaskOwner)
			for name, o := range map[string]testutil.TokenOptions{
				"another subject":                  bob(),
				"the same subject, another tenant": {Subject: "partner-1", Tenant: "globex", Scopes: []string{"recon.run"}},
				"the same subject, no tenant":      {Subject: "partner-1", Scopes: []string{"recon.run"}},
			} {
				v := f.admit(t, bearer(t, o), op.method, op.params)
				refused(t, v, protocol.TaskNotFound, "task not found", decisionlog.RuleTaskOwner)
				require.Nil(t, v.Task, name)
			}
		})
	}
	t.Run("a referenced task", func(t *testing.T) {
		allowed(t, f.admit(t, bearer(t, alice()), "SendMessage", send(`"referenceTaskIds":["task-a"],`)))
		v := f.admit(t, bearer(t, bob()), "SendMessage", send(`"referenceTaskIds":["task-a"],`))
		refused(t, v, protocol.TaskNotFound, "task not found", decisionlog.RuleTaskOwner)
	})
}

// TestLegacyBindings: a binding written before issuers were recorded belongs to its subject and
// tenant only through the revision's legacy issuer (the finance example trusts one issuer).
func TestLegacyBindings(t *testing.T) {
	f := finance(t)
	require.Equal(t, testutil.Issuer, f.rev.LegacyIssuer)
	require.NoError(t, f.store.Bind(t.Context(), tasks.Binding{TaskID: "task-old", Capability: "lookup-invoice", Handler: "h", Subject: "partner-1", Tenant: "acme"}))
	v := f.admit(t, bearer(t, alice()), "GetTask", `{"id":"task-old"}`)
	allowed(t, v)
	require.Equal(t, "task-old", v.Task.TaskID)
	refused(t, f.admit(t, bearer(t, bob()), "GetTask", `{"id":"task-old"}`), protocol.TaskNotFound, "task not found", decisionlog.RuleTaskOwner)
}

func TestOwnerOf(t *testing.T) {
	f := finance(t)
	v := f.admit(t, bearer(t, alice()), "ListTasks", `{}`)
	allowed(t, v)
	require.Equal(t, tasks.Owner{Issuer: testutil.Issuer, Subject: "partner-1", Tenant: "acme", Legacy: true}, admission.OwnerOf(f.rev, v.Principal))

	other := v.Principal
	other.Issuer = "https://other.example.com"
	require.Equal(t, tasks.Owner{Issuer: other.Issuer, Subject: "partner-1", Tenant: "acme"}, admission.OwnerOf(f.rev, other),
		"only the legacy issuer owns bindings without one")

	// With mTLS principals a second issuer exists (urn:capgate:mtls): nobody owns legacy bindings.
	m := edited(t, "  anonymous_public: false", "  anonymous_public: false\n  mtls_principals:\n    spiffe://example.com/erp: {subject: erp, tenant: acme}")
	require.Empty(t, m.rev.LegacyIssuer)
	require.False(t, admission.OwnerOf(m.rev, v.Principal).Legacy)
	peer := m.rev.Peers["spiffe://example.com/erp"]
	require.Equal(t, tasks.Owner{Issuer: peer.Issuer, Subject: "erp", Tenant: "acme"}, admission.OwnerOf(m.rev, peer))
	require.NotEqual(t, testutil.Issuer, peer.Issuer)
}

// TestContexts: a message claims a new context for its sender; another caller naming it gets
// the answer of an unknown task; a continued task only looks contexts up; a filter (ListTasks'
// contextId) is admitted whoever holds the context, and claims nothing: it narrows the caller's
// own results.
func TestContexts(t *testing.T) {
	f := finance(t)
	t.Run("a message claims a new context", func(t *testing.T) {
		allowed(t, f.admit(t, bearer(t, alice()), "SendMessage", send(`"contextId":"ctx-new",`)))
		held, ok, err := f.store.LookupContext(t.Context(), "ctx-new")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, tasks.Owner{Issuer: testutil.Issuer, Subject: "partner-1", Tenant: "acme"}, held.Owner())
		allowed(t, f.admit(t, bearer(t, alice()), "SendMessage", send(`"contextId":"ctx-new",`)))
		allowed(t, f.admit(t, bearer(t, alice()), "ListTasks", `{"contextId":"ctx-new"}`))
	})
	t.Run("another caller's context", func(t *testing.T) {
		refused(t, f.admit(t, bearer(t, bob()), "SendMessage", send(`"contextId":"ctx-new",`)),
			protocol.TaskNotFound, "task not found", decisionlog.RuleContextOwner)
		allowed(t, f.admit(t, bearer(t, bob()), "ListTasks", `{"contextId":"ctx-new"}`))
		held, _, err := f.store.LookupContext(t.Context(), "ctx-new")
		require.NoError(t, err)
		require.Equal(t, "partner-1", held.Subject, "a refused claim changed the holder")
	})
	t.Run("a filter does not claim", func(t *testing.T) {
		allowed(t, f.admit(t, bearer(t, alice()), "ListTasks", `{"contextId":"ctx-unheld"}`))
		_, ok, err := f.store.LookupContext(t.Context(), "ctx-unheld")
		require.NoError(t, err)
		require.False(t, ok)
	})
	t.Run("a continued task's context", func(t *testing.T) {
		f.bind(t, alice(), "task-c", "ctx-c", "lookup-invoice")
		f.bind(t, alice(), "task-d", "ctx-d", "lookup-invoice")
		f.bind(t, bob(), "task-b", "ctx-b", "lookup-invoice")
		allowed(t, f.admit(t, bearer(t, alice()), "SendMessage", send(`"taskId":"task-c","contextId":"ctx-c",`)))
		refused(t, f.admit(t, bearer(t, alice()), "SendMessage", send(`"taskId":"task-c","contextId":"ctx-d",`)),
			protocol.InvalidParams, "message.contextId is not the context of the task the message continues", decisionlog.RuleContextOwner)
		refused(t, f.admit(t, bearer(t, alice()), "SendMessage", send(`"taskId":"task-c","contextId":"ctx-b",`)),
			protocol.TaskNotFound, "task not found", decisionlog.RuleContextOwner)
		refused(t, f.admit(t, bearer(t, alice()), "SendMessage", send(`"taskId":"task-c","contextId":"ctx-elsewhere",`)),
			protocol.TaskNotFound, "task not found", decisionlog.RuleContextOwner)
		_, ok, err := f.store.LookupContext(t.Context(), "ctx-elsewhere")
		require.NoError(t, err)
		require.False(t, ok, "a context other than the task's was claimed")
	})
	t.Run("racing claims of one new id", func(t *testing.T) {
		results := make(chan bool, 2)
		for _, o := range []testutil.TokenOptions{alice(), bob()} {
			c := bearer(t, o)
			go func() { results <- f.admit(t, c, "SendMessage", send(`"contextId":"ctx-race",`)).Allowed }()
		}
		require.NotEqual(t, <-results, <-results, "exactly one claim wins")
	})
}

func TestTenant(t *testing.T) {
	f := finance(t)
	f.bind(t, alice(), "task-a", "", "lookup-invoice")
	allowed(t, f.admit(t, bearer(t, alice()), "GetTask", `{"id":"task-a","tenant":"acme"}`))
	refused(t, f.admit(t, bearer(t, alice()), "SendMessage", `{"tenant":"globex",`+send("")[1:]),
		protocol.Unauthorized, `the request names tenant "globex", which is not the caller's`, decisionlog.RuleTenant)
	refused(t, f.admit(t, bearer(t, testutil.TokenOptions{Subject: "partner-1", Scopes: []string{"recon.run"}}), "SendMessage", `{"tenant":"globex",`+send("")[1:]),
		protocol.Unauthorized, `the request names tenant "globex", but the caller has no tenant: send none`, decisionlog.RuleTenant)
	// A task operation in another tenant answers as for a task that does not exist.
	refused(t, f.admit(t, bearer(t, alice()), "GetTask", `{"id":"task-a","tenant":"globex"}`),
		protocol.TaskNotFound, "task not found", decisionlog.RuleTenant)
}

func TestPush(t *testing.T) {
	create := `{"taskId":"task-a","url":"https://hooks.example.com/a2a/1"}`
	t.Run("disabled", func(t *testing.T) {
		f := finance(t)
		f.bind(t, alice(), "task-a", "", "lookup-invoice")
		refused(t, f.admit(t, bearer(t, alice()), "CreateTaskPushNotificationConfig", create),
			protocol.PushNotificationNotSupported, "push notifications are not supported by this agent", "")
		refused(t, f.admit(t, bearer(t, alice()), "GetTaskPushNotificationConfig", `{"taskId":"task-a","id":"c1"}`),
			protocol.PushNotificationNotSupported, "push notifications are not supported by this agent", "")
	})
	t.Run("enabled", func(t *testing.T) {
		f := edited(t, "store: memory", "store: memory\npush: {enabled: true, allowed_urls: [\"https://hooks.example.com/a2a\"]}")
		f.bind(t, alice(), "task-a", "", "lookup-invoice")
		allowed(t, f.admit(t, bearer(t, alice()), "CreateTaskPushNotificationConfig", create))
		refused(t, f.admit(t, bearer(t, bob()), "CreateTaskPushNotificationConfig", create),
			protocol.TaskNotFound, "task not found", decisionlog.RuleTaskOwner)
		v := f.admit(t, bearer(t, alice()), "CreateTaskPushNotificationConfig", `{"taskId":"task-a","url":"https://hooks.example.com/a2ax"}`)
		require.False(t, v.Allowed)
		require.Equal(t, protocol.InvalidParams, v.Err.Code)
	})
}

// TestExtensionMethod: a method an extension adds exists for a caller only once it activated
// the extension, and admits only a caller entitled to the capability serving it.
func TestExtensionMethod(t *testing.T) {
	f := finance(t)
	const params = `{"invoice":"INV-1"}`
	refused(t, f.admit(t, bearer(t, alice()), "finance/explainVariance", params),
		protocol.MethodNotFound, `method "finance/explainVariance" is added by extension `+varianceExtension+`; activate it in A2A-Extensions`,
		decisionlog.RuleExtensionMethod)
	v := f.admit(t, bearer(t, alice()), "finance/explainVariance", params, protocol.ExtensionsHeader, varianceExtension)
	allowed(t, v)
	require.Equal(t, []string{varianceExtension}, v.Extensions)
	v = f.admit(t, bearer(t, testutil.PublicCaller()), "finance/explainVariance", params, protocol.ExtensionsHeader, varianceExtension)
	refused(t, v, protocol.Unauthorized, `the caller is not entitled to method "finance/explainVariance"`, decisionlog.RuleExtensionMethod)
	require.Equal(t, "reconcile-invoice", v.Err.Capability())
	require.NotContains(t, v.Err.Message, "reconcile-invoice", "the refusal names the method, not the capability behind it")

	a := edited(t, "anonymous_public: false", "anonymous_public: true")
	v = a.admit(t, anonymous, "finance/explainVariance", params, protocol.ExtensionsHeader, varianceExtension)
	refused(t, v, protocol.Unauthenticated, "authentication required", decisionlog.RuleCredential)
	require.Equal(t, "reconcile-invoice", v.Err.Capability())
}

func TestUnknownExtensionRefused(t *testing.T) {
	f := finance(t)
	v := f.admit(t, bearer(t, alice()), "ListTasks", `{}`, protocol.ExtensionsHeader, "https://example.com/ext/nobody")
	allowed(t, v) // an extension the agent does not declare is not activated, and not an error
	require.Empty(t, v.Extensions)
}

// TestNoEntitlement: a message from a caller entitled to no capability at all is refused before
// routing.
func TestNoEntitlement(t *testing.T) {
	f := edited(t, "", "", "extract-invoice-fields.yaml", "lookup-invoice.yaml", "lookup-invoice-v1.yaml")
	refused(t, f.admit(t, bearer(t, testutil.PublicCaller()), "SendMessage", send("")),
		protocol.Unauthorized, "no capability of this agent is available to the caller", decisionlog.RuleNoCandidate)
	allowed(t, f.admit(t, bearer(t, alice()), "SendMessage", send("")))
	// Not a message: entitlement is the dispatcher's question.
	allowed(t, f.admit(t, bearer(t, testutil.PublicCaller()), "ListTasks", `{}`))
}

// TestLimitsOfABoundTask: a message continuing a task is held to its capability's enforced
// limits at admission, as at the dispatcher.
func TestLimitsOfABoundTask(t *testing.T) {
	f := finance(t)
	payer := testutil.TokenOptions{Subject: "payer", Tenant: "acme", Scopes: []string{"payments.apply"}}
	f.bind(t, payer, "task-p", "", "apply-remittance")
	parts := func(n int) string {
		ps := make([]string, n)
		for i := range ps {
			ps[i] = `{"text":"remit"}`
		}
		return `{"message":{"messageId":"m-1","role":"ROLE_USER","taskId":"task-p","parts":[` + strings.Join(ps, ",") + `]}}`
	}
	allowed(t, f.admit(t, bearer(t, payer), "SendMessage", parts(4)))
	v := f.admit(t, bearer(t, payer), "SendMessage", parts(5))
	require.False(t, v.Allowed)
	require.Equal(t, protocol.PayloadTooLarge, v.Err.Code)
	require.Contains(t, v.Err.Message, "at most 4 parts")
}

// TestStoreError: every task store failure becomes the protocol error the doors answer with; an
// unavailable store is an internal error the caller may retry, never "not found".
func TestStoreError(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		code protocol.Code
		msg  string
	}{
		{"conflict", tasks.ErrConflict, protocol.InvalidAgentResponse, "the handler returned a task id that is already bound elsewhere"},
		{"wrapped conflict", wrap(tasks.ErrConflict), protocol.InvalidAgentResponse, "the handler returned a task id that is already bound elsewhere"},
		{"unavailable", wrap(tasks.ErrUnavailable), protocol.Unavailable, "task bindings are unavailable; try again later"},
		{"too many pending", tasks.ErrTooManyPending, protocol.Unavailable, "task bindings are unavailable; try again later"},
		{"cancelled", context.Canceled, protocol.Unavailable, "task bindings are unavailable; try again later"},
		{"anything else", net.ErrClosed, protocol.Unavailable, "task bindings are unavailable; try again later"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := admission.StoreError(tc.err)
			require.Equal(t, tc.code, e.Code)
			require.Equal(t, tc.msg, e.Message)
			require.ErrorIs(t, e, tc.err, "the cause is kept for the log")
			require.NotContains(t, e.Message, tc.err.Error(), "the cause never reaches the client")
		})
	}
}

func wrap(err error) error { return &wrapped{err} }

type wrapped struct{ err error }

func (w *wrapped) Error() string { return "redis get: " + w.err.Error() }
func (w *wrapped) Unwrap() error { return w.err }

// TestStoreUnavailable: with the task store down (a real Redis client whose server is gone),
// every request naming a task or a context is refused as internal — not admitted, and not
// answered as for an unknown task.
func TestStoreUnavailable(t *testing.T) {
	f := finance(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	down := admission.New(redisstore.New(rdb), nil)
	for _, op := range []struct{ method, params string }{
		{"GetTask", `{"id":"task-a"}`},
		{"SendMessage", send(`"taskId":"task-a",`)},
		{"SendMessage", send(`"contextId":"ctx-new",`)},
	} {
		f.adm = down
		v := f.admit(t, bearer(t, alice()), op.method, op.params)
		refused(t, v, protocol.Unavailable, "task bindings are unavailable; try again later", "")
		require.ErrorIs(t, v.Err, tasks.ErrUnavailable)
	}
	// Without a store, nothing naming a task or a context is admitted either.
	f.adm = admission.New(nil, nil)
	refused(t, f.admit(t, bearer(t, alice()), "GetTask", `{"id":"task-a"}`),
		protocol.Internal, "task ownership cannot be checked: no task store is configured", "")
	refused(t, f.admit(t, bearer(t, alice()), "SendMessage", send(`"contextId":"ctx-new",`)),
		protocol.Internal, "context ownership cannot be checked: no task store is configured", "")
	allowed(t, f.admit(t, bearer(t, alice()), "SendMessage", send("")))
}

// TestNotEntitled: the one "not entitled" refusal of admission and the dispatcher's re-check
// asks an anonymous caller for a credential and refuses an authenticated one.
func TestNotEntitled(t *testing.T) {
	e := admission.NotEntitled(identity.Principal{}, "capability lookup-invoice")
	require.Equal(t, protocol.Unauthenticated, e.Code)
	require.Equal(t, "Bearer", e.WWWAuthenticate())
	e = admission.NotEntitled(identity.Principal{Authenticated: true, Subject: "s"}, "capability lookup-invoice")
	require.Equal(t, protocol.Unauthorized, e.Code)
	require.Equal(t, "the caller is not entitled to capability lookup-invoice", e.Message)
}
