package redisstore

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/capgate/capgate/sidecar/tasks"
)

// Schemes of the store setting, one per Redis mode (the "s" variants use
// TLS).
const (
	SchemeRedis       = "redis"
	SchemeRedisTLS    = "rediss"
	SchemeSentinel    = "redis-sentinel"
	SchemeSentinelTLS = "rediss-sentinel"
	SchemeCluster     = "redis-cluster"
	SchemeClusterTLS  = "rediss-cluster"
)

// URL query parameters read by capgate itself (go-redis reads the others).
const (
	ParamKeyPrefix      = "key_prefix"
	ParamBindingTTL     = "binding_ttl"
	ParamMinReplicas    = "min_replicas"
	ParamReplicaTimeout = "replica_timeout"
	// ParamContextCache is how long a context's holder is answered from
	// memory (WithContextCache); 0 turns the cache off.
	ParamContextCache = "context_cache"
	// ParamSentinelUsername is the Sentinels' ACL user (redis-sentinel://
	// only); their password is store_sentinel_password_file or _env.
	ParamSentinelUsername = "sentinel_username"
)

// readRouting are go-redis parameters that would read from replicas: an
// ownership read must see every acknowledged write, so capgate reads from
// the master only.
var readRouting = []string{"read_only", "route_by_latency", "route_by_latency_tolerance", "route_randomly", "replica_only", "use_disconnected_replicas"}

// redisMode is how a store URL reaches Redis.
type redisMode int

const (
	modeSingle redisMode = iota
	modeSentinel
	modeCluster
)

// IsURL reports whether s names a Redis store in any mode (a
// well-formed one or not: see Check).
func IsURL(s string) bool {
	scheme, _, ok := strings.Cut(s, "://")
	if !ok {
		return false
	}
	_, _, known := schemeMode(scheme)
	return known
}

func schemeMode(scheme string) (redisMode, bool, bool) {
	switch scheme {
	case SchemeRedis:
		return modeSingle, false, true
	case SchemeRedisTLS:
		return modeSingle, true, true
	case SchemeSentinel:
		return modeSentinel, false, true
	case SchemeSentinelTLS:
		return modeSentinel, true, true
	case SchemeCluster:
		return modeCluster, false, true
	case SchemeClusterTLS:
		return modeCluster, true, true
	}
	return 0, false, false
}

// Check reports what is wrong with a store setting other than "memory",
// exactly as Open would refuse it, without contacting Redis. The error
// starts with the URL (without credentials or query) and never quotes the
// password.
func Check(raw string) error {
	_, err := parseStoreURL(raw)
	return err
}

// storeURL is a parsed store setting.
type storeURL struct {
	mode     redisMode
	single   *redis.Options
	failover *redis.FailoverOptions
	cluster  *redis.ClusterOptions
	own      []tasks.Option
	display  string // scheme://hosts/path, no credentials, no query
}

// client is the go-redis client of u: a Client, a Sentinel-backed failover
// Client, or a ClusterClient.
func (u *storeURL) client() redis.UniversalClient {
	switch u.mode {
	case modeSentinel:
		return redis.NewFailoverClient(u.failover)
	case modeCluster:
		return redis.NewClusterClient(u.cluster)
	}
	return redis.NewClient(u.single)
}

func (u *storeURL) readTimeout() time.Duration {
	switch u.mode {
	case modeSentinel:
		return u.failover.ReadTimeout
	case modeCluster:
		return u.cluster.ReadTimeout
	}
	return u.single.ReadTimeout
}

// setPassword sets the password of the Redis servers (not of Sentinels).
func (u *storeURL) setPassword(p string) {
	switch u.mode {
	case modeSentinel:
		u.failover.Password = p
	case modeCluster:
		u.cluster.Password = p
	default:
		u.single.Password = p
	}
}

