package redisstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/sidecar/tasks"
	"github.com/capgate/capgate/test/replicas/redisproc"
)

// recorder is an Observer that keeps what it is told.
type recorder struct {
	mu        sync.Mutex
	failed    map[string]int
	reachable []bool
}

func (r *recorder) Failed(op string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failed == nil {
		r.failed = map[string]int{}
	}
	r.failed[op]++
}

func (r *recorder) Reachable(ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reachable = append(r.reachable, ok)
}

func (r *recorder) failures(op string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed[op]
}

// up is the last reachability reported, and whether any was.
func (r *recorder) up() (bool, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.reachable) == 0 {
		return false, false
	}
	return r.reachable[len(r.reachable)-1], true
}

const healthWait = 15 * time.Second

// TestRedisHealth: a real redis-server killed and restarted. The store
// reports itself reachable at open; with Redis gone and no traffic, Watch's
// probe reports it unreachable and counts failed pings; an operation's
// failure is counted under its own name, a caller's own cancellation is
// not; with Redis back, the probe reports it reachable again. The changes
// are logged once each.
func TestRedisHealth(t *testing.T) {
	srv := redisproc.Start(t)
	rec := &recorder{}
	core, logs := observer.New(zapcore.InfoLevel)
	r := openTestRedis(t, srv, tasks.WithObserver(rec), tasks.WithProbeInterval(20*time.Millisecond), tasks.WithOpTimeout(500*time.Millisecond), tasks.WithLogger(zap.New(core)))
	up, ok := rec.up()
	require.True(t, ok && up, "reachable once the start-up write was answered")

	ctx, stop := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); r.Watch(ctx) }()
	t.Cleanup(func() { stop(); <-done })

	srv.Kill()
	require.Eventually(t, func() bool { up, _ := rec.up(); return !up && rec.failures(tasks.OpPing) >= 2 }, healthWait, 10*time.Millisecond,
		"no traffic: the probe finds the outage and keeps counting it")
	_, _, err := r.Lookup(t.Context(), "t-1")
	require.ErrorIs(t, err, tasks.ErrUnavailable)
	require.Equal(t, 1, rec.failures(tasks.OpLookup))
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	_, _, err = r.Lookup(cancelled, "t-1")
	require.ErrorIs(t, err, tasks.ErrUnavailable)
	require.Equal(t, 1, rec.failures(tasks.OpLookup), "the caller's own cancellation is not the store's failure")

	srv.Restart()
	require.Eventually(t, func() bool { up, _ := rec.up(); return up }, healthWait, 10*time.Millisecond, "the probe finds Redis back")
	_, _, err = r.Lookup(t.Context(), "t-1")
	require.NoError(t, err)
	require.Equal(t, 1, logs.FilterMessageSnippet("task store unreachable").Len())
	require.Equal(t, 1, logs.FilterMessage("task store reachable again").Len())
}

// TestHealthIgnoresOlderNews: an outcome of a command begun before the one that made the
// last change (a PING answered just before Redis went away, reporting after a failure seen
// since) changes nothing; a later one does. Each change is logged and observed once, in order.
func TestHealthIgnoresOlderNews(t *testing.T) {
	rec := &recorder{}
	core, logs := observer.New(zapcore.InfoLevel)
	h := newHealth(tasks.Settings{Observer: rec, Log: zap.New(core)})
	down := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	h.observe(10, nil)  // the first outcome: reachable, not logged
	h.observe(20, down) // a change
	h.observe(15, nil)  // begun before the failure: older news
	h.observe(18, nil)
	up, _ := rec.up()
	require.False(t, up)
	h.observe(25, nil)  // begun after it: Redis is back
	h.observe(22, down) // older news again
	require.Equal(t, []bool{true, false, true}, rec.reachable)
	require.Equal(t, 1, logs.FilterMessageSnippet("task store unreachable").Len())
	require.Equal(t, 1, logs.FilterMessage("task store reachable again").Len())
}

// TestAnswered: which outcomes say Redis answers.
func TestAnswered(t *testing.T) {
	for _, tc := range []struct {
		err       error
		known, ok bool
	}{
		{nil, true, true},
		{redis.Nil, true, true},
		{context.Canceled, false, false},
		{redis.ErrClosed, false, false},
		{context.DeadlineExceeded, true, false},
		{redis.ErrPoolTimeout, true, false},
	} {
		known, ok := answered(tc.err)
		require.Equal(t, tc.known, known, "%v", tc.err)
		require.Equal(t, tc.ok, ok, "%v", tc.err)
	}
}

