package compile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"

	"github.com/capgate/capgate/policy/manifest"
)

// Bundle defaults, matching the OPA CLI's.
const (
	// DefaultSigningAlg is the signature algorithm when none is given.
	DefaultSigningAlg = "RS256"
	// DefaultKeyID is the key id a signature names when none is given; it
	// is also the default of `opa run --verification-key-id`.
	DefaultKeyID = "default"
	// DefaultMaxBundleBytes bounds what ReadBundle inflates.
	DefaultMaxBundleBytes = 256 << 20
)

// asymmetric lists the algorithms a bundle may be signed with: public-key
// schemes only, so the verifying side never holds a signing secret.
var asymmetric = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"}

// BundleOptions tune WriteBundle.
type BundleOptions struct {
	// SigningKey is a PEM private key (PKCS#1, PKCS#8 or SEC 1). Empty
	// writes an unsigned bundle.
	SigningKey []byte
	// SigningAlg is the JWS algorithm (RS256 when empty).
	SigningAlg string
	// KeyID names the key in the signature's kid header ("default" when
	// empty).
	KeyID string
}

// VerifyOptions tune ReadBundle.
type VerifyOptions struct {
	// PublicKey is the PEM public key signatures must verify against.
	// When set, unsigned and tampered bundles are refused. When empty, no
	// signature is checked (the content hash still is).
	PublicKey []byte
	// Alg is the JWS algorithm of PublicKey (RS256 when empty).
	Alg string
	// KeyID is the key's name (DefaultKeyID when empty); a signature must
	// name the same key id.
	KeyID string
	// Scope, when set, must equal the signature's scope claim.
	Scope string
	// MaxBytes bounds the inflated bundle (DefaultMaxBundleBytes when 0).
	MaxBytes int64
}

// WriteBundle writes s as an OPA bundle (tar.gz): /data.json holding
// {"capgate": {capabilities, settings, registry}}, one .rego file per module
// at its module path, /.manifest with revision = s.Revision and roots
// ["capgate"], and, when a signing key is given, /.signatures.json in the
// format `opa build --signing-key` produces.
func WriteBundle(w io.Writer, s *Snapshot, opts BundleOptions) error {
	b, err := toBundle(s)
	if err != nil {
		return fmt.Errorf("write bundle: %w", err)
	}
	if len(opts.SigningKey) > 0 {
		alg := opts.SigningAlg
		if alg == "" {
			alg = DefaultSigningAlg
		}
		if !slices.Contains(asymmetric, alg) {
			return fmt.Errorf("write bundle: signing algorithm %q: want one of %s", alg, strings.Join(asymmetric, ", "))
		}
		// OPA reads a key that is not PEM as a file name: insist on PEM.
		if !strings.HasPrefix(strings.TrimSpace(string(opts.SigningKey)), "-----BEGIN") {
			return errors.New("write bundle: signing key is not PEM")
		}
		kid := opts.KeyID
		if kid == "" {
			kid = DefaultKeyID
		}
		sc := bundle.NewSigningConfig(strings.TrimSpace(string(opts.SigningKey)), alg, "")
		if err := b.GenerateSignature(sc, kid, false); err != nil {
			return fmt.Errorf("write bundle: sign: %w", err)
		}
	}
	if err := bundle.NewWriter(w).Write(b); err != nil {
		return fmt.Errorf("write bundle: %w", err)
	}
	return nil
}

func toBundle(s *Snapshot) (bundle.Bundle, error) {
	if s == nil || s.Registry == nil {
		return bundle.Bundle{}, errors.New("nil snapshot")
	}
	data, err := s.Data()
	if err != nil {
		return bundle.Bundle{}, err
	}
	doc, err := s.bundleDocument(data)
	if err != nil {
		return bundle.Bundle{}, err
	}
	b := bundle.Bundle{
		Data:     map[string]any{Root: doc},
		Manifest: bundle.Manifest{Revision: s.Revision, Roots: &[]string{Root}},
	}
	b.Manifest.SetRegoVersion(ast.RegoV1)
	for _, p := range slices.Sorted(maps.Keys(s.Modules)) {
		m, err := ast.ParseModuleWithOpts(p, s.Modules[p], ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			return bundle.Bundle{}, fmt.Errorf("module %s: %w", p, err)
		}
		b.Modules = append(b.Modules, bundle.ModuleFile{
			URL: "/" + p, Path: "/" + p, RelativePath: "/" + p,
			Raw: []byte(s.Modules[p]), Parsed: m,
		})
	}
	return b, nil
}

