package engine_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/compile"
	"github.com/capgate/capgate/policy/compile/compiletest"
	"github.com/capgate/capgate/policy/engine"
)

const benchCaps = 10_000

func benchSnapshot(b *testing.B, n int) *compile.Snapshot {
	b.Helper()
	s, err := compile.Build(compiletest.Synthetic(n), compiletest.Auth(), nil)
	require.NoError(b, err)
	return s
}

// benchCaller returns distinct classes for distinct i: the tenant varies
// and the scopes cycle through the synthetic scope set.
func benchCaller(i int) engine.Caller {
	return engine.Caller{
		Authenticated: true,
		Subject:       fmt.Sprintf("user-%d", i),
		Tenant:        fmt.Sprintf("tenant-%d", i),
		Scopes:        []string{compiletest.Scope(i % 10), compiletest.Scope((i + 3) % 10), compiletest.Scope((i + 7) % 10)},
	}
}

func BenchmarkViewCached(b *testing.B) {
	e := newEngine(b, compiletest.Synthetic(benchCaps), nil)
	c := benchCaller(1)
	ctx := context.Background()
	_, err := e.View(ctx, c)
	require.NoError(b, err)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := e.View(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkViewUncached10k(b *testing.B) {
	e := newEngine(b, compiletest.Synthetic(benchCaps), nil)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		i++
		if _, err := e.View(ctx, benchCaller(i)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecide10k(b *testing.B) {
	e := newEngine(b, compiletest.Synthetic(benchCaps), nil)
	ctx := context.Background()
	c := benchCaller(1)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		i++
		if _, err := e.Decide(ctx, c, fmt.Sprintf("cap-%05d", i%benchCaps)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNew10k(b *testing.B) {
	s := benchSnapshot(b, benchCaps)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := engine.New(ctx, s); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReview10k: one new caller class's decisions with reasons over
// 10,000 capabilities (what an access review pays per class).
func BenchmarkReview10k(b *testing.B) {
	e := newEngine(b, compiletest.Synthetic(benchCaps), nil)
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		if _, err := e.Review(ctx, benchCaller(i)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReady10k is what a start or a reload spends on the policy:
// building and checking the snapshot, then the engine over it.
func BenchmarkReady10k(b *testing.B) {
	reg := compiletest.Synthetic(benchCaps)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		s, err := compile.Build(reg, compiletest.Auth(), nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := engine.New(ctx, s); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecide150 is the gateway's per-message re-check: one caller
// (a class seen before) and the capabilities of a 150-skill registry.
func BenchmarkDecide150(b *testing.B) {
	e := newEngine(b, compiletest.Synthetic(150), nil)
	ctx := context.Background()
	c := benchCaller(1)
	ids := make([]string, 150)
	for i := range ids {
		ids[i] = fmt.Sprintf("cap-%05d", i)
		if _, err := e.Decide(ctx, c, ids[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		i++
		if _, err := e.Decide(ctx, c, ids[i%len(ids)]); err != nil {
			b.Fatal(err)
		}
	}
}
