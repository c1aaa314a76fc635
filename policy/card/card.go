// Package card projects capabilities into agent cards — A2A 1.0, and the 0.3 shape for 0.3
// callers — validates them against the A2A schema, checks that the public card leaks no hidden
// capability, and locks and checks the public card in CI.
package card

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/manifest"
)

// Values every generated card carries.
const (
	// BearerSchemeName is the key of the HTTP bearer scheme in securitySchemes.
	BearerSchemeName a2a.SecuritySchemeName = "bearer"
	// FallbackVersion stands in for an empty agent.version.
	FallbackVersion = "0.0.0"
	// skillsHashLen is how many hex digits of the skills hash the version carries.
	skillsHashLen = 8
)

// Extended-card settings of config.Cards.ExtendedCard.
const (
	ExtendedCardAuto = "auto"
	ExtendedCardOn   = "on"
	ExtendedCardOff  = "off"
)

// DefaultInputModes and DefaultOutputModes are the card-level media types;
// a skill that sets its own modes overrides them. Output lists JSON first
// because capgate handlers answer structured data; plain text is always
// accepted and returned (clarification questions are text). Each call
// returns a fresh slice.
func DefaultInputModes() []string { return []string{"text/plain"} }

// DefaultOutputModes: see DefaultInputModes.
func DefaultOutputModes() []string { return []string{"application/json", "text/plain"} }

// Options are the per-card settings Build does not derive from the config.
type Options struct {
	// ExtendedCard sets capabilities.extendedAgentCard (see NeedsExtendedCard).
	ExtendedCard bool
}

// Build projects cfg and an already-selected list of capabilities into an
// agent card. Which capabilities a caller sees is the policy's decision;
// Build only skips removed ones (defensively) and duplicate ids. Skills are
// sorted by id; a deprecated skill's description gets a generated sentence
// naming its replacement. The card version is agent.version plus SemVer
// build metadata over the generated skills (see Version).
//
// The card declares an HTTP bearer scheme when issuers are configured, and an oauth2 /
// openIdConnect scheme per issuer that names its token endpoint / discovery document (see
// securitySchemes). securityRequirements are stated only with cards.security_requirements
// "proto" or "a2a-go" (the card's and each skill's, see schemeSet): a2a.proto encodes a requirement's scopes as a
// StringList object ({"list": []}) while a2a-go v2.3.1 reads and writes a bare array
// (a2aproject/a2a-go#430), so either form breaks one family of clients.
func Build(cfg *config.Config, caps []manifest.Capability, opts Options) *a2a.AgentCard {
	ag := cfg.Agent
	skills := buildSkills(caps)
	schemes := securitySchemes(cfg.Auth, caps)
	c := &a2a.AgentCard{
		Name:        ag.Name,
		Description: ag.Description,
		SupportedInterfaces: []*a2a.AgentInterface{
			{URL: ag.InterfaceURL(config.BindingJSONRPC), ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2a.Version},
			{URL: ag.InterfaceURL(config.BindingHTTPJSON), ProtocolBinding: a2a.TransportProtocolHTTPJSON, ProtocolVersion: a2a.Version},
		},
		Version:          Version(ag.Version, skills),
		DocumentationURL: ag.DocumentationURL,
		Capabilities: a2a.AgentCapabilities{
			Streaming:         ag.Streaming == nil || *ag.Streaming,
			PushNotifications: cfg.Push.Enabled, // push.enabled: both doors refuse push configs otherwise
			ExtendedAgentCard: opts.ExtendedCard,
			Extensions:        buildExtensions(ag.Extensions),
		},
		DefaultInputModes:  DefaultInputModes(),
		DefaultOutputModes: DefaultOutputModes(),
		SecuritySchemes:    schemes.named(),
		Skills:             skills,
	}
	if f := cfg.Cards.SecurityRequirements; f == config.SecurityRequirementsProto || f == config.SecurityRequirementsA2AGo {
		c.SecurityRequirements = schemes.requirements()
		byID := capsByID(caps)
		for i := range c.Skills {
			if m := byID[c.Skills[i].ID]; m != nil {
				c.Skills[i].SecurityRequirements = schemes.skillRequirements(m.RequiresScopes)
			}
		}
	}
	if ag.ServesGRPC() {
		// gRPC is served on the same listener, advertised as a gRPC target (dns:///host:port)
		// that clients dial as given (see docs/cards.md, "The gRPC interface").
		c.SupportedInterfaces = append(c.SupportedInterfaces,
			&a2a.AgentInterface{URL: ag.InterfaceURL(config.BindingGRPC), ProtocolBinding: a2a.TransportProtocolGRPC, ProtocolVersion: a2a.Version})
	}
	if ag.Provider != nil {
		c.Provider = &a2a.AgentProvider{Org: ag.Provider.Organization, URL: ag.Provider.URL}
	}
	return c
}

