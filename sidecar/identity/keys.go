package identity

import (
	"context"
	"github.com/capgate/capgate/sidecar/jwks"

	"go.uber.org/zap"
)

// refresh fetches iss's jwks_url unless a fetch happened less than
// refreshEvery ago (by the injected clock). Concurrent callers wait for the
// fetch in progress and then see its result. A failed fetch keeps the last
// good key set.
func (v *Verifier) refresh(ctx context.Context, iss *issuer) {
	iss.fetchMu.Lock()
	defer iss.fetchMu.Unlock()
	now := v.now()
	if !iss.lastFetch.IsZero() {
		if since := now.Sub(iss.lastFetch); since >= 0 && since < v.refreshEvery {
			return
		}
	}
	iss.lastFetch = now

	// The fetch outlives a cancelled request (bounded by fetchTimeout), so a
	// client hanging up cannot waste the issuer's refresh slot.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), v.fetchTimeout)
	defer cancel()
	set, err := v.fetch(fctx, iss)
	if err != nil {
		v.log.Warn("JWKS fetch failed; keeping the last good key set",
			zap.String("issuer", iss.name), zap.String("url", iss.logURL), zap.Error(err))
		return
	}
	old := iss.keys.Swap(&set)
	if old != nil && removedOrChanged(*old, set) {
		// Tokens verified with a key that is gone must be verified again.
		v.cache.Purge()
	}
	v.log.Debug("JWKS fetched", zap.String("issuer", iss.name), zap.Int("keys", len(set)))
}

func (v *Verifier) fetch(ctx context.Context, iss *issuer) (keySet, error) {
	body, err := jwks.Fetch(ctx, v.client, iss.jwksURL)
	if err != nil {
		return nil, err
	}
	set, skipped, err := parseJWKS(body)
	v.logSkipped(iss.name, skipped)
	if err != nil {
		return nil, err
	}
	return set, nil
}

// removedOrChanged reports whether a kid of old is missing from next or now
// names a different key.
func removedOrChanged(old, next keySet) bool {
	for kid, o := range old {
		if n, ok := next[kid]; !ok || !o.Same(n) {
			return true
		}
	}
	return false
}
