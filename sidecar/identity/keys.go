package identity

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/sidecar/jwks"
)

// refresh makes sure iss's jwks_url was fetched less than refreshEvery ago
// (by the injected clock), starting a fetch if not, and waits for the fetch
// in progress while ctx allows. The fetch itself is detached from the
// request: it runs bounded by fetchTimeout whatever ctx does, so a check
// with a short deadline (Envoy's ext_authz timeout, 250ms) returns when its
// deadline passes, while the fetch completes for the requests that follow.
// Concurrent callers share one fetch. A failed fetch keeps the last good
// key set.
func (v *Verifier) refresh(ctx context.Context, iss *issuer) {
	done := v.startFetch(ctx, iss, v.refreshEvery)
	if done == nil {
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// revalidate starts a background fetch of iss's jwks_url when its key set
// is older than maxKeyAge, without waiting: keys an issuer publishes ahead
// of a rotation are known before the first token signed with them arrives,
// and keys it withdraws stop verifying within maxKeyAge.
func (v *Verifier) revalidate(ctx context.Context, iss *issuer) {
	_ = v.startFetch(ctx, iss, v.maxKeyAge)
}

// startFetch starts a fetch of iss's jwks_url unless one is in progress
// (whose done channel it returns) or the last one started less than minAge
// ago (nil).
func (v *Verifier) startFetch(ctx context.Context, iss *issuer, minAge time.Duration) <-chan struct{} {
	iss.fetchMu.Lock()
	defer iss.fetchMu.Unlock()
	if iss.fetching != nil {
		return iss.fetching
	}
	now := v.now()
	if !iss.lastFetch.IsZero() {
		if since := now.Sub(iss.lastFetch); since >= 0 && since < minAge {
			return nil
		}
	}
	iss.lastFetch = now
	done := make(chan struct{})
	iss.fetching = done
	// The fetch outlives the request that started it (bounded by
	// fetchTimeout), so a client hanging up or a check timing out cannot
	// waste the issuer's refresh slot.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), v.fetchTimeout)
	go func() {
		defer cancel()
		v.fetchAndStore(fctx, iss)
		iss.fetchMu.Lock()
		iss.fetching = nil
		iss.fetchMu.Unlock()
		close(done)
	}()
	return done
}

func (v *Verifier) fetchAndStore(ctx context.Context, iss *issuer) {
	set, err := v.fetch(ctx, iss)
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
