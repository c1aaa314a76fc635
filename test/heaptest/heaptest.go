// Package heaptest measures the heap a benchmark's result keeps alive: the
// retained-MiB/op metric of capgate's memory benchmarks.
package heaptest

import (
	"runtime"
	"testing"
)

// Live is the heap in use after a full collection.
func Live() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// Retained sums, over benchmark iterations, the live heap that grew between
// Start and Stop. Keep the measured value alive (runtime.KeepAlive) after
// Stop. Neither call is timed work: stop the benchmark timer around them
// when the iteration's time matters.
type Retained struct {
	before uint64
	sum    float64
	n      int
}

// Start notes the live heap before the measured work.
func (r *Retained) Start() { r.before = Live() }

// Stop adds the live heap grown since Start (negative if it shrank).
func (r *Retained) Stop() {
	r.sum += float64(int64(Live()) - int64(r.before))
	r.n++
}

// Report reports the mean as retained-MiB/op.
func (r *Retained) Report(b *testing.B) {
	if r.n > 0 {
		b.ReportMetric(r.sum/float64(r.n)/(1<<20), "retained-MiB/op")
	}
}
