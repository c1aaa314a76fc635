package engine

import (
	"math/bits"

	"github.com/capgate/capgate/policy/manifest"
)

// View is what one entitlement class of callers may see and run at one
// revision: the projection cards and the router read. It is immutable and
// shared by every caller of the class. Sets are bitsets over the
// registry's id order, so a view costs 2 bits per capability.
type View struct {
	revision string
	reg      *manifest.Registry
	visible  bitset
	entitled bitset
}

// Revision is the policy revision the view was decided at.
func (v *View) Revision() string { return v.revision }

// Visible reports whether the class may see capability id in a card.
func (v *View) Visible(id string) bool { return v.visible.has(v.reg.Index(id)) }

// Entitled reports whether the class may run capability id.
func (v *View) Entitled(id string) bool { return v.entitled.has(v.reg.Index(id)) }

// EntitledAt is Entitled for the capability at position i of reg.All(), without looking its id
// up (the router asks it of every capability per message); ok is false when reg is not the
// registry the view was decided over, and the caller must ask Entitled.
func (v *View) EntitledAt(reg *manifest.Registry, i int) (entitled, ok bool) {
	if reg != v.reg {
		return false, false
	}
	return v.entitled.has(i), true
}

// VisibleIDs returns the visible capability ids, sorted.
func (v *View) VisibleIDs() []string { return v.ids(v.visible) }

// EntitledIDs returns the entitled capability ids, sorted.
func (v *View) EntitledIDs() []string { return v.ids(v.entitled) }

// VisibleCapabilities returns copies of the visible manifests, by id.
func (v *View) VisibleCapabilities() []manifest.Capability { return v.caps(v.visible) }

// EntitledCapabilities returns copies of the entitled manifests, by id.
func (v *View) EntitledCapabilities() []manifest.Capability { return v.caps(v.entitled) }

// AnyEntitled reports whether the class may run at least one capability.
func (v *View) AnyEntitled() bool { return v.entitled.any() }

func (v *View) ids(b bitset) []string {
	all := v.reg.All()
	out := make([]string, 0, b.count())
	b.each(func(i int) { out = append(out, all[i].ID) })
	return out
}

func (v *View) caps(b bitset) []manifest.Capability {
	all := v.reg.All()
	out := make([]manifest.Capability, 0, b.count())
	b.each(func(i int) { out = append(out, all[i]) })
	return out
}

// bitset is a fixed-size set of small non-negative integers.
type bitset []uint64

func newBitset(n int) bitset { return make(bitset, (n+63)/64) }

func (b bitset) set(i int) { b[i/64] |= 1 << (uint(i) % 64) }

// has is false for out-of-range positions, including -1 (unknown id).
func (b bitset) has(i int) bool {
	return i >= 0 && i/64 < len(b) && b[i/64]&(1<<(uint(i)%64)) != 0
}

func (b bitset) any() bool {
	for _, w := range b {
		if w != 0 {
			return true
		}
	}
	return false
}

func (b bitset) count() int {
	n := 0
	for _, w := range b {
		n += bits.OnesCount64(w)
	}
	return n
}

// each calls f for every member in ascending order.
func (b bitset) each(f func(i int)) {
	for wi, w := range b {
		for w != 0 {
			t := bits.TrailingZeros64(w)
			f(wi*64 + t)
			w &= w - 1
		}
	}
}
