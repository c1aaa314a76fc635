package access

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"strings"

	"github.com/capgate/capgate/policy/engine"
)

//go:embed report.html.tmpl
var reportHTML string

var reportTmpl = template.Must(template.New("report").Parse(reportHTML))

type htmlReport struct {
	Title, Subtitle string
	Provenance      []string
	Legend          string
	Diff            bool
	Changed         []string    // diff: what changed
	Groups          []htmlGroup // diff: gains by capability, riskiest first
	Guards          []string    // diff: loosened guards, riskiest first
	Lost            []htmlLoss  // diff: the lost cells
	Columns         []htmlColumn
	Rows            []htmlRow
	Notes           []htmlNote // the deciding rules, numbered
	Quotas          []string   // matrix: the quotas of each class
}

type htmlColumn struct{ ID, Note, Owner string }

type htmlRow struct {
	Class, Who, Description string
	Cells                   []htmlCell
}

type htmlCell struct {
	Class, Capability string
	Level             Level
	Label, Title      string
	Change            string // "gained", "lost", "gained lost" or ""
	Note              int    // the number of the cell's note (its deciding rules)
}

// htmlLoss is a lost cell: what the text report's "lost" list says.
type htmlLoss struct {
	Line, Class, Capability, Base, Head string
}

type htmlNote struct {
	N    int
	Text string
}

type htmlGroup struct {
	Heading string
	Causes  []string
	Gains   []string
}

// notes numbers the deciding rules of cells, one note per distinct text,
// so the reasons are in the page (and on paper), not only on hover.
type notes struct {
	list  []htmlNote
	index map[string]int
}

func (n *notes) add(text string) int {
	if n.index == nil {
		n.index = map[string]int{}
	}
	if i, ok := n.index[text]; ok {
		return i
	}
	i := len(n.list) + 1
	n.index[text] = i
	n.list = append(n.list, htmlNote{N: i, Text: text})
	return i
}

func noteText(c Cell) string {
	s := string(c.Level()) + ": " + orNone(c.Rule())
	for _, q := range c.Quotas {
		s += "; quota " + QuotaLine(q)
	}
	return s
}

func column(c Capability, note string) htmlColumn {
	if note == "" {
		note = c.Visibility + ", " + c.State
	}
	return htmlColumn{ID: c.ID, Note: note, Owner: orNone(c.Owner)}
}

// WriteHTML writes the matrix as one self-contained HTML page (no external
// assets): a provenance header, colour-coded cells with their level and
// the number of their note, the notes (the deciding rules) under the
// matrix, sticky headers, filters by class and capability, and print
// rules that wrap the matrix onto the page.
func WriteHTML(w io.Writer, m *Matrix) error {
	r := htmlReport{
		Title:      "capgate access matrix",
		Subtitle:   fmt.Sprintf("policy revision %s: %d caller classes × %d capabilities", m.Revision, len(m.Classes), len(m.Capabilities)),
		Provenance: m.Provenance.Lines(),
		Legend:     Legend,
	}
	for _, c := range m.Capabilities {
		r.Columns = append(r.Columns, column(c, ""))
	}
	var ns notes
	for i, class := range m.Classes {
		row := htmlRow{Class: class.Name, Who: class.Who(), Description: class.Description, Cells: make([]htmlCell, len(m.Capabilities))}
		for j, c := range m.Capabilities {
			cell := m.Cell(i, j)
			row.Cells[j] = htmlCell{Class: class.Name, Capability: c.ID, Level: cell.Level(), Label: string(cell.Level()),
				Title: cellTitle(cell), Note: ns.add(noteText(cell))}
		}
		r.Rows = append(r.Rows, row)
	}
	r.Notes = ns.list
	for i, class := range m.Classes {
		for _, q := range m.ClassQuotas(i) {
			r.Quotas = append(r.Quotas, fmt.Sprintf("%s: %s, on %s (%s)", class.Name, q.Line(), strings.Join(q.Capabilities, ", "), QuotaWhy(q.Quota, m.Plans)))
		}
	}
	return reportTmpl.Execute(w, r)
}

