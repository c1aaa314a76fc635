package identity

import (
	"strconv"
	"sync"
	"time"
)

// maxInternedClasses bounds the class table of the verified-token cache.
const maxInternedClasses = 4096

// cacheEntry is one verified token in the cache, kept compact and stored by
// value: thousands of tokens share a few callers' tenant, issuer, scopes and
// actor chain, so those live once, in a tokenClass. A token is valid while
// now is before expires plus the verifier's clock skew.
type cacheEntry struct {
	subject string
	class   *tokenClass
	expires time.Time // Principal.ExpiresAt
}

// tokenClass is what many tokens' principals have in common.
type tokenClass struct {
	tenant, issuer             string
	scopes, actor, actorIssuer []string
}

// principal rebuilds the cached Principal; it allocates nothing (the slices
// are shared, read-only).
func (e *cacheEntry) principal() Principal {
	return Principal{
		Authenticated: true,
		Subject:       e.subject,
		Tenant:        e.class.tenant,
		Issuer:        e.class.issuer,
		Scopes:        e.class.scopes,
		Actor:         e.class.actor,
		ActorIssuers:  e.class.actorIssuer,
		ExpiresAt:     e.expires,
	}
}

// classTable interns tokenClasses. It is bounded: when full it starts over,
// so it only stops deduplicating for a while; entries already cached keep
// their class.
type classTable struct {
	mu      sync.Mutex
	classes map[string]*tokenClass
}

// entry makes the cache entry of p.
func (t *classTable) entry(p Principal) cacheEntry {
	return cacheEntry{subject: p.Subject, class: t.intern(p), expires: p.ExpiresAt}
}

func (t *classTable) intern(p Principal) *tokenClass {
	key := classKey(p)
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.classes[key]; ok {
		return c
	}
	if t.classes == nil || len(t.classes) >= maxInternedClasses {
		t.classes = make(map[string]*tokenClass)
	}
	c := &tokenClass{tenant: p.Tenant, issuer: p.Issuer, scopes: p.Scopes, actor: p.Actor, actorIssuer: p.ActorIssuers}
	t.classes[key] = c
	return c
}

// classKey encodes a principal's class unambiguously (length-prefixed
// fields; nil and empty lists differ, as they do in a Principal).
func classKey(p Principal) string {
	b := make([]byte, 0, 64)
	str := func(s string) {
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, ':')
		b = append(b, s...)
	}
	list := func(l []string) {
		if l == nil {
			b = append(b, 'n')
			return
		}
		b = strconv.AppendInt(b, int64(len(l)), 10)
		b = append(b, '[')
		for _, s := range l {
			str(s)
		}
	}
	str(p.Tenant)
	str(p.Issuer)
	list(p.Scopes)
	list(p.Actor)
	list(p.ActorIssuers)
	return string(b)
}
