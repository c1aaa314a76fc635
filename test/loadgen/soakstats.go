package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/capgate/capgate/sidecar/tasks"
)

// The soak's pure analysis: outcomes bucketed into windows, growth of a
// sampled gauge after warm-up, and the Redis restart window.

// outcome kinds the soak counts apart.
const (
	kindOK          = "ok"
	kindUnavailable = "store-unavailable" // the task store could not answer (the Redis restart)
)

// soakOutcome is one finished request of the soak.
type soakOutcome struct {
	op         string
	start, end time.Time
	kind       string // kindOK, kindUnavailable or the error's kind
	expected   bool   // kindOK or a refusal the operation is meant to get
	server     bool   // an HTTP 5xx or a JSON-RPC internal/server error
}

// window is the soak's requests in one reporting interval.
type window struct {
	from, to    time.Time
	n, ok       int
	refused     int            // expected refusals (e.g. a completed task is not cancelable)
	unavailable int            // store-unavailable answers
	unexpected  map[string]int // other outcomes by kind
	server      int            // 5xx (store-unavailable included)
	latencies   []time.Duration
}

// p99 is the window's 99th percentile latency (nearest rank).
func (w *window) p99() time.Duration {
	if len(w.latencies) == 0 {
		return 0
	}
	l := slices.Clone(w.latencies)
	slices.Sort(l)
	i := (len(l)*99+99)/100 - 1
	return l[min(max(i, 0), len(l)-1)]
}

// windows buckets outs by start time into intervals of size from begin to end.
func windows(outs []soakOutcome, begin, end time.Time, size time.Duration) []*window {
	var ws []*window
	for t := begin; t.Before(end); t = t.Add(size) {
		ws = append(ws, &window{from: t, to: t.Add(size), unexpected: map[string]int{}})
	}
	for _, o := range outs {
		i := int(o.start.Sub(begin) / size)
		if o.start.Before(begin) || i >= len(ws) {
			continue
		}
		w := ws[i]
		w.n++
		w.latencies = append(w.latencies, o.end.Sub(o.start))
		if o.server {
			w.server++
		}
		switch {
		case o.kind == kindOK:
			w.ok++
		case o.kind == kindUnavailable:
			w.unavailable++
		case o.expected:
			w.refused++
		default:
			w.unexpected[o.op+": "+o.kind]++
		}
	}
	return ws
}

// soakPlan is the store's binding_ttl and the warm-up of a soak of length
// d. binding_ttl is the default (tasks.DefaultBindingTTL): the owner's task
// set grows for the whole run, as in production, and every ListTasks still
// reads one page of it (tasks.Store.OwnedPage), so the run's memory must not
// follow it. Growth is measured after a warm-up of d/3: before the Redis
// restart at d/2, so the restart's reconnections are measured too.
func soakPlan(d time.Duration) (ttl, warmup time.Duration) {
	return tasks.DefaultBindingTTL, (d / 3).Round(time.Second)
}

// sample is one reading of a gauge (VmRSS, goroutines) at a time.
type sample struct {
	at time.Time
	v  float64
}

// growth is how much a gauge grew after warm-up: the median of the samples
// in the last span minus the median of the samples in the first span after
// warmEnd (medians, so that one GC cycle or a burst of in-flight requests
// at a scrape does not decide). ok is false without samples in both spans.
func growth(s []sample, warmEnd time.Time, span time.Duration) (g float64, ok bool) {
	if len(s) == 0 {
		return 0, false
	}
	last := s[len(s)-1].at
	var first, final []float64
	for _, x := range s {
		if !x.at.Before(warmEnd) && x.at.Before(warmEnd.Add(span)) {
			first = append(first, x.v)
		}
		if x.at.After(last.Add(-span)) && !x.at.Before(warmEnd.Add(span)) {
			final = append(final, x.v)
		}
	}
	if len(first) == 0 || len(final) == 0 {
		return 0, false
	}
	return median(final) - median(first), true
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// outage is the Redis restart: killed at down, answering again at up.
type outage struct{ down, up time.Time }

// covers reports whether o may have met the outage: it ended after Redis
// was killed and started before grace after Redis answered again.
func (w outage) covers(o soakOutcome, grace time.Duration) bool {
	return !o.end.Before(w.down) && o.start.Before(w.up.Add(grace))
}

// verdicts checks the soak's outcomes: no unexpected outcome, no 5xx but
// store-unavailable, and store-unavailable only inside the restart window
// (with grace). It returns one line per violated rule and the number of
// store-unavailable answers inside the window.
func verdicts(outs []soakOutcome, w outage, grace time.Duration) (problems []string, inWindow int) {
	var unexpected, server, outside int
	var firstUnexpected, firstOutside, firstServer string
	for _, o := range outs {
		switch {
		case o.kind == kindUnavailable:
			if w.covers(o, grace) {
				inWindow++
			} else {
				outside++
				if firstOutside == "" {
					firstOutside = fmt.Sprintf("%s at %s", o.op, o.start.Format("15:04:05.000"))
				}
			}
		case o.server:
			server++
			if firstServer == "" {
				firstServer = o.op + ": " + o.kind
			}
		}
		if o.kind != kindUnavailable && !o.expected {
			unexpected++
			if firstUnexpected == "" {
				firstUnexpected = o.op + ": " + o.kind
			}
		}
	}
	if server > 0 {
		problems = append(problems, fmt.Sprintf("%d server errors (5xx or internal) other than store-unavailable (first: %s)", server, firstServer))
	}
	if unexpected > 0 {
		problems = append(problems, fmt.Sprintf("%d unexpected outcomes (first: %s)", unexpected, firstUnexpected))
	}
	if outside > 0 {
		problems = append(problems, fmt.Sprintf("%d store-unavailable answers outside the restart window (+%v) (first: %s)", outside, grace, firstOutside))
	}
	return problems, inWindow
}