// WriteDiffHTML writes what changed and the gains by capability, riskiest
// first, with their causes, then the head's matrix over the capabilities
// of both sides, with gained and lost cells highlighted and both sides'
// rules in the notes.
func WriteDiffHTML(w io.Writer, base, head *Matrix, d *Diff) error {
	r := htmlReport{
		Title:      "capgate access diff",
		Subtitle:   fmt.Sprintf("%s → %s: %s", sideName(d.BaseName, d.BaseRevision), sideName(d.HeadName, d.HeadRevision), d.counts()),
		Provenance: d.Provenance.Lines(),
		Legend:     Legend,
		Diff:       true,
	}
	for _, c := range d.Capabilities {
		r.Changed = append(r.Changed, c.ID+": "+string(c.Kind)+": "+c.summary())
	}
	for _, c := range d.Config {
		r.Changed = append(r.Changed, "config: "+c.String())
	}
	for _, g := range d.GainGroups() {
		hg := htmlGroup{Heading: g.heading()}
		for _, c := range g.Causes {
			hg.Causes = append(hg.Causes, c.Cause())
		}
		for _, c := range g.Gains {
			hg.Gains = append(hg.Gains, fmt.Sprintf("%s: %s → %s (%s)", c.Class, c.Base.Level(), c.Head.Level(), c.Risk))
		}
		r.Groups = append(r.Groups, hg)
	}
	for _, g := range d.Guards {
		r.Guards = append(r.Guards, g.String()+"; entitled in head: "+orNone(strings.Join(g.Callers, ", ")))
	}
	for _, c := range d.Lost {
		r.Lost = append(r.Lost, htmlLoss{Line: c.lossLine(), Class: c.Class, Capability: c.Capability,
			Base: "base: " + orNone(c.Base.Rule()), Head: "head: " + orNone(c.Head.Rule())})
	}
	cols := Columns(base, head)
	colNotes := map[string]string{}
	for _, c := range d.Capabilities {
		colNotes[c.ID] = string(c.Kind) + ": " + c.summary()
	}
	for _, col := range cols {
		var c Capability
		if col.Head >= 0 {
			c = head.Capabilities[col.Head]
		} else {
			c = base.Capabilities[col.Base]
		}
		r.Columns = append(r.Columns, column(c, colNotes[col.ID]))
	}
	var ns notes
	for i, class := range head.Classes {
		row := htmlRow{Class: class.Name, Who: class.Who(), Description: class.Description, Cells: make([]htmlCell, len(cols))}
		for j, col := range cols {
			ch := CellChange{Base: cellAt(base, i, col.Base), Head: cellAt(head, i, col.Head)}
			cell := htmlCell{Class: class.Name, Capability: col.ID, Level: ch.Head.Level(), Label: string(ch.Head.Level()), Title: cellTitle(ch.Head)}
			var change []string
			if ch.Gained() {
				change = append(change, "gained")
			}
			if ch.Lost() {
				change = append(change, "lost")
			}
			if len(change) > 0 {
				cell.Change = strings.Join(change, " ")
				cell.Label = string(ch.Base.Level()) + " → " + string(ch.Head.Level())
				cell.Title = "base: " + cellTitle(ch.Base) + "\nhead: " + cellTitle(ch.Head)
				cell.Note = ns.add("base " + noteText(ch.Base) + " | head " + noteText(ch.Head))
			} else {
				cell.Note = ns.add(noteText(ch.Head))
			}
			row.Cells[j] = cell
		}
		r.Rows = append(r.Rows, row)
	}
	r.Notes = ns.list
	return reportTmpl.Execute(w, r)
}

func cellTitle(c Cell) string {
	return fmt.Sprintf("%s\nvisible: %s\nentitled: %s", c.Level(), reasonList(c.VisibleReasons), reasonList(c.EntitledReasons))
}

func reasonList(rs []engine.Reason) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.Effect + " " + r.String()
	}
	return strings.Join(parts, ", ")
}
