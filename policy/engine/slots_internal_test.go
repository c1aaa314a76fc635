package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/compile"
	"github.com/capgate/capgate/policy/compile/compiletest"
)

// TestViewEvaluationsBounded holds the only evaluation slot, as a running
// evaluation would: a new class waits for it (and its caller can give up),
// a cached class does not, and the waiting evaluation completes once the
// slot is free.
func TestViewEvaluationsBounded(t *testing.T) {
	s, err := compile.Build(compiletest.Registry(), compiletest.Auth(), nil)
	require.NoError(t, err)
	e, err := New(t.Context(), s, WithConcurrentEvaluations(1))
	require.NoError(t, err)
	cached := Caller{Authenticated: true, Tenant: "acme"}
	want, err := e.View(t.Context(), cached)
	require.NoError(t, err)

	e.evalSlots <- struct{}{} // an evaluation is running
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	v, err := e.View(ctx, Caller{Authenticated: true, Tenant: "globex"})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Nil(t, v)
	got, err := e.View(t.Context(), cached)
	require.NoError(t, err)
	require.Same(t, want, got)

	done := make(chan *View, 1)
	go func() {
		v, _ := e.View(context.Background(), Caller{Authenticated: true, Tenant: "initech"})
		done <- v
	}()
	select {
	case <-done:
		t.Fatal("a new class was evaluated while every slot was taken")
	case <-time.After(50 * time.Millisecond):
	}
	<-e.evalSlots // the running evaluation ends
	require.NotNil(t, <-done)
	require.Eventually(t, func() bool { return e.CachedViews() == 3 }, 5*time.Second, 5*time.Millisecond,
		"the abandoned evaluation still completes and is cached")
}

func TestNewRefusesZeroEvaluations(t *testing.T) {
	s, err := compile.Build(compiletest.Registry(), compiletest.Auth(), nil)
	require.NoError(t, err)
	_, err = New(t.Context(), s, WithConcurrentEvaluations(0))
	require.ErrorContains(t, err, "concurrent evaluations 0: must be positive")
}
