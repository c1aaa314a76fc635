package replicas_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/test/replicas/redisproc"
	"github.com/capgate/capgate/test/testutil"
)

// handlerLog counts the SendMessage calls that reach the upstream handler, by messageId, with
// when each arrived.
type handlerLog struct {
	mu    sync.Mutex
	calls map[string][]time.Time
}

func (l *handlerLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "unreadable body", http.StatusBadRequest)
			return
		}
		var req struct {
			Method string `json:"method"`
			Params struct {
				Message struct {
					MessageID string `json:"messageId"`
				} `json:"message"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &req) == nil && (req.Method == "SendMessage" || req.Method == "SendStreamingMessage") {
			l.mu.Lock()
			l.calls[req.Params.Message.MessageID] = append(l.calls[req.Params.Message.MessageID], time.Now())
			l.mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

// attempt is one send of a message and how it ended: "ok", or the error's outcome metadata
// (not_run, in_progress, unknown), or "transport".
type attempt struct {
	start, end time.Time
	outcome    string
	taskID     string
}

// errorOutcome is the outcome metadata of a JSON-RPC error answer ("" when none).
func errorOutcome(raw string) string {
	var r struct {
		Error struct {
			Data []struct {
				Metadata map[string]string `json:"metadata"`
			} `json:"data"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(raw), &r) != nil || len(r.Error.Data) == 0 {
		return ""
	}
	return r.Error.Data[0].Metadata["outcome"]
}

// TestMessagesRunOnceThroughStoreOutages: two replicas share a Redis — one server killed
// (SIGKILL) and restarted, or a Sentinel master killed and failed over — while four callers
// send messages through both, each retrying a message until it is acknowledged (or its
// outcome is unknown) and resending some acknowledged ones. Throughout: no messageId reaches
// the handler more than once; no attempt the store refused (outcome not_run) reached it; a
// resent acknowledged message answers with the same task; every acknowledged task is read by
// its owner through both replicas afterwards. The figures are in docs/operations.md,
// "Retries and messageId".
func TestMessagesRunOnceThroughStoreOutages(t *testing.T) {
	t.Run("redis restart", func(t *testing.T) {
		srv := redisproc.Start(t)
		runOnce(t, srv.URL(0), func() {
			srv.Kill()
		}, func() {
			srv.Restart()
		})
	})
	t.Run("sentinel failover", func(t *testing.T) {
		set := redisproc.StartSentinelSet(t, "main", time.Second)
		var old string
		runOnce(t, set.URL(), func() {
			old = set.Master.Addr
			set.Master.Kill()
		}, func() {
			require.Eventually(t, func() bool {
				a, err := set.MasterAddr(t.Context())
				return err == nil && a != old
			}, 30*time.Second, 20*time.Millisecond, "Sentinel promotes the replica")
			set.Master.Restart() // back as the new master's replica: writes, which wait for one, resume
		})
	})
}

