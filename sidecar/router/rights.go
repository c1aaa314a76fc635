package router

import (
	"context"

	"github.com/capgate/capgate/policy/engine"
	"github.com/capgate/capgate/policy/manifest"
)

// Rights is a Caller backed by the policy engine: entitlement from the
// caller's cached view, tombstones from the policy's reasons.
type Rights struct {
	ctx    context.Context
	engine *engine.Engine
	caller engine.Caller
	view   *engine.View
}

var (
	_ Caller        = (*Rights)(nil)
	_ IndexedCaller = (*Rights)(nil)
)

// Context is the request's context the rights were read in (its trace).
func (r *Rights) Context() context.Context { return r.ctx }

// NewRights evaluates (or reuses) the caller's view.
func NewRights(ctx context.Context, e *engine.Engine, c engine.Caller) (*Rights, error) {
	v, err := e.View(ctx, c)
	if err != nil {
		return nil, err
	}
	return &Rights{ctx: ctx, engine: e, caller: c, view: v}, nil
}

// View is the caller's projection.
func (r *Rights) View() *engine.View { return r.view }

// Entitled implements Caller.
func (r *Rights) Entitled(id string) bool { return r.view.Entitled(id) }

// EntitledAt implements IndexedCaller from the view's bitset.
func (r *Rights) EntitledAt(reg *manifest.Registry, i int) (entitled, ok bool) {
	return r.view.EntitledAt(reg, i)
}

// WouldBeEntitled implements Caller: the capability is removed and
// state.removed is the policy's only refusal.
func (r *Rights) WouldBeEntitled(id string) bool {
	dec, err := r.engine.Decide(r.ctx, r.caller, id)
	if err != nil || !dec.Exists {
		return false
	}
	refusals, removed := 0, false
	for _, reason := range dec.EntitledReasons {
		if reason.Effect == "refuse" {
			refusals++
			removed = removed || reason.Rule == "state.removed"
		}
	}
	return removed && refusals == 1
}
