package handler

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"
)

// sseEvents is a handler's stream of n status updates for request id, as
// a2a-go writes them.
func sseEvents(id string, n int) []byte {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "data: {\"jsonrpc\":\"2.0\",\"id\":%q,\"result\":{\"statusUpdate\":{\"taskId\":\"019a-task-%d\",\"contextId\":\"ctx-1\","+
			"\"status\":{\"state\":\"TASK_STATE_WORKING\",\"timestamp\":\"2026-12-03T08:00:00.%06dZ\"}}}}\n\n", id, i%7, i)
	}
	return []byte(b.String())
}

// BenchmarkRelayEvents reads and checks one event of a handler's stream,
// as Invoker.Stream does for every event it relays: into one reused buffer,
// the result left in it.
func BenchmarkRelayEvents(b *testing.B) {
	const n = 1000
	stream := sseEvents("capgate-x", n)
	b.SetBytes(int64(len(stream) / n))
	b.ReportAllocs()
	br := bufio.NewReaderSize(bytes.NewReader(stream), 64<<10)
	i := 0
	var data []byte
	for b.Loop() {
		if i%n == 0 {
			br.Reset(bytes.NewReader(stream))
		}
		i++
		var err error
		data, err = nextEvent(br, data)
		if err != nil {
			b.Fatal(err)
		}
		if _, why := parseEvent(data, "capgate-x", false); why != "" {
			b.Fatal(why)
		}
	}
}

// nextEventPlain and readLinePlain are the reader before it stopped copying
// every line: the reference TestNextEventMatchesPlain compares with.
func nextEventPlain(br *bufio.Reader) ([]byte, error) {
	var data []byte
	has := false
	for {
		line, err := readLinePlain(br)
		if err != nil {
			return nil, err
		}
		if len(line) == 0 {
			if has {
				return data, nil
			}
			continue
		}
		if line[0] == ':' {
			continue
		}
		name, value, found := bytes.Cut(line, []byte(":"))
		if found && len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		if string(name) != "data" {
			continue
		}
		if has {
			data = append(data, '\n')
		}
		data = append(data, value...)
		has = true
		if len(data) > MaxEventBytes {
			return nil, errEventTooLarge
		}
	}
}

func readLinePlain(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > MaxEventBytes+2 {
			return nil, errEventTooLarge
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			line = line[:len(line)-1]
			if n := len(line); n > 0 && line[n-1] == '\r' {
				line = line[:n-1]
			}
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return nil, err
		}
	}
}

// readAll reads every event of stream with next over a reader of size
// bufSize fed one byte at a time or whole, and records events and the
// final error.
func readAll(stream []byte, bufSize int, oneByte bool, next func(*bufio.Reader) ([]byte, error)) []string {
	var r io.Reader = bytes.NewReader(stream)
	if oneByte {
		r = iotest.OneByteReader(r)
	}
	br := bufio.NewReaderSize(r, bufSize)
	var out []string
	for {
		data, err := next(br)
		if err != nil {
			return append(out, "error: "+err.Error())
		}
		out = append(out, string(data))
	}
}

// TestNextEventMatchesPlain: the reader that hands out lines from the
// buffer finds the same events and errors as the copying one, whatever the
// line endings, comments, fields, multi-line data, lines longer than the
// buffer, oversize events and unterminated ends.
func TestNextEventMatchesPlain(t *testing.T) {
	big := strings.Repeat("x", MaxEventBytes+10)
	streams := map[string]string{
		"events":           string(sseEvents("capgate-x", 20)),
		"crlf":             "data: {\"a\":1}\r\n\r\ndata: {\"b\":2}\r\n\r\n",
		"comments, fields": ": keep-alive\n\nevent: message\nid: 7\nretry: 10\ndata: one\n\n:x\ndata:two\n\n",
		"multi-line data":  "data: {\ndata: \"k\": 1\ndata: }\n\n",
		"no data":          "event: x\n\n\n\ndata: late\n\n",
		"unterminated":     "data: first\n\ndata: last",
		"long lines":       "data: " + strings.Repeat("{\"k\":\"v\"},", 300) + "\n\ndata: short\n\n",
		"oversize line":    "data: " + big + "\n\n",
		"oversize event":   "data: " + big[:MaxEventBytes/2] + "\ndata: " + big[:MaxEventBytes/2+5] + "\n\n",
		"empty":            "",
		"cr only":          "data: a\r\r\n\n",
	}
	for name, s := range streams {
		for _, bufSize := range []int{16, 4096, 64 << 10} {
			for _, oneByte := range []bool{false, true} {
				if oneByte && len(s) > 100_000 {
					continue
				}
				want := readAll([]byte(s), bufSize, oneByte, nextEventPlain)
				var buf []byte // reused from event to event, as Stream does
				got := readAll([]byte(s), bufSize, oneByte, func(br *bufio.Reader) ([]byte, error) {
					data, err := nextEvent(br, buf)
					buf = data
					return data, err
				})
				require.Equal(t, want, got, "%s, buffer %d, one byte at a time %v", name, bufSize, oneByte)
			}
		}
	}
}

