package protocol

import (
	"strconv"
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
			require.Equal(t, tc.same, fieldKey(tc.a) == fieldKey(tc.b))
		})
	}
}

func TestLargeObjectFieldCollision(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"id":"t"`)
	for i := range 40 {
		b.WriteString(`,"k` + strconv.Itoa(i) + `":1`)
	}
	b.WriteString(`,"ID":"u"}`)
	_, err := ParseJSONRPC(V1, ctJSON, []byte(rpc(`1`, "GetTask", b.String())), Limits{})
	require.NotNil(t, err)
	require.Equal(t, ParseError, err.Code)
	require.Equal(t, `duplicate object key "ID" (same field as "id")`, err.Message)
}

func TestManyExactDuplicateNamesAfterSetThreshold(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"metadata":{`)
	for i := range 100 {
		b.WriteString(`"k` + strconv.Itoa(i) + `":1,`)
	}
	b.WriteString(`"k7":2}}`)
	_, err := ParseHTTP(V1, "POST", "/message:send", ctJSON, []byte(b.String()), Limits{})
	require.NotNil(t, err)
	require.Equal(t, `duplicate object key "k7"`, err.Message)
}
