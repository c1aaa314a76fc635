package access

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/policy/compile"
	"github.com/capgate/capgate/policy/engine"
)

// The writers below print to a bufio.Writer: its first error sticks and
// Flush returns it, so the prints' own results are not checked.

// WriteText writes the matrix as text: the classes, a grid of levels
// (rows: classes, columns: capabilities) and the deciding rule of every
// cell.
func WriteText(w io.Writer, m *Matrix) error {
	bw := bufio.NewWriter(w)
	for _, l := range m.Provenance.Lines() {
		_, _ = fmt.Fprintln(bw, l)
	}
	_, _ = fmt.Fprintf(bw, "policy revision: %s\n", m.Revision)
	writeAnswer(bw, m)
	_, _ = fmt.Fprintln(bw, "\ncaller classes:")
	writeClasses(bw, m.Classes)
	_, _ = fmt.Fprintln(bw, "\ncapabilities:")
	tw := tabwriter.NewWriter(bw, 0, 4, 2, ' ', 0)
	for _, c := range m.Capabilities {
		_, _ = fmt.Fprintf(tw, "  %s\t%s\t%s\towner %s\trouting %s\n", c.ID, c.Visibility, c.State, orNone(c.Owner), c.RoutingMode())
	}
	_ = tw.Flush()
	_, _ = fmt.Fprintf(bw, "\nmatrix (%s):\n", Legend)
	tw = tabwriter.NewWriter(bw, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprint(tw, "  class")
	for _, c := range m.Capabilities {
		_, _ = fmt.Fprintf(tw, "\t%s", c.ID)
	}
	_, _ = fmt.Fprintln(tw)
	for i, class := range m.Classes {
		_, _ = fmt.Fprintf(tw, "  %s", class.Name)
		for j := range m.Capabilities {
			_, _ = fmt.Fprintf(tw, "\t%s", m.Cell(i, j).Level())
		}
		_, _ = fmt.Fprintln(tw)
	}
	_ = tw.Flush()
	_, _ = fmt.Fprintln(bw, "\ndeciding rules:")
	for i, class := range m.Classes {
		_, _ = fmt.Fprintf(bw, "  %s\n", class.Name)
		tw = tabwriter.NewWriter(bw, 0, 4, 2, ' ', 0)
		for j, c := range m.Capabilities {
			cell := m.Cell(i, j)
			_, _ = fmt.Fprintf(tw, "    %s\t%s\t%s\n", c.ID, cell.Level(), cell.Rule())
		}
		_ = tw.Flush()
	}
	writeClassQuotas(bw, m, "  ", "    ")
	return bw.Flush()
}

// writeClassQuotas lists, per class, the quotas its calls are counted
// against (nothing when the deployment has no quotas).
func writeClassQuotas(w io.Writer, m *Matrix, indent, item string) {
	if !m.HasQuotas() {
		return
	}
	_, _ = fmt.Fprintln(w, "\nquotas (per class, over the capabilities it may run):")
	for i, class := range m.Classes {
		qs := m.ClassQuotas(i)
		if len(qs) == 0 {
			_, _ = fmt.Fprintf(w, "%s%s: none\n", indent, class.Name)
			continue
		}
		_, _ = fmt.Fprintf(w, "%s%s:\n", indent, class.Name)
		for _, q := range qs {
			_, _ = fmt.Fprintf(w, "%s%s\n%s  on %s; %s\n", item, q.Line(), item, strings.Join(q.Capabilities, ", "), QuotaWhy(q.Quota, m.Plans))
		}
	}
}

// writeAnswer answers the question of a matrix of one capability (who can
// run it, who can only see it) or of one class (what it can run, what it
// can only see).
func writeAnswer(w io.Writer, m *Matrix) {
	names := func(ss []string) string {
		if len(ss) == 0 {
			return "nobody"
		}
		return strings.Join(ss, ", ")
	}
	// split sorts the n cells of one row or column into runnable and
	// only visible, by name.
	split := func(n int, cell func(k int) Cell, name func(k int) string) (run, see string) {
		var r, s []string
		for k := range n {
			switch c := cell(k); {
			case c.Entitled:
				r = append(r, name(k))
			case c.Visible:
				s = append(s, name(k))
			}
		}
		return names(r), names(s)
	}
	switch {
	case len(m.Capabilities) == 1:
		run, see := split(len(m.Classes), func(i int) Cell { return m.Cell(i, 0) }, func(i int) string { return m.Classes[i].Name })
		id := m.Capabilities[0].ID
		_, _ = fmt.Fprintf(w, "\nwho can run %s: %s\nwho can see %s but not run it: %s\n", id, run, id, see)
	case len(m.Classes) == 1:
		run, see := split(len(m.Capabilities), func(j int) Cell { return m.Cell(0, j) }, func(j int) string { return m.Capabilities[j].ID })
		name := m.Classes[0].Name
		_, _ = fmt.Fprintf(w, "\nwhat %s can run: %s\nwhat %s can see but not run: %s\n", name, run, name, see)
	}
}

func writeClasses(w io.Writer, classes []Class) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range classes {
		_, _ = fmt.Fprintf(tw, "  %s\t%s\t%s\n", c.Name, c.Who(), c.Description)
	}
	_ = tw.Flush()
}

