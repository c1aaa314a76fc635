package card

import (
	"context"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/engine"
)

// Public builds the public card: the projection for an anonymous caller.
func Public(ctx context.Context, cfg *config.Config, e *engine.Engine) (*a2a.AgentCard, error) {
	return ForCaller(ctx, cfg, e, engine.Caller{})
}

// ForCaller builds the card a caller sees: the capabilities the policy makes
// visible to it. For an anonymous caller that is the public card.
func ForCaller(ctx context.Context, cfg *config.Config, e *engine.Engine, c engine.Caller) (*a2a.AgentCard, error) {
	v, err := e.View(ctx, c)
	if err != nil {
		return nil, err
	}
	opts := Options{ExtendedCard: NeedsExtendedCard(cfg, e.Snapshot().Registry.All())}
	return Build(cfg, v.VisibleCapabilities(), opts), nil
}