func buildSkills(caps []manifest.Capability) []a2a.AgentSkill {
	sorted := make([]*manifest.Capability, 0, len(caps))
	for i := range caps {
		if caps[i].State != manifest.StateRemoved {
			sorted = append(sorted, &caps[i])
		}
	}
	slices.SortStableFunc(sorted, func(a, b *manifest.Capability) int { return strings.Compare(a.ID, b.ID) })
	skills := make([]a2a.AgentSkill, 0, len(sorted))
	for i, m := range sorted {
		if i > 0 && sorted[i-1].ID == m.ID {
			continue
		}
		tags := slices.Clone(m.Skill.Tags)
		if tags == nil {
			tags = []string{}
		}
		skills = append(skills, a2a.AgentSkill{
			ID:          m.ID,
			Name:        m.Skill.Name,
			Description: skillDescription(m),
			Tags:        tags,
			Examples:    slices.Clone(m.Skill.Examples),
			InputModes:  slices.Clone(m.Skill.InputModes),
			OutputModes: slices.Clone(m.Skill.OutputModes),
		})
	}
	return skills
}

// skillDescription suffixes a deprecated capability's description with a
// sentence naming its replacement.
func skillDescription(m *manifest.Capability) string {
	d := strings.TrimSpace(m.Skill.Description)
	if m.State != manifest.StateDeprecated {
		return d
	}
	if d != "" && !strings.ContainsAny(d[len(d)-1:], ".!?") {
		d += "."
	}
	if m.ReplacedBy != "" {
		return strings.TrimSpace(d + " Deprecated: use " + m.ReplacedBy + " instead.")
	}
	return strings.TrimSpace(d + " Deprecated; it will be removed.")
}

func buildExtensions(exts []config.Extension) []a2a.AgentExtension {
	if len(exts) == 0 {
		return nil
	}
	out := make([]a2a.AgentExtension, 0, len(exts))
	for _, e := range exts {
		out = append(out, a2a.AgentExtension{URI: e.URI, Description: e.Description, Required: e.Required, Params: e.Params})
	}
	return out
}

// NeedsExtendedCard decides capabilities.extendedAgentCard: "on" and "off"
// in cfg.Cards.ExtendedCard force it; otherwise ("auto" or empty) it is true
// when any capability that is not removed could appear only in an extended
// card: visibility extended, or state preview (preview is never public).
// Internal capabilities never appear in any card and do not count.
func NeedsExtendedCard(cfg *config.Config, all []manifest.Capability) bool {
	switch cfg.Cards.ExtendedCard {
	case ExtendedCardOn:
		return true
	case ExtendedCardOff:
		return false
	}
	return HasExtendedContent(all)
}

// HasExtendedContent reports whether any capability could appear in an
// extended card but not in the public one: not removed, not internal, and
// extended or in preview.
func HasExtendedContent(all []manifest.Capability) bool {
	for i := range all {
		m := &all[i]
		if m.State == manifest.StateRemoved || m.Visibility == manifest.VisibilityInternal {
			continue
		}
		if m.Visibility == manifest.VisibilityExtended || m.State == manifest.StatePreview {
			return true
		}
	}
	return false
}

