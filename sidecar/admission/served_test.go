package admission_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/positionstest"
	"github.com/capgate/capgate/test/testutil"
)

// TestServedBindings: the served-binding rules are admission's, so both doors apply them alike.
// With agent.grpc false every gRPC call, of either version and any operation, is MethodNotFound
// for every caller. With gRPC served, no call to the 0.3 gRPC service is admitted: the owner's
// GetTask there is VersionNotSupported, and another caller naming the owner's task hears
// TaskNotFound, as on every other binding.
func TestServedBindings(t *testing.T) {
	d := testutil.LoadDeployment(t, "")
	no := false
	d.Config.Agent.GRPC = &no
	off := newFixture(t, d)
	on := finance(t)
	for _, f := range []*fixture{off, on} {
		f.bind(t, alice(), "t-own", "ctx-own", "reconcile-invoice")
	}
	callers := map[string]caller{"owner": bearer(t, alice()), "other": bearer(t, bob()), "anonymous": anonymous}
	n := 0
	for _, p := range positionstest.All() {
		if p.Binding != protocol.GRPC {
			continue
		}
		for name, c := range callers {
			t.Run(p.Name()+"/"+name, func(t *testing.T) {
				n++
				v := off.admitPosition(t, p, c, n)
				require.False(t, v.Allowed)
				require.Equal(t, protocol.MethodNotFound, v.Err.Code, "%v", v.Err)
				require.Equal(t, "this agent does not serve the gRPC binding", v.Err.Message)

				n++
				v = on.admitPosition(t, p, c, n)
				if p.Version == protocol.V03 {
					require.False(t, v.Allowed, "a 0.3 gRPC call was admitted")
					if p.Operation == protocol.GetTask && p.Kind == positionstest.Task {
						want := map[string]protocol.Code{"owner": protocol.VersionNotSupported, "other": protocol.TaskNotFound, "anonymous": protocol.Unauthenticated}[name]
						require.Equal(t, want, v.Err.Code, "%v", v.Err)
					}
				}
			})
		}
	}
}
