package identity

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
)

// mintCases are tokens to mint: what the gateway mints, and claims whose
// encoding takes encoding/json's other paths (escaped and non-ASCII text,
// invalid UTF-8, nested objects, numbers, arrays, booleans, null).
func mintCases() []MintClaims {
	return []MintClaims{
		benchMintClaims(),
		{Subject: "alice", Audience: "recon.v3"},
		{Subject: `a "quoted" \ name <b>&amp;`, Tenant: "ténant ✓", Audience: "h\u2028\x01\x7f",
			Scopes: []string{"b a", "c <x>", "a"}, Capability: "cap\tтест", DecisionID: "d\xff\xfe",
			Actor: "agent&", PriorAct: map[string]any{"sub": "orchestrator<", "act": map[string]any{"sub": "planner", "iss": "é"}},
			TenantClaim: "org<id>", ScopesClaim: "scp",
			Extra: map[string]any{
				"limits": map[string]any{"max": 1000, "f": 1.5, "big": 1e21, "neg": math.Copysign(0, -1), "list": []any{"a", 2, true, nil}, "empty": map[string]any{}},
				"flag":   false, "none": nil, "num": json.Number("12.50"), "ints": []int{1, 2}, "nilmap": map[string]any(nil),
				"z<&>": "\u00e9\u0301", "": "empty name",
			}},
	}
}

// TestMintClaimsRoundTrip: every claim Mint sets, and every extra claim,
// reads back from the token as encoding/json gives it (a verifier reads
// claims, not bytes), whatever its text (escaped, non-ASCII, invalid
// UTF-8) or type.
func TestMintClaimsRoundTrip(t *testing.T) {
	m, err := GenerateMinter(mintIssuer, WithMintClock(newFakeClock().Now))
	require.NoError(t, err)
	for _, c := range mintCases() {
		cl, err := m.claims(c)
		require.NoError(t, err)
		want, err := json.Marshal(cl)
		require.NoError(t, err)

		tok, err := m.Mint(c)
		require.NoError(t, err)
		seg, err := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[1])
		require.NoError(t, err)
		var got map[string]any
		require.NoError(t, json.Unmarshal(seg, &got))
		delete(got, "jti") // random per token
		var wantMap map[string]any
		require.NoError(t, json.Unmarshal(want, &wantMap))
		delete(wantMap, "jti")
		require.Equal(t, wantMap, got)
	}
	// What encoding/json refuses is refused.
	for _, bad := range []any{math.NaN(), make(chan int), map[string]any{"f": func() {}}} {
		_, err := m.Mint(MintClaims{Subject: "alice", Audience: "h", Extra: map[string]any{"x": bad}})
		require.ErrorContains(t, err, "mint: encode claims")
	}
}

// TestMintMatchesJWT: a minted token is the one jwt.Token.SignedString
// builds (header, claims; the ES256 signature is randomised, so it is
// checked by verifying it) and a fresh one each call. The claims are
// compared re-encoded from the parsed token where that round trip is
// lossless (not for invalid UTF-8 or a json.Number: those are held to
// encoding/json's claims by TestMintClaimsRoundTrip).
func TestMintMatchesJWT(t *testing.T) {
	clock := newFakeClock()
	m, err := GenerateMinter(mintIssuer, WithMintClock(clock.Now))
	require.NoError(t, err)
	for i, c := range mintCases() {
		tok, err := m.Mint(c)
		require.NoError(t, err)
		parts := strings.Split(tok, ".")
		require.Len(t, parts, 3)

		var claims jwt.MapClaims
		parsed, err := jwt.ParseWithClaims(tok, &claims, func(*jwt.Token) (any, error) { return &m.key.PublicKey, nil },
			jwt.WithValidMethods([]string{"ES256"}), jwt.WithTimeFunc(clock.Now))
		require.NoError(t, err)
		require.True(t, parsed.Valid)

		plain := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
		plain.Header["kid"] = m.kid
		want, err := plain.SigningString()
		require.NoError(t, err)
		if i < 2 {
			require.Equal(t, want, parts[0]+"."+parts[1])
		} else {
			require.Equal(t, strings.Split(want, ".")[0], parts[0])
		}

		again, err := m.Mint(c)
		require.NoError(t, err)
		require.NotEqual(t, tok, again, "never the same token twice")
	}
}

// TestEncodeClaimsMatchesMarshal: encodeClaims writes exactly json.Marshal's bytes for the
// claims of every mint case (escaped, non-ASCII and invalid UTF-8 text, HTML characters,
// U+2028, nested objects, numbers, arrays, null) and for edge-case names and values, and
// refuses what json.Marshal refuses.
func TestEncodeClaimsMatchesMarshal(t *testing.T) {
	m, err := GenerateMinter(mintIssuer, WithMintClock(newFakeClock().Now))
	require.NoError(t, err)
	var all []jwt.MapClaims
	for _, c := range mintCases() {
		cl, err := m.claims(c)
		require.NoError(t, err)
		all = append(all, cl)
	}
	odd := []string{"", "a", "<", ">", "&", "\u2028", "\u2029", "\x00", "\x1f", "\x7f", "\xff", "\xc3", "é", "\"", `\`, "/",
		"\ufffd", "\U0001F600", "a\nb", "\t", " "}
	for _, name := range odd {
		for _, v := range odd {
			all = append(all, jwt.MapClaims{name: v, name + "x": []any{v, map[string]any{v: name}}})
		}
	}
	all = append(all, jwt.MapClaims{}, jwt.MapClaims{"n": nil, "i": int64(-1) << 62, "f": 0.1, "e": 1e-7, "b": true,
		"raw": json.RawMessage(`{"b": 1,"a" :[ ]}`), "s": []string(nil), "bytes": []byte("x<y")})
	for _, cl := range all {
		want, err := json.Marshal(cl)
		require.NoError(t, err)
		got, err := encodeClaims(cl)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "%#v", cl)
	}
	for _, bad := range []any{math.NaN(), math.Inf(1), make(chan int), map[string]any{"f": func() {}}} {
		_, werr := json.Marshal(jwt.MapClaims{"x": bad})
		_, gerr := encodeClaims(jwt.MapClaims{"a": "ok", "x": bad})
		require.Error(t, werr)
		require.Error(t, gerr)
	}
}

// FuzzEncodeClaims holds encodeClaims to json.Marshal over any names and string values.
func FuzzEncodeClaims(f *testing.F) {
	f.Add("sub", "alice", "tenant", "ténant <&> \u2028")
	f.Add("", "\xff\xfe", "a\x00", "\U0001F600")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		cl := jwt.MapClaims{k1: v1, k2: map[string]any{v2: k1, k1: []any{v1, int64(len(v2))}}}
		want, err := json.Marshal(cl)
		if err != nil {
			t.Skip()
		}
		got, err := encodeClaims(cl)
		if err != nil || string(got) != string(want) {
			t.Fatalf("encodeClaims = %q, %v; json.Marshal = %q", got, err, want)
		}
	})
}