// Legend says what each level means, in the words every report uses.
const Legend = "none: neither in the card nor runnable; visible: in the card, not runnable; " +
	"entitled: in the card and runnable; entitled-hidden: runnable, never in a card (internal)"

// WriteMarkdown writes the matrix as a Markdown table, each cell its level
// and deciding rule.
func WriteMarkdown(w io.Writer, m *Matrix) error {
	bw := bufio.NewWriter(w)
	_, _ = fmt.Fprintf(bw, "### Access matrix (policy revision `%s`)\n\n", m.Revision)
	for _, l := range m.Provenance.Lines() {
		_, _ = fmt.Fprintf(bw, "%s  \n", mdCell(l))
	}
	_, _ = fmt.Fprintf(bw, "Levels: %s.\n\n", Legend)
	_, _ = fmt.Fprintln(bw, "| class | caller |")
	_, _ = fmt.Fprintln(bw, "|---|---|")
	for _, c := range m.Classes {
		_, _ = fmt.Fprintf(bw, "| %s | %s |\n", mdCell(c.Name), mdCell(c.Who()+": "+c.Description))
	}
	_, _ = fmt.Fprint(bw, "\n| class |")
	for _, c := range m.Capabilities {
		_, _ = fmt.Fprintf(bw, " %s<br>%s, %s<br>owner %s |", mdCell(c.ID), c.Visibility, c.State, mdCell(orNone(c.Owner)))
	}
	_, _ = fmt.Fprint(bw, "\n|---|")
	_, _ = fmt.Fprint(bw, strings.Repeat("---|", len(m.Capabilities)))
	_, _ = fmt.Fprintln(bw)
	for i, class := range m.Classes {
		_, _ = fmt.Fprintf(bw, "| %s |", mdCell(class.Name))
		for j := range m.Capabilities {
			cell := m.Cell(i, j)
			_, _ = fmt.Fprintf(bw, " **%s**<br>%s |", cell.Level(), mdCode(cell.Rule()))
		}
		_, _ = fmt.Fprintln(bw)
	}
	if m.HasQuotas() {
		_, _ = fmt.Fprintln(bw, "\n| class | quota | counts | why |")
		_, _ = fmt.Fprintln(bw, "|---|---|---|---|")
		for i, class := range m.Classes {
			for _, q := range m.ClassQuotas(i) {
				_, _ = fmt.Fprintf(bw, "| %s | %s | %s | %s |\n", mdCell(class.Name), mdCell(q.Line()),
					mdCell(strings.Join(q.Capabilities, ", ")), mdCell(QuotaWhy(q.Quota, m.Plans)))
			}
		}
	}
	return bw.Flush()
}

