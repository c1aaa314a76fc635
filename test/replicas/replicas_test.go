// Package replicas_test runs two capgate replicas in-process that share
// their task bindings through a real redis-server, in front of one shared
// upstream A2A handler, and checks that work started on one replica
// continues on the other, that ownership holds on both, that no
// acknowledged binding is lost when Redis crashes and restarts, and that an
// unreachable Redis fails task operations closed while cards keep being
// served.
package replicas_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/tasks/redisstore"
	"github.com/capgate/capgate/test/replicas/redisproc"
	"github.com/capgate/capgate/test/testnet"
	"github.com/capgate/capgate/test/testutil"
)

// Callers of the finance example: the partner owns the tasks; the intruder
// is entitled to the same capability in the same tenant but owns nothing.
var (
	partner  = testutil.Partner()
	intruder = testutil.OtherPartner()
)

// cluster is two capgate replicas (A and B) sharing one Redis and one
// upstream handler.
type cluster struct {
	redis    *redisproc.Server
	upstream *testutil.Upstream
	a, b     *testutil.Server
}

// newCluster starts Redis, the shared upstream echo handler and two
// replicas of the finance example whose handlers all point at it. Both
// replicas sign handler tokens with one key (identity.signing_key_file),
// which the upstream trusts.
func newCluster(t *testing.T) *cluster {
	t.Helper()
	c := &cluster{redis: redisproc.Start(t)}
	c.upstream = testutil.NewUpstream(t, testutil.LoadDeployment(t, testutil.CopyFinance(t)))
	c.a = c.replica(t, c.redis.URL(0))
	c.b = c.replica(t, c.redis.URL(0))
	return c
}

// replica starts one capgate of the finance example on store.
func (c *cluster) replica(t *testing.T, store string) *testutil.Server {
	t.Helper()
	d := testutil.LoadDeployment(t, testutil.CopyFinance(t))
	d.Config.Store = store
	c.upstream.Use(d)
	return testutil.Start(t, d)
}

