package access

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/policy/engine"
)

// The writers below print to a bufio.Writer: its first error sticks and
// Flush returns it, so the prints' own results are not checked.

// WriteText writes the matrix as text: the classes, a grid of levels
// (rows: classes, columns: capabilities) and the deciding rule of every
// cell.
func WriteText(w io.Writer, m *Matrix) error {
	bw := bufio.NewWriter(w)
	_, _ = fmt.Fprintf(bw, "policy revision: %s\n\ncaller classes:\n", m.Revision)
	writeClasses(bw, m.Classes)
	_, _ = fmt.Fprintln(bw, "\ncapabilities:")
	tw := tabwriter.NewWriter(bw, 0, 4, 2, ' ', 0)
	for _, c := range m.Capabilities {
		_, _ = fmt.Fprintf(tw, "  %s\t%s\t%s\trouting %s\n", c.ID, c.Visibility, c.State, c.RoutingMode())
	}
	_ = tw.Flush()
	_, _ = fmt.Fprintln(bw, "\nmatrix (none | visible | entitled | entitled-hidden):")
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
	return bw.Flush()
}

func writeClasses(w io.Writer, classes []Class) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range classes {
		_, _ = fmt.Fprintf(tw, "  %s\t%s\t%s\n", c.Name, c.Who(), c.Description)
	}
	_ = tw.Flush()
}

// WriteMarkdown writes the matrix as a Markdown table, each cell its level
// and deciding rule.
func WriteMarkdown(w io.Writer, m *Matrix) error {
	bw := bufio.NewWriter(w)
	_, _ = fmt.Fprintf(bw, "### Access matrix (policy revision `%s`)\n\n", m.Revision)
	_, _ = fmt.Fprintln(bw, "| class | caller |")
	_, _ = fmt.Fprintln(bw, "|---|---|")
	for _, c := range m.Classes {
		_, _ = fmt.Fprintf(bw, "| %s | %s |\n", mdCell(c.Name), mdCell(c.Who()+": "+c.Description))
	}
	_, _ = fmt.Fprint(bw, "\n| class |")
	for _, c := range m.Capabilities {
		_, _ = fmt.Fprintf(bw, " %s<br>%s, %s |", mdCell(c.ID), c.Visibility, c.State)
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
	return bw.Flush()
}

// mdCell makes text safe in a Markdown table cell.
func mdCell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "\r", " ", "<", "&lt;", ">", "&gt;").Replace(s)
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

