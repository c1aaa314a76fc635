package tasks

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"
)

// MemoryURL selects the in-process store.
const MemoryURL = "memory"

// Open opens the store a config names: "memory" for an in-process Memory,
// or a redis:// or rediss:// URL for a Redis store shared by replicas (see
// OpenRedis: a Redis that does not answer at start is logged, not an error;
// task operations then fail closed with ErrUnavailable). A store ignores the
// options it has no use for. A store that holds connections implements
// io.Closer.
func Open(ctx context.Context, url string, opts ...Option) (Store, error) {
	switch {
	case url == MemoryURL:
		return NewMemory(0, opts...), nil
	case strings.HasPrefix(url, "redis://"), strings.HasPrefix(url, "rediss://"):
		return OpenRedis(ctx, url, opts...)
	}
	return nil, fmt.Errorf("store %q: neither %q nor a redis:// or rediss:// URL", redactedStore(url), MemoryURL)
}

// redactedStore hides anything after "://" that looks like credentials.
func redactedStore(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		rest = "xxxxx" + rest[at:]
	}
	return scheme + "://" + rest
}

// Option configures a store. A store ignores the options it has no use for:
// the memory store reads only WithClock.
type Option func(*options)

type options struct {
	prefix    string
	ttl       time.Duration
	opTimeout time.Duration
	log       *zap.Logger
	now       func() time.Time
}

func newOptions(opts []Option) options {
	o := options{prefix: DefaultKeyPrefix, ttl: DefaultBindingTTL, opTimeout: DefaultOpTimeout}
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
	if o.now == nil {
		o.now = time.Now
	}
	return o
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
