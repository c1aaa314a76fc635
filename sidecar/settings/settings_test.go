package settings_test

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/policy/config"
	"github.com/capgate/capgate/policy/config/configtest"
	"github.com/capgate/capgate/policy/diag"
	"github.com/capgate/capgate/sidecar/jwks"
	"github.com/capgate/capgate/sidecar/settings"
	"github.com/capgate/capgate/sidecar/tasks"
)

// base is a valid config; cases change one thing in it (configtest.Base).
const base = configtest.Base

// noKeys is the verifier's own message for a key set without a key.
var noKeys = func() string {
	err := jwks.Check([]byte(`{"keys":[]}`))
	if err == nil {
		panic("an empty key set passes")
	}
	return err.Error()
}()

func fsWith(cfg string) fstest.MapFS {
	fs := configtest.FS(cfg)
	fs["keys/nokeys.jwks.json"] = &fstest.MapFile{Data: []byte(`{"keys":[]}`)}
	return fs
}

// TestChecks: the settings the runtime owns are refused at load, each at
// its line with the owning package's message; the base config passes.
func TestChecks(t *testing.T) {
	_, err := config.LoadFS(fsWith(base), "capgate.yaml", settings.Checks()...)
	require.NoError(t, err)
	tests := []struct {
		name     string
		old, new string
		want     string
	}{
		{"push prefix not canonical", "store: memory\n", "store: memory\npush: {allowed_urls: [\"HTTPS://Hooks.example.com:443/a2a/../b\"]}\n",
			"capgate.yaml:23: push.allowed_urls[0]: \"HTTPS://Hooks.example.com:443/a2a/../b\" is not in canonical form (RFC 3986 section 6); write it as \"https://hooks.example.com/b\""},
		{"push prefix with an encoded slash", "store: memory\n", "store: memory\npush: {allowed_urls: [\"https://hooks.example.com/a%2fb\"]}\n",
			"capgate.yaml:23: push.allowed_urls[0]: \"https://hooks.example.com/a%2fb\" has an encoded \"/\" or \"\\\" in its path"},
		{"store unknown", "store: memory", "store: mysql://db:3306",
			`capgate.yaml:22: store: "mysql://db:3306" is not a store URL (want memory, redis://, rediss://, redis-sentinel://, rediss-sentinel://, redis-cluster://, rediss-cluster://)`},
		{"store sentinel without master", "store: memory", "store: redis-sentinel://:pw@s1:26379,s2:26379",
			`capgate.yaml:22: store: redis-sentinel://s1:26379,s2:26379: the path must be the master's name, e.g. redis-sentinel://host:26379,host:26380/mymaster`},
		{"store cluster with a database", "store: memory", "store: rediss-cluster://c1:7000,c2:7000/2",
			`capgate.yaml:22: store: rediss-cluster://c1:7000,c2:7000/2: a Redis Cluster has no database numbers or paths (found "2")`},
		{"store reads from replicas", "store: memory", "store: redis-cluster://c1:7000?read_only=true",
			`capgate.yaml:22: store: redis-cluster://c1:7000: read_only is not accepted: capgate reads task ownership from the master only`},
		{"store password file without Redis", "store: memory", "store: memory\nstore_password_file: redis.pw",
			`capgate.yaml:23: store_password_file: set, but store is "memory", which takes no password`},
		{"store password file missing", "store: memory", "store: redis-sentinel://s1:26379/main\nstore_password_file: nope.pw",
			`capgate.yaml:23: store_password_file: read nope.pw: file does not exist`},
		{"store password env without Redis", "store: memory", "store: memory\nstore_password_env: REDIS_PASSWORD",
			`capgate.yaml:23: store_password_env: set, but store is "memory", which takes no password`},
		{"store password env not set", "store: memory", "store: redis://r1:6379/0\nstore_password_env: CAPGATE_TEST_UNSET_0x",
			`capgate.yaml:23: store_password_env: the environment variable CAPGATE_TEST_UNSET_0x is not set`},
		{"store password env not a name", "store: memory", "store: redis://r1:6379/0\nstore_password_env: 'A=B'",
			`capgate.yaml:23: store_password_env: "A=B" is not an environment variable name`},
		{"store password file and env", "store: memory", "store: redis://r1:6379/0\nstore_password_file: redis.pw\nstore_password_env: REDIS_PASSWORD",
			`capgate.yaml:23: store_password_file: set this or store_password_env, not both`},
		{"store password file empty", "store: memory", "store: redis://r1:6379/0\nstore_password_file: keys/empty.pw",
			`capgate.yaml:23: store_password_file: keys/empty.pw is empty`},
		{"sentinel password without Sentinels", "store: memory", "store: redis-cluster://c1:7000\nstore_sentinel_password_file: keys/empty.pw",
			`capgate.yaml:23: store_sentinel_password_file: set, but store is "redis-cluster://c1:7000": only Sentinels have this password (the servers' is store_password_file or store_password_env)`},
		{"sentinel password file missing", "store: memory", "store: rediss-sentinel://s1:26379/main\nstore_sentinel_password_file: nope.pw",
			`capgate.yaml:23: store_sentinel_password_file: read nope.pw: file does not exist`},
		{"sentinel password env not set", "store: memory", "store: redis-sentinel://s1:26379/main\nstore_sentinel_password_env: CAPGATE_TEST_UNSET_0x",
			`capgate.yaml:23: store_sentinel_password_env: the environment variable CAPGATE_TEST_UNSET_0x is not set`},
		{"jwks file holds no key", "./keys/demo.jwks.json", "./keys/nokeys.jwks.json",
			`capgate.yaml:15: auth.issuers[0].jwks_file: ./keys/nokeys.jwks.json: ` + noKeys},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Contains(t, base, tt.old)
			c, err := config.LoadFS(fsWith(strings.Replace(base, tt.old, tt.new, 1)), "capgate.yaml", settings.Checks()...)
			require.Nil(t, c)
			require.EqualError(t, err, tt.want)
			var set *diag.Set
			require.True(t, errors.As(err, &set))
		})
	}
}