// TestRedisStartLine: one line names the store, without its password, with
// its mode, key prefix and min_replicas; a single Redis with min_replicas 0
// gets no replica warning.
func TestRedisStartLine(t *testing.T) {
	const password = "pa55-Secret"
	srv := redisproc.StartAuth(t, password)
	core, logs := observer.New(zapcore.DebugLevel)
	r, err := Dial(t.Context(), "redis://:"+password+"@"+srv.Addr+"/0?key_prefix=fin:", tasks.WithLogger(zap.New(core)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	lines := logs.FilterMessage("task store").All()
	require.Len(t, lines, 1)
	f := lines[0].ContextMap()
	require.Equal(t, "redis://"+srv.Addr+"/0", f["store"])
	require.Equal(t, "single", f["mode"])
	require.Equal(t, "fin:", f["key_prefix"])
	require.EqualValues(t, 0, f["min_replicas"])
	require.Zero(t, logs.FilterLevelExact(zapcore.WarnLevel).Len())
	for _, e := range logs.All() {
		b, err := json.Marshal(e.ContextMap())
		require.NoError(t, err)
		require.NotContains(t, e.Message+string(b), password)
	}

	core, logs = observer.New(zapcore.InfoLevel)
	_, err = tasks.OpenMemory(t.Context(), tasks.MemoryURL, tasks.WithLogger(zap.New(core)))
	require.NoError(t, err)
	require.Equal(t, "memory", logs.FilterMessage("task store").All()[0].ContextMap()["mode"])
}

// TestRedisSentinelReplicaWarning: a Sentinel master with one replica and
// min_replicas 1 warns that a failover stops writes until a replica
// re-attaches; once its replica is gone, that every write fails now.
func TestRedisSentinelReplicaWarning(t *testing.T) {
	set := redisproc.StartSentinelSet(t, "warn", 5*time.Second)
	open := func() *observer.ObservedLogs {
		core, logs := observer.New(zapcore.InfoLevel)
		r, err := Dial(t.Context(), set.URL(), tasks.WithLogger(zap.New(core)))
		require.NoError(t, err)
		require.NoError(t, r.Close())
		start := logs.FilterMessage("task store").All()
		require.Len(t, start, 1)
		require.Equal(t, "sentinel", start[0].ContextMap()["mode"])
		require.EqualValues(t, 1, start[0].ContextMap()["min_replicas"])
		return logs.FilterLevelExact(zapcore.WarnLevel)
	}
	warns := open().All()
	require.Len(t, warns, 1)
	require.Contains(t, warns[0].Message, "no more connected replicas than min_replicas")
	require.Contains(t, warns[0].Message, "after a failover")
	require.Contains(t, warns[0].Message, "until a replica re-attaches")
	require.EqualValues(t, 1, warns[0].ContextMap()["connected_replicas"])

	set.Replica.Kill()
	master := redis.NewClient(&redis.Options{Addr: set.Master.Addr})
	t.Cleanup(func() { _ = master.Close() })
	require.Eventually(t, func() bool {
		info, err := master.Info(t.Context(), "replication").Result()
		n, ok := connectedReplicas(info)
		return err == nil && ok && n == 0
	}, healthWait, 20*time.Millisecond)
	warns = open().All()
	require.Len(t, warns, 1)
	require.Contains(t, warns[0].Message, "fewer connected replicas than min_replicas")
	require.EqualValues(t, 0, warns[0].ContextMap()["connected_replicas"])
}

// TestRedisLog: go-redis's lines become one JSON object each, on one line,
// bounded.
func TestRedisLog(t *testing.T) {
	var buf bytes.Buffer
	l := NewLog(zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(&buf), zapcore.InfoLevel)))
	l.Printf(t.Context(), "redis: connection pool: failed to dial after %d attempts: %v", 5, "dial tcp 127.0.0.1:1: connect: connection refused")
	l.Printf(t.Context(), "autopipeline: recovered panic: %v\n%s", "boom", strings.Repeat("goroutine 1 [running]:\n\tmain.go:1\n", 100))
	l.Printf(t.Context(), "%s", strings.Repeat("é", MaxLogBytes))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 3)
	for i, line := range lines {
		var e map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &e), line)
		require.Equal(t, "warn", e["level"])
		require.Equal(t, "redis client", e["msg"])
		s := e["line"].(string)
		require.LessOrEqual(t, len(s), MaxLogBytes)
		require.NotContains(t, s, "\n")
		require.Equal(t, i > 0, e["truncated"] == true, line)
	}
	require.Contains(t, lines[0], "failed to dial after 5 attempts")
}

// TestRedisClusterHealth: on a Cluster the start-up line says so, each
// master with one replica and min_replicas 1 is warned of by address, and
// the hook on the cluster client reports reachability.
func TestRedisClusterHealth(t *testing.T) {
	nodes := redisproc.StartCluster(t, 3, 1)
	var addrs []string
	for _, n := range nodes[:3] {
		addrs = append(addrs, n.Addr)
	}
	rec := &recorder{}
	core, logs := observer.New(zapcore.InfoLevel)
	r, err := Dial(t.Context(), "redis-cluster://"+strings.Join(addrs, ","), tasks.WithObserver(rec), tasks.WithLogger(zap.New(core)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	up, ok := rec.up()
	require.True(t, ok && up)
	start := logs.FilterMessage("task store").All()
	require.Len(t, start, 1)
	require.Equal(t, "cluster", start[0].ContextMap()["mode"])
	warns := logs.FilterLevelExact(zapcore.WarnLevel).All()
	require.Len(t, warns, 3, "one per master")
	masters := map[any]bool{}
	for _, w := range warns {
		require.Contains(t, w.Message, "after a failover")
		require.EqualValues(t, 1, w.ContextMap()["connected_replicas"])
		masters[w.ContextMap()["master"]] = true
	}
	require.Len(t, masters, 3)
}
