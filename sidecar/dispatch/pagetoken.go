package dispatch

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"strconv"

	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/tasks"
)

// PageTokenKeyPurpose is the purpose under which the server derives the
// ListTasks page-token key from capgate's signing key
// (identity.Minter.DeriveKey).
const PageTokenKeyPurpose = "capgate ListTasks page token v1"

// WithPageTokenKey sets the HMAC-SHA256 key of ListTasks page tokens (at
// least 32 bytes; a shorter key is ignored). Replicas given the same key
// accept each other's tokens. Without it New draws a random key: tokens
// then do not survive a restart and are refused by other replicas.
func WithPageTokenKey(key []byte) Option {
	return func(d *Dispatcher) {
		if len(key) >= 32 {
			d.pageKey = append([]byte(nil), key...)
		}
	}
}

// newPageKey is the random key of a dispatcher given none.
func newPageKey() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k) // never fails (crypto/rand)
	return k
}

// A page token is base64url (no padding) of
//
//	version (1 byte, 1) | created seconds (int64) | created nanoseconds (uint32) |
//	digest (16 bytes: SHA-256 of the task id, truncated) | mac (32 bytes)
//
// all big-endian, where mac is HMAC-SHA256 under the page key of the
// request's scope (tokenScope: the owner's issuer, subject and tenant and
// every ListTasks parameter but pageSize and pageToken) followed by the
// first 29 bytes. The position names the last task the previous page
// examined; the task id is kept as a digest so that a token has a fixed
// size whatever the handler's ids.
const (
	pageTokenVersion = 1
	positionLen      = 1 + 8 + 4 + tasks.DigestBytes
	pageTokenBytes   = positionLen + sha256.Size
)

// errPageToken is the answer to a page token that was not issued for this
// caller and these parameters (or was altered).
func errPageToken() *protocol.Error {
	return protocol.Errorf(protocol.InvalidParams, "pageToken is not valid for this request")
}

// positionBytes is p as a page token carries it: the token version, the
// created time, the task-id digest (tasks.Position: the store reads in this
// order).
func positionBytes(p tasks.Position) []byte {
	b := make([]byte, 0, positionLen)
	b = append(b, pageTokenVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(p.Sec))
	b = binary.BigEndian.AppendUint32(b, p.Nsec)
	return append(b, p.Digest[:]...)
}

// tokenScope is what a page token is bound to, as length-prefixed fields.
func tokenScope(o tasks.Owner, q listQuery) []byte {
	after := ""
	if q.after != nil {
		after = q.after.UTC().Format("2006-01-02T15:04:05.000000000Z")
	}
	hist := ""
	if q.historyLength != nil {
		hist = strconv.Itoa(*q.historyLength)
	}
	var b []byte
	for _, f := range []string{"capgate ListTasks page", o.Issuer, o.Subject, o.Tenant,
		q.contextID, q.state, after, hist, strconv.FormatBool(q.includeArtifacts)} {
		b = binary.BigEndian.AppendUint32(b, uint32(len(f)))
		b = append(b, f...)
	}
	return b
}

func (d *Dispatcher) pageMAC(scope, pos []byte) []byte {
	m := hmac.New(sha256.New, d.pageKey)
	m.Write(scope)
	m.Write(pos)
	return m.Sum(nil)
}

// sealPage returns the page token that continues after p.
func (d *Dispatcher) sealPage(scope []byte, p tasks.Position) string {
	pos := positionBytes(p)
	return base64.RawURLEncoding.EncodeToString(append(pos, d.pageMAC(scope, pos)...))
}

// openPage checks a page token against scope and returns its position.
func (d *Dispatcher) openPage(scope []byte, token string) (tasks.Position, *protocol.Error) {
	raw, err := base64.RawURLEncoding.Strict().DecodeString(token)
	if err != nil || len(raw) != pageTokenBytes {
		return tasks.Position{}, errPageToken()
	}
	pos, mac := raw[:positionLen], raw[positionLen:]
	if !hmac.Equal(mac, d.pageMAC(scope, pos)) || pos[0] != pageTokenVersion {
		return tasks.Position{}, errPageToken()
	}
	p := tasks.Position{
		Sec:  int64(binary.BigEndian.Uint64(pos[1:9])),
		Nsec: binary.BigEndian.Uint32(pos[9:13]),
	}
	copy(p.Digest[:], pos[13:])
	return p, nil
}
