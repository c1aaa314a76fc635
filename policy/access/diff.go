package access

import (
	"fmt"
	"slices"
)

// ChangeKind says how a capability changed between two revisions.
type ChangeKind string

// Capability changes.
const (
	Added   ChangeKind = "added"
	Removed ChangeKind = "removed"
	Changed ChangeKind = "changed" // a manifest field (state, visibility, scopes, ...)
)

// CapabilityChange is a capability added, removed, or whose manifest
// fields changed. Base or Head is nil when the side lacks it.
type CapabilityChange struct {
	Kind       ChangeKind
	ID         string
	Base, Head *Capability
	// Fields are the manifest fields that changed (Changed only; both
	// matrices need Facts).
	Fields []FieldChange
}

// CellChange is one class's cell for one capability that differs in what
// it grants.
type CellChange struct {
	Class, Capability string
	Base, Head        Cell
	// Causes are the changes of the capability or the config that moved
	// the cell (see attribute).
	Causes []FieldChange
	// Risk ranks a gain (set for gained cells).
	Risk Risk
}

// Gained reports whether the head grants something the base did not.
func (c CellChange) Gained() bool {
	return c.Head.Visible && !c.Base.Visible || c.Head.Entitled && !c.Base.Entitled
}

// Lost reports whether the base granted something the head does not.
func (c CellChange) Lost() bool {
	return c.Base.Visible && !c.Head.Visible || c.Base.Entitled && !c.Head.Entitled
}

// Diff is what a change of deployment does to access. A cell that both
// gains one aspect and loses the other is in both lists.
type Diff struct {
	// BaseName and HeadName say where each side came from (a config path,
	// a bundle, a git revision); the caller sets them for reports.
	BaseName, HeadName         string
	BaseRevision, HeadRevision string
	Classes                    []Class // the head's
	Capabilities               []CapabilityChange
	// Config are the config fields that changed (issuers, claim names,
	// preview settings, deny modules).
	Config []FieldChange
	// Gained is in risk order: grouped by capability, the capability
	// with the riskiest gain first (see GainGroups).
	Gained, Lost []CellChange
	// Guards are the capabilities that run with less care in the head
	// (routing mode downgraded, destructive tag removed, a limit raised or
	// removed, a quota loosened or gone), riskiest first: risks like gains.
	Guards []Guard
	// Provenance says where the report came from; reports print it when
	// set.
	Provenance Provenance
	owners     map[string]string
}

// Empty reports whether nothing changed.
func (d *Diff) Empty() bool {
	return len(d.Capabilities) == 0 && len(d.Config) == 0 && len(d.Gained) == 0 && len(d.Lost) == 0 && len(d.Guards) == 0
}

// Risky reports whether the change gains access or loosens a guard: what
// a review must look at (access diff fails on it unless allowed).
func (d *Diff) Risky() bool { return len(d.Gained) > 0 || len(d.Guards) > 0 }