// reply is a JSON-RPC response of capgate.
type reply struct {
	Status int
	Header http.Header
	Result struct {
		Task *taskJSON `json:"task"`
		taskJSON
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Raw string
}

type taskJSON struct {
	ID     string `json:"id"`
	Status struct {
		State string `json:"state"`
	} `json:"status"`
	Artifacts []struct {
		Parts []struct {
			Data map[string]any `json:"data"`
		} `json:"parts"`
	} `json:"artifacts"`
}

// task is the task of a SendMessage ({"task": …}) or GetTask (the task
// itself) result.
func (r *reply) task() *taskJSON {
	if r.Result.Task != nil {
		return r.Result.Task
	}
	return &r.Result.taskJSON
}

// call posts a JSON-RPC 1.0 request as tok to srv. It never fails the test
// on a transport error (the load goroutine calls it): err says what went
// wrong.
func call(srv *testutil.Server, tok, method string, params any) (*reply, error) {
	p, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":%q,"params":%s}`, method, p)
	req, err := http.NewRequest(http.MethodPost, srv.Endpoint("/"), strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := srv.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	var r reply
	dec := json.NewDecoder(resp.Body)
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("HTTP %d %s: body is not JSON: %w", resp.StatusCode, resp.Header.Get("Content-Type"), err)
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("HTTP %d: %w: %s", resp.StatusCode, err, raw)
	}
	r.Status, r.Header, r.Raw = resp.StatusCode, resp.Header, string(raw)
	return &r, nil
}

// reconcile is the reference message: a PDF and "reconcile this against the
// PO", routed to reconcile-invoice (partners holding recon.run).
func reconcile(id, taskID string) map[string]any {
	msg := map[string]any{
		"messageId": id,
		"role":      "ROLE_USER",
		"parts": []any{
			map[string]any{"text": "reconcile this against the PO"},
			map[string]any{"raw": "JVBERi0xLjQ=", "mediaType": "application/pdf", "filename": "inv.pdf"},
		},
	}
	if taskID != "" {
		msg["taskId"] = taskID
	}
	return map[string]any{"message": msg}
}

// send creates a task through srv and returns its id.
func send(t *testing.T, srv *testutil.Server, tok, messageID string) string {
	t.Helper()
	r, err := call(srv, tok, "SendMessage", reconcile(messageID, ""))
	require.NoError(t, err)
	require.Nil(t, r.Error, "SendMessage: %s", r.Raw)
	id := r.task().ID
	require.NotEmpty(t, id, "SendMessage answered no task: %s", r.Raw)
	return id
}

// JSON-RPC error codes of A2A.
const (
	taskNotFound  = -32001
	internalError = -32603
)

// TestContinueOnOtherReplica: a task created through replica A is read and
// continued through replica B by its owner; another caller gets
// TaskNotFound on both replicas, exactly as for an unknown id.
func TestContinueOnOtherReplica(t *testing.T) {
	c := newCluster(t)
	owner, other := testutil.Token(t, partner), testutil.Token(t, intruder)

	id := send(t, c.a, owner, "m-1")

	r, err := call(c.b, owner, "GetTask", map[string]any{"id": id})
	require.NoError(t, err)
	require.Nil(t, r.Error, "GetTask through B: %s", r.Raw)
	require.Equal(t, id, r.task().ID)
	require.Equal(t, "TASK_STATE_COMPLETED", r.task().Status.State)
	require.NotEmpty(t, r.task().Artifacts)
	report := r.task().Artifacts[0].Parts[0].Data
	require.Equal(t, "reconcile-invoice", report["capability"], "B used the capability bound by A")
	require.Equal(t, "partner-1", report["principal"])
	require.Equal(t, "acme", report["tenant"])
	dec := c.b.WaitDecision(t, r.Header.Get("X-Capgate-Decision-Id"))
	require.Equal(t, "reconcile-invoice", dec[0]["capability"])

	// A continuing message through B is routed by the binding A made and
	// reaches the shared handler, which knows the task: the echo completes
	// every task at once, so it refuses a further message to it as a
	// terminal task (an unknown task would be TaskNotFound).
	r, err = call(c.b, owner, "SendMessage", reconcile("m-2", id))
	require.NoError(t, err)
	dec = c.b.WaitDecision(t, r.Header.Get("X-Capgate-Decision-Id"))
	require.Equal(t, "reconcile-invoice", dec[0]["capability"])
	require.Equal(t, "task", dec[0]["layer"], "routed by the shared binding, not by the message")
	require.NotNil(t, r.Error, r.Raw)
	require.Contains(t, r.Error.Message, "terminal state", "the handler answered for its task: %s", r.Raw)

	// Ownership holds on both replicas.
	for name, srv := range map[string]*testutil.Server{"A": c.a, "B": c.b} {
		for _, op := range []struct {
			method string
			params any
		}{
			{"GetTask", map[string]any{"id": id}},
			{"CancelTask", map[string]any{"id": id}},
			{"SendMessage", reconcile("m-3", id)},
		} {
			r, err := call(srv, other, op.method, op.params)
			require.NoError(t, err)
			require.NotNil(t, r.Error, "%s %s by another caller: %s", name, op.method, r.Raw)
			require.Equal(t, taskNotFound, r.Error.Code, "%s %s: %s", name, op.method, r.Raw)
			unknown, err := call(srv, other, op.method, map[string]any{"id": "no-such-task"})
			require.NoError(t, err)
			if op.method != "SendMessage" {
				require.Equal(t, unknown.Error.Message, strings.ReplaceAll(r.Error.Message, id, "no-such-task"),
					"another caller's task reads like an unknown one")
			}
		}
	}

	// ListTasks through B shows the owner's task and nothing to the other.
	r, err = call(c.b, owner, "ListTasks", map[string]any{})
	require.NoError(t, err)
	require.Nil(t, r.Error, r.Raw)
	require.Contains(t, r.Raw, id)
	r, err = call(c.a, other, "ListTasks", map[string]any{})
	require.NoError(t, err)
	require.NotContains(t, r.Raw, id)
}

// inContext is the reference message in context contextID.
func inContext(id, contextID string) map[string]any {
	p := reconcile(id, "")
	p["message"].(map[string]any)["contextId"] = contextID
	return p
}

// TestContextsAcrossReplicas: callers racing through both replicas to start
// a conversation under one new context id leave exactly one holder (the
// claim is one Redis script); the holder goes on in it through either
// replica, and everyone else is refused there as for an unknown task — also
// in the context of a task a handler created through the other replica.
func TestContextsAcrossReplicas(t *testing.T) {
	c := newCluster(t)
	const n = 10
	toks := make([]string, n)
	for i := range toks {
		toks[i] = testutil.Token(t, testutil.TokenOptions{Subject: fmt.Sprintf("racer-%d", i), Tenant: "acme", Scopes: []string{"recon.run"}})
	}
	replicas := []*testutil.Server{c.a, c.b}
	replies := make([]*reply, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			replies[i], errs[i] = call(replicas[i%2], toks[i], "SendMessage", inContext(fmt.Sprintf("m-%d", i), "ctx-new"))
		})
	}
	wg.Wait()
	winner := -1
	for i := range n {
		require.NoError(t, errs[i])
		if replies[i].Error == nil {
			require.Equal(t, -1, winner, "two callers hold one new context: %s", replies[i].Raw)
			winner = i
			continue
		}
		require.Equal(t, taskNotFound, replies[i].Error.Code, replies[i].Raw)
	}
	require.NotEqual(t, -1, winner)
	for i := range n {
		for _, srv := range replicas {
			r, err := call(srv, toks[i], "SendMessage", inContext("again", "ctx-new"))
			require.NoError(t, err)
			if i == winner {
				require.Nil(t, r.Error, "the holder goes on in its context: %s", r.Raw)
			} else {
				require.NotNil(t, r.Error, r.Raw)
				require.Equal(t, taskNotFound, r.Error.Code, r.Raw)
			}
		}
	}

	// The context of a task the handler created through A is its owner's on B.
	owner, other := testutil.Token(t, partner), testutil.Token(t, intruder)
	r, err := call(c.a, owner, "SendMessage", reconcile("m-own", ""))
	require.NoError(t, err)
	var created struct {
		Result struct {
			Task struct {
				ContextID string `json:"contextId"`
			} `json:"task"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Raw), &created))
	ctxID := created.Result.Task.ContextID
	require.NotEmpty(t, ctxID, r.Raw)
	r, err = call(c.b, other, "SendMessage", inContext("m-x", ctxID))
	require.NoError(t, err)
	require.NotNil(t, r.Error, r.Raw)
	require.Equal(t, taskNotFound, r.Error.Code, r.Raw)
	r, err = call(c.b, owner, "SendMessage", inContext("m-own-2", ctxID))
	require.NoError(t, err)
	require.Nil(t, r.Error, r.Raw)
}

// outcome is one request of the load run.
type outcome struct {
	at       time.Time
	took     time.Duration
	replica  string
	taskID   string // set when acknowledged
	err      error  // transport or decode problem
	status   int
	rpcError string
	ctype    string
	// ownerRead marks a GetTask by the task's owner (the failover test).
	ownerRead bool
}

// TestRedisRestartUnderLoad crashes Redis (SIGKILL) in the middle of a load
// run and restarts it on the same data directory: every task whose
// SendMessage succeeded, before or after the crash, is still bound
// afterwards, readable through either replica; requests during the outage
// fail promptly with a JSON-RPC error saying the task store is unavailable.
func TestRedisRestartUnderLoad(t *testing.T) {
	c := newCluster(t)
	owner := testutil.Token(t, partner)

	var (
		mu   sync.Mutex
		outs []outcome
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	const workers = 4
	for w := range workers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name, srv := "A", c.a
				if (w+i)%2 == 1 {
					name, srv = "B", c.b
				}
				start := time.Now()
				r, err := call(srv, owner, "SendMessage", reconcile(fmt.Sprintf("load-%d-%d", w, i), ""))
				o := outcome{at: start, took: time.Since(start), replica: name, err: err}
				if r != nil {
					o.status, o.ctype = r.Status, r.Header.Get("Content-Type")
					if r.Error != nil {
						o.rpcError = fmt.Sprintf("%d %s", r.Error.Code, r.Error.Message)
					} else {
						o.taskID = r.task().ID
					}
				}
				mu.Lock()
				outs = append(outs, o)
				mu.Unlock()
			}
		})
	}
	acked := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, o := range outs {
			if o.taskID != "" {
				n++
			}
		}
		return n
	}
	require.Eventually(t, func() bool { return acked() >= 20 }, 20*time.Second, 10*time.Millisecond, "load before the crash")

	c.redis.Kill()
	crashed := time.Now()
	time.Sleep(time.Second) // an outage every worker runs into
	c.redis.Restart()
	restarted := time.Now()
	before := acked()
	require.Eventually(t, func() bool { return acked() >= before+20 }, 20*time.Second, 10*time.Millisecond, "load after the restart")
	close(stop)
	wg.Wait()

	var ids []string
	var failed, duringOutage int
	for _, o := range outs {
		require.NoError(t, o.err, "request through %s at %s", o.replica, o.at)
		require.Contains(t, o.ctype, "application/json", "a JSON-RPC answer, never an HTML error page")
		if o.taskID != "" {
			ids = append(ids, o.taskID)
			continue
		}
		failed++
		require.Equal(t, http.StatusOK, o.status, "JSON-RPC errors travel in a 200: %s", o.rpcError)
		require.Contains(t, []string{unavailable, unrecorded}, o.rpcError, "the store's refusal, or an outcome it could not record")
		require.Less(t, o.took, 5*time.Second, "a failing request does not hang")
		if !o.at.Before(crashed) && o.at.Before(restarted) {
			duringOutage++
		}
	}
	t.Logf("%d requests: %d acknowledged, %d failed (%d sent during the %s outage)",
		len(outs), len(ids), failed, duringOutage, restarted.Sub(crashed).Round(time.Millisecond))
	require.Positive(t, duringOutage, "the outage was exercised")

	// Every acknowledged binding survived, with its owner, on both replicas.
	store, err := redisstore.Dial(t.Context(), c.redis.URL(0))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	for _, id := range ids {
		b, ok, err := store.Lookup(t.Context(), id)
		require.NoError(t, err)
		require.True(t, ok, "acknowledged task %s lost", id)
		require.Equal(t, "partner-1", b.Subject)
		require.Equal(t, "acme", b.Tenant)
		require.Equal(t, "reconcile-invoice", b.Capability)
	}
	for _, id := range ids {
		for name, srv := range map[string]*testutil.Server{"A": c.a, "B": c.b} {
			r, err := call(srv, owner, "GetTask", map[string]any{"id": id})
			require.NoError(t, err)
			require.Nil(t, r.Error, "GetTask %s through %s: %s", id, name, r.Raw)
			require.Equal(t, id, r.task().ID)
		}
	}
}

// TestRedisDown: with Redis unreachable — gone mid-run, or never there at
// start — task operations, and messages and lists naming a context, fail closed with a clear A2A error and the
// public card is still served.
func TestRedisDown(t *testing.T) {
	c := newCluster(t)
	owner := testutil.Token(t, partner)
	id := send(t, c.a, owner, "m-1")

	c.redis.Kill()

	nowhere := "redis://" + testnet.RefusedAddr(t) + "/0"
	late := c.replica(t, nowhere) // starts although its Redis never answered

	for name, srv := range map[string]*testutil.Server{"A": c.a, "B": c.b, "started without Redis": late} {
		t.Run(name, func(t *testing.T) {
			card := srv.Do(t, http.MethodGet, "/.well-known/agent-card.json", "")
			require.Equal(t, http.StatusOK, card.Status)
			require.Contains(t, string(card.Body), "lookup-invoice")

			for _, op := range []struct {
				method string
				params any
			}{
				{"SendMessage", reconcile("m-2", "")},
				{"SendMessage", reconcile("m-3", id)},
				{"SendMessage", inContext("m-4", "ctx-any")}, // a context's owner cannot be read either
				{"GetTask", map[string]any{"id": id}},
				{"ListTasks", map[string]any{}},
				{"ListTasks", map[string]any{"contextId": "ctx-any"}},
			} {
				start := time.Now()
				r, err := call(srv, owner, op.method, op.params)
				require.NoError(t, err)
				require.Less(t, time.Since(start), 5*time.Second, "%s does not hang", op.method)
				require.NotNil(t, r.Error, "%s fails closed: %s", op.method, r.Raw)
				require.NotEqual(t, taskNotFound, r.Error.Code, "an unreachable store is not an unknown task")
				require.Contains(t, r.Error.Message, "task bindings are unavailable", "%s: %s", op.method, r.Raw)
				require.Contains(t, r.Header.Get("Content-Type"), "application/json")
			}
		})
	}

	// Back up: the same replicas recover without a restart of their own.
	c.redis.Restart()
	require.Eventually(t, func() bool {
		r, err := call(c.b, owner, "GetTask", map[string]any{"id": id})
		return err == nil && r.Error == nil && r.task().ID == id
	}, 10*time.Second, 50*time.Millisecond)
}
