package tasks_test

import (
	"testing"

	"github.com/capgate/capgate/sidecar/tasks"
	"github.com/capgate/capgate/sidecar/tasks/storetest"
)

// The conformance suites (storetest) on the memory store; the Redis
// backend runs them from its own folder (sidecar/tasks/redisstore).

func TestMemory(t *testing.T) {
	storetest.Run(t, func(_ *testing.T, opts ...tasks.Option) tasks.Store { return tasks.NewMemory(0, opts...) })
}

func TestMemoryExamples(t *testing.T) {
	storetest.RunExamples(t, func(_ *testing.T, opts ...tasks.Option) tasks.Examples { return tasks.NewMemory(0, opts...) })
}
