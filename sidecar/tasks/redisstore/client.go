package redisstore

import "github.com/redis/go-redis/v9"

// Client is the store's go-redis client, for state kept beside the task
// bindings on the same servers (quota counters, sidecar/metering).
func (r *Store) Client() redis.UniversalClient { return r.rdb }

// KeyPrefix is the prefix of the store's keys ("capgate:" by default):
// state kept beside the bindings uses it too, so deployments sharing one
// Redis keep apart.
func (r *Store) KeyPrefix() string { return r.keys.prefix }