// Compare diffs two matrices of the same classes (matched by name). A
// capability one side lacks is refused there with capability.unknown.
func Compare(base, head *Matrix) (*Diff, error) {
	if !slices.EqualFunc(base.Classes, head.Classes, func(a, b Class) bool { return a.Name == b.Name }) {
		return nil, fmt.Errorf("the two sides were reviewed for different caller classes")
	}
	d := &Diff{BaseRevision: base.Revision, HeadRevision: head.Revision, Classes: head.Classes, owners: map[string]string{}}
	facts := base.Facts != nil && head.Facts != nil
	if facts {
		d.Config = compareFields("", base.Facts.config(head.Facts), head.Facts.config(base.Facts))
	}
	classOrder := make(map[string]int, len(head.Classes))
	for i, c := range head.Classes {
		classOrder[c.Name] = i
	}
	for _, col := range Columns(base, head) {
		var capChange *CapabilityChange
		var fields []FieldChange
		visibility := ""
		switch {
		case col.Base < 0:
			capChange = &CapabilityChange{Kind: Added, ID: col.ID, Head: &head.Capabilities[col.Head]}
		case col.Head < 0:
			capChange = &CapabilityChange{Kind: Removed, ID: col.ID, Base: &base.Capabilities[col.Base]}
		default:
			b, h := &base.Capabilities[col.Base], &head.Capabilities[col.Head]
			if facts {
				fields = compareFields(col.ID, base.Facts.Capabilities[col.ID], head.Facts.Capabilities[col.ID])
			}
			if *b != *h || len(fields) > 0 {
				capChange = &CapabilityChange{Kind: Changed, ID: col.ID, Base: b, Head: h, Fields: fields}
			}
		}
		if col.Head >= 0 {
			visibility = head.Capabilities[col.Head].Visibility
			d.owners[col.ID] = head.Capabilities[col.Head].Owner
		} else {
			visibility = base.Capabilities[col.Base].Visibility
			d.owners[col.ID] = base.Capabilities[col.Base].Owner
		}
		if capChange != nil {
			d.Capabilities = append(d.Capabilities, *capChange)
		}
		if col.Base >= 0 && col.Head >= 0 {
			var bf, hf *runFacts
			if facts {
				if r, ok := base.Facts.runs[col.ID]; ok {
					bf = &r
				}
				if r, ok := head.Facts.runs[col.ID]; ok {
					hf = &r
				}
			}
			for _, g := range guards(col.ID, &base.Capabilities[col.Base], &head.Capabilities[col.Head], bf, hf) {
				// The risk of the widest class entitled in the head: who
				// now runs it with less care.
				g.Risk = Risk{Runs: true, Visibility: visibility, Callers: callersNone}
				for i, class := range head.Classes {
					if !granted(head, i, col.Head)[1] {
						continue
					}
					g.Callers = append(g.Callers, class.Name)
					if r := riskOf(CellChange{Head: Cell{Entitled: true}}, class, visibility); len(g.Callers) == 1 || compareRisk(r, g.Risk) < 0 {
						g.Risk = r
					}
				}
				d.Guards = append(d.Guards, g)
			}
			if base.quotas != nil || head.quotas != nil {
				d.Guards = append(d.Guards, quotaGuards(col.ID, base, head, col)...)
			}
		}
		for i, class := range head.Classes {
			if granted(base, i, col.Base) == granted(head, i, col.Head) {
				continue
			}
			ch := CellChange{Class: class.Name, Capability: col.ID, Base: cellAt(base, i, col.Base), Head: cellAt(head, i, col.Head)}
			if ch.Gained() {
				g := ch
				g.Causes = attribute(ch.Base, ch.Head, capChange, fields, d.Config)
				g.Risk = riskOf(ch, class, visibility)
				d.Gained = append(d.Gained, g)
			}
			if ch.Lost() {
				l := ch
				l.Causes = attribute(ch.Head, ch.Base, capChange, fields, d.Config)
				d.Lost = append(d.Lost, l)
			}
		}
	}
	rankGains(d.Gained, classOrder)
	slices.SortStableFunc(d.Guards, compareGuards)
	return d, nil
}

// Column is one capability of two matrices: its index in each, -1 where
// the side lacks it.
type Column struct {
	ID         string
	Base, Head int
}

// Columns merges the capabilities of two matrices in id order.
func Columns(base, head *Matrix) []Column {
	var out []Column
	i, j := 0, 0
	for i < len(base.Capabilities) || j < len(head.Capabilities) {
		switch {
		case j == len(head.Capabilities) || i < len(base.Capabilities) && base.Capabilities[i].ID < head.Capabilities[j].ID:
			out = append(out, Column{ID: base.Capabilities[i].ID, Base: i, Head: -1})
			i++
		case i == len(base.Capabilities) || head.Capabilities[j].ID < base.Capabilities[i].ID:
			out = append(out, Column{ID: head.Capabilities[j].ID, Base: -1, Head: j})
			j++
		default:
			out = append(out, Column{ID: base.Capabilities[i].ID, Base: i, Head: j})
			i, j = i+1, j+1
		}
	}
	return out
}

func cellAt(m *Matrix, class, col int) Cell {
	if col < 0 {
		return absent
	}
	return m.Cell(class, col)
}

// granted is what class grants on capability col: visible, entitled.
func granted(m *Matrix, class, col int) [2]bool {
	if col < 0 {
		return [2]bool{}
	}
	r, c := m.rows[class], m.col(col)
	return [2]bool{r.Visible(c), r.Entitled(c)}
}
