package tasks

import (
	"context"
	"strings"
	"time"

	"go.uber.org/zap"
)

// MemoryURL selects the in-process store.
const MemoryURL = "memory"

// OpenMemory opens the in-process store (url is MemoryURL; the Backend row
// "memory" of sidecar/tasks/backends): a Memory with the default bounds that
// logs its start-up line and reports itself reachable to WithObserver.
func OpenMemory(_ context.Context, _ string, opts ...Option) (Store, error) {
	openedMemory(opts)
	return NewMemory(0, opts...), nil
}

// RedactedURL is a store URL with anything after "://" that looks like
// credentials hidden, for messages and logs.
func RedactedURL(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		rest = "xxxxx" + rest[at:]
	}
	return scheme + "://" + rest
}

// Defaults of the options (a Redis store's; the memory store reads only
// the clock).
const (
	DefaultKeyPrefix = "capgate:"
	// DefaultBindingTTL is how long a binding lives after its last Bind: a
	// task idle longer than the usage window is forgotten.
	DefaultBindingTTL = 30 * 24 * time.Hour
	// DefaultOpTimeout bounds one store operation, retries included, so a
	// caller gets ErrUnavailable instead of hanging when Redis is away.
	DefaultOpTimeout = 2 * time.Second
	// DefaultReplicaTimeout is how long an ownership write waits for its
	// replicas (replica_timeout) unless the URL sets it.
	DefaultReplicaTimeout = 250 * time.Millisecond
	// DefaultContextCacheAge is how long a Redis store answers a context's
	// holder from memory (context_cache) unless the URL sets it.
	DefaultContextCacheAge = 30 * time.Second
)

// Option configures a store. A store ignores the options it has no use for:
// the memory store reads only WithClock.
type Option func(*options)

type options struct {
	prefix    string
	ttl       time.Duration
	opTimeout time.Duration
	log       *zap.Logger
	now       func() time.Time
	// minReplicas replicas must confirm each ownership write within
	// replicaTimeout (Redis WAIT) before it is acknowledged; 0 waits for none.
	minReplicas      int
	replicaTimeout   time.Duration
	password         string
	sentinelPassword string
	// observer is told of failures and reachability (observer.go);
	// probeEvery is Watch's interval.
	observer   Observer
	probeEvery time.Duration
	// contextCacheAge bounds how long a Redis store answers a context's
	// holder from memory (contextCache); 0 turns the cache off.
	contextCacheAge time.Duration
}

func newOptions(opts []Option) options {
	o := options{prefix: DefaultKeyPrefix, ttl: DefaultBindingTTL, opTimeout: DefaultOpTimeout, contextCacheAge: DefaultContextCacheAge}
	for _, opt := range opts {
		opt(&o)
	}
	if o.log == nil {
		o.log = zap.NewNop()
	}
	if o.ttl <= 0 {
		o.ttl = DefaultBindingTTL
	}
	if o.opTimeout <= 0 {
		o.opTimeout = DefaultOpTimeout
	}
	if o.replicaTimeout <= 0 {
		o.replicaTimeout = DefaultReplicaTimeout
	}
	if o.now == nil {
		o.now = time.Now
	}
	return o
}

// Settings are the options a store was opened with, resolved with their
// defaults, for a backend outside this package (its Open reads them with
// ApplyOptions; Option's fields are this package's own).
type Settings struct {
	KeyPrefix        string
	BindingTTL       time.Duration
	OpTimeout        time.Duration
	Log              *zap.Logger
	Now              func() time.Time
	MinReplicas      int
	ReplicaTimeout   time.Duration
	Password         string
	SentinelPassword string
	Observer         Observer
	ProbeInterval    time.Duration
	ContextCacheAge  time.Duration
}

// ApplyOptions resolves opts as this package's stores do.
func ApplyOptions(opts ...Option) Settings {
	o := newOptions(opts)
	return Settings{KeyPrefix: o.prefix, BindingTTL: o.ttl, OpTimeout: o.opTimeout, Log: o.log, Now: o.now,
		MinReplicas: o.minReplicas, ReplicaTimeout: o.replicaTimeout, Password: o.password, SentinelPassword: o.sentinelPassword,
		Observer: o.observer, ProbeInterval: o.probeEvery, ContextCacheAge: o.contextCacheAge}
}

// WithClock sets the clock that decides when pending bindings expire
// (default time.Now). Tests use it; Redis still drops expired keys by its
// own clock.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithKeyPrefix sets the prefix of every Redis key (default
// DefaultKeyPrefix).
func WithKeyPrefix(p string) Option { return func(o *options) { o.prefix = p } }

// WithBindingTTL sets how long a Redis binding lives after its last Bind
// (default DefaultBindingTTL).
func WithBindingTTL(d time.Duration) Option { return func(o *options) { o.ttl = d } }

// WithOpTimeout bounds each Redis store operation (default
// DefaultOpTimeout).
func WithOpTimeout(d time.Duration) Option { return func(o *options) { o.opTimeout = d } }

// WithLogger sets the logger (a Redis that is down at start is logged).
func WithLogger(l *zap.Logger) Option { return func(o *options) { o.log = l } }

// WithReplicas makes every ownership write (Bind, BindPending, Delete) wait
// until n replicas confirmed it (Redis WAIT n timeout, on the connection
// that wrote) before it succeeds; a write fewer replicas confirmed in time
// fails with ErrUnavailable and is not acknowledged. n = 0 waits for none.
// The Sentinel and Cluster URLs default to 1 (min_replicas), a single
// Redis to 0.
func WithReplicas(n int, timeout time.Duration) Option {
	return func(o *options) { o.minReplicas, o.replicaTimeout = n, timeout }
}

// WithContextCache sets how long a Redis store answers the holder of a
// context it has read or claimed from memory, without a round trip
// (default DefaultContextCacheAge; 0 turns it off). See redisstore's
// contextCache for why that is safe.
func WithContextCache(age time.Duration) Option {
	return func(o *options) { o.contextCacheAge = max(age, 0) }
}

// WithPassword sets the password of the Redis servers (store_password_file
// or store_password_env), taking precedence over one in the URL.
func WithPassword(p string) Option { return func(o *options) { o.password = p } }

// WithSentinelPassword sets the password of the Sentinels of a
// redis-sentinel:// store (their requirepass; store_sentinel_password_file or
// store_sentinel_password_env). The Redis servers' password is not sent to
// Sentinels, nor this one to the servers.
func WithSentinelPassword(p string) Option { return func(o *options) { o.sentinelPassword = p } }
