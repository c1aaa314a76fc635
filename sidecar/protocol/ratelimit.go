package protocol

import (
	"strconv"
	"strings"

	"github.com/capgate/capgate/policy/quota"
)

// Remaining-budget header fields: the IETF "RateLimit header fields for HTTP" draft
// (draft-ietf-httpapi-ratelimit-headers, structured-field form): RateLimit-Policy names each
// quota with its budget q and window w (seconds); RateLimit names each with what remains r
// and the seconds t until it is full again. The same names go on admitted answers (where a
// binding carries headers) and on ResourceExhausted refusals, with Retry-After.
const (
	HeaderRateLimitPolicy = "ratelimit-policy"
	HeaderRateLimit       = "ratelimit"
)

// RateLimitHeaders renders quota states as the RateLimit-Policy and RateLimit header fields
// (nil for none).
func RateLimitHeaders(states []quota.State) [][2]string {
	if len(states) == 0 {
		return nil
	}
	var policy, limit strings.Builder
	for i, q := range states {
		if i > 0 {
			policy.WriteString(", ")
			limit.WriteString(", ")
		}
		name := sfString(q.ID)
		policy.WriteString(name + ";q=" + strconv.FormatInt(q.Limit, 10) + ";w=" + strconv.FormatInt(q.Window, 10))
		limit.WriteString(name + ";r=" + strconv.FormatInt(max(q.Remaining, 0), 10) + ";t=" + strconv.FormatInt(max(q.Reset, 0), 10))
	}
	return [][2]string{{HeaderRateLimitPolicy, policy.String()}, {HeaderRateLimit, limit.String()}}
}

// sfString is s as a structured-field string (RFC 8941 3.3.3): printable ASCII, with \ and "
// escaped; anything else is replaced by '_'.
func sfString(s string) string {
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	for i := 0; i < len(s) && i < 128; i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20 || c > 0x7e:
			b = append(b, '_')
		default:
			b = append(b, c)
		}
	}
	return string(append(b, '"'))
}

// QuotaHeaders are the headers of a ResourceExhausted refusal: Retry-After (RFC 9110 10.2.3)
// and the refused quota's RateLimit-Policy and RateLimit (nothing remains; full again after
// the retry delay at the earliest). Nil for any other error.
func (e *Error) QuotaHeaders() [][2]string {
	secs, ok := e.RetryAfter()
	if !ok {
		return nil
	}
	out := [][2]string{{"retry-after", strconv.FormatInt(secs, 10)}}
	limit, err1 := strconv.ParseInt(e.Metadata[MetaQuotaLimit], 10, 64)
	window, err2 := strconv.ParseInt(e.Metadata[MetaQuotaWindow], 10, 64)
	if id := e.Metadata[MetaQuota]; id != "" && err1 == nil && err2 == nil {
		out = append(out, RateLimitHeaders([]quota.State{{ID: id, Limit: limit, Window: window, Reset: secs}})...)
	}
	return out
}