// TestStoreCredentials: the store's passwords come from a file or from the
// environment; an empty variable is refused as an unset one is, and the
// secret never appears in an error.
func TestStoreCredentials(t *testing.T) {
	const secret = "hunter2-but-longer"
	load := func(t *testing.T, extra string, files map[string]string) (*config.Config, error) {
		t.Helper()
		fsys := fsWith(strings.Replace(base, "store: memory", "store: redis-sentinel://s1:26379/main\n"+extra, 1))
		for name, data := range files {
			fsys[name] = &fstest.MapFile{Data: []byte(data)}
		}
		return config.LoadFS(fsys, "capgate.yaml", settings.Checks()...)
	}

	t.Setenv("CAPGATE_TEST_REDIS_PW", secret)
	t.Setenv("CAPGATE_TEST_SENTINEL_PW", secret+"-sentinel")
	c, err := load(t, "store_password_env: CAPGATE_TEST_REDIS_PW\nstore_sentinel_password_env: CAPGATE_TEST_SENTINEL_PW", nil)
	require.NoError(t, err)
	sc, err := settings.Store(c)
	require.NoError(t, err)
	require.Equal(t, tasks.Config{URL: "redis-sentinel://s1:26379/main", Password: secret, SentinelPassword: secret + "-sentinel"}, sc)
	require.Len(t, sc.Options(), 2, "the servers' password and the Sentinels'")

	c, err = load(t, "store_password_file: keys/redis.pw", map[string]string{"keys/redis.pw": "  " + secret + "\n"})
	require.NoError(t, err)
	sc, err = settings.Store(c)
	require.NoError(t, err)
	require.Equal(t, secret, sc.Password, "white space around the file's secret is dropped")
	require.Len(t, sc.Options(), 1)

	c, err = load(t, "", nil)
	require.NoError(t, err)
	sc, err = settings.Store(c)
	require.NoError(t, err)
	require.Empty(t, sc.Options(), "no credentials: the URL's, if any")

	t.Setenv("CAPGATE_TEST_REDIS_PW", "")
	_, err = load(t, "store_password_env: CAPGATE_TEST_REDIS_PW", nil)
	require.EqualError(t, err, "capgate.yaml:23: store_password_env: the environment variable CAPGATE_TEST_REDIS_PW is empty")

	// Validated at load, read again at start: a variable emptied in between
	// is still refused, by name.
	t.Setenv("CAPGATE_TEST_REDIS_PW", secret)
	c, err = load(t, "store_password_env: CAPGATE_TEST_REDIS_PW", nil)
	require.NoError(t, err)
	t.Setenv("CAPGATE_TEST_REDIS_PW", "")
	_, err = settings.Store(c)
	require.EqualError(t, err, "store_password_env: the environment variable CAPGATE_TEST_REDIS_PW is empty")
	require.NotContains(t, err.Error(), secret)
}
