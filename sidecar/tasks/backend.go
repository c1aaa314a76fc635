package tasks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Backend is one kind of task store, a row of a Backends table: the URLs it
// serves, how to check one without connecting, how to open it, and whether
// replicas share it. The table capgate serves with is sidecar/tasks/backends;
// there is no registry to add to from elsewhere.
type Backend struct {
	// Name names the backend in messages and docs ("memory", "redis").
	Name string
	// Schemes are the URL schemes it serves: "redis" serves redis://…; a
	// URL without "://" is matched by its whole text (see Bare).
	Schemes []string
	// Bare: the backend's URL is the scheme alone ("memory"), not
	// scheme://…; messages list it so.
	Bare bool
	// Check reports what is wrong with a URL of this backend, exactly as
	// Open would refuse it, without connecting. nil: every URL of its
	// schemes is well formed.
	Check func(url string) error
	// Open opens the store a URL names. A store that holds connections
	// implements io.Closer.
	Open func(ctx context.Context, url string, opts ...Option) (Store, error)
	// Shared reports whether replicas share the store, so that another
	// process (capgate lifecycle) can read its usage; an unshared store
	// lives in its process alone.
	Shared bool
	// Password and SentinelPassword say which credentials it takes
	// (WithPassword, WithSentinelPassword: store_password_*,
	// store_sentinel_password_*).
	Password, SentinelPassword bool
}

// Backends is a table of task store backends.
type Backends []Backend

// Lookup finds the backend serving url by its scheme: scheme://… for most,
// the whole URL for a Bare one ("memory", never "memory://…").
func (t Backends) Lookup(url string) (Backend, bool) {
	scheme, _, hasSlashes := strings.Cut(url, "://")
	for _, b := range t {
		if b.Bare != hasSlashes && slices.Contains(b.Schemes, scheme) {
			return b, true
		}
	}
	return Backend{}, false
}

// Check reports what is wrong with a store URL, as Open would refuse it,
// without connecting. The error never quotes a password.
func (t Backends) Check(url string) error {
	b, ok := t.Lookup(url)
	if !ok {
		return fmt.Errorf("%q is not a store URL (want %s)", RedactedURL(url), strings.Join(t.forms(), ", "))
	}
	if b.Check == nil {
		return nil
	}
	return b.Check(url)
}

// Open opens the store url names with the backend serving it. A store
// ignores the options it has no use for.
func (t Backends) Open(ctx context.Context, url string, opts ...Option) (Store, error) {
	b, ok := t.Lookup(url)
	if !ok {
		return nil, fmt.Errorf("store: %w", t.Check(url))
	}
	return b.Open(ctx, url, opts...)
}

// Shared reports whether the store url names is shared by replicas (see
// Backend.Shared); an unknown URL is not.
func (t Backends) Shared(url string) bool {
	b, ok := t.Lookup(url)
	return ok && b.Shared
}

// forms are the URL forms the table serves, for messages: "memory",
// "redis://", ….
func (t Backends) forms() []string {
	var out []string
	for _, b := range t {
		for _, s := range b.Schemes {
			if b.Bare {
				out = append(out, s)
			} else {
				out = append(out, s+"://")
			}
		}
	}
	return out
}

// Config is the store's settings: the URL naming a backend of the table,
// and the credentials capgate.yaml gives it (store_password_*,
// store_sentinel_password_*; sidecar/settings reads them).
type Config struct {
	URL              string
	Password         string
	SentinelPassword string
}

// Fields of a ConfigError: the setting at fault.
const (
	FieldURL              = "url"
	FieldPassword         = "password"
	FieldSentinelPassword = "sentinel_password"
)

// ConfigError is one problem of a Config: the setting at fault (FieldURL,
// FieldPassword, FieldSentinelPassword) and what is wrong with it.
type ConfigError struct {
	Field string
	Err   error
}

func (e *ConfigError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// Validate reports every problem of c against the table (errors.Join of
// *ConfigError): a URL no backend serves or its backend refuses, and a
// credential its backend does not take.
func (c Config) Validate(t Backends) error {
	var errs []error
	add := func(field string, err error) { errs = append(errs, &ConfigError{Field: field, Err: err}) }
	b, known := t.Lookup(c.URL)
	if err := t.Check(c.URL); err != nil {
		add(FieldURL, err)
	}
	if known && c.Password != "" && !b.Password {
		add(FieldPassword, fmt.Errorf("set, but store is %q, which takes no password", RedactedURL(c.URL)))
	}
	if known && c.SentinelPassword != "" && !b.SentinelPassword {
		add(FieldSentinelPassword, fmt.Errorf("set, but store is %q: only Sentinels have this password (the servers' is store_password_file or store_password_env)", RedactedURL(c.URL)))
	}
	return errors.Join(errs...)
}

// Options are the options c gives a store: its credentials.
func (c Config) Options() []Option {
	var opts []Option
	if c.Password != "" {
		opts = append(opts, WithPassword(c.Password))
	}
	if c.SentinelPassword != "" {
		opts = append(opts, WithSentinelPassword(c.SentinelPassword))
	}
	return opts
}
