// Package settings is the runtime's side of capgate.yaml. policy/config
// decodes the whole file and checks the policy's own settings; the settings
// whose rules the runtime owns are checked here, each by the package that
// uses it — the store by sidecar/tasks (tasks.Config.Validate against the
// backend table, sidecar/tasks/backends), push.allowed_urls by sidecar/push
// (push.Policy.Validate), an issuer's jwks_file by sidecar/jwks
// (jwks.Check) — and reported at their lines through config.Check. Every
// loader of a config to serve passes Checks to config.Load (or
// deployment.Load). The dependency points one way: sidecar/ imports
// policy/, never the reverse.
package settings

import (
	"errors"
	"fmt"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/diag"
	"github.com/capgate/capgate/sidecar/jwks"
	"github.com/capgate/capgate/sidecar/push"
	"github.com/capgate/capgate/sidecar/tasks"
	"github.com/capgate/capgate/sidecar/tasks/backends"
)

// Checks are the runtime's checks of a config, for config.Load.
func Checks() []config.Check {
	return []config.Check{checkStore, checkPush, checkJWKS}
}

// Store is the store's settings of a config: the URL and the credentials
// read from their files or variables. An error names the setting at fault,
// never the secret.
func Store(c *config.Config) (tasks.Config, error) {
	sc := tasks.Config{URL: c.Store}
	for _, s := range storeSecrets(c) {
		p, key, err := c.Secret(s.name, s.file, s.env)
		if err != nil {
			return tasks.Config{}, fmt.Errorf("%s: %w", key, err)
		}
		*s.into(&sc) = p
	}
	return sc, nil
}

// storeSecret is one credential of the store, from a file or the
// environment.
type storeSecret struct {
	name, file, env string // name: the settings' stem (name_file, name_env)
	field           string // its tasks.ConfigError field
	into            func(*tasks.Config) *string
}

func (s storeSecret) set() bool { return s.file != "" || s.env != "" }

// key is the setting a problem of s is reported at: name_file, or name_env
// when only that is set.
func (s storeSecret) key() string {
	if s.file == "" && s.env != "" {
		return s.name + "_env"
	}
	return s.name + "_file"
}

func storeSecrets(c *config.Config) []storeSecret {
	return []storeSecret{
		{"store_password", c.StorePasswordFile, c.StorePasswordEnv, tasks.FieldPassword,
			func(sc *tasks.Config) *string { return &sc.Password }},
		{"store_sentinel_password", c.StoreSentinelPasswordFile, c.StoreSentinelPasswordEnv, tasks.FieldSentinelPassword,
			func(sc *tasks.Config) *string { return &sc.SentinelPassword }},
	}
}

// checkStore checks store against the backend table, then reads each
// credential its backend takes. Which credentials apply is decided before
// any is read: a password set for a store that takes none is reported as
// such, not read.
func checkStore(c *config.Config) []diag.Problem {
	var out []diag.Problem
	secrets := storeSecrets(c)
	sc := tasks.Config{URL: c.Store}
	for _, s := range secrets {
		if s.set() {
			*s.into(&sc) = "set" // a stand-in: Validate asks only whether it is set
		}
	}
	refused := map[string]bool{}
	each(sc.Validate(backends.Table()), func(err error) {
		var ce *tasks.ConfigError
		if !errors.As(err, &ce) {
			out = append(out, diag.Problem{Field: "store", Message: err.Error()})
			return
		}
		field := "store"
		for _, s := range secrets {
			if s.field == ce.Field {
				field = s.key()
				refused[s.field] = true
			}
		}
		out = append(out, diag.Problem{Field: field, Message: ce.Err.Error()})
	})
	for _, s := range secrets {
		if !s.set() || refused[s.field] {
			continue
		}
		if _, key, err := c.Secret(s.name, s.file, s.env); err != nil {
			out = append(out, diag.Problem{Field: key, Message: err.Error()})
		}
	}
	return out
}

// checkPush checks push.allowed_urls (push.Policy.Validate).
func checkPush(c *config.Config) []diag.Problem {
	var out []diag.Problem
	p := push.Policy{Enabled: c.Push.Enabled, Allowed: c.Push.AllowedURLs}
	each(p.Validate(), func(err error) {
		field := "push.allowed_urls"
		var pe *push.PrefixError
		if errors.As(err, &pe) {
			field, err = fmt.Sprintf("push.allowed_urls[%d]", pe.Index), pe.Err
		}
		out = append(out, diag.Problem{Field: field, Message: err.Error()})
	})
	return out
}

// checkJWKS checks each issuer's jwks_file as the verifier reads it
// (jwks.Check, so the messages are the verifier's). A file that cannot be
// read is policy/config's to report.
func checkJWKS(c *config.Config) []diag.Problem {
	var out []diag.Problem
	for i, is := range c.Auth.Issuers {
		if is.JWKSFile == "" || is.JWKSURL != "" {
			continue
		}
		b, err := c.ReadFile(is.JWKSFile)
		if err != nil {
			continue
		}
		field := fmt.Sprintf("auth.issuers[%d].jwks_file", i)
		switch err := jwks.Check(b); {
		case errors.Is(err, jwks.ErrTooLarge):
			out = append(out, diag.Problem{Field: field, Message: fmt.Sprintf("%s is larger than %d bytes", is.JWKSFile, jwks.MaxBytes)})
		case err != nil:
			out = append(out, diag.Problem{Field: field, Message: fmt.Sprintf("%s: %v", is.JWKSFile, err)})
		}
	}
	return out
}

// each calls f with every error err joins (errors.Join), or err itself.
func each(err error, f func(error)) {
	if err == nil {
		return
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			each(e, f)
		}
		return
	}
	f(err)
}
