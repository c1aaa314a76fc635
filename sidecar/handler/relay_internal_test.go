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
// as Invoker.Stream does for every event it relays.
func BenchmarkRelayEvents(b *testing.B) {
	const n = 1000
	stream := sseEvents("capgate-x", n)
	b.SetBytes(int64(len(stream) / n))
	b.ReportAllocs()
	br := bufio.NewReaderSize(bytes.NewReader(stream), 64<<10)
	i := 0
	for b.Loop() {
		if i%n == 0 {
			br.Reset(bytes.NewReader(stream))
		}
		i++
		data, err := nextEvent(br)
		if err != nil {
			b.Fatal(err)
		}
		if _, why := parseResponse(data, "capgate-x", false); why != "" {
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
				got := readAll([]byte(s), bufSize, oneByte, nextEvent)
				require.Equal(t, want, got, "%s, buffer %d, one byte at a time %v", name, bufSize, oneByte)
			}
		}
	}
}

// TestParseResponsePooled: parseResponse with a pooled decoder gives what a
// fresh decoder gives (the plain parse), for a run of good and bad
// responses in which each reuses a decoder the one before may have left
// mid-value, and keeps nothing of the body it read.
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
	}
	for _, b := range strings.Split(string(sseEvents("capgate-x", 5)), "\n\n") {
		if d, ok := strings.CutPrefix(b, "data: "); ok {
			bodies = append(bodies, d)
		}
	}
	for round := range 3 {
		for i, b := range bodies {
			for _, emptyOK := range []bool{false, true} {
				wantResp, wantWhy := parseResponseFrom(jsontext.NewDecoder(bytes.NewReader([]byte(b))), "capgate-x", emptyOK)
				body := []byte(b)
				gotResp, gotWhy := parseResponse(body, "capgate-x", emptyOK)
				require.Equal(t, wantWhy, gotWhy, "round %d body %d", round, i)
				require.Equal(t, wantResp, gotResp, "round %d body %d", round, i)
				for k := range body {
					body[k] = 'X' // what was parsed must not alias the body
				}
				require.Equal(t, wantResp, gotResp, "round %d body %d after the body changed", round, i)
			}
		}
	}
}
