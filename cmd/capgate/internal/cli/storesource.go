package cli

import (
	"context"
	"io"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/sidecar/settings"
	"github.com/capgate/capgate/sidecar/tasks"
	"github.com/capgate/capgate/sidecar/tasks/backends"
)

// serverState is where a command reads what a serving capgate keeps in its task store
// (usage, candidate examples): the store itself, opened from the config, when replicas
// share it (the backend table says which) and no --admin URL is given; otherwise the
// admin listener of the capgate serving the config, since a memory store lives in that
// process only.
type serverState struct {
	// Store is the opened store (nil: read through the admin listener); Close closes it.
	Store tasks.Store
	Close func()
	// Admin is the admin listener's URL (--admin, default http://<listen.admin>) and
	// Token its listen.admin_token_file secret (nil: none), when Store is nil.
	Admin string
	Token []byte
}

func openServerState(ctx context.Context, cfg *config.Config, adminURL string) (serverState, error) {
	table := backends.Table()
	if adminURL != "" || !table.Shared(cfg.Store) {
		if adminURL == "" {
			adminURL = "http://" + dialable(cfg.Listen.Admin)
		}
		token, err := cfg.AdminToken()
		if err != nil {
			return serverState{}, usageErr("%v", err)
		}
		return serverState{Admin: adminURL, Token: token, Close: func() {}}, nil
	}
	sc, err := settings.Store(cfg)
	if err != nil {
		return serverState{}, usageErr("%v", err)
	}
	st, err := table.Open(ctx, sc.URL, sc.Options()...)
	if err != nil {
		return serverState{}, usageErr("store: %v", err)
	}
	return serverState{Store: st, Close: func() {
		if c, ok := st.(io.Closer); ok {
			_ = c.Close()
		}
	}}, nil
}
