package access_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/access"
	"github.com/capgate/capgate/policy/compile"
	"github.com/capgate/capgate/policy/compile/compiletest"
	"github.com/capgate/capgate/policy/engine"
	"github.com/capgate/capgate/policy/manifest"
)

const (
	benchCaps    = 10_000
	benchClasses = 100
)

// benchClassList is 100 distinct classes over the synthetic registry:
// anonymous, then every tenant (one unlisted) × scope pairs, a quarter
// opted in to previews.
func benchClassList() []access.Class {
	classes := []access.Class{{Name: "anonymous"}}
	for i := 1; len(classes) < benchClasses; i++ {
		classes = append(classes, access.Class{
			Name: "c" + string(rune('a'+i%26)) + compiletest.Tenant(i),
			Caller: engine.Caller{Authenticated: true, Tenant: compiletest.Tenant(i % 6),
				Scopes: benchScopes(i)},
		})
	}
	return classes
}

// benchScopes are two scopes, and for a quarter of the classes the preview
// scope (opted in to previews).
func benchScopes(i int) []string {
	scopes := []string{compiletest.Scope(i % 10), compiletest.Scope(i / 10 % 10)}
	if i%4 == 0 {
		scopes = append(scopes, compiletest.PreviewScope)
	}
	return scopes
}

func benchEngine(b testing.TB, reg *manifest.Registry) *engine.Engine {
	b.Helper()
	s, err := compile.Build(reg, compiletest.Auth(), nil)
	require.NoError(b, err)
	e, err := engine.New(context.Background(), s)
	require.NoError(b, err)
	return e
}

// changed is the synthetic registry with every 97th capability changed:
// states rotated, tenant lists widened, visibility made public.
func changed(n int) *manifest.Registry {
	caps := compiletest.Synthetic(n).All()
	out := make([]manifest.Capability, len(caps))
	copy(out, caps)
	for i := 0; i < len(out); i += 97 {
		c := &out[i]
		switch i % 3 {
		case 0:
			c.Visibility = manifest.VisibilityPublic
		case 1:
			if c.State == manifest.StatePreview {
				c.State = manifest.StateGA
			}
		case 2:
			c.Tenants = manifest.Tenants{All: true}
		}
	}
	return manifest.NewRegistry(out)
}

// reportCPU reports the process's CPU time (user + system) per operation
// beside the wall time: on a shared machine wall time measures the
// neighbours as much as the code.
func reportCPU(b *testing.B) func() {
	var start syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &start)
	return func() {
		var end syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &end)
		cpu := time.Duration(end.Utime.Nano() - start.Utime.Nano() + end.Stime.Nano() - start.Stime.Nano())
		b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
	}
}

// BenchmarkMatrix10kx100: 10,000 capabilities × 100 caller classes.
func BenchmarkMatrix10kx100(b *testing.B) {
	e := benchEngine(b, compiletest.Synthetic(benchCaps))
	classes := benchClassList()
	ctx := context.Background()
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		if _, err := access.Build(ctx, e, classes); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDiff10kx100: both matrices of two 10,000-capability
// deployments and their comparison.
func BenchmarkDiff10kx100(b *testing.B) {
	base, head := benchEngine(b, compiletest.Synthetic(benchCaps)), benchEngine(b, changed(benchCaps))
	classes := benchClassList()
	ctx := context.Background()
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		bm, err := access.Build(ctx, base, classes)
		if err != nil {
			b.Fatal(err)
		}
		hm, err := access.Build(ctx, head, classes)
		if err != nil {
			b.Fatal(err)
		}
		d, err := access.Compare(bm, hm)
		if err != nil {
			b.Fatal(err)
		}
		if len(d.Gained) == 0 {
			b.Fatal("the changed registry gains nothing")
		}
	}
}