// parseStoreURL reads a store URL:
//
//	redis[s]://[user:pass@]host:port[/db][?params]
//	redis[s]-sentinel://[user:pass@]host:port[,host:port…]/<master>[?db=N&params]
//	redis[s]-cluster://[user:pass@]host:port[,host:port…][?params]
//
// The user and password are those of the Redis servers, never sent to
// Sentinels: a Sentinel is contacted with sentinel_username (a parameter)
// and the password WithSentinelPassword gives, or without credentials.
// Capgate's own parameters are key_prefix, binding_ttl, min_replicas,
// replica_timeout, context_cache and sentinel_username; the others are
// go-redis's.
func parseStoreURL(raw string) (*storeURL, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	mode, tls, known := schemeMode(scheme)
	if !ok || !known {
		return nil, fmt.Errorf("%q is neither %q nor a Redis URL (%s)", tasks.RedactedURL(raw), tasks.MemoryURL, strings.Join(redisSchemes(), ", "))
	}
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	userinfo, hosts := "", authority
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		userinfo, hosts = authority[:at+1], authority[at+1:]
	}
	display := scheme + "://" + hosts
	// url.Parse reads the credentials, path and query of the first host;
	// its errors would quote the password.
	u, err := url.Parse(scheme + "://" + userinfo + "h" + tail)
	if err != nil {
		return nil, fmt.Errorf("%s: malformed URL", display)
	}
	display += u.EscapedPath()
	var addrs []string
	for _, h := range strings.Split(hosts, ",") {
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			if mode == modeSingle && h != "" && !strings.Contains(h, ":") {
				addrs = append(addrs, h) // go-redis adds :6379
				continue
			}
			return nil, fmt.Errorf("%s: %q is not host:port", display, h)
		}
		if n, err := strconv.Atoi(port); host == "" || err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%s: %q is not host:port", display, h)
		}
		addrs = append(addrs, h)
	}
	if mode == modeSingle && len(addrs) != 1 {
		return nil, fmt.Errorf("%s: one host:port (several are for %s:// or %s://)", display, SchemeSentinel, SchemeCluster)
	}
	q := u.Query()
	if q.Has(ParamSentinelUsername) && mode != modeSentinel {
		return nil, fmt.Errorf("%s: %s is for %s:// stores (the Sentinels' ACL user)", display, ParamSentinelUsername, SchemeSentinel)
	}
	for _, p := range readRouting {
		if q.Has(p) {
			return nil, fmt.Errorf("%s: %s is not accepted: capgate reads task ownership from the master only", display, p)
		}
	}
	own, err := ownParams(display, mode, q)
	if err != nil {
		return nil, err
	}
	out := &storeURL{mode: mode, own: own, display: display}
	user, pass := "", ""
	if u.User != nil {
		user = u.User.Username()
		pass, _ = u.User.Password()
	}
	// go-redis parses the remaining parameters (and refuses unknown ones)
	// from a URL of its own form.
	switch mode {
	case modeSingle:
		path := u.Path
		u.Host, u.Scheme, u.RawQuery, u.Path = addrs[0], "redis", q.Encode(), path
		if tls {
			u.Scheme = "rediss"
		}
		o, err := redis.ParseURL(u.String())
		if err != nil {
			return nil, fmt.Errorf("%s: %v", display, strings.TrimPrefix(err.Error(), "redis: "))
		}
		setTimeouts(q, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.MaxRetries)
		o.DialerRetries, o.ContextTimeoutEnabled = 1, true
		out.single = o
	case modeSentinel:
		master := strings.Trim(u.Path, "/")
		if master == "" || strings.Contains(master, "/") {
			return nil, fmt.Errorf("%s: the path must be the master's name, e.g. %s://host:26379,host:26380/mymaster", display, SchemeSentinel)
		}
		q.Set("master_name", master)
		sentinelUser := q.Get(ParamSentinelUsername)
		q.Del(ParamSentinelUsername)
		o, err := redis.ParseFailoverURL(goRedisURL(addrs, q))
		if err != nil {
			return nil, fmt.Errorf("%s: %v", display, strings.TrimPrefix(err.Error(), "redis: "))
		}
		o.Username, o.Password = user, pass
		o.SentinelUsername = sentinelUser
		if tls {
			o.TLSConfig = tlsConfig(addrs[0])
		}
		setTimeouts(q, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.MaxRetries)
		o.DialerRetries, o.ContextTimeoutEnabled = 1, true
		out.failover = o
	case modeCluster:
		if p := strings.Trim(u.Path, "/"); p != "" {
			return nil, fmt.Errorf("%s: a Redis Cluster has no database numbers or paths (found %q)", display, p)
		}
		if q.Has("db") {
			return nil, fmt.Errorf("%s: a Redis Cluster has no database numbers (db=%s)", display, q.Get("db"))
		}
		o, err := redis.ParseClusterURL(goRedisURL(addrs, q))
		if err != nil {
			return nil, fmt.Errorf("%s: %v", display, strings.TrimPrefix(err.Error(), "redis: "))
		}
		o.Username, o.Password = user, pass
		if tls {
			o.TLSConfig = tlsConfig(addrs[0])
		}
		setTimeouts(q, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.MaxRetries)
		o.DialerRetries, o.ContextTimeoutEnabled = 1, true
		out.cluster = o
	}
	if o := tasks.ApplyOptions(own...); o.MinReplicas > 0 && o.ReplicaTimeout >= out.readTimeout() {
		return nil, fmt.Errorf("%s: %s=%s must be shorter than read_timeout (%s): the reply to WAIT is read within it", display, ParamReplicaTimeout, o.ReplicaTimeout, out.readTimeout())
	}
	return out, nil
}

