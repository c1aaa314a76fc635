// Package access computes access reviews: which caller class may see or run
// which capability (the matrix), and what a change of deployment does to it
// (the diff), with the policy's own reason codes.
package access

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/capgate/capgate/policy/engine"
)

// Class is a named caller class: one row of the matrix.
type Class struct {
	Name        string
	Description string
	Caller      engine.Caller
}

// Who describes the class's caller: "anonymous", or "authenticated,
// tenant acme, scopes [a b]".
func (c Class) Who() string {
	if !c.Caller.Authenticated {
		return "anonymous"
	}
	parts := []string{"authenticated"}
	if c.Caller.Subject != "" {
		parts = append(parts, fmt.Sprintf("subject %s", c.Caller.Subject))
	}
	if c.Caller.Tenant != "" {
		parts = append(parts, fmt.Sprintf("tenant %s", c.Caller.Tenant))
	}
	if len(c.Caller.Scopes) > 0 {
		parts = append(parts, fmt.Sprintf("scopes [%s]", strings.Join(c.Caller.Scopes, " ")))
	}
	return strings.Join(parts, ", ")
}

// Capability is one column of the matrix.
type Capability struct {
	ID         string `json:"id"`
	State      string `json:"state"`
	Visibility string `json:"visibility"`
	// Routing is the routing mode (manifest routing.mode) when it is not
	// auto: confirm or explicit.
	Routing string `json:"routing,omitempty"`
}

// RoutingMode is the capability's routing mode: auto, confirm or explicit.
func (c Capability) RoutingMode() string {
	if c.Routing == "" {
		return "auto"
	}
	return c.Routing
}

// Level is what a cell grants.
type Level string

// Levels, from least to most.
const (
	None           Level = "none"            // neither visible nor runnable
	Visible        Level = "visible"         // in the class's card, not runnable
	EntitledHidden Level = "entitled-hidden" // runnable, never in a card (internal)
	Entitled       Level = "entitled"        // in the card and runnable
)

// Cell is one class's decision for one capability.
type Cell struct {
	Visible, Entitled               bool
	VisibleReasons, EntitledReasons []engine.Reason
}

// Level is the cell's level.
func (c Cell) Level() Level {
	switch {
	case c.Visible && c.Entitled:
		return Entitled
	case c.Entitled:
		return EntitledHidden
	case c.Visible:
		return Visible
	}
	return None
}

// Rule names the rules that decided the cell's level: what granted it,
// then what refused the rest ("not visible: ...", "not entitled: ..."); a
// cell that grants nothing lists every refusal. Both reason lists are in
// the cell.
func (c Cell) Rule() string {
	pick := func(rs []engine.Reason, effect string) []string {
		var out []string
		for _, r := range rs {
			if r.Effect == effect {
				out = append(out, r.String())
			}
		}
		return out
	}
	join := func(ss []string) string { return strings.Join(ss, " ") }
	switch c.Level() {
	case Entitled:
		return join(pick(c.EntitledReasons, "grant"))
	case EntitledHidden:
		return join(pick(c.EntitledReasons, "grant")) + "; not visible: " + join(pick(c.VisibleReasons, "refuse"))
	case Visible:
		return join(pick(c.VisibleReasons, "grant")) + "; not entitled: " + join(pick(c.EntitledReasons, "refuse"))
	}
	refused := pick(c.EntitledReasons, "refuse")
	for _, r := range pick(c.VisibleReasons, "refuse") {
		if !slices.Contains(refused, r) {
			refused = append(refused, r)
		}
	}
	return join(refused)
}

// absent is the cell of a capability a deployment does not have: refused
// with the policy's reason for an id not in the registry.
var absent = Cell{
	VisibleReasons:  []engine.Reason{{Rule: "capability.unknown", Effect: "refuse"}},
	EntitledReasons: []engine.Reason{{Rule: "capability.unknown", Effect: "refuse"}},
}

// Matrix is every class's decision for every capability of one revision.
type Matrix struct {
	Revision     string
	Classes      []Class
	Capabilities []Capability     // id order
	rows         []*engine.Review // per class
}

// Cell returns class i's cell for capability j.
func (m *Matrix) Cell(i, j int) Cell {
	d := m.rows[i].Decision(j)
	return Cell{Visible: d.Visible, Entitled: d.Entitled, VisibleReasons: d.VisibleReasons, EntitledReasons: d.EntitledReasons}
}

// Decider is the engine as the matrix needs it.
type Decider interface {
	Revision() string
	Review(ctx context.Context, c engine.Caller) (*engine.Review, error)
}

var _ Decider = (*engine.Engine)(nil)

// Build decides every class over the engine's registry (one engine.Review
// per class, as many at once as there are CPUs); cells are assembled when
// read. Deny modules of the snapshot take part like in every other
// decision.
func Build(ctx context.Context, e Decider, classes []Class) (*Matrix, error) {
	if err := checkNames(classes); err != nil {
		return nil, err
	}
	m := &Matrix{Revision: e.Revision(), Classes: classes, rows: make([]*engine.Review, len(classes))}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, c := range classes {
		g.Go(func() error {
			r, err := e.Review(gctx, c.Caller)
			if err != nil {
				return fmt.Errorf("caller class %s: %w", c.Name, err)
			}
			m.rows[i] = r
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	r := m.rows[0] // every review covers the same registry
	m.Capabilities = make([]Capability, r.Len())
	for j := range m.Capabilities {
		c := &m.Capabilities[j]
		c.ID, c.State, c.Visibility = r.Capability(j)
		if mode := r.RoutingMode(j); mode != "auto" {
			c.Routing = mode
		}
	}
	return m, nil
}

func checkNames(classes []Class) error {
	if len(classes) == 0 {
		return fmt.Errorf("no caller classes")
	}
	seen := make(map[string]bool, len(classes))
	for _, c := range classes {
		if c.Name == "" {
			return fmt.Errorf("caller class without a name")
		}
		if seen[c.Name] {
			return fmt.Errorf("caller class %q named twice", c.Name)
		}
		seen[c.Name] = true
	}
	return nil
}
