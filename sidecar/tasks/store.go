package tasks

import (
	"context"
	"fmt"
	"strings"
)

// MemoryURL selects the in-process store.
const MemoryURL = "memory"

// Open opens the store a config names: "memory" for an in-process Memory,
// or a redis:// or rediss:// URL for a Redis store shared by replicas (see
// OpenRedis: a Redis that does not answer at start is logged, not an error;
// task operations then fail closed with ErrUnavailable). opts apply to the
// Redis store only. A store that holds connections implements io.Closer.
func Open(ctx context.Context, url string, opts ...RedisOption) (Store, error) {
	switch {
	case url == MemoryURL:
		return NewMemory(0), nil
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
