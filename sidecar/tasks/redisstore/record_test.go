package redisstore

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/capgate/capgate/sidecar/tasks"
)

// TestAppendSentMatchesJSON: encodeSent writes exactly json.Marshal's bytes, for records with
// every optional field set or not, times in other zones, at the ends of the years encoding/json
// takes and beyond, and strings that need escaping.
func TestAppendSentMatchesJSON(t *testing.T) {
	berlin := time.FixedZone("CET", 3600)
	times := []time.Time{
		{}, time.Unix(0, 0).UTC(), time.Unix(1_733_370_000, 123_456_789).UTC(), time.Now(), time.Now().In(berlin),
		time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("far", 30*3600)),
		time.Date(2026, 1, 1, 0, 0, 0, 500, time.FixedZone("odd", -(9*3600+30*60+15))),
	}
	texts := []string{"", "t-1", "0123456789abcdef", "a b", "ctx:{x}/%7B", "<", ">", "&", `"`, `\`, "\n", "\x00", "\x7f", "ü", "\u2028", "\xff", "~"}
	n := 0
	for _, start := range times {
		for _, deadline := range times[:4] {
			for i, text := range texts {
				for _, flags := range []int{0, 1, 2, 3} {
					s := tasks.Sent{MessageID: "ignored", Owner: tasks.Owner{Subject: "ignored"}, Started: start, Deadline: deadline,
						Done: flags&1 != 0, Lost: flags&2 != 0}
					switch (i + flags) % 5 {
					case 0:
						s.Digest = text
					case 1:
						s.TaskID, s.ContextID = text, texts[(i+1)%len(texts)]
					case 2:
						s.Capability = text
					case 3:
						s.Handler = text
					default:
						s.Digest, s.TaskID, s.ContextID, s.Capability, s.Handler = text, text, text, text, text
					}
					want, wantErr := json.Marshal(s)
					got, buf, err := encodeSent(s)
					if wantErr != nil {
						require.Error(t, err, "%+v", s)
						continue
					}
					require.NoError(t, err)
					require.Equal(t, string(want), string(got), "%+v", s)
					releaseRecord(buf)
					n++
				}
			}
		}
	}
	require.Greater(t, n, 1000)
	now := time.Now()
	_, ok := appendSent(nil, tasks.Sent{Started: now, Deadline: now, Digest: "0123456789abcdef", Done: true, TaskID: "t-1", ContextID: "c-1", Capability: "lookup-invoice", Handler: "billing"})
	require.True(t, ok, "a usual record is written by appendSent, not by encoding/json")
}

// TestPadded: padded is fmt.Sprintf("%020d", n) for the times a call may have.
func TestPadded(t *testing.T) {
	for _, n := range []int64{0, 1, 9, 10, 1_733_370_000_123_456_789, math.MaxInt64, time.Now().UnixNano()} {
		require.Equal(t, fmt.Sprintf("%020d", n), padded(n), n)
	}
}
