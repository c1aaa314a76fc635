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
	Diff            bool
	Columns         []htmlColumn
	Rows            []htmlRow
}

type htmlColumn struct{ ID, Note string }

type htmlRow struct {
	Class, Who, Description string
	Cells                   []htmlCell
}

type htmlCell struct {
	Class, Capability string
	Level             Level
	Label, Title      string
	Change            string // "gained", "lost", "gained lost" or ""
}

var labels = map[Level]string{None: "·", Visible: "see", Entitled: "run", EntitledHidden: "run*"}

// WriteHTML writes the matrix as one self-contained HTML page (no external
// assets): colour-coded cells, sticky headers, filters by class and
// capability, the deciding rules on hover.
func WriteHTML(w io.Writer, m *Matrix) error {
	r := htmlReport{
		Title:    "capgate access matrix",
		Subtitle: fmt.Sprintf("policy revision %s: %d caller classes × %d capabilities", m.Revision, len(m.Classes), len(m.Capabilities)),
	}
	for _, c := range m.Capabilities {
		r.Columns = append(r.Columns, htmlColumn{ID: c.ID, Note: c.Visibility + ", " + c.State})
	}
	for i, class := range m.Classes {
		row := htmlRow{Class: class.Name, Who: class.Who(), Description: class.Description, Cells: make([]htmlCell, len(m.Capabilities))}
		for j, c := range m.Capabilities {
			cell := m.Cell(i, j)
			row.Cells[j] = htmlCell{Class: class.Name, Capability: c.ID, Level: cell.Level(), Label: labels[cell.Level()], Title: cellTitle(cell)}
		}
		r.Rows = append(r.Rows, row)
	}
	return reportTmpl.Execute(w, r)
}

// WriteDiffHTML writes the head's matrix over the capabilities of both
// sides, with gained and lost cells highlighted and both sides' rules on
// hover.
func WriteDiffHTML(w io.Writer, base, head *Matrix, d *Diff) error {
	r := htmlReport{
		Title: "capgate access diff",
		Subtitle: fmt.Sprintf("%s → %s: %d gained, %d lost, %d capabilities changed",
			sideName(d.BaseName, d.BaseRevision), sideName(d.HeadName, d.HeadRevision), len(d.Gained), len(d.Lost), len(d.Capabilities)),
		Diff: true,
	}
	cols := Columns(base, head)
	notes := map[string]string{}
	for _, c := range d.Capabilities {
		notes[c.ID] = string(c.Kind) + ": " + c.summary()
	}
	for _, col := range cols {
		note := notes[col.ID]
		if note == "" {
			c := head.Capabilities[col.Head]
			note = c.Visibility + ", " + c.State
		}
		r.Columns = append(r.Columns, htmlColumn{ID: col.ID, Note: note})
	}
	for i, class := range head.Classes {
		row := htmlRow{Class: class.Name, Who: class.Who(), Description: class.Description, Cells: make([]htmlCell, len(cols))}
		for j, col := range cols {
			ch := CellChange{Base: cellAt(base, i, col.Base), Head: cellAt(head, i, col.Head)}
			cell := htmlCell{Class: class.Name, Capability: col.ID, Level: ch.Head.Level(), Label: labels[ch.Head.Level()], Title: cellTitle(ch.Head)}
			var change []string
			if ch.Gained() {
				change = append(change, "gained")
			}
			if ch.Lost() {
				change = append(change, "lost")
			}
			if len(change) > 0 {
				cell.Change = strings.Join(change, " ")
				cell.Label = labels[ch.Base.Level()] + "→" + labels[ch.Head.Level()]
				cell.Title = "base: " + cellTitle(ch.Base) + "\nhead: " + cellTitle(ch.Head)
			}
			row.Cells[j] = cell
		}
		r.Rows = append(r.Rows, row)
	}
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
