package main

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

const decisionMetric = "capgate_decision_duration_seconds"

// histogram is a cumulative Prometheus histogram: upper bound → count.
type histogram struct {
	bounds []float64
	counts []float64
	sum    float64
	count  float64
}

// scrapeDecisions reads capgate's ext_authz decision latency histogram from
// its admin listener.
func scrapeDecisions(ctx context.Context, admin string) (*histogram, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	h := &histogram{}
	type bucket struct{ le, n float64 }
	var bs []bucket
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, decisionMetric) || !strings.Contains(line, `component="extauthz"`) {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(line, decisionMetric+"_bucket"):
			i := strings.Index(line, `le="`)
			end := strings.IndexByte(line[i+4:], '"')
			le, err := strconv.ParseFloat(line[i+4:i+4+end], 64)
			if err != nil {
				continue
			}
			bs = append(bs, bucket{le, v})
		case strings.HasPrefix(line, decisionMetric+"_sum"):
			h.sum = v
		case strings.HasPrefix(line, decisionMetric+"_count"):
			h.count = v
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(bs) == 0 {
		return nil, fmt.Errorf("no %s{component=\"extauthz\"} at %s/metrics", decisionMetric, admin)
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].le < bs[j].le })
	for _, b := range bs {
		h.bounds = append(h.bounds, b.le)
		h.counts = append(h.counts, b.n)
	}
	return h, nil
}

// minus is the histogram of the observations made between prev and h.
func (h *histogram) minus(prev *histogram) *histogram {
	out := &histogram{bounds: h.bounds, sum: h.sum - prev.sum, count: h.count - prev.count}
	for i := range h.counts {
		out.counts = append(out.counts, h.counts[i]-prev.counts[i])
	}
	return out
}

// quantile interpolates linearly inside the bucket, as PromQL's
// histogram_quantile does; the answer is only as fine as the buckets.
func (h *histogram) quantile(q float64) time.Duration {
	if h.count == 0 {
		return 0
	}
	rank := q * h.count
	lower, below := 0.0, 0.0
	for i, le := range h.bounds {
		if h.counts[i] >= rank {
			if math.IsInf(le, 1) {
				return seconds(lower)
			}
			in := h.counts[i] - below
			if in <= 0 {
				return seconds(le)
			}
			return seconds(lower + (le-lower)*(rank-below)/in)
		}
		lower, below = le, h.counts[i]
	}
	return seconds(lower)
}

// fractionUnder is the share of observations at or under bound (a bucket bound).
func (h *histogram) fractionUnder(bound float64) float64 {
	for i, le := range h.bounds {
		if le == bound && h.count > 0 {
			return h.counts[i] / h.count
		}
	}
	return math.NaN()
}

func (h *histogram) mean() time.Duration {
	if h.count == 0 {
		return 0
	}
	return seconds(h.sum / h.count)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
