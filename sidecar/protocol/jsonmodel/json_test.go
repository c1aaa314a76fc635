package jsonmodel

import (
	"mime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSameFieldMatchesFieldKey(t *testing.T) {
	tests := []struct {
		a, b string
		same bool
	}{
		{"taskId", "taskId", true},
		{"taskId", "TASKID", true},
		{"taskId", "task_id", true},
		{"taskId", "_t_a_s_k_i_d_", true},
		{"taskId", "tas\u212aId", true},   // Kelvin sign folds to k
		{"skillId", "\u017fkillId", true}, // long s folds to s
		{"taskId", "taskIds", false},
		{"taskId", "tasId", false},
		{"taskId", "t\u0430skId", false}, // Cyrillic а is not a
		{"", "_", true},
		{"id", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.a+"|"+tc.b, func(t *testing.T) {
			require.Equal(t, tc.same, sameField(tc.a, tc.b))
			require.Equal(t, tc.same, sameField([]byte(tc.a), tc.b))
			require.Equal(t, tc.same, sameField([]byte(tc.a), []byte(tc.b)))
			require.Equal(t, tc.same, fieldKey(tc.a) == fieldKey(tc.b))
			require.Equal(t, fieldKey(tc.a), fieldKey([]byte(tc.a)))
		})
	}
}

func TestSameFieldDoesNotAllocate(t *testing.T) {
	long := []byte(strings.Repeat("x", 100) + "Id")
	other := []byte(strings.Repeat("x", 100) + "ID")
	field := string(long)
	allocs := testing.AllocsPerRun(100, func() {
		sameField(long, other)
		sameField(long, "xId")
		sameField(long, field)
	})
	require.Zero(t, allocs)
}

func TestBareMediaTypeMatchesMime(t *testing.T) {
	for _, s := range []string{
		"text/plain", "application/pdf", "image/svg+xml", "application/vnd.a-b_c.d+json", "x/y", "a!#$%&'*+-.^_`{|}~/b",
		"Text/plain", "text/Plain", "text", "/plain", "text/", "/", "", "a/b/c", "text/plain;", "text/plain; charset=utf-8",
		" text/plain", "text/plain ", "text /plain", "t\u00e9xt/plain", "text/pl@in", "text/(plain)", "text/plain\x00", "a\"b/c",
	} {
		t.Run(s, func(t *testing.T) { checkBareMediaType(t, s) })
	}
}

func FuzzBareMediaType(f *testing.F) {
	for _, s := range []string{"text/plain", "image/svg+xml", "Text/Plain", "a/b/c", "text/plain; q=1"} {
		f.Add(s)
	}
	f.Fuzz(checkBareMediaType)
}

// checkBareMediaType: whatever isBareMediaType accepts, mime.ParseMediaType returns unchanged.
func checkBareMediaType(t *testing.T, s string) {
	if !isBareMediaType(s) {
		return
	}
	mt, params, err := mime.ParseMediaType(s)
	require.NoError(t, err)
	require.Equal(t, s, mt)
	require.Empty(t, params)
	require.Contains(t, mt, "/")
}
