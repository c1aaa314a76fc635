package positionstest_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/positionstest"
)

// TestCatalogueAgreesWithOperationTable: the catalogue, written independently of protocol's
// operation table, has a context position for exactly the operations the table says can name a
// context, and a task position for every operation the table says targets a task; every
// operation it sweeps is in the table.
func TestCatalogueAgreesWithOperationTable(t *testing.T) {
	contexts, tasks := map[protocol.Operation]bool{}, map[protocol.Operation]bool{}
	for _, p := range positionstest.All() {
		require.True(t, p.Operation.Known(), p.Name())
		switch p.Kind {
		case positionstest.Context:
			contexts[p.Operation] = true
		case positionstest.Task:
			tasks[p.Operation] = true
		}
	}
	for _, op := range protocol.Operations() {
		require.Equal(t, op.NamesContext(), contexts[op], "%s: names a context", op)
		if op.TargetsTask() {
			require.True(t, tasks[op], "%s targets a task but has no task position", op)
		}
	}
}
