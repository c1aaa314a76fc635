package admission_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/admission"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/positionstest"
	"github.com/capgate/capgate/sidecar/protocol/wire"
)

// admitPosition fills position p with the owner's task, context or tenant (as its kind names),
// parses it as the doors do and admits it for caller c.
func (f *fixture) admitPosition(t *testing.T, p positionstest.Position, c caller, n int) admission.Verdict {
	t.Helper()
	swept := map[positionstest.Kind]string{positionstest.Task: "t-own", positionstest.Context: "ctx-own", positionstest.Tenant: alice().Tenant}[p.Kind]
	method, target, h, body, err := positionstest.RequestFor(p, swept, "t-own", alice().Tenant, "https://hooks.example.com/", "m-"+strconv.Itoa(n))
	require.NoError(t, err)
	if c != anonymous {
		h.Set("Authorization", string(c))
	}
	path, query, _ := strings.Cut(target, "?")
	r, perr := wire.Parse(protocol.Envelope{Method: method, Path: path, Query: query, Header: protocol.HTTPHeader(h),
		Body: body, GRPC: true, Methods: f.rev.Methods}, "", protocol.Limits{})
	if perr != nil {
		return admission.Verdict{Err: perr} // refused by the parser: not admission's to decide
	}
	return f.adm.Admit(t.Context(), f.rev, admission.Input{Request: r, Header: protocol.HTTPHeader(h)})
}

// TestEveryRefusalCarriesItsError: over every position of every binding and a caller of each
// kind, Admit's verdict is an admission or a refusal with its error, never neither: the doors
// answer the error as it is and keep no default of their own.
func TestEveryRefusalCarriesItsError(t *testing.T) {
	f := finance(t)
	f.bind(t, alice(), "t-own", "ctx-own", "reconcile-invoice")
	callers := []caller{bearer(t, alice()), bearer(t, bob()), anonymous}
	n := 0
	for _, p := range positionstest.All() {
		for _, c := range callers {
			n++
			v := f.admitPosition(t, p, c, n)
			require.Equal(t, v.Allowed, v.Err == nil, "%s: allowed %v, error %v", p.Name(), v.Allowed, v.Err)
		}
	}
}
