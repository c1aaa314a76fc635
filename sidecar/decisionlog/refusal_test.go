package decisionlog_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/decisionlog"
	"github.com/capgate/capgate/sidecar/protocol"
)

// TestSetRefusal: one method fills a refusal's fields, as both doors record it.
func TestSetRefusal(t *testing.T) {
	e := decisionlog.Entry{Result: decisionlog.Allow}
	e.SetRefusal(nil)
	require.Equal(t, decisionlog.Allow, e.Result, "no error: the decision stands")
	require.Empty(t, e.Code)

	e.SetRefusal(protocol.Errorf(protocol.TaskNotFound, "task not found").Decided(decisionlog.RuleTaskOwner, "lookup-invoice"))
	require.Equal(t, decisionlog.Deny, e.Result)
	require.Equal(t, string(protocol.TaskNotFound), e.Code)
	require.Equal(t, decisionlog.RuleTaskOwner, e.Rule)
	require.Equal(t, "lookup-invoice", e.Capability)
	require.Len(t, e.Reasons, 1)
	require.Empty(t, e.AuthReason)

	// The policy's reasons and a capability already recorded (the router's choice) are kept.
	kept := decisionlog.Entry{Reasons: []string{"scope.missing"}, Capability: "reconcile-invoice"}
	kept.SetRefusal(protocol.Errorf(protocol.Unauthorized, "no").Decided(decisionlog.RuleNoCandidate, "other"))
	require.Equal(t, []string{"scope.missing"}, kept.Reasons)
	require.Equal(t, "reconcile-invoice", kept.Capability)

	// An Unauthenticated refusal records the class of the refused credential.
	anon := decisionlog.Entry{}
	anon.SetRefusal(protocol.MissingCredentials())
	require.Equal(t, string(protocol.Unauthenticated), anon.Code)
	require.Equal(t, "missing_credential", anon.AuthReason)
}
