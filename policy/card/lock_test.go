package card_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/card"
	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/manifest"
)

// release is the state of the finance agent when the lock was written.
type release struct {
	cfg    *config.Config
	public []manifest.Capability
	hidden []manifest.Capability
}

func newRelease() release {
	return release{
		cfg:    fixtureConfig(),
		public: []manifest.Capability{lookupInvoice()},
		hidden: []manifest.Capability{reconcileInvoice(), forecastCashflow(), auditTrail()},
	}
}

func lockOf(t *testing.T, r release) []byte {
	t.Helper()
	b, err := card.Lock(card.Build(r.cfg, r.public, card.Options{ExtendedCard: true}), r.cfg, r.hidden)
	require.NoError(t, err)
	return b
}

func check(t *testing.T, lock []byte, r release) []card.Finding {
	t.Helper()
	fs, err := card.Check(lock, card.Build(r.cfg, r.public, card.Options{ExtendedCard: true}), r.cfg, r.hidden)
	require.NoError(t, err)
	return fs
}

// where is the part of a finding a test pins down.
type where struct{ Kind, Skill, Field string }

func wheres(fs []card.Finding) []where {
	out := []where{}
	for _, f := range fs {
		out = append(out, where{f.Kind, f.Skill, f.Field})
	}
	return out
}

func TestLockGolden(t *testing.T) {
	lock := lockOf(t, newRelease())
	requireGolden(t, "public-card.lock.json", lock, true)

	var lf struct {
		BaseVersion string          `json:"baseVersion"`
		Card        json.RawMessage `json:"card"`
	}
	require.NoError(t, json.Unmarshal(lock, &lf))
	require.Equal(t, "1.4.0", lf.BaseVersion)
	require.NoError(t, card.ValidateJSON(lf.Card))
}

