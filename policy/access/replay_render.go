package access

import (
	"bufio"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"strings"
	"time"
)

// summary is the report's first lines: what was read and replayed.
func (r *ReplayReport) summary() []string {
	lines := []string{
		fmt.Sprintf("read %s; replayed %s (%s, each evaluated once); %s without a replayable question; %s outside the time window",
			count(r.Events, "decision event", "decision events"), count(r.Questions, "recorded question", "recorded questions"),
			count(r.Distinct, "distinct question", "distinct questions"), count(r.Skipped, "event", "events"),
			count(r.OutsideWindow, "question", "questions")),
		"head revision: " + r.HeadRevision,
	}
	if r.BaseRevision != "" {
		n := 0
		for _, f := range r.Unreproduced {
			n += f.Count
		}
		lines = append(lines, fmt.Sprintf("base revision: %s (%s not reproduced by it, left out of the flips)", r.BaseRevision, count(n, "question", "questions")))
	}
	if r.Counted > 0 {
		lines = append(lines, fmt.Sprintf("%s refused by a quota: not reproduced (a replay holds no counters, and the answer depends on traffic the log does not hold); their entitlement was replayed",
			count(r.Counted, "event was", "events were")))
	}
	if len(r.Flips) == 0 {
		return append(lines, fmt.Sprintf("no recorded decision changes (%d unchanged)", r.Unchanged))
	}
	return append(lines, fmt.Sprintf("%d allowed → refused, %d refused → allowed (%d unchanged)", r.Losses(), r.Gains(), r.Unchanged))
}

// count is "1 event", "2 events".
func count(n int, one, many string) string { return fmt.Sprintf("%d %s", n, plural(n, one, many)) }