// ownParams takes capgate's own parameters out of q.
func ownParams(display string, mode redisMode, q url.Values) ([]tasks.Option, error) {
	var own []tasks.Option
	if q.Has(ParamKeyPrefix) {
		p := q.Get(ParamKeyPrefix)
		if mode == modeCluster && strings.ContainsAny(p, "{}") {
			return nil, fmt.Errorf("%s: %s=%q: in a Redis Cluster the prefix must not contain { or } (capgate puts the hash tags in the keys)", display, ParamKeyPrefix, p)
		}
		own = append(own, tasks.WithKeyPrefix(p))
		q.Del(ParamKeyPrefix)
	}
	if q.Has(ParamBindingTTL) {
		d, err := time.ParseDuration(q.Get(ParamBindingTTL))
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%s: %s=%q is not a positive duration", display, ParamBindingTTL, q.Get(ParamBindingTTL))
		}
		own = append(own, tasks.WithBindingTTL(d))
		q.Del(ParamBindingTTL)
	}
	if q.Has(ParamContextCache) {
		d, err := time.ParseDuration(q.Get(ParamContextCache))
		if err != nil || d < 0 || d > time.Hour {
			return nil, fmt.Errorf("%s: %s=%q is not a duration from 0 to 1h", display, ParamContextCache, q.Get(ParamContextCache))
		}
		own = append(own, tasks.WithContextCache(d))
		q.Del(ParamContextCache)
	}
	minReplicas := 0
	if mode != modeSingle {
		minReplicas = 1
	}
	if q.Has(ParamMinReplicas) {
		n, err := strconv.Atoi(q.Get(ParamMinReplicas))
		if err != nil || n < 0 || n > 16 {
			return nil, fmt.Errorf("%s: %s=%q is not a number from 0 to 16", display, ParamMinReplicas, q.Get(ParamMinReplicas))
		}
		minReplicas = n
		q.Del(ParamMinReplicas)
	}
	timeout := tasks.DefaultReplicaTimeout
	if q.Has(ParamReplicaTimeout) {
		d, err := time.ParseDuration(q.Get(ParamReplicaTimeout))
		if err != nil || d < time.Millisecond {
			return nil, fmt.Errorf("%s: %s=%q is not a duration of at least 1ms", display, ParamReplicaTimeout, q.Get(ParamReplicaTimeout))
		}
		timeout = d
		q.Del(ParamReplicaTimeout)
	}
	own = append(own, tasks.WithReplicas(minReplicas, timeout))
	return own, nil
}

// goRedisURL is the redis:// URL go-redis's Sentinel and Cluster parsers
// read: the first address as host, the others as addr parameters.
func goRedisURL(addrs []string, q url.Values) string {
	q = cloneValues(q)
	for _, a := range addrs[1:] {
		q.Add("addr", a)
	}
	return (&url.URL{Scheme: "redis", Host: addrs[0], RawQuery: q.Encode()}).String()
}

func cloneValues(q url.Values) url.Values {
	out := make(url.Values, len(q))
	for k, v := range q {
		out[k] = append([]string(nil), v...)
	}
	return out
}

func tlsConfig(addr string) *tls.Config {
	host, _, _ := net.SplitHostPort(addr)
	return &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
}

// setTimeouts applies capgate's defaults to the timeouts and retries the
// URL does not set.
func setTimeouts(q url.Values, dial, read, write *time.Duration, retries *int) {
	for _, d := range []struct {
		name string
		v    *time.Duration
	}{{"dial_timeout", dial}, {"read_timeout", read}, {"write_timeout", write}} {
		if !q.Has(d.name) {
			*d.v = DefaultTimeout
		}
	}
	if !q.Has("max_retries") {
		*retries = DefaultRetries
	}
}

func redisSchemes() []string {
	return []string{SchemeRedis + "://", SchemeRedisTLS + "://", SchemeSentinel + "://", SchemeSentinelTLS + "://", SchemeCluster + "://", SchemeClusterTLS + "://"}
}

// errNotReplicated is a write Redis applied but fewer replicas than
// min_replicas confirmed in time: it is not acknowledged.
var errNotReplicated = errors.New("write not confirmed by enough replicas in time")