// parseResponsePlain is parseResponse as it was before it reused decoders
// and stopped copying each member: a fresh decoder, every value cloned,
// strings decoded before they are compared. TestParseResponsePooled
// compares parseResponse and parseEvent with it.
func parseResponsePlain(body []byte, id string, emptyOK bool) (resp response, why string) {
	dec := jsontext.NewDecoder(bytes.NewReader(body))
	tok, err := dec.ReadToken()
	if err != nil || tok.Kind() != '{' {
		return response{}, "not a JSON object"
	}
	var version, gotID, result, errObj jsontext.Value
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return response{}, "malformed JSON"
		}
		name := tok.String()
		v, err := dec.ReadValue()
		if err != nil {
			return response{}, "malformed JSON"
		}
		v = v.Clone()
		switch name {
		case "jsonrpc":
			version = v
		case "id":
			gotID = v
		case "result":
			result = v
		case "error":
			errObj = v
		}
	}
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '}' {
		return response{}, "malformed JSON"
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return response{}, "data after the JSON value"
	}
	if s, ok := jsonString(version); !ok || s != "2.0" {
		return response{}, `jsonrpc is not "2.0"`
	}
	if result == nil && errObj == nil && emptyOK {
		result = jsontext.Value("null")
	}
	if (result == nil) == (errObj == nil) {
		return response{}, "not exactly one of result and error"
	}
	s, isString := jsonString(gotID)
	idOK := isString && s == id
	if errObj != nil {
		if !idOK && (gotID == nil || gotID.Kind() != 'n') {
			return response{}, "id does not match the request"
		}
		var e rpcError
		if err := json.Unmarshal(errObj, &e, json.RejectUnknownMembers(false)); err != nil || e.Code == nil || e.Message == nil {
			return response{}, "malformed error object"
		}
		return response{rpcErr: &e}, ""
	}
	if !idOK {
		return response{}, "id does not match the request"
	}
	return response{result: result}, ""
}

