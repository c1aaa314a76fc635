package identity

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDeriveKey: one signing key gives one key per purpose, in any minter
// (replicas agree); another purpose or another signing key gives another.
func TestDeriveKey(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	a, err := NewMinter("https://capgate.example.com", key)
	require.NoError(t, err)
	b, err := NewMinter("https://capgate.example.com", key)
	require.NoError(t, err)
	other, err := GenerateMinter("https://capgate.example.com")
	require.NoError(t, err)

	ka, err := a.DeriveKey("page tokens")
	require.NoError(t, err)
	require.Len(t, ka, 32)
	kb, err := b.DeriveKey("page tokens")
	require.NoError(t, err)
	require.Equal(t, ka, kb, "same signing key, same purpose: same key")
	kp, err := a.DeriveKey("something else")
	require.NoError(t, err)
	require.NotEqual(t, ka, kp)
	ko, err := other.DeriveKey("page tokens")
	require.NoError(t, err)
	require.NotEqual(t, ka, ko)
	raw, err := key.Bytes()
	require.NoError(t, err)
	require.NotEqual(t, raw, ka, "not the private key itself")

	_, err = a.DeriveKey("")
	require.Error(t, err)
	var nilMinter *Minter
	_, err = nilMinter.DeriveKey("page tokens")
	require.Error(t, err)
}
