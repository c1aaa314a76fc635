package identity

import (
	"crypto/hkdf"
	"crypto/sha256"
	"errors"
	"fmt"
)

// DeriveKey returns a 32-byte secret key for purpose, derived from the
// minter's signing key by HKDF-SHA256 (RFC 5869; the private scalar is the
// secret, purpose the info). Every replica configured with the same
// identity.signing_key_file derives the same key; with a generated signing
// key it lasts as long as the process. Distinct purposes give independent
// keys, and the signing key cannot be recovered from a derived one.
func (m *Minter) DeriveKey(purpose string) ([]byte, error) {
	if m == nil || m.key == nil {
		return nil, errors.New("derive key: no signing key")
	}
	if purpose == "" {
		return nil, errors.New("derive key: no purpose")
	}
	secret, err := m.key.Bytes()
	if err != nil {
		return nil, fmt.Errorf("derive key: %w", err)
	}
	return hkdf.Key(sha256.New, secret, []byte("capgate derived key v1"), purpose, 32)
}