func runOnce(t *testing.T, store string, kill, restore func()) {
	log := &handlerLog{calls: map[string][]time.Time{}}
	c := &cluster{upstream: testutil.NewUpstreamWrapped(t, testutil.LoadDeployment(t, testutil.CopyFinance(t)), log.wrap)}
	c.a = c.replica(t, store)
	c.b = c.replica(t, store)
	owner := testutil.Token(t, partner)

	var (
		mu         sync.Mutex
		attempts   = map[string][]attempt{}
		acked      = map[string]string{} // messageId → task id
		ackTimes   []time.Time
		violations []string
		replays    int
	)
	stop := make(chan struct{})
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	sendOnce := func(w, n int, id string) attempt {
		srv := c.a
		if (w+n)%2 == 1 {
			srv = c.b
		}
		a := attempt{start: time.Now()}
		r, err := call(srv, owner, "SendMessage", reconcile(id, ""))
		a.end = time.Now()
		switch {
		case err != nil:
			a.outcome = "transport"
		case r.Error == nil:
			a.outcome, a.taskID = "ok", r.task().ID
		default:
			a.outcome = errorOutcome(r.Raw)
			if a.outcome == "" {
				a.outcome = fmt.Sprintf("%d %s", r.Error.Code, r.Error.Message)
			}
		}
		mu.Lock()
		attempts[id] = append(attempts[id], a)
		mu.Unlock()
		return a
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			n := 0
			for k := 0; !stopped(); k++ {
				id := fmt.Sprintf("once-%d-%d", w, k)
				inProgressSince := time.Time{}
				for !stopped() {
					n++
					a := sendOnce(w, n, id)
					if a.outcome == "ok" {
						mu.Lock()
						acked[id] = a.taskID
						ackTimes = append(ackTimes, a.end)
						mu.Unlock()
						if k%3 == 0 { // the answer was lost on the way, say: the caller sends it again
							n++
							if b := sendOnce(w, n, id); b.outcome == "ok" {
								mu.Lock()
								replays++
								if b.taskID != a.taskID {
									violations = append(violations, fmt.Sprintf("%s resent: task %s, first %s", id, b.taskID, a.taskID))
								}
								mu.Unlock()
							}
						}
						break
					}
					if a.outcome == "unknown" {
						break // the caller must look for its effect; it does not run it again
					}
					if a.outcome == "in_progress" {
						if inProgressSince.IsZero() {
							inProgressSince = a.start
						} else if time.Since(inProgressSince) > 2*time.Second {
							break // its first call's outcome was never recorded; given up
						}
					}
					select { // a caller's back-off between retries
					case <-stop:
					case <-time.After(20 * time.Millisecond):
					}
				}
			}
		})
	}
	ackedSince := func(t0 time.Time) int { return countAfter(&mu, &ackTimes, t0) }
	require.Eventually(t, func() bool { return ackedSince(time.Time{}) >= 20 }, 30*time.Second, 10*time.Millisecond, "load before the outage")
	killed := time.Now()
	kill()
	refusedSince := func(t0 time.Time) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, as := range attempts {
			for _, a := range as {
				if a.outcome == "not_run" && a.start.After(t0) {
					n++
				}
			}
		}
		return n
	}
	// The store stays down until every caller has run into it.
	require.Eventually(t, func() bool { return refusedSince(killed) >= 8 }, 30*time.Second, 10*time.Millisecond, "messages refused while the store is down")
	restore()
	require.Eventually(t, func() bool { return ackedSince(killed) >= 1 }, 40*time.Second, 10*time.Millisecond, "messages are acknowledged again")
	resumed := time.Now()
	require.Eventually(t, func() bool { return ackedSince(resumed) >= 20 }, 30*time.Second, 10*time.Millisecond, "load after the outage")
	close(stop)
	wg.Wait()

	log.mu.Lock()
	defer log.mu.Unlock()
	counts := map[string]int{}
	handlerCalls := 0
	for id, calls := range log.calls {
		handlerCalls += len(calls)
		if len(calls) > 1 {
			violations = append(violations, fmt.Sprintf("%s reached the handler %d times", id, len(calls)))
		}
		for _, at := range calls {
			for _, a := range attempts[id] {
				if a.outcome == "not_run" && !at.Before(a.start) && !at.After(a.end) {
					violations = append(violations, fmt.Sprintf("%s reached the handler during an attempt refused as not run", id))
				}
			}
		}
	}
	for _, as := range attempts {
		for _, a := range as {
			counts[a.outcome]++
		}
	}
	for id := range acked {
		if len(log.calls[id]) != 1 {
			violations = append(violations, fmt.Sprintf("acknowledged %s reached the handler %d times", id, len(log.calls[id])))
		}
	}
	sort.Strings(violations)
	require.Empty(t, violations)
	var outcomes []string
	for o, n := range counts {
		outcomes = append(outcomes, fmt.Sprintf("%s %d", o, n))
	}
	sort.Strings(outcomes)
	require.Positive(t, counts["not_run"], "the outage was exercised")
	for o := range counts {
		require.Contains(t, []string{"ok", "not_run", "in_progress", "unknown"}, o, "every refusal says what became of the message")
	}

	// Every acknowledged task is its owner's, through either replica.
	lost := 0
	for id, task := range acked {
		for name, srv := range map[string]*testutil.Server{"A": c.a, "B": c.b} {
			r, err := call(srv, owner, "GetTask", map[string]any{"id": task})
			require.NoError(t, err)
			if r.Error != nil {
				lost++
				t.Errorf("acknowledged task %s (message %s) not read through %s: %s", task, id, name, r.Raw)
			}
		}
	}
	t.Logf("%d messages, %d attempts (%s), %d handler calls, %d acknowledged, %d resent after acknowledgement (same task), %d lost; outage of the store from %s to the first acknowledgement after it: %s",
		len(attempts), counts["ok"]+counts["not_run"]+counts["in_progress"]+counts["unknown"]+counts["transport"], fmt.Sprint(outcomes),
		handlerCalls, len(acked), replays, lost, killed.Format(time.StampMilli), resumed.Sub(killed).Round(time.Millisecond))
}
