// Package revision holds the state capgate serves requests from — one compiled deployment:
// config, registry, prepared policy engine, verifier, router and pre-rendered cards, at one policy
// revision (the content hash, State.ID) — and the holder through which servers read the current
// one.
package revision

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/policy/card"
	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/deployment"
	"github.com/capgate/capgate/policy/engine"
	"github.com/capgate/capgate/policy/manifest"
	"github.com/capgate/capgate/sidecar/cardsig"
	"github.com/capgate/capgate/sidecar/identity"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/protocol/jsonrpcwire"
	"github.com/capgate/capgate/sidecar/push"
	"github.com/capgate/capgate/sidecar/router"
)

// State is everything a request needs at one policy revision: the compiled deployment, its
// prepared engine, verifier, router and pre-rendered cards. It is immutable; a reload builds a new
// one off the request path and swaps it in. (A revision, elsewhere in capgate, is the content hash
// of the policy and data: State.ID.)
type State struct {
	Deployment *deployment.Deployment
	Engine     *engine.Engine
	Verifier   *identity.Verifier
	// Router is the routing index (classifier built from the skills); nil
	// when built with Options.NoGateway.
	Router *router.Index
	// Model is the optional model-based router (nil when not configured).
	Model *router.Model

	// PublicCard is the serialized public card, PublicETag its ETag (see
	// SignCard); empty when built with Options.NoGateway.
	PublicCard []byte
	PublicETag string
	// PublicCardV03 is the same card in the A2A 0.3 shape (card.V03),
	// served to 0.3 callers; PublicETagV03 its ETag.
	PublicCardV03 []byte
	PublicETagV03 string
	// CardVersion is the public card's version (agent.version with build
	// metadata over its skills), recorded in the gateway's decision events.
	CardVersion string
	// CardsModified is when the cards last changed: the cards' Last-Modified. Build sets it to
	// the time of the build; Holder.Store keeps the previous revision's when the revision and
	// the public cards are unchanged (a reload that changed nothing).
	CardsModified time.Time
	// CardSigner signs the cards when cards.signing_key_file is set (nil
	// otherwise); the public cards above are signed already.
	CardSigner *cardsig.Signer
	// ExtendedCard says whether capabilities.extendedAgentCard is advertised.
	ExtendedCard bool
	// Extensions are the declared extensions, for negotiation.
	Extensions []protocol.Extension
	// Peers maps mTLS peer identities to principals (auth.mtls_principals of this revision's
	// config, so a reload follows it).
	Peers map[string]identity.Principal
	// LegacyIssuer owns task bindings written before issuers were recorded ("": nobody).
	LegacyIssuer string
	// Proxy is the trusted proxy the gateway reads mTLS peers from (nil: none).
	Proxy *identity.ProxyTrust
	// Push is the push notification policy.
	Push push.Policy
	// Methods are the JSON-RPC methods extensions add (agent.extensions[].methods).
	Methods protocol.Methods
	// BasePath is Deployment.BasePath, read once: both doors match every
	// request's path against it (parsing agent.url per request was ~1 % of
	// a routed message's allocated bytes).
	BasePath string
}

// Config is the deployment's configuration.
func (r *State) Config() *config.Config { return r.Deployment.Config }

// Registry is the deployment's capability registry.
func (r *State) Registry() *manifest.Registry { return r.Deployment.Registry() }

// ID is the policy revision (content hash of data and modules).
func (r *State) ID() string { return r.Engine.Revision() }

// Options tune Build.
type Options struct {
	Logger          *zap.Logger
	VerifierOptions []identity.Option
	EngineOptions   []engine.Option
	// NoGateway builds only what the ext_authz server reads: no routing
	// index, model router or public card, which only the gateway serves.
	// Over a large registry the index alone is megabytes that an
	// ext_authz-only process would carry for nothing.
	NoGateway bool
}

