package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

const checkMethod = "/envoy.service.auth.v3.Authorization/Check"

// target is a pool of gRPC connections to one Authorization server.
type target struct {
	conns []*grpc.ClientConn
}

func dial(addr string, n int) (*target, error) {
	t := &target{}
	for range max(n, 1) {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
		if err != nil {
			t.close()
			return nil, err
		}
		c.Connect()
		t.conns = append(t.conns, c)
	}
	return t, nil
}

func (t *target) close() {
	for _, c := range t.conns {
		_ = c.Close()
	}
}

// check sends one pre-encoded request; a denial is an error (every request
// the generator sends must be allowed).
func (t *target) check(ctx context.Context, worker int, req *marshalled) error {
	var res result
	if err := t.conns[worker%len(t.conns)].Invoke(ctx, checkMethod, req, &res); err != nil {
		return err
	}
	if res.code != 0 {
		return fmt.Errorf("check denied with code %d", res.code)
	}
	return nil
}

// stats of one phase.
type stats struct {
	n        int64
	elapsed  time.Duration
	lat      []time.Duration // sorted
	errors   int64
	firstErr error
	// dropped counts open-loop requests not sent because maxInFlight were
	// already waiting: the server fell behind the fixed rate.
	dropped int64
}

func (s *stats) rate() float64 { return float64(s.n) / s.elapsed.Seconds() }

func (s *stats) pct(q float64) time.Duration {
	if len(s.lat) == 0 {
		return 0
	}
	return s.lat[int(q*float64(len(s.lat)-1))]
}

// errs collects errors without stopping the load.
type errs struct {
	n     atomic.Int64
	once  sync.Once
	first error
}

func (e *errs) add(err error) {
	e.n.Add(1)
	e.once.Do(func() { e.first = err })
}

// sendFunc sends request number i from worker w and waits for its answer;
// an answer other than the expected one is an error.
type sendFunc func(ctx context.Context, w, i int) error

// checks sends reqs in rotation to the Authorization server t.
func checks(t *target, reqs []marshalled) sendFunc {
	return func(ctx context.Context, w, i int) error { return t.check(ctx, w, &reqs[i%len(reqs)]) }
}

// closedLoop keeps workers requests in flight for warmup+d and measures the
// last d: throughput and round-trip latency.
func closedLoop(ctx context.Context, send sendFunc, workers int, warmup, d time.Duration) (*stats, error) {
	var (
		measuring atomic.Bool
		stop      atomic.Bool
		count     atomic.Int64
		wg        sync.WaitGroup
		mu        sync.Mutex
		all       []time.Duration
		e         errs
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, 4096)
			for i := w; !stop.Load(); i += workers {
				start := time.Now()
				err := send(ctx, w, i)
				if err != nil {
					e.add(err)
					if ctx.Err() != nil {
						return
					}
					continue
				}
				if measuring.Load() {
					lat = append(lat, time.Since(start))
					count.Add(1)
				}
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		}()
	}
	sleep(ctx, warmup)
	measuring.Store(true)
	begin := time.Now()
	sleep(ctx, d)
	measuring.Store(false)
	elapsed := time.Since(begin)
	n := count.Load()
	stop.Store(true)
	wg.Wait()
	slices.Sort(all)
	s := &stats{n: n, elapsed: elapsed, lat: all, errors: e.n.Load(), firstErr: e.first}
	return s, ctx.Err()
}

// openLoop sends at a fixed rate for warmup+d, whatever the answers' pace
// (requests are not held back by slow answers: up to maxInFlight wait in
// flight), and measures the last d. Latency is from the moment a request
// was sent to its answer; late is how many requests were sent more than
// 1 ms after their scheduled time (the generator falling behind).
func openLoop(ctx context.Context, send sendFunc, rate float64, maxInFlight int, warmup, d time.Duration) (*stats, int64, error) {
	type job struct {
		i       int
		measure bool
	}
	jobs := make(chan job, maxInFlight)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		all  []time.Duration
		e    errs
		n    atomic.Int64
		late int64
	)
	for w := range maxInFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, 4096)
			for j := range jobs {
				start := time.Now()
				if err := send(ctx, w, j.i); err != nil {
					e.add(err)
					continue
				}
				if j.measure {
					lat = append(lat, time.Since(start))
					n.Add(1)
				}
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		}()
	}
	interval := time.Duration(float64(time.Second) / rate)
	begin := time.Now()
	measureFrom, end := begin.Add(warmup), begin.Add(warmup+d)
	dropped := 0
	for i := 0; ; i++ {
		due := begin.Add(time.Duration(i) * interval)
		if !due.Before(end) || ctx.Err() != nil {
			break
		}
		if wait := time.Until(due); wait > 0 {
			time.Sleep(wait)
		} else if wait < -time.Millisecond && !due.Before(measureFrom) {
			late++
		}
		select {
		case jobs <- job{i: i, measure: !due.Before(measureFrom)}:
		default:
			dropped++ // every worker busy: the server is saturated
		}
	}
	close(jobs)
	wg.Wait()
	slices.Sort(all)
	s := &stats{n: n.Load(), elapsed: d, lat: all, errors: e.n.Load(), firstErr: e.first, dropped: int64(dropped)}
	return s, late, ctx.Err()
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
