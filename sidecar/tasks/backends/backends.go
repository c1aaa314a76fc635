// Package backends is the table of task store backends capgate serves with:
// one row per kind of store (the memory store, and Redis as one server, a
// Sentinel set or a Cluster), each naming its URL schemes, its check, its
// opener, whether replicas share it and which credentials it takes. Opening
// a store, checking the store setting and the CLI's "is this store shared"
// all read this one table (see docs/walkthroughs.md, "Add a store backend").
// It is a function returning a fresh table: no registry, no init().
package backends

import (
	"context"

	"github.com/capgate/capgate/sidecar/tasks"
	"github.com/capgate/capgate/sidecar/tasks/redisstore"
)

// Table is the task store backends, in the order messages list them.
func Table() tasks.Backends {
	return tasks.Backends{
		{Name: tasks.MemoryURL, Schemes: []string{tasks.MemoryURL}, Bare: true, Open: tasks.OpenMemory},
		{Name: "redis", Schemes: []string{redisstore.SchemeRedis, redisstore.SchemeRedisTLS},
			Check: redisstore.Check, Open: redisstore.Open, Shared: true, Password: true},
		{Name: "redis-sentinel", Schemes: []string{redisstore.SchemeSentinel, redisstore.SchemeSentinelTLS},
			Check: redisstore.Check, Open: redisstore.Open, Shared: true, Password: true, SentinelPassword: true},
		{Name: "redis-cluster", Schemes: []string{redisstore.SchemeCluster, redisstore.SchemeClusterTLS},
			Check: redisstore.Check, Open: redisstore.Open, Shared: true, Password: true},
	}
}

// Open opens the store url names with the table's backend for it.
func Open(ctx context.Context, url string, opts ...tasks.Option) (tasks.Store, error) {
	return Table().Open(ctx, url, opts...)
}