// Version is the card version for a base agent.version and a generated skill
// list: "<base>+skills.<h>", h the first 8 hex digits of the SHA-256 of the
// skills' canonical JSON (see SkillsHash). A base that already carries build
// metadata gets ".skills.<h>" appended to it; an empty base is "0.0.0".
func Version(base string, skills []a2a.AgentSkill) string {
	if base == "" {
		base = FallbackVersion
	}
	sep := "+"
	if strings.Contains(base, "+") {
		sep = "."
	}
	return base + sep + "skills." + SkillsHash(skills)[:skillsHashLen]
}

// BaseVersion is the part of a card version before the build metadata.
func BaseVersion(v string) string {
	base, _, _ := strings.Cut(v, "+")
	return base
}

// canonicalSkill fixes the canonical JSON of a skill independently of
// a2a-go's struct layout: keys in lexicographic order, empty optional lists
// omitted.
type canonicalSkill struct {
	Description string   `json:"description"`
	Examples    []string `json:"examples,omitempty"`
	ID          string   `json:"id"`
	InputModes  []string `json:"inputModes,omitempty"`
	Name        string   `json:"name"`
	OutputModes []string `json:"outputModes,omitempty"`
	Tags        []string `json:"tags"`
}

// SkillsHash is the hex SHA-256 of the canonical JSON of skills: an array in
// the given order of objects with sorted keys, no insignificant whitespace,
// no HTML escaping.
func SkillsHash(skills []a2a.AgentSkill) string {
	cs := make([]canonicalSkill, 0, len(skills))
	for _, s := range skills {
		tags := s.Tags
		if tags == nil {
			tags = []string{}
		}
		cs = append(cs, canonicalSkill{
			Description: s.Description, Examples: s.Examples, ID: s.ID, InputModes: s.InputModes,
			Name: s.Name, OutputModes: s.OutputModes, Tags: tags,
		})
	}
	b, err := encode(cs, false)
	if err != nil {
		// Only strings and string slices: encoding cannot fail.
		panic(fmt.Sprintf("card: encode skills: %v", err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Marshal encodes a card compactly for serving, its security requirements in the A2A proto's
// JSON form (MarshalAs with config.SecurityRequirementsProto). The bytes are deterministic:
// struct fields in a2a-go's order, map keys sorted, no HTML escaping.
func Marshal(c *a2a.AgentCard) ([]byte, error) {
	return MarshalAs(c, config.SecurityRequirementsProto)
}

// MarshalAs is Marshal with the security requirements in form, a value of
// cards.security_requirements: a2a-go's bare arrays for config.SecurityRequirementsA2AGo, the
// proto's StringList objects otherwise (a card built with "omit" has none).
func MarshalAs(c *a2a.AgentCard, form string) ([]byte, error) {
	b, err := encode(c, false)
	if err != nil || form == config.SecurityRequirementsA2AGo {
		return b, err
	}
	return protoRequirements(b)
}

// MarshalIndent encodes a card with two-space indentation and a final
// newline, for the CLI, lock files and golden files.
func MarshalIndent(c *a2a.AgentCard) ([]byte, error) {
	return MarshalIndentAs(c, config.SecurityRequirementsProto)
}

// MarshalIndentAs is MarshalIndent with the security requirements in form (see MarshalAs).
func MarshalIndentAs(c *a2a.AgentCard, form string) ([]byte, error) {
	b, err := MarshalAs(c, form)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, b, "", "  "); err != nil {
		return nil, fmt.Errorf("encode agent card: %w", err)
	}
	return append(buf.Bytes(), '\n'), nil
}

func encode(v any, indent bool) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if indent {
		enc.SetIndent("", "  ")
	}
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode agent card: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