// TestParseResponsePooled: parseResponse and parseEvent, with pooled
// decoders, give what the plain parse gives, for a run of good and bad
// responses in which each reuses a decoder the one before may have left
// mid-value. parseResponse keeps nothing of the body it read; parseEvent's
// result is the body's own bytes.
func TestParseResponsePooled(t *testing.T) {
	bodies := []string{
		`{"jsonrpc":"2.0","id":"capgate-x","result":{"kind":"task","id":"t1"}}`,
		`{"jsonrpc":"2.0","id":"capgate-x","result":{"kind":"task","id":"t1"}`, // cut short
		`{"jsonrpc":"2.0","id":"capgate-x","error":{"code":-32001,"message":"Task not found","data":[{"reason":"x"}]}}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}`,
		`{"jsonrpc":"2.0","id":"capgate-x","result":1,"result":2}`, // duplicate name
		"{\"jsonrpc\":\"2.0\",\"id\":\"capgate-x\",\"result\":\"\xff\"}",
		`{"jsonrpc":"2.0","id":"capgate-x","result":{}} {}`,
		`{"jsonrpc":"1.0","id":"capgate-x","result":{}}`,
		`{"jsonrpc":"2.0","id":"other","result":{}}`,
		`{"jsonrpc":"2.0","id":"capgate-x"}`,
		`{"jsonrpc":"2.0","id":"capgate-x","result":{},"error":{"code":1,"message":"m"}}`,
		`{"jsonrpc":"2.0","id":"capgate-x","error":{"message":"no code"}}`,
		`[1,2,3]`,
		``,
		`{"jsonrpc":"2.0","id":"capgate-x","result":` + strings.Repeat(`[`, 200) + strings.Repeat(`]`, 200) + `}`,
		`{"jsonrpc":"2.0","id":"capgate-x","extra":{"deep":[1,{"a":"b"}]},"result":{"k":"\u00e9\ud83d\ude00"}}`,
		// Escaped strings: compared decoded, not as written.
		`{"jsonrpc":"2\u002e0","id":"capgate\u002dx","result":{}}`,
		`{"jsonrpc":"2.0","id":"capgate\u002dy","result":{}}`,
		`{"jsonrpc":"2.0\u0000","id":"capgate-x","result":{}}`,
		`{"jsonrpc":"2.0","id":"capgate-x\"","result":{}}`,
		`{"jsonrpc":"2.0","id":"","result":{}}`,
		`{"jsonrpc":2.0,"id":"capgate-x","result":{}}`,
		`{"jsonrpc":"2.0","id":["capgate-x"],"result":{}}`,
		`{"jsonrpc":"2.0","id":"capgate-x","error":{"code":-32001,"message":"m","data":[{"@type":"x"}]},"result":null}`,
		`{"jsonrpc":"2.0","id":"capgate-x","error":{"code":-32001,"message":"m","data":[{"@type":"x"}]}}`,
		"{ \"jsonrpc\" : \"2.0\" ,\n \"id\" : \"capgate-x\" , \"result\" : [ 1 , 2 ] }",
	}
	for _, b := range strings.Split(string(sseEvents("capgate-x", 5)), "\n\n") {
		if d, ok := strings.CutPrefix(b, "data: "); ok {
			bodies = append(bodies, d)
		}
	}
	for round := range 3 {
		for i, b := range bodies {
			for _, emptyOK := range []bool{false, true} {
				wantResp, wantWhy := parseResponsePlain([]byte(b), "capgate-x", emptyOK)

				body := []byte(b)
				gotResp, gotWhy := parseResponse(body, "capgate-x", emptyOK)
				require.Equal(t, wantWhy, gotWhy, "round %d body %d", round, i)
				require.Equal(t, wantResp, gotResp, "round %d body %d", round, i)

				event := []byte(b)
				eventResp, eventWhy := parseEvent(event, "capgate-x", emptyOK)
				require.Equal(t, wantWhy, eventWhy, "round %d body %d", round, i)
				require.Equal(t, wantResp, eventResp, "round %d body %d", round, i)

				for k := range body {
					body[k] = 'X' // what parseResponse returns must not alias the body
					event[k] = 'X'
				}
				require.Equal(t, wantResp, gotResp, "round %d body %d after the body changed", round, i)
				if wantWhy == "" && wantResp.rpcErr != nil {
					require.Equal(t, wantResp, eventResp, "round %d body %d: an error keeps nothing of the body", round, i)
				}
				if wantWhy == "" && wantResp.result != nil && !emptyOKNull(wantResp, b) {
					require.Equal(t, strings.Repeat("X", len(wantResp.result)), string(eventResp.result),
						"round %d body %d: the event's result is its body's bytes", round, i)
				}
			}
		}
	}
}

// emptyOKNull reports whether resp's result is the null parseResponse
// supplies for a body without one.
func emptyOKNull(resp response, body string) bool {
	return string(resp.result) == "null" && !strings.Contains(body, `"result"`)
}

// FuzzParseEvent: for any body, parseEvent and parseResponse agree with the
// plain parse.
func FuzzParseEvent(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":"capgate-x","result":{"kind":"task","id":"t1"}}`))
	f.Add([]byte(`{"jsonrpc":"2\u002e0","id":"capgate\u002dx","result":[1]}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse","data":[{"@type":"x"}]}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"capgate-x"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, emptyOK := range []bool{false, true} {
			want, wantWhy := parseResponsePlain(body, "capgate-x", emptyOK)
			got, gotWhy := parseEvent(bytes.Clone(body), "capgate-x", emptyOK)
			require.Equal(t, wantWhy, gotWhy)
			require.Equal(t, want, got)
			got, gotWhy = parseResponse(bytes.Clone(body), "capgate-x", emptyOK)
			require.Equal(t, wantWhy, gotWhy)
			require.Equal(t, want, got)
		}
	})
}