// ReadBundle reads a bundle WriteBundle wrote and rebuilds the snapshot
// from it: the registry from data.capgate.registry, the settings, and the
// modules. The rebuilt snapshot passes every check Build makes, its
// capability facts are derived again from the registry (so cards, router
// and policy cannot disagree), and its content hash must equal the
// manifest's revision. With a public key the signature is verified first.
func ReadBundle(r io.Reader, opts VerifyOptions) (*Snapshot, error) {
	limit := opts.MaxBytes
	if limit <= 0 {
		limit = DefaultMaxBundleBytes
	}
	rd := bundle.NewReader(r).WithSizeLimitBytes(limit).WithRegoVersion(ast.RegoV1)
	if len(opts.PublicKey) > 0 {
		alg := opts.Alg
		if alg == "" {
			alg = DefaultSigningAlg
		}
		if !slices.Contains(asymmetric, alg) {
			return nil, fmt.Errorf("read bundle: verification algorithm %q: want one of %s", alg, strings.Join(asymmetric, ", "))
		}
		kid := opts.KeyID
		if kid == "" {
			kid = DefaultKeyID
		}
		keys := map[string]*bundle.KeyConfig{kid: {Key: string(opts.PublicKey), Algorithm: alg, Scope: opts.Scope}}
		// No pinned key id in the config: OPA then looks the key up by the
		// signature's kid header, so a signature naming another key fails.
		rd = rd.WithBundleVerificationConfig(bundle.NewVerificationConfig(keys, "", opts.Scope, nil))
	} else {
		rd = rd.WithSkipBundleVerification(true)
	}
	b, err := rd.Read()
	if err != nil {
		return nil, fmt.Errorf("read bundle: %w", err)
	}
	if len(opts.PublicKey) > 0 && len(b.Signatures.Signatures) == 0 {
		return nil, errors.New("read bundle: bundle is not signed")
	}
	s, err := fromBundle(&b)
	if err != nil {
		return nil, fmt.Errorf("read bundle: %w", err)
	}
	return s, nil
}

func fromBundle(b *bundle.Bundle) (*Snapshot, error) {
	if b.Manifest.Roots == nil || !slices.Equal(*b.Manifest.Roots, []string{Root}) {
		return nil, fmt.Errorf("manifest roots must be [%q]", Root)
	}
	doc, _ := b.Data[Root].(map[string]any)
	if doc == nil {
		return nil, fmt.Errorf("no data under %s", Root)
	}
	regDoc, _ := doc[keyRegistry].(map[string]any)
	if regDoc == nil {
		return nil, fmt.Errorf("no data under %s.%s", Root, keyRegistry)
	}
	caps := make([]manifest.Capability, 0, len(regDoc))
	for _, id := range slices.Sorted(maps.Keys(regDoc)) {
		c, err := registryEntry(id, regDoc[id])
		if err != nil {
			return nil, err
		}
		caps = append(caps, c)
	}
	settings, err := decodeSettings(doc[keySettings])
	if err != nil {
		return nil, err
	}
	modules := make(map[string]string, len(b.Modules))
	for _, m := range b.Modules {
		p := strings.TrimPrefix(m.Path, "/")
		if _, dup := modules[p]; dup {
			return nil, fmt.Errorf("module %s: duplicate path", p)
		}
		modules[p] = string(m.Raw)
	}
	s, err := assemble(manifest.NewRegistry(caps), settings, modules)
	if err != nil {
		return nil, err
	}
	// The facts are derived again from the registry; a bundle whose data
	// differs from what capgate would write is refused, not repaired.
	data, err := s.Data()
	if err != nil {
		return nil, err
	}
	rebuilt, err := s.bundleDocument(data)
	if err != nil {
		return nil, err
	}
	if same, err := sameJSON(rebuilt, doc); err != nil || !same {
		return nil, fmt.Errorf("data.%s differs from the document its registry and settings compile to", Root)
	}
	if s.Revision != b.Manifest.Revision {
		return nil, fmt.Errorf("content hash %s does not match the manifest revision %q", s.Revision, b.Manifest.Revision)
	}
	return s, nil
}

// registryEntry decodes the manifest a bundle stores under
// data.capgate.registry[key]: the manifest's own JSON, checked by the
// format's value rules (manifest.Capability.Validate). Limits come back as
// plain JSON values (numbers as float64).
func registryEntry(key string, v any) (manifest.Capability, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return manifest.Capability{}, fmt.Errorf("registry %s: %w", key, err)
	}
	var c manifest.Capability
	if err := json.Unmarshal(b, &c); err != nil {
		return manifest.Capability{}, fmt.Errorf("registry %s: %w", key, err)
	}
	if c.ID != key {
		return manifest.Capability{}, fmt.Errorf("registry %s: id %q differs from its key", key, c.ID)
	}
	if err := c.Validate(); err != nil {
		return manifest.Capability{}, fmt.Errorf("registry %s: %w", key, err)
	}
	c.Source = manifest.Source{File: "bundle:data.capgate.registry." + key}
	return c, nil
}

func decodeSettings(v any) (Settings, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return Settings{}, fmt.Errorf("no data under %s.%s", Root, keySettings)
	}
	var s Settings
	var errs []error
	if x, ok := m["preview_scope"].(string); ok {
		s.PreviewScope = x
	} else {
		errs = append(errs, errors.New("settings.preview_scope: want a string"))
	}
	if x, ok := m["anonymous_public"].(bool); ok {
		s.AnonymousPublic = x
	} else {
		errs = append(errs, errors.New("settings.anonymous_public: want a boolean"))
	}
	list, ok := m["preview_tenants"].([]any)
	if !ok {
		errs = append(errs, errors.New("settings.preview_tenants: want a list"))
	}
	s.PreviewTenants = make([]string, 0, len(list))
	for _, t := range list {
		x, ok := t.(string)
		if !ok {
			errs = append(errs, errors.New("settings.preview_tenants: want strings"))
			break
		}
		s.PreviewTenants = append(s.PreviewTenants, x)
	}
	q, err := decodeQuotas(m["quotas"])
	if err != nil {
		errs = append(errs, err)
	}
	s.Quotas = q
	return s, errors.Join(errs...)
}

func sameJSON(a, b any) (bool, error) {
	x, err := json.Marshal(a)
	if err != nil {
		return false, err
	}
	y, err := json.Marshal(b)
	if err != nil {
		return false, err
	}
	return bytes.Equal(x, y), nil
}
