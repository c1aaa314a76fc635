package replicas_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/tasks/redisstore"
	"github.com/capgate/capgate/test/replicas/redisproc"
	"github.com/capgate/capgate/test/testutil"
)

// unavailable is the answer to a task operation while the store cannot
// answer (JSON-RPC, HTTP 200).
var unavailable = fmt.Sprintf("%d task bindings are unavailable; try again later", internalError)

// unrecorded is the answer to a message whose handler was called when the store went away
// before its task was bound: the outcome is unknown (docs/operations.md, "What an error tells
// a caller").
var unrecorded = fmt.Sprintf("%d the skill's handler was called, but its answer could not be recorded: the outcome is unknown. "+
	"Sending this message again with the same messageId does not run it again", internalError)

// TestSentinelFailoverUnderLoad: two replicas share a Sentinel-managed
// Redis (master, one replica, three Sentinels, down-after 1 s). Under load
// — owners creating tasks and reading acknowledged ones, another caller
// reading them too — the master is killed (SIGKILL); Sentinel promotes the
// replica and the old master, restarted, becomes its replica. Throughout:
// no acknowledged task is lost (each was confirmed by the replica before
// the answer), the other caller never reads an owner's task, the owner
// never gets TaskNotFound for one of its acknowledged tasks (a lookup that
// cannot be answered is an error), every failure is the store-unavailable
// error, and task creation resumes without a restart of either replica.
func TestSentinelFailoverUnderLoad(t *testing.T) {
	set := redisproc.StartSentinelSet(t, "main", time.Second)
	c := &cluster{upstream: testutil.NewUpstream(t, testutil.LoadDeployment(t, testutil.CopyFinance(t)))}
	c.a = c.replica(t, set.URL())
	c.b = c.replica(t, set.URL())
	owner, other := testutil.Token(t, partner), testutil.Token(t, intruder)

	var (
		mu         sync.Mutex
		acked      []string
		ackTimes   []time.Time
		outs       []outcome
		violations []string
	)
	pick := func(rng *rand.Rand) string {
		mu.Lock()
		defer mu.Unlock()
		if len(acked) == 0 {
			return ""
		}
		return acked[rng.IntN(len(acked))]
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 22))
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
				var o outcome
				switch id := pick(rng); {
				case i%3 == 1 && id != "":
					// The owner reads one of its acknowledged tasks.
					r, err := call(srv, owner, "GetTask", map[string]any{"id": id})
					o = record(start, name, r, err)
					if r != nil && r.Error != nil && r.Error.Code == taskNotFound {
						mu.Lock()
						violations = append(violations, fmt.Sprintf("%s: owner got TaskNotFound for acknowledged task %s at %s", name, id, start.Format(time.StampMilli)))
						mu.Unlock()
					}
					o.taskID, o.ownerRead = "", true
				case i%3 == 2 && id != "":
					// Another caller tries the same.
					r, err := call(srv, other, "GetTask", map[string]any{"id": id})
					o = record(start, name, r, err)
					if r != nil && r.Error == nil {
						mu.Lock()
						violations = append(violations, fmt.Sprintf("%s: another caller read task %s at %s: %s", name, id, start.Format(time.StampMilli), r.Raw))
						mu.Unlock()
					}
					if o.rpcError == fmt.Sprintf("%d task not found", taskNotFound) || (r != nil && r.Error != nil && r.Error.Code == taskNotFound) {
						o.rpcError = "" // the right refusal
					}
					o.taskID = ""
				default:
					r, err := call(srv, owner, "SendMessage", reconcile(fmt.Sprintf("fo-%d-%d", w, i), ""))
					o = record(start, name, r, err)
					if o.taskID != "" {
						mu.Lock()
						acked = append(acked, o.taskID)
						ackTimes = append(ackTimes, time.Now())
						mu.Unlock()
					}
				}
				mu.Lock()
				outs = append(outs, o)
				mu.Unlock()
			}
		})
	}
	ackedSince := func(t0 time.Time) int { return countAfter(&mu, &ackTimes, t0) }
	require.Eventually(t, func() bool { return ackedSince(time.Time{}) >= 20 }, 30*time.Second, 10*time.Millisecond, "load before the failover")

	oldMaster := set.Master.Addr
	set.Master.Kill()
	killed := time.Now()
	require.Eventually(t, func() bool {
		a, err := set.MasterAddr(t.Context())
		return err == nil && a != oldMaster
	}, 30*time.Second, 20*time.Millisecond, "Sentinel promotes the replica")
	promoted := time.Now()
	// The old master comes back (as a supervisor would restart it) and
	// Sentinel makes it the new master's replica: writes, which wait for
	// one replica, resume.
	set.Master.Restart()
	require.Eventually(t, func() bool { return ackedSince(killed) >= 1 }, 60*time.Second, 10*time.Millisecond, "task creation resumes")
	resumed := time.Now()
	require.Eventually(t, func() bool { return ackedSince(resumed) >= 20 }, 30*time.Second, 10*time.Millisecond, "load after the failover")
	close(stop)
	wg.Wait()

	require.Empty(t, violations)
	failed := 0
	for _, o := range outs {
		require.NoError(t, o.err, "request through %s at %s", o.replica, o.at)
		require.Contains(t, o.ctype, "application/json")
		require.Equal(t, http.StatusOK, o.status)
		if o.rpcError != "" {
			failed++
			require.Contains(t, []string{unavailable, unrecorded}, o.rpcError, "through %s at %s", o.replica, o.at.Format(time.StampMilli))
		}
	}
	t.Logf("%d requests, %d acknowledged tasks, %d failed closed; master killed → replica promoted in %s, → first task acknowledged again in %s (old master restarted and attached as replica)",
		len(outs), len(acked), failed, promoted.Sub(killed).Round(time.Millisecond), resumed.Sub(killed).Round(time.Millisecond))
	require.Positive(t, failed, "the failover was exercised")
	readsBack := time.Duration(-1)
	for _, o := range outs {
		if o.ownerRead && o.rpcError == "" && o.at.After(killed) && (readsBack < 0 || o.at.Sub(killed) < readsBack) {
			readsBack = o.at.Sub(killed)
		}
	}
	t.Logf("first owner read answered again %s after the kill", readsBack.Round(time.Millisecond))

	// Every acknowledged task survived, with its owner, on both replicas.
	store, err := redisstore.Dial(t.Context(), set.URL())
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	for _, id := range acked {
		b, ok, err := store.Lookup(t.Context(), id)
		require.NoError(t, err)
		require.True(t, ok, "acknowledged task %s lost", id)
		require.Equal(t, "partner-1", b.Subject)
		for name, srv := range map[string]*testutil.Server{"A": c.a, "B": c.b} {
			r, err := call(srv, owner, "GetTask", map[string]any{"id": id})
			require.NoError(t, err)
			require.Nil(t, r.Error, "GetTask %s through %s: %s", id, name, r.Raw)
			r, err = call(srv, other, "GetTask", map[string]any{"id": id})
			require.NoError(t, err)
			require.NotNil(t, r.Error, "another caller reads %s through %s", id, name)
			require.Equal(t, taskNotFound, r.Error.Code)
		}
	}
}

// record is the outcome of one request.
func record(start time.Time, replica string, r *reply, err error) outcome {
	o := outcome{at: start, took: time.Since(start), replica: replica, err: err}
	if r != nil {
		o.status, o.ctype = r.Status, r.Header.Get("Content-Type")
		if r.Error != nil {
			o.rpcError = fmt.Sprintf("%d %s", r.Error.Code, r.Error.Message)
		} else {
			o.taskID = r.task().ID
		}
	}
	return o
}

// countAfter counts the times in *ts after t0, read under mu (the load's goroutines append to
// it): the acknowledgements since a moment of an outage test.
func countAfter(mu *sync.Mutex, ts *[]time.Time, t0 time.Time) int {
	mu.Lock()
	defer mu.Unlock()
	n := 0
	for _, at := range *ts {
		if at.After(t0) {
			n++
		}
	}
	return n
}
