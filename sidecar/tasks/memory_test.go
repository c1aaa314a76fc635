package tasks

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMemory(t *testing.T) {
	testStore(t, func(_ *testing.T, opts ...Option) Store { return NewMemory(0, opts...) })
}

func TestMemoryBounded(t *testing.T) {
	m := NewMemory(2)
	ctx := t.Context()
	require.NoError(t, m.Bind(ctx, Binding{TaskID: "a", Subject: "s"}))
	require.NoError(t, m.Bind(ctx, Binding{TaskID: "b", Subject: "s"}))
	require.ErrorIs(t, m.Bind(ctx, Binding{TaskID: "c", Subject: "s"}), ErrUnavailable)
}
