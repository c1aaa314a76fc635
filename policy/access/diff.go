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
	Changed ChangeKind = "changed" // state or visibility
)

// CapabilityChange is a capability added, removed, or whose state or
// visibility changed. Base or Head is nil when the side lacks it.
type CapabilityChange struct {
	Kind       ChangeKind
	ID         string
	Base, Head *Capability
}

// CellChange is one class's cell for one capability that differs in what
// it grants.
type CellChange struct {
	Class, Capability string
	Base, Head        Cell
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
	Gained, Lost               []CellChange
}

// Empty reports whether nothing changed.
func (d *Diff) Empty() bool {
	return len(d.Capabilities) == 0 && len(d.Gained) == 0 && len(d.Lost) == 0
}

// Compare diffs two matrices of the same classes (matched by name). A
// capability one side lacks is refused there with capability.unknown.
func Compare(base, head *Matrix) (*Diff, error) {
	if !slices.EqualFunc(base.Classes, head.Classes, func(a, b Class) bool { return a.Name == b.Name }) {
		return nil, fmt.Errorf("the two sides were reviewed for different caller classes")
	}
	d := &Diff{BaseRevision: base.Revision, HeadRevision: head.Revision, Classes: head.Classes}
	for _, col := range Columns(base, head) {
		switch {
		case col.Base < 0:
			d.Capabilities = append(d.Capabilities, CapabilityChange{Kind: Added, ID: col.ID, Head: &head.Capabilities[col.Head]})
		case col.Head < 0:
			d.Capabilities = append(d.Capabilities, CapabilityChange{Kind: Removed, ID: col.ID, Base: &base.Capabilities[col.Base]})
		case base.Capabilities[col.Base] != head.Capabilities[col.Head]:
			d.Capabilities = append(d.Capabilities, CapabilityChange{Kind: Changed, ID: col.ID, Base: &base.Capabilities[col.Base], Head: &head.Capabilities[col.Head]})
		}
		for i, class := range head.Classes {
			if granted(base, i, col.Base) == granted(head, i, col.Head) {
				continue
			}
			ch := CellChange{Class: class.Name, Capability: col.ID, Base: cellAt(base, i, col.Base), Head: cellAt(head, i, col.Head)}
			if ch.Gained() {
				d.Gained = append(d.Gained, ch)
			}
			if ch.Lost() {
				d.Lost = append(d.Lost, ch)
			}
		}
	}
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
	r := m.rows[class]
	return [2]bool{r.Visible(col), r.Entitled(col)}
}