// mdCell makes text safe in a Markdown table cell with backslash escapes
// (which Markdown renders as the character itself), not HTML entities.
func mdCell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "\r", " ", "<", `\<`, ">", `\>`, "*", `\*`, "_", `\_`, "`", "\\`").Replace(s)
}

func mdCode(s string) string {
	if s == "" {
		return ""
	}
	// Entities are not decoded in a code span: escape only what breaks
	// the table or the span.
	return "`" + strings.NewReplacer("|", `\|`, "\n", " ", "\r", " ", "`", "'").Replace(s) + "`"
}

type callerJSON struct {
	Authenticated bool     `json:"authenticated"`
	Subject       string   `json:"subject"`
	Tenant        string   `json:"tenant"`
	Scopes        []string `json:"scopes"`
}

type classJSON struct {
	Name        string     `json:"name"`
	Description string     `json:"description"`
	Caller      callerJSON `json:"caller"`
}

type reasonsJSON struct {
	Visible  []engine.Reason `json:"visible"`
	Entitled []engine.Reason `json:"entitled"`
}

type cellJSON struct {
	Capability string      `json:"capability"`
	Level      Level       `json:"level"`
	Visible    bool        `json:"visible"`
	Entitled   bool        `json:"entitled"`
	Rule       string      `json:"rule"`
	Reasons    reasonsJSON `json:"reasons"`
	Quotas     []QuotaJSON `json:"quotas,omitempty"`
}

type rowJSON struct {
	Class string     `json:"class"`
	Cells []cellJSON `json:"cells"`
}

func classesJSON(cs []Class) []classJSON {
	out := make([]classJSON, len(cs))
	for i, c := range cs {
		out[i] = classJSON{Name: c.Name, Description: c.Description, Caller: callerJSON{
			Authenticated: c.Caller.Authenticated, Subject: c.Caller.Subject, Tenant: c.Caller.Tenant,
			Scopes: append([]string{}, c.Caller.Scopes...),
		}}
	}
	return out
}

func toCellJSON(id string, c Cell, plans []compile.Plan) cellJSON {
	return cellJSON{Capability: id, Level: c.Level(), Visible: c.Visible, Entitled: c.Entitled, Rule: c.Rule(),
		Reasons: reasonsJSON{Visible: nonNil(c.VisibleReasons), Entitled: nonNil(c.EntitledReasons)},
		Quotas:  QuotasJSON(c.Quotas, plans)}
}

func nonNil(rs []engine.Reason) []engine.Reason {
	if rs == nil {
		return []engine.Reason{}
	}
	return rs
}

// WriteJSON writes the matrix as JSON: revision, classes, capabilities and
// one row of cells per class, each with its level, deciding rule and both
// reason lists.
func WriteJSON(w io.Writer, m *Matrix) error {
	out := struct {
		Provenance   *provenanceJSON `json:"provenance,omitempty"`
		Revision     string          `json:"revision"`
		Classes      []classJSON     `json:"classes"`
		Capabilities []Capability    `json:"capabilities"`
		Rows         []rowJSON       `json:"rows"`
	}{Provenance: m.Provenance.json(), Revision: m.Revision, Classes: classesJSON(m.Classes), Capabilities: m.Capabilities, Rows: make([]rowJSON, len(m.Classes))}
	for i, class := range m.Classes {
		row := rowJSON{Class: class.Name, Cells: make([]cellJSON, len(m.Capabilities))}
		for j, c := range m.Capabilities {
			row.Cells[j] = toCellJSON(c.ID, m.Cell(i, j), m.Plans)
		}
		out.Rows[i] = row
	}
	return writeJSON(w, out)
}

