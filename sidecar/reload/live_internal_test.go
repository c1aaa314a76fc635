package reload

import (
	"context"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/sidecar/handler"
)

func TestRestartOnly(t *testing.T) {
	started := &config.Config{}
	started.Listen.A2A = "127.0.0.1:8080"
	started.Limits.MaxBodyBytes = 1 << 20
	started.Handlers = map[string]string{"a": "http://127.0.0.1:9001"}

	same := *started
	require.Empty(t, RestartOnly(started, &same))

	next := *started
	next.Listen.A2A = "127.0.0.1:8081"
	next.Limits.MaxBodyBytes = 2 << 20
	next.Handlers = map[string]string{"b": "http://127.0.0.1:9002"} // applied live
	require.Equal(t, []string{"listen.a2a", "limits.max_body_bytes"}, RestartOnly(started, &next))
}

func TestInvokersServeDroppedHandlerFromPrevious(t *testing.T) {
	newInv := func(handlers map[string]string) (*handler.Invoker, *config.Config) {
		inv, err := handler.NewInvoker(handlers)
		require.NoError(t, err)
		t.Cleanup(func() { _ = inv.Close() })
		return inv, &config.Config{Handlers: handlers}
	}
	first, cfg1 := newInv(map[string]string{"old": "http://127.0.0.1:9001", "kept": "http://127.0.0.1:9002"})
	x := NewInvokers(first, cfg1)
	require.Same(t, first, x.pick("old"))

	second, cfg2 := newInv(map[string]string{"kept": "http://127.0.0.1:9002", "new": "http://127.0.0.1:9003"})
	x.swap(second, cfg2)
	require.Same(t, second, x.pick("kept"))
	require.Same(t, second, x.pick("new"))
	require.Same(t, first, x.pick("old"), "a request of the previous revision still reaches its handler")
	require.Same(t, second, x.pick("never-configured"))
}

func TestOnSIGHUPRegistersBeforeReturning(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	triggered := make(chan struct{}, 1)
	wait := OnSIGHUP(ctx, zap.NewNop(), func() { triggered <- struct{}{} })
	// Sent at once: were the handler installed later, the default action
	// would end the test binary.
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	<-triggered
	cancel()
	wait()
}