func toCellJSON(id string, c Cell) cellJSON {
	return cellJSON{Capability: id, Level: c.Level(), Visible: c.Visible, Entitled: c.Entitled, Rule: c.Rule(),
		Reasons: reasonsJSON{Visible: nonNil(c.VisibleReasons), Entitled: nonNil(c.EntitledReasons)}}
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
		Revision     string       `json:"revision"`
		Classes      []classJSON  `json:"classes"`
		Capabilities []Capability `json:"capabilities"`
		Rows         []rowJSON    `json:"rows"`
	}{Revision: m.Revision, Classes: classesJSON(m.Classes), Capabilities: m.Capabilities, Rows: make([]rowJSON, len(m.Classes))}
	for i, class := range m.Classes {
		row := rowJSON{Class: class.Name, Cells: make([]cellJSON, len(m.Capabilities))}
		for j, c := range m.Capabilities {
			row.Cells[j] = toCellJSON(c.ID, m.Cell(i, j))
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

// WriteDiffText writes what changed: capabilities, then gained and lost
// cells with the rules on both sides.
func WriteDiffText(w io.Writer, d *Diff) error {
	bw := bufio.NewWriter(w)
	_, _ = fmt.Fprintf(bw, "base: %s\nhead: %s\n", sideName(d.BaseName, d.BaseRevision), sideName(d.HeadName, d.HeadRevision))
	if d.Empty() {
		_, _ = fmt.Fprintln(bw, "\nno change in access")
		return bw.Flush()
	}
	_, _ = fmt.Fprintf(bw, "\n%d gained, %d lost, %d capabilities changed\n", len(d.Gained), len(d.Lost), len(d.Capabilities))
	if len(d.Capabilities) > 0 {
		_, _ = fmt.Fprintln(bw, "\ncapabilities:")
		tw := tabwriter.NewWriter(bw, 0, 4, 2, ' ', 0)
		for _, c := range d.Capabilities {
			_, _ = fmt.Fprintf(tw, "  %s\t%s\t%s\n", c.Kind, c.ID, c.summary())
		}
		_ = tw.Flush()
	}
	d.eachGroup("gained", "lost", func(title string, changes []CellChange) {
		_, _ = fmt.Fprintf(bw, "\n%s:\n", title)
		for _, c := range changes {
			_, _ = fmt.Fprintf(bw, "  %s × %s: %s -> %s\n", c.Class, c.Capability, c.Base.Level(), c.Head.Level())
			_, _ = fmt.Fprintf(bw, "      base: %s\n      head: %s\n", c.Base.Rule(), c.Head.Rule())
		}
	})
	return bw.Flush()
}

// eachGroup calls f with the gained, then the lost cells, under the
// given titles, skipping an empty group.
func (d *Diff) eachGroup(gained, lost string, f func(title string, changes []CellChange)) {
	if len(d.Gained) > 0 {
		f(gained, d.Gained)
	}
	if len(d.Lost) > 0 {
		f(lost, d.Lost)
	}
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
	if c.Base.State != c.Head.State {
		parts = append(parts, "state "+c.Base.State+" -> "+c.Head.State)
	}
	if c.Base.Visibility != c.Head.Visibility {
		parts = append(parts, "visibility "+c.Base.Visibility+" -> "+c.Head.Visibility)
	}
	return strings.Join(parts, ", ")
}

// WriteDiffMarkdown writes a summary fit for a pull-request comment.
func WriteDiffMarkdown(w io.Writer, d *Diff) error {
	bw := bufio.NewWriter(w)
	_, _ = fmt.Fprintln(bw, "### capgate access review")
	_, _ = fmt.Fprintf(bw, "\nbase %s → head %s\n\n", mdCode(sideName(d.BaseName, d.BaseRevision)), mdCode(sideName(d.HeadName, d.HeadRevision)))
	if d.Empty() {
		_, _ = fmt.Fprintln(bw, "No change in who can see or run what.")
		return bw.Flush()
	}
	_, _ = fmt.Fprintf(bw, "**%d gained**, %d lost, %d capabilities changed.\n", len(d.Gained), len(d.Lost), len(d.Capabilities))
	if len(d.Capabilities) > 0 {
		_, _ = fmt.Fprintln(bw, "\n| capability | change |\n|---|---|")
		for _, c := range d.Capabilities {
			_, _ = fmt.Fprintf(bw, "| %s | %s: %s |\n", mdCode(c.ID), c.Kind, mdCell(c.summary()))
		}
	}
	d.eachGroup("Gained (a caller can now see or run something it could not)", "Lost", func(title string, changes []CellChange) {
		_, _ = fmt.Fprintf(bw, "\n#### %s\n\n| class | capability | base | head |\n|---|---|---|---|\n", title)
		for _, c := range changes {
			_, _ = fmt.Fprintf(bw, "| %s | %s | %s %s | **%s** %s |\n", mdCell(c.Class), mdCode(c.Capability),
				c.Base.Level(), mdCode(c.Base.Rule()), c.Head.Level(), mdCode(c.Head.Rule()))
		}
	})
	return bw.Flush()
}

type capChangeJSON struct {
	Kind ChangeKind  `json:"kind"`
	ID   string      `json:"id"`
	Base *Capability `json:"base"`
	Head *Capability `json:"head"`
}

type cellChangeJSON struct {
	Class      string   `json:"class"`
	Capability string   `json:"capability"`
	Base       cellJSON `json:"base"`
	Head       cellJSON `json:"head"`
}

// WriteDiffJSON writes the diff as JSON.
func WriteDiffJSON(w io.Writer, d *Diff) error {
	changes := func(cs []CellChange) []cellChangeJSON {
		out := make([]cellChangeJSON, len(cs))
		for i, c := range cs {
			out[i] = cellChangeJSON{Class: c.Class, Capability: c.Capability, Base: toCellJSON(c.Capability, c.Base), Head: toCellJSON(c.Capability, c.Head)}
		}
		return out
	}
	caps := make([]capChangeJSON, len(d.Capabilities))
	for i, c := range d.Capabilities {
		caps[i] = capChangeJSON(c)
	}
	return writeJSON(w, struct {
		Base         string           `json:"base"`
		Head         string           `json:"head"`
		BaseRevision string           `json:"base_revision"`
		HeadRevision string           `json:"head_revision"`
		Classes      []classJSON      `json:"classes"`
		Capabilities []capChangeJSON  `json:"capabilities"`
		Gained       []cellChangeJSON `json:"gained"`
		Lost         []cellChangeJSON `json:"lost"`
	}{d.BaseName, d.HeadName, d.BaseRevision, d.HeadRevision, classesJSON(d.Classes), caps, changes(d.Gained), changes(d.Lost)})
}
