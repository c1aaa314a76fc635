package redisproc

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelSet is a master, one replica and three Sentinels monitoring the
// master under Name.
type SentinelSet struct {
	Name            string
	Master, Replica *Server
	Sentinels       []*Server
}

// StartSentinelSet starts a master, a replica of it and three Sentinels
// (quorum 2, down-after-milliseconds downAfter), and waits until the
// replica is in sync and every Sentinel knows the replica and the two
// other Sentinels, so that a failover can start at once.
func StartSentinelSet(t testing.TB, name string, downAfter time.Duration) *SentinelSet {
	t.Helper()
	return StartSentinelSetAuth(t, name, downAfter, Auth{})
}

// StartSentinelSetAuth is StartSentinelSet with passwords: the master and
// the replica require a.Password (and authenticate to each other with it),
// the Sentinels use it to reach them and require a.SentinelPassword
// themselves.
func StartSentinelSetAuth(t testing.TB, name string, downAfter time.Duration, a Auth) *SentinelSet {
	t.Helper()
	start := func(args ...string) *Server {
		if a.Password == "" {
			return Start(t, args...)
		}
		return StartAuth(t, a.Password, args...)
	}
	s := &SentinelSet{Name: name, Master: start()}
	s.Replica = start("--replicaof", "127.0.0.1", s.Master.Port())
	WaitInSync(t, s.Replica)
	for range 3 {
		s.Sentinels = append(s.Sentinels, startSentinel(t, name, s.Master.Addr, downAfter, a))
	}
	for _, sn := range s.Sentinels {
		c := redis.NewSentinelClient(&redis.Options{Addr: sn.Addr, Password: a.SentinelPassword})
		waitFor(t, 30*time.Second, "Sentinel "+sn.Addr+" knows the replica and the other Sentinels", func(ctx context.Context) bool {
			m, err := c.Master(ctx, name).Result()
			return err == nil && m["num-slaves"] == "1" && m["num-other-sentinels"] == "2"
		})
		_ = c.Close()
	}
	return s
}

// SentinelAddrs are the Sentinels' addresses.
func (s *SentinelSet) SentinelAddrs() []string {
	out := make([]string, len(s.Sentinels))
	for i, sn := range s.Sentinels {
		out[i] = sn.Addr
	}
	return out
}

// URL is the store URL of the set: redis-sentinel://<sentinels>/<name>.
func (s *SentinelSet) URL() string {
	return "redis-sentinel://" + strings.Join(s.SentinelAddrs(), ",") + "/" + s.Name
}

// MasterAddr is the master's address as the first Sentinel that answers
// reports it.
func (s *SentinelSet) MasterAddr(ctx context.Context) (string, error) {
	var err error
	for _, sn := range s.Sentinels {
		c := redis.NewSentinelClient(&redis.Options{Addr: sn.Addr, Password: sn.password})
		var a []string
		a, err = c.GetMasterAddrByName(ctx, s.Name).Result()
		_ = c.Close()
		if err == nil && len(a) == 2 {
			return a[0] + ":" + a[1], nil
		}
	}
	return "", err
}

// WaitInSync waits until replica's link to its master is up and its
// initial synchronisation is done.
func WaitInSync(t testing.TB, replica *Server) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: replica.Addr, Password: replica.password})
	defer func() { _ = c.Close() }()
	waitFor(t, 30*time.Second, replica.Addr+" in sync with its master", func(ctx context.Context) bool {
		info, err := c.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up") && strings.Contains(info, "master_sync_in_progress:0")
	})
}

func waitFor(t testing.TB, limit time.Duration, what string, ok func(context.Context) bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		done := ok(ctx)
		cancel()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s", what, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