func writeJSON(w io.Writer, v any) error {
	if err := json.MarshalWrite(w, v, jsontext.WithIndent("  "), json.Deterministic(true)); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// WriteDiffText writes what changed: the capabilities' and the config's
// fields, then the gained cells grouped by capability, riskiest first,
// each with its causes and the rules on both sides, then the lost cells.
func WriteDiffText(w io.Writer, d *Diff) error {
	bw := bufio.NewWriter(w)
	for _, l := range d.Provenance.Lines() {
		_, _ = fmt.Fprintln(bw, l)
	}
	_, _ = fmt.Fprintf(bw, "base: %s\nhead: %s\n", sideName(d.BaseName, d.BaseRevision), sideName(d.HeadName, d.HeadRevision))
	if d.Empty() {
		_, _ = fmt.Fprintln(bw, "\nno change in access")
		return bw.Flush()
	}
	_, _ = fmt.Fprintf(bw, "\n%s\n", d.counts())
	if len(d.Capabilities) > 0 || len(d.Config) > 0 {
		_, _ = fmt.Fprintln(bw, "\nwhat changed:")
		tw := tabwriter.NewWriter(bw, 0, 4, 2, ' ', 0)
		for _, c := range d.Capabilities {
			_, _ = fmt.Fprintf(tw, "  %s\t%s\t%s\n", c.ID, c.Kind, c.summary())
		}
		for _, c := range d.Config {
			_, _ = fmt.Fprintf(tw, "  config\tchanged\t%s\n", c)
		}
		_ = tw.Flush()
	}
	if len(d.Gained) > 0 {
		_, _ = fmt.Fprintln(bw, "\ngained, by capability, riskiest first:")
		for _, g := range d.GainGroups() {
			_, _ = fmt.Fprintf(bw, "\n  %s\n", g.heading())
			for _, c := range g.Causes {
				_, _ = fmt.Fprintf(bw, "    caused by %s\n", c.Cause())
			}
			for _, c := range g.Gains {
				_, _ = fmt.Fprintf(bw, "    %s: %s → %s (%s)\n", c.Class, c.Base.Level(), c.Head.Level(), c.Risk)
				_, _ = fmt.Fprintf(bw, "        base: %s\n        head: %s\n", c.Base.Rule(), c.Head.Rule())
			}
		}
	}
	if len(d.Guards) > 0 {
		_, _ = fmt.Fprintln(bw, "\nloosened guards (how a skill runs), riskiest first:")
		for _, g := range d.Guards {
			_, _ = fmt.Fprintf(bw, "  %s\n", g)
			_, _ = fmt.Fprintf(bw, "      entitled in head: %s\n", orNone(strings.Join(g.Callers, ", ")))
		}
	}
	if len(d.Lost) > 0 {
		_, _ = fmt.Fprintln(bw, "\nlost:")
		for _, c := range d.Lost {
			_, _ = fmt.Fprintf(bw, "  %s\n", c.lossLine())
			_, _ = fmt.Fprintf(bw, "      base: %s\n      head: %s\n", c.Base.Rule(), c.Head.Rule())
		}
	}
	return bw.Flush()
}

func (d *Diff) counts() string {
	return fmt.Sprintf("%d gained, %d lost, %s%d %s and %d %s changed", len(d.Gained), len(d.Lost), d.guardCount(),
		len(d.Capabilities), plural(len(d.Capabilities), "capability", "capabilities"), len(d.Config), plural(len(d.Config), "config field", "config fields"))
}

// guardCount is "2 guards loosened, " ("" when none).
func (d *Diff) guardCount() string {
	if len(d.Guards) == 0 {
		return ""
	}
	return fmt.Sprintf("%d %s loosened, ", len(d.Guards), plural(len(d.Guards), "guard", "guards"))
}

// heading is "purge-invoice-cache (internal, ga; owner finance-platform-team):
// 4 classes can now run it, 1 can now see it".
func (g GainGroup) heading() string {
	s := g.Capability
	var about []string
	if g.Change != nil && g.Change.Head != nil {
		about = append(about, g.Change.Head.Visibility+", "+g.Change.Head.State)
	} else if len(g.Gains) > 0 {
		about = append(about, g.Gains[0].Risk.Visibility)
	}
	if g.Owner != "" {
		about = append(about, "owner "+g.Owner)
	}
	if len(about) > 0 {
		s += " (" + strings.Join(about, "; ") + ")"
	}
	runs, sees := g.Runs(), len(g.Gains)-g.Runs()
	var what []string
	if runs > 0 {
		what = append(what, fmt.Sprintf("%d %s can now run it", runs, plural(runs, "class", "classes")))
	}
	if sees > 0 {
		what = append(what, fmt.Sprintf("%d %s can now see it", sees, plural(sees, "class", "classes")))
	}
	return s + ": " + strings.Join(what, ", ")
}

// lossLine is a lost cell in one line, as the text, Markdown and HTML
// reports say it: "tenant:acme × reconcile-invoice: entitled → none,
// caused by …".
func (c CellChange) lossLine() string {
	return fmt.Sprintf("%s × %s: %s → %s, caused by %s", c.Class, c.Capability, c.Base.Level(), c.Head.Level(), causes(c.Causes))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// causes joins the causes of a cell: "a; b", or "no field change found"
// (a callers file read with changed claim names on a bundle side).
func causes(cs []FieldChange) string {
	if len(cs) == 0 {
		return "no field change found"
	}
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = c.Cause()
	}
	return strings.Join(parts, "; ")
}

func sideName(name, rev string) string {
	if name == "" {
		return "revision " + rev
	}
	return name + " (revision " + rev + ")"
}

func (c CapabilityChange) summary() string {
	switch c.Kind {
	case Added:
		return c.Head.Visibility + ", " + c.Head.State
	case Removed:
		return "was " + c.Base.Visibility + ", " + c.Base.State
	}
	var parts []string
	for _, f := range c.Fields {
		parts = append(parts, f.String())
	}
	if len(c.Fields) == 0 { // no facts: what the matrices hold
		if c.Base.State != c.Head.State {
			parts = append(parts, "state "+c.Base.State+" → "+c.Head.State)
		}
		if c.Base.Visibility != c.Head.Visibility {
			parts = append(parts, "visibility "+c.Base.Visibility+" → "+c.Head.Visibility)
		}
		if c.Base.Owner != c.Head.Owner {
			parts = append(parts, "owner "+orNone(c.Base.Owner)+" → "+orNone(c.Head.Owner))
		}
	}
	return strings.Join(parts, ", ")
}

// WriteDiffMarkdown writes a summary fit for a pull-request comment: what
// changed, the gains by capability, riskiest first, with their causes,
// then the losses.
func WriteDiffMarkdown(w io.Writer, d *Diff) error {
	bw := bufio.NewWriter(w)
	_, _ = fmt.Fprintln(bw, "### capgate access review")
	_, _ = fmt.Fprintln(bw)
	for _, l := range d.Provenance.Lines() {
		_, _ = fmt.Fprintf(bw, "%s  \n", mdCell(l))
	}
	_, _ = fmt.Fprintf(bw, "base %s → head %s\n\n", mdCode(sideName(d.BaseName, d.BaseRevision)), mdCode(sideName(d.HeadName, d.HeadRevision)))
	if d.Empty() {
		_, _ = fmt.Fprintln(bw, "No change in who can see or run what.")
		return bw.Flush()
	}
	line := strings.Replace(d.counts(), " gained", " gained**", 1)
	if g := d.guardCount(); g != "" {
		line = strings.Replace(line, g, "**"+strings.TrimSuffix(g, ", ")+"**, ", 1)
	}
	_, _ = fmt.Fprintf(bw, "**%s.\n", line)
	if len(d.Capabilities) > 0 || len(d.Config) > 0 {
		_, _ = fmt.Fprintln(bw, "\n#### What changed\n\n| where | change |\n|---|---|")
		for _, c := range d.Capabilities {
			_, _ = fmt.Fprintf(bw, "| %s | %s: %s |\n", mdCode(c.ID), c.Kind, mdCode(c.summary()))
		}
		for _, c := range d.Config {
			_, _ = fmt.Fprintf(bw, "| config | %s |\n", mdCode(c.String()))
		}
	}
	if len(d.Gained) > 0 {
		_, _ = fmt.Fprintln(bw, "\n#### Gained (a caller can now see or run something it could not), riskiest first")
		for _, g := range d.GainGroups() {
			_, _ = fmt.Fprintf(bw, "\n**%s**\n\n", mdCell(g.heading()))
			for _, c := range g.Causes {
				_, _ = fmt.Fprintf(bw, "- caused by %s\n", mdCode(c.Cause()))
			}
			_, _ = fmt.Fprintln(bw, "\n| class | risk | base | head |\n|---|---|---|---|")
			for _, c := range g.Gains {
				_, _ = fmt.Fprintf(bw, "| %s | %s | %s %s | **%s** %s |\n", mdCell(c.Class), mdCell(c.Risk.String()),
					c.Base.Level(), mdCode(c.Base.Rule()), c.Head.Level(), mdCode(c.Head.Rule()))
			}
		}
	}
	if len(d.Guards) > 0 {
		_, _ = fmt.Fprintln(bw, "\n#### Loosened guards (how a skill runs), riskiest first\n\n| capability | change | effect | risk | entitled in head |\n|---|---|---|---|---|")
		for _, g := range d.Guards {
			_, _ = fmt.Fprintf(bw, "| %s | %s | %s | %s | %s |\n", mdCode(g.Capability), mdCode(g.Cause.String()), mdCell(g.Effect), mdCell(g.Risk.String()), mdCell(orNone(strings.Join(g.Callers, ", "))))
		}
	}
	if len(d.Lost) > 0 {
		_, _ = fmt.Fprintln(bw, "\n#### Lost\n\n| class | capability | base | head | caused by |\n|---|---|---|---|---|")
		for _, c := range d.Lost {
			_, _ = fmt.Fprintf(bw, "| %s | %s | %s %s | **%s** %s | %s |\n", mdCell(c.Class), mdCode(c.Capability),
				c.Base.Level(), mdCode(c.Base.Rule()), c.Head.Level(), mdCode(c.Head.Rule()), mdCode(causes(c.Causes)))
		}
	}
	return bw.Flush()
}

type capChangeJSON struct {
	Kind   ChangeKind  `json:"kind"`
	ID     string      `json:"id"`
	Base   *Capability `json:"base"`
	Head   *Capability `json:"head"`
	Fields []fieldJSON `json:"fields"`
}

type cellChangeJSON struct {
	Class      string      `json:"class"`
	Capability string      `json:"capability"`
	Base       cellJSON    `json:"base"`
	Head       cellJSON    `json:"head"`
	Causes     []fieldJSON `json:"causes"`
	Risk       *Risk       `json:"risk,omitempty"`
}

type gainGroupJSON struct {
	Capability string           `json:"capability"`
	Owner      string           `json:"owner,omitempty"`
	Summary    string           `json:"summary"`
	Causes     []fieldJSON      `json:"causes"`
	Gains      []cellChangeJSON `json:"gains"`
}

type provenanceJSON struct {
	GeneratedAt string `json:"generated_at"`
	Version     string `json:"capgate_version"`
	Commit      string `json:"commit"`
	Config      string `json:"config"`
}

func (p Provenance) json() *provenanceJSON {
	if p == (Provenance{}) {
		return nil
	}
	return &provenanceJSON{p.GeneratedAt.UTC().Format(time.RFC3339), p.Version, p.Commit, p.Config}
}

// fieldJSON is a FieldChange with its sentence ("purge-invoice-cache:
// requires_scopes [ops.admin] → []").
type fieldJSON struct {
	Capability string `json:"capability,omitempty"`
	Field      string `json:"field"`
	Base       string `json:"base"`
	Head       string `json:"head"`
	Summary    string `json:"summary"`
}

func nonNilFields(fs []FieldChange) []fieldJSON {
	out := make([]fieldJSON, len(fs))
	for i, f := range fs {
		out[i] = fieldJSON{f.Capability, f.Field, f.Base, f.Head, f.Cause()}
	}
	return out
}

// WriteDiffJSON writes the diff as JSON: the changed fields, the gained
// cells in risk order (each with its causes and risk), the same grouped
// by capability (gained_by_capability), and the lost cells.
func WriteDiffJSON(w io.Writer, d *Diff) error {
	change := func(c CellChange, gained bool) cellChangeJSON {
		out := cellChangeJSON{Class: c.Class, Capability: c.Capability, Base: toCellJSON(c.Capability, c.Base, nil), Head: toCellJSON(c.Capability, c.Head, nil), Causes: nonNilFields(c.Causes)}
		if gained {
			r := c.Risk
			out.Risk = &r
		}
		return out
	}
	changes := func(cs []CellChange, gained bool) []cellChangeJSON {
		out := make([]cellChangeJSON, len(cs))
		for i, c := range cs {
			out[i] = change(c, gained)
		}
		return out
	}
	caps := make([]capChangeJSON, len(d.Capabilities))
	for i, c := range d.Capabilities {
		caps[i] = capChangeJSON{Kind: c.Kind, ID: c.ID, Base: c.Base, Head: c.Head, Fields: nonNilFields(c.Fields)}
	}
	groups := []gainGroupJSON{}
	for _, g := range d.GainGroups() {
		groups = append(groups, gainGroupJSON{Capability: g.Capability, Owner: g.Owner, Summary: g.heading(), Causes: nonNilFields(g.Causes), Gains: changes(g.Gains, true)})
	}
	return writeJSON(w, struct {
		Provenance   *provenanceJSON  `json:"provenance,omitempty"`
		Base         string           `json:"base"`
		Head         string           `json:"head"`
		BaseRevision string           `json:"base_revision"`
		HeadRevision string           `json:"head_revision"`
		Classes      []classJSON      `json:"classes"`
		Capabilities []capChangeJSON  `json:"capabilities"`
		Config       []fieldJSON      `json:"config"`
		Gained       []cellChangeJSON `json:"gained"`
		GainGroups   []gainGroupJSON  `json:"gained_by_capability"`
		Lost         []cellChangeJSON `json:"lost"`
		Guards       []guardJSON      `json:"loosened_guards"`
	}{d.Provenance.json(), d.BaseName, d.HeadName, d.BaseRevision, d.HeadRevision, classesJSON(d.Classes), caps, nonNilFields(d.Config), changes(d.Gained, true), groups, changes(d.Lost, false), guardsJSON(d.Guards)})
}

type guardJSON struct {
	Capability  string    `json:"capability"`
	Kind        GuardKind `json:"kind"`
	Destructive bool      `json:"destructive"`
	Cause       fieldJSON `json:"cause"`
	Effect      string    `json:"effect"`
	Risk        Risk      `json:"risk"`
	Callers     []string  `json:"entitled_in_head"`
	Summary     string    `json:"summary"`
}

func guardsJSON(gs []Guard) []guardJSON {
	out := make([]guardJSON, len(gs))
	for i, g := range gs {
		out[i] = guardJSON{g.Capability, g.Kind, g.Destructive, nonNilFields([]FieldChange{g.Cause})[0], g.Effect, g.Risk, append([]string{}, g.Callers...), g.String()}
	}
	return out
}