func TestCheck(t *testing.T) {
	lock := lockOf(t, newRelease())

	tests := []struct {
		name   string
		change func(r *release)
		want   []where
	}{
		{name: "unchanged", change: func(*release) {}, want: []where{}},
		{
			name:   "skill description changed, no bump",
			change: func(r *release) { r.public[0].Skill.Description = "Finds an invoice by number." },
			want: []where{
				{card.KindSkillChanged, "lookup-invoice", "description"},
				{card.KindVersionNotBumped, "", "agent.version"},
			},
		},
		{
			name: "skill description changed, bumped",
			change: func(r *release) {
				r.public[0].Skill.Description = "Finds an invoice by number."
				r.cfg.Agent.Version = "1.4.1"
			},
			want: []where{{card.KindSkillChanged, "lookup-invoice", "description"}},
		},
		{
			name:   "skill added, no bump",
			change: func(r *release) { r.public = append(r.public, listOverdue()) },
			want: []where{
				{card.KindSkillAdded, "list-overdue", ""},
				{card.KindVersionNotBumped, "", "agent.version"},
			},
		},
		{
			name: "skill added, bumped",
			change: func(r *release) {
				r.public = append(r.public, listOverdue())
				r.cfg.Agent.Version = "1.5.0"
			},
			want: []where{{card.KindSkillAdded, "list-overdue", ""}},
		},
		{
			name: "skill removed, bumped",
			change: func(r *release) {
				r.public = nil
				r.cfg.Agent.Version = "2.0.0"
			},
			want: []where{{card.KindSkillRemoved, "lookup-invoice", ""}},
		},
		{
			name: "modes changed",
			change: func(r *release) {
				r.public[0].Skill.OutputModes = []string{"application/json", "text/csv"}
				r.public[0].Skill.Tags = []string{"finance"}
				r.cfg.Agent.Version = "1.4.1"
			},
			want: []where{
				{card.KindSkillChanged, "lookup-invoice", "tags"},
				{card.KindModesChanged, "lookup-invoice", "outputModes"},
			},
		},
		{
			name:   "card field changed",
			change: func(r *release) { r.cfg.Agent.Streaming = ptr(false); r.cfg.Agent.Provider.URL = "https://example.org" },
			want: []where{
				{card.KindCardChanged, "", "capabilities.streaming"},
				{card.KindCardChanged, "", "provider.url"},
			},
		},
		{
			name:   "base version bumped alone",
			change: func(r *release) { r.cfg.Agent.Version = "1.4.1" },
			want:   []where{{card.KindCardChanged, "", "version"}},
		},
		{
			name: "leaked extended description",
			change: func(r *release) {
				r.public[0].Skill.Description = "Finds an invoice; it then matches an invoice to its purchase order for you."
				r.cfg.Agent.Version = "1.4.1"
			},
			want: []where{
				{card.KindSkillChanged, "lookup-invoice", "description"},
				{card.KindLeak, "reconcile-invoice", "skills[lookup-invoice].description"},
			},
		},
		{
			name:   "leaked id",
			change: func(r *release) { r.cfg.Agent.Description = "Partners may ask for reconcile-invoice." },
			want: []where{
				{card.KindCardChanged, "", "description"},
				{card.KindLeak, "reconcile-invoice", "description"},
			},
		},
		{
			name: "leaked internal example and preview name",
			change: func(r *release) {
				r.public[0].Skill.Examples = []string{"Forecast cash flow for May", "Export the audit trail"}
				r.cfg.Agent.Version = "1.4.1"
			},
			want: []where{
				{card.KindSkillChanged, "lookup-invoice", "examples"},
				{card.KindLeak, "audit-trail", "skills[lookup-invoice].examples[1]"},
				{card.KindLeak, "forecast-cashflow", "skills[lookup-invoice].examples[0]"},
			},
		},
		{
			name: "not leaks: similar id, short words, fewer than six shared words",
			change: func(r *release) {
				r.public[0].Skill.Description = "Finds an invoice (not reconcile-invoice-v2, nor reconcile invoice); matches an invoice to its order."
				r.cfg.Agent.Version = "1.4.1"
			},
			want: []where{{card.KindSkillChanged, "lookup-invoice", "description"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRelease()
			tt.change(&r)
			require.Equal(t, tt.want, wheres(check(t, lock, r)))
		})
	}
}

func TestCheckFindingDetails(t *testing.T) {
	lock := lockOf(t, newRelease())
	r := newRelease()
	r.public[0].Skill.Description = "Finds an invoice; it then matches an invoice to its purchase order for you."
	r.public[0].Skill.OutputModes = []string{"text/csv"}
	fs := check(t, lock, r)

	require.Equal(t, card.Finding{
		Kind: card.KindSkillChanged, Skill: "lookup-invoice", Field: "description",
		Old:     "Finds an invoice by its number and returns its status, amounts and due date.",
		New:     "Finds an invoice; it then matches an invoice to its purchase order for you.",
		Message: "the description of skill lookup-invoice changed",
	}, fs[0])
	require.Equal(t, `["application/json"]`, fs[1].Old)
	require.Equal(t, `["text/csv"]`, fs[1].New)
	require.Contains(t, fs[1].Message, "new id")
	require.Equal(t, card.Finding{
		Kind: card.KindVersionNotBumped, Field: "agent.version",
		Message: "the skill list changed but agent.version is still 1.4.0; bump it",
	}, fs[2])
	require.Equal(t, card.KindLeak, fs[3].Kind)
	require.Equal(t, "matches an invoice to its purchase", fs[3].New)
	require.Contains(t, fs[3].Message, "extended capability reconcile-invoice")
}

func TestLockRefusesLeak(t *testing.T) {
	r := newRelease()
	r.public[0].Skill.Examples = []string{"Reconcile invoice INV-20931 against its PO."}
	_, err := card.Lock(card.Build(r.cfg, r.public, card.Options{}), r.cfg, r.hidden)
	var le *card.LeakError
	require.True(t, errors.As(err, &le), "error %v", err)
	require.Equal(t, []where{{card.KindLeak, "reconcile-invoice", "skills[lookup-invoice].examples[0]"}}, wheres(le.Findings))
	require.ErrorContains(t, err, "reconcile-invoice")
}

func TestCheckBadLock(t *testing.T) {
	r := newRelease()
	public := card.Build(r.cfg, r.public, card.Options{})
	tests := []struct {
		name, lock, wantErr string
	}{
		{"not JSON", `{`, "read card lock"},
		{"no baseVersion", `{"card": {}}`, `"baseVersion" and "card" are required`},
		{"no card", `{"baseVersion": "1.0.0"}`, `"baseVersion" and "card" are required`},
		{"card not an object", `{"baseVersion": "1.0.0", "card": []}`, "card is not a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := card.Check([]byte(tt.lock), public, r.cfg, r.hidden)
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestFormatFindingsGolden(t *testing.T) {
	lock := lockOf(t, newRelease())
	r := newRelease()
	r.public[0].Skill.Description = "Finds an invoice; it then matches an invoice to its purchase order for you."
	r.public[0].Skill.OutputModes = []string{"text/csv"}
	r.public = append(r.public, listOverdue())
	r.cfg.Agent.Streaming = ptr(false)

	var buf bytes.Buffer
	card.FormatFindings(&buf, check(t, lock, r))
	requireGolden(t, "findings.golden.txt", buf.Bytes(), false)

	buf.Reset()
	card.FormatFindings(&buf, nil)
	require.Equal(t, "card check: the public card matches the lock and leaks nothing\n", buf.String())
}

func listOverdue() manifest.Capability {
	return manifest.Capability{
		ID: "list-overdue", State: manifest.StateGA, Visibility: manifest.VisibilityPublic,
		Skill: manifest.Skill{
			Name:        "List overdue invoices",
			Description: "Lists invoices past their due date.",
			Tags:        []string{"finance", "invoices"},
		},
		Tenants: manifest.Tenants{All: true}, Handler: "invoices.overdue",
	}
}

func TestHidden(t *testing.T) {
	publicPreview := lookupInvoice()
	publicPreview.ID, publicPreview.State = "lookup-preview", manifest.StatePreview
	removedExtended := reconcileInvoice()
	removedExtended.ID, removedExtended.State = "reconcile-old", manifest.StateRemoved
	all := []manifest.Capability{
		lookupInvoice(), deprecated(lookupInvoice(), ""), reconcileInvoice(), forecastCashflow(), auditTrail(),
		publicPreview, removedExtended, oldExport(),
	}
	ids := []string{}
	for _, m := range card.Hidden(all) {
		ids = append(ids, m.ID)
	}
	require.Equal(t, []string{"reconcile-invoice", "forecast-cashflow", "audit-trail", "lookup-preview"}, ids)
}
