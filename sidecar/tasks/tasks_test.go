package tasks

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOwnedBy(t *testing.T) {
	withIssuer := Binding{Issuer: "https://idp-a", Subject: "alice", Tenant: "acme"}
	legacy := Binding{Subject: "alice", Tenant: "acme"}
	anonymous := Binding{}
	tests := []struct {
		name    string
		binding Binding
		owner   Owner
		want    bool
	}{
		{"same issuer, subject and tenant", withIssuer, Owner{Issuer: "https://idp-a", Subject: "alice", Tenant: "acme"}, true},
		{"legacy flag does not matter with an issuer", withIssuer, Owner{Issuer: "https://idp-a", Subject: "alice", Tenant: "acme", Legacy: true}, true},
		{"another issuer", withIssuer, Owner{Issuer: "https://idp-b", Subject: "alice", Tenant: "acme"}, false},
		{"another issuer, legacy", withIssuer, Owner{Issuer: "https://idp-b", Subject: "alice", Tenant: "acme", Legacy: true}, false},
		{"no issuer on the caller", withIssuer, Owner{Subject: "alice", Tenant: "acme", Legacy: true}, false},
		{"another tenant", withIssuer, Owner{Issuer: "https://idp-a", Subject: "alice", Tenant: "globex"}, false},
		{"no tenant", withIssuer, Owner{Issuer: "https://idp-a", Subject: "alice"}, false},
		{"another subject", withIssuer, Owner{Issuer: "https://idp-a", Subject: "bob", Tenant: "acme"}, false},
		{"subject case matters", withIssuer, Owner{Issuer: "https://idp-a", Subject: "Alice", Tenant: "acme"}, false},
		{"legacy binding, legacy owner", legacy, Owner{Issuer: "https://idp-a", Subject: "alice", Tenant: "acme", Legacy: true}, true},
		{"legacy binding, owner not legacy", legacy, Owner{Issuer: "https://idp-a", Subject: "alice", Tenant: "acme"}, false},
		{"legacy binding, legacy owner of another tenant", legacy, Owner{Issuer: "https://idp-a", Subject: "alice", Tenant: "globex", Legacy: true}, false},
		{"legacy binding, legacy owner with another subject", legacy, Owner{Issuer: "https://idp-a", Subject: "bob", Tenant: "acme", Legacy: true}, false},
		{"empty subject owns nothing", Binding{Issuer: "https://idp-a", Tenant: "acme"}, Owner{Issuer: "https://idp-a", Tenant: "acme"}, false},
		{"empty subject owns nothing, legacy", Binding{Tenant: "acme"}, Owner{Tenant: "acme", Legacy: true}, false},
		{"anonymous binding, anonymous owner", anonymous, Owner{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, tt.binding.OwnedBy(tt.owner))
		})
	}
}

func TestBindingOwner(t *testing.T) {
	b := Binding{TaskID: "t", Issuer: "i", Subject: "s", Tenant: "n", Capability: "c"}
	require.Equal(t, Owner{Issuer: "i", Subject: "s", Tenant: "n"}, b.Owner())
	require.True(t, b.OwnedBy(b.Owner()))
}