// Build prepares a revision: it compiles the policy, builds the verifier and,
// for the gateway, renders the public card and the routing index. Nothing is
// served from a revision that failed.
func Build(ctx context.Context, d *deployment.Deployment, opts Options) (*State, error) {
	e, err := engine.New(ctx, d.Snapshot, opts.EngineOptions...)
	if err != nil {
		return nil, fmt.Errorf("prepare policy: %w", err)
	}
	vopts := append([]identity.Option(nil), opts.VerifierOptions...)
	if opts.Logger != nil {
		vopts = append(vopts, identity.WithLogger(opts.Logger.Named("identity")))
	}
	v, err := identity.NewVerifier(ctx, d.Config.Auth, d.Config.ReadFile, vopts...)
	if err != nil {
		return nil, fmt.Errorf("authentication: %w", err)
	}
	proxy, err := identity.NewProxyTrust(d.Config.Auth.TrustedProxy, d.Config.ReadFile)
	if err != nil {
		return nil, fmt.Errorf("authentication: %w", err)
	}
	r := &State{
		CardsModified: time.Now().UTC().Truncate(time.Second),
		Deployment:    d,
		Engine:        e,
		Verifier:      v,
		ExtendedCard:  card.NeedsExtendedCard(d.Config, d.Registry().All()),
		Peers:         identity.PeerPrincipals(d.Config.Auth),
		LegacyIssuer:  identity.LegacyTaskIssuer(d.Config.Auth),
		Proxy:         proxy,
		Push:          push.Policy{Enabled: d.Config.Push.Enabled, Allowed: d.Config.Push.AllowedURLs},
		BasePath:      d.BasePath(),
	}
	if !opts.NoGateway {
		if cs := d.Config.Cards; cs.SigningKeyFile != "" {
			pemBytes, err := d.Config.ReadFile(cs.SigningKeyFile)
			if err != nil {
				return nil, fmt.Errorf("cards.signing_key_file: %w", err)
			}
			if r.CardSigner, err = cardsig.NewSigner(pemBytes, cs.SigningKID, cs.SigningJKU); err != nil {
				return nil, fmt.Errorf("cards.signing_key_file: %w", err)
			}
		}
		pub, err := card.Public(ctx, d.Config, e)
		if err != nil {
			return nil, fmt.Errorf("public card: %w", err)
		}
		r.CardVersion = pub.Version
		b, err := card.MarshalAs(pub, d.Config.Cards.SecurityRequirements)
		if err != nil {
			return nil, fmt.Errorf("public card: %w", err)
		}
		if r.PublicCard, r.PublicETag, err = SignCard(r.CardSigner, b); err != nil {
			return nil, fmt.Errorf("public card: %w", err)
		}
		if b, err = card.MarshalV03(pub); err != nil {
			return nil, fmt.Errorf("public card (0.3): %w", err)
		}
		if r.PublicCardV03, r.PublicETagV03, err = SignCard(r.CardSigner, b); err != nil {
			return nil, fmt.Errorf("public card (0.3): %w", err)
		}
		r.Router = router.NewIndex(d.Registry(), d.Config.Router.Threshold)
		r.Model = router.NewModel(d.Config.Router.Model, nil)
	}
	for _, x := range d.Config.Agent.Extensions {
		r.Extensions = append(r.Extensions, protocol.Extension{URI: x.URI, Required: x.Required})
	}
	if r.Methods, err = extensionMethods(d); err != nil {
		return nil, err
	}
	return r, nil
}

// extensionMethods collects the methods extensions add: none may shadow an A2A method of either
// version, and each is served by a capability of the registry.
func extensionMethods(d *deployment.Deployment) (protocol.Methods, error) {
	var out protocol.Methods
	var errs []error
	for i, x := range d.Config.Agent.Extensions {
		for k, m := range x.Methods {
			at := fmt.Sprintf("agent.extensions[%d].methods[%d]", i, k)
			if jsonrpcwire.IsA2AMethod(m.Name) {
				errs = append(errs, fmt.Errorf("%s: %q is an A2A method; an extension adds methods of its own", at, m.Name))
				continue
			}
			if _, ok := d.Registry().Get(m.Capability); !ok {
				errs = append(errs, fmt.Errorf("%s: capability %q is not in the registry", at, m.Capability))
				continue
			}
			if out == nil {
				out = protocol.Methods{}
			}
			out[m.Name] = protocol.MethodExtension{URI: x.URI, Capability: m.Capability}
		}
	}
	return out, errors.Join(errs...)
}

// SignCard returns the card bytes to serve and their ETag. Without a
// signer: b itself, and a strong ETag (the first 128 bits of its SHA-256).
// With one: b signed, and a weak ETag over b and the key id. An ES256
// signature differs every time it is computed, so the served bytes differ
// between builds and replicas while the card does not: the weak tag says
// "same card", and a cached copy still revalidates (If-None-Match compares
// weakly).
func SignCard(s *cardsig.Signer, b []byte) (signed []byte, etag string, err error) {
	if s == nil {
		sum := sha256.Sum256(b)
		return b, `"` + hex.EncodeToString(sum[:16]) + `"`, nil
	}
	signed, err = s.Sign(b)
	if err != nil {
		return nil, "", err
	}
	h := sha256.New()
	_, _ = h.Write(b)
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(s.KeyID()))
	return signed, `W/"` + hex.EncodeToString(h.Sum(nil)[:16]) + `"`, nil
}

// Holder publishes the current revision to concurrent readers.
type Holder struct {
	p atomic.Pointer[State]
}

// NewHolder returns a holder serving r.
func NewHolder(r *State) *Holder {
	h := &Holder{}
	h.p.Store(r)
	return h
}

// Load returns the current revision; a request keeps the one it loaded.
func (h *Holder) Load() *State { return h.p.Load() }

// Store swaps in a new revision. A revision whose policy and public cards are those of the one
// it replaces keeps that one's CardsModified, so a reload that changed nothing does not make
// every cached card stale.
func (h *Holder) Store(r *State) {
	if old := h.p.Load(); old != nil && old != r && old.ID() == r.ID() &&
		old.PublicETag == r.PublicETag && old.PublicETagV03 == r.PublicETagV03 {
		r.CardsModified = old.CardsModified
	}
	h.p.Store(r)
}