func (f Flip) seen() string {
	return stamp(f.First) + " … " + stamp(f.Last)
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func (c Caller) scopes() string { return "[" + strings.Join(c.Scopes, " ") + "]" }

func rulesText(rs []string) string {
	if len(rs) == 0 {
		return "(none)"
	}
	return strings.Join(rs, ", ")
}

// WriteReplayText writes the flips, grouped by change, then the counts by
// capability and by caller, then the questions the base did not reproduce.
func WriteReplayText(w io.Writer, r *ReplayReport) error {
	bw := bufio.NewWriter(w)
	for _, l := range r.Provenance.Lines() {
		_, _ = fmt.Fprintln(bw, l)
	}
	for _, l := range r.summary() {
		_, _ = fmt.Fprintln(bw, l)
	}
	flips := func(fs []Flip, before, after string) {
		for _, f := range fs {
			_, _ = fmt.Fprintf(bw, "  %s: %s %s by %s %s ×%d (%s)\n      %s: %s; %s: %s\n", f.Change, f.Operation, f.Capability,
				f.Caller, f.Caller.scopes(), f.Count, f.seen(), before, rulesText(f.Before), after, rulesText(f.After))
		}
	}
	if len(r.Flips) > 0 {
		_, _ = fmt.Fprintln(bw, "\nflipped decisions:")
		flips(r.Flips, "recorded", "head")
		_, _ = fmt.Fprintln(bw, "\nby capability:")
		for _, c := range r.ByCapability {
			_, _ = fmt.Fprintf(bw, "  %s: %d allowed → refused, %d refused → allowed, %s\n", c.Capability, c.Losses, c.Gains, count(c.Callers, "caller", "callers"))
		}
		_, _ = fmt.Fprintln(bw, "\nby caller:")
		for _, c := range r.ByCaller {
			_, _ = fmt.Fprintf(bw, "  %s %s: %d allowed → refused, %d refused → allowed, %s\n", c.Caller, c.Caller.scopes(), c.Losses, c.Gains, count(c.Capabilities, "capability", "capabilities"))
		}
	}
	if len(r.Unreproduced) > 0 {
		_, _ = fmt.Fprintln(bw, "\nnot reproduced by the base (served by another revision):")
		flips(r.Unreproduced, "recorded", "base")
	}
	return bw.Flush()
}

// WriteReplayMarkdown writes the report as Markdown tables (a pull-request
// comment).
func WriteReplayMarkdown(w io.Writer, r *ReplayReport) error {
	bw := bufio.NewWriter(w)
	_, _ = fmt.Fprintln(bw, "## Replay of recorded decisions")
	_, _ = fmt.Fprintln(bw)
	for _, l := range append(r.Provenance.Lines(), r.summary()...) {
		_, _ = fmt.Fprintf(bw, "- %s\n", mdCell(l))
	}
	table := func(title, before, after string, fs []Flip) {
		_, _ = fmt.Fprintf(bw, "\n### %s\n\n| change | capability | operation | caller | scopes | count | first seen | last seen | rules %s | rules %s |\n|---|---|---|---|---|---|---|---|---|---|\n", title, before, after)
		for _, f := range fs {
			_, _ = fmt.Fprintf(bw, "| %s | %s | %s | %s | %s | %d | %s | %s | %s | %s |\n", f.Change, mdCode(f.Capability), mdCell(f.Operation),
				mdCell(f.Caller.String()), mdCell(strings.Join(f.Caller.Scopes, " ")), f.Count, stamp(f.First), stamp(f.Last),
				mdCell(rulesText(f.Before)), mdCell(rulesText(f.After)))
		}
	}
	if len(r.Flips) > 0 {
		table("Flipped decisions", "recorded", "head", r.Flips)
		_, _ = fmt.Fprintln(bw, "\n### By capability\n\n| capability | allowed → refused | refused → allowed | callers |\n|---|---|---|---|")
		for _, c := range r.ByCapability {
			_, _ = fmt.Fprintf(bw, "| %s | %d | %d | %d |\n", mdCode(c.Capability), c.Losses, c.Gains, c.Callers)
		}
		_, _ = fmt.Fprintln(bw, "\n### By caller\n\n| caller | scopes | allowed → refused | refused → allowed | capabilities |\n|---|---|---|---|---|")
		for _, c := range r.ByCaller {
			_, _ = fmt.Fprintf(bw, "| %s | %s | %d | %d | %d |\n", mdCell(c.Caller.String()), mdCell(strings.Join(c.Caller.Scopes, " ")), c.Losses, c.Gains, c.Capabilities)
		}
	}
	if len(r.Unreproduced) > 0 {
		table("Not reproduced by the base", "recorded", "base", r.Unreproduced)
	}
	return bw.Flush()
}

type replayJSON struct {
	Provenance     *provenanceJSON   `json:"provenance,omitempty"`
	HeadRevision   string            `json:"head_revision"`
	BaseRevision   string            `json:"base_revision,omitempty"`
	Events         int               `json:"events"`
	Questions      int               `json:"questions"`
	Distinct       int               `json:"distinct_questions"`
	Skipped        int               `json:"skipped_events"`
	OutsideWindow  int               `json:"outside_window"`
	Unchanged      int               `json:"unchanged"`
	AllowedRefused int               `json:"allowed_to_refused"`
	RefusedAllowed int               `json:"refused_to_allowed"`
	Flips          []Flip            `json:"flips"`
	ByCapability   []CapabilityFlips `json:"by_capability"`
	ByCaller       []CallerFlips     `json:"by_caller"`
	Unreproduced   []Flip            `json:"unreproduced"`
	// QuotaRefusals are the events a quota refused: not reproduced.
	QuotaRefusals int `json:"quota_refusals_not_reproduced"`
}

// WriteReplayJSON writes the report as JSON.
func WriteReplayJSON(w io.Writer, r *ReplayReport) error {
	return writeJSON(w, replayJSON{
		Provenance: r.Provenance.json(), HeadRevision: r.HeadRevision, BaseRevision: r.BaseRevision,
		Events: r.Events, Questions: r.Questions, Distinct: r.Distinct, Skipped: r.Skipped, OutsideWindow: r.OutsideWindow,
		Unchanged: r.Unchanged, AllowedRefused: r.Losses(), RefusedAllowed: r.Gains(),
		Flips: orEmpty(r.Flips), ByCapability: orEmpty(r.ByCapability), ByCaller: orEmpty(r.ByCaller), Unreproduced: orEmpty(r.Unreproduced),
		QuotaRefusals: r.Counted,
	})
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

//go:embed replay.html.tmpl
var replayHTML string

var replayTmpl = template.Must(template.Must(template.New("replay").Funcs(template.FuncMap{
	"stamp": stamp,
	"rules": rulesText,
	"flipTable": func(fs []Flip, before, after string) flipTable {
		return flipTable{Flips: fs, Before: before, After: after}
	},
}).Parse(replayHTML)).New("style").Parse(reportStyle))

type flipTable struct {
	Flips         []Flip
	Before, After string
}

type replayHTMLData struct {
	Summary []string
	Report  *ReplayReport
}

// WriteReplayHTML writes the report as a self-contained HTML page in the
// access report's style.
func WriteReplayHTML(w io.Writer, r *ReplayReport) error {
	return replayTmpl.ExecuteTemplate(w, "replay", replayHTMLData{Summary: append(r.Provenance.Lines(), r.summary()...), Report: r})
}

// reportStyle is the access report's stylesheet, shared by the replay page.
var reportStyle = func() string {
	_, rest, _ := strings.Cut(reportHTML, "<style>")
	css, _, _ := strings.Cut(rest, "</style>")
	return css
}()
