package cli

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// loggedDecision is a decision-log event as capgate writes it (console
// JSON lines) and OPA uploads it (gzip'd JSON arrays): the fields explain
// and replay read.
type loggedDecision struct {
	DecisionID string `json:"decision_id"`
	// Type is OPA's console marker (openpolicyagent.org/decision_logs);
	// uploads have none.
	Type      string `json:"type,omitzero"`
	Timestamp string `json:"timestamp"`
	Path      string `json:"path"`
	Bundles   map[string]struct {
		Revision string `json:"revision"`
	} `json:"bundles,omitzero"`
	// Labels and Metrics are kept as read (explain decodes them).
	Labels      jsontext.Value `json:"labels,omitzero"`
	Input       map[string]any `json:"input,omitzero"`
	Result      loggedResult   `json:"result"`
	Metrics     jsontext.Value `json:"metrics,omitzero"`
	RequestedBy string         `json:"requested_by,omitzero"`
	TraceID     string         `json:"trace_id,omitzero"`
	SpanID      string         `json:"span_id,omitzero"`
}

// loggedResult is an event's result.
type loggedResult struct {
	Allow      bool         `json:"allow"`
	Result     string       `json:"result"`
	Code       string       `json:"code,omitzero"`
	AuthReason string       `json:"auth_reason,omitzero"`
	Rule       string       `json:"rule,omitzero"`
	Reasons    []string     `json:"reasons,omitzero"`
	Rules      []loggedRule `json:"rules,omitzero"`
	// The entitlement answers a replay re-asks (access replay).
	Entitled          *bool        `json:"entitled,omitzero"`
	RequestedEntitled *bool        `json:"requested_entitled,omitzero"`
	RequestedRules    []loggedRule `json:"requested_rules,omitzero"`
	// Limits are the capability's limits the decision carried; CardVersion
	// the card version of the revision that decided.
	Limits      map[string]any `json:"limits,omitzero"`
	CardVersion string         `json:"card_version,omitzero"`
}

// loggedRule is one reason of a decision event.
type loggedRule struct {
	Effect string `json:"effect"`
	Reason string `json:"reason"`
	Rule   string `json:"rule"`
	// Detail is what the reason is about (scope.missing: the scopes).
	Detail string `json:"detail,omitzero"`
}

// opaEventType marks a decision event on OPA's console (and capgate's).
const opaEventType = "openpolicyagent.org/decision_logs"

// isDecision reports whether e is a decision event in OPA's format — a
// decision id, the policy path asked and a timestamp, and on a console
// OPA's type — rather than another line that carries a decision id (the
// audit stream's handler call, a skill hint ignored).
func (e *loggedDecision) isDecision() bool {
	return e.DecisionID != "" && e.Path != "" && e.Timestamp != "" && (e.Type == "" || e.Type == opaEventType)
}

// Bounds on reading one decision-log file. Reading holds one event at a
// time, so its memory is bounded by maxEventBytes (the decoder's buffer
// and the decoded event), whatever the file holds; the other two bound the
// time a hostile file can take: a gzip'd file of repeated events inflates
// a thousandfold.
const (
	// maxLogBytes bounds a gzip'd file's decompressed bytes.
	maxLogBytes = 1 << 30
	// maxEventBytes bounds one event: a console line, or one element of an
	// upload's array. capgate's own events are under 4 KiB.
	maxEventBytes = 1 << 20
	// maxLogEvents bounds the events (JSON values) of one file.
	maxLogEvents = 1 << 22
)

// logLimits are the bounds of one read (the constants above; smaller in
// tests).
type logLimits struct {
	bytes, eventBytes int64
	events            int
}

func defaultLogLimits() logLimits {
	return logLimits{bytes: maxLogBytes, eventBytes: maxEventBytes, events: maxLogEvents}
}

// logError is a decision log refused: where (line, and the event's
// position in the line's array), and why.
type logError struct {
	line, event int // event: 1-based within an array, 0 for a line's own value
	err         error
}

func (e *logError) Error() string {
	if e.event > 0 {
		return fmt.Sprintf("%d: event %d of the line's array: %v", e.line, e.event, e.err)
	}
	return fmt.Sprintf("%d: %v", e.line, e.err)
}

func (e *logError) Unwrap() error { return e.err }

// logErr says what is wrong with the decision log at path: file:line:
// when the error has a place.
func logErr(path string, err error) error {
	var le *logError
	if errors.As(err, &le) {
		return usageErr("%s:%v", path, err)
	}
	return usageErr("%s: %v", path, err)
}

// findDecision finds decision id in a decision log (see eachDecision).
func findDecision(r io.Reader, id string) (*loggedDecision, error) {
	var found *loggedDecision
	err := eachDecision(r, func(e *loggedDecision) error {
		if e.DecisionID == id {
			found = e
			return errFound
		}
		return nil
	})
	if errors.Is(err, errFound) {
		err = nil
	}
	return found, err
}

// errFound stops eachDecision once findDecision has its event.
var errFound = errors.New("found")

// eachDecision reads a decision log, gzip'd or not, line by line, each
// line a stream of JSON values (an event or an array of events), and
// calls fn with each decision event, in order, until fn returns an error.
// Events are read one at a time (an array is never held whole). Lines
// and values that are not JSON (a console log's other lines, a line cut
// short) and JSON that is no decision event (isDecision) are skipped;
// what exceeds defaultLogLimits is refused with its line.
func eachDecision(r io.Reader, fn func(*loggedDecision) error) error {
	return readDecisions(r, defaultLogLimits(), fn)
}

func readDecisions(r io.Reader, lim logLimits, fn func(*loggedDecision) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var inflated *boundedReader
	if head, _ := br.Peek(2); bytes.Equal(head, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return err
		}
		inflated = &boundedReader{r: zr, n: lim.bytes}
		br = bufio.NewReaderSize(inflated, 64<<10)
	}
	lr := &lineReader{br: br}
	dec := jsontext.NewDecoder(lr)
	events := 0
	for {
		lr.next()
		dec.Reset(lr)
		if err := readLine(lr, dec, lim, &events, fn); err != nil {
			return err
		}
		lr.skipRest()
		switch {
		case inflated != nil && inflated.over:
			return &logError{line: lr.line,
				err: fmt.Errorf("decompresses to more than %d bytes (capgate reads at most that of one file; split it)", lim.bytes)}
		case lr.err != nil: // the file's or gzip's
			return &logError{line: lr.line, err: lr.err}
		case lr.atEOF:
			return nil
		}
	}
}

// readLine reads the JSON values of one line. It returns fn's error or a
// bound exceeded (*logError); JSON that does not parse ends the line
// quietly (as a line that is not JSON is skipped), and so does a read
// error, which readDecisions then reports.
func readLine(lr *lineReader, dec *jsontext.Decoder, lim logLimits, events *int, fn func(*loggedDecision) error) error {
	for {
		lr.limit = dec.InputOffset() + lim.eventBytes
		switch dec.PeekKind() {
		case '{':
			if err := readEvent(lr, dec, lim, events, 0, fn); err != nil {
				return skipLine(err)
			}
		case '[':
			if _, err := dec.ReadToken(); err != nil {
				return lr.failure(0, lim)
			}
			if err := readArray(lr, dec, lim, events, fn); err != nil {
				return skipLine(err)
			}
		default: // not JSON, the line's end, or a bound
			return lr.failure(0, lim)
		}
	}
}

// readArray reads the events of an array up to its end.
func readArray(lr *lineReader, dec *jsontext.Decoder, lim logLimits, events *int, fn func(*loggedDecision) error) error {
	for i := 1; ; i++ {
		lr.limit = dec.InputOffset() + lim.eventBytes
		switch dec.PeekKind() {
		case ']':
			if _, err := dec.ReadToken(); err != nil {
				return errSkipLine
			}
			return nil
		case 0:
			if f := lr.failure(i, lim); f != nil {
				return f
			}
			return errSkipLine
		}
		if err := readEvent(lr, dec, lim, events, i, fn); err != nil {
			return err
		}
	}
}

// skipLine turns errSkipLine into the line's quiet end.
func skipLine(err error) error {
	if errors.Is(err, errSkipLine) {
		return nil
	}
	return err
}

// readEvent reads one value of a line (index: its position in the
// line's array, 0 for the line's own value) and calls fn when it is a
// decision event.
func readEvent(lr *lineReader, dec *jsontext.Decoder, lim logLimits, events *int, index int, fn func(*loggedDecision) error) error {
	if *events++; *events > lim.events {
		return &logError{line: lr.line, event: index,
			err: fmt.Errorf("more than %d events (capgate reads at most that many of one file; split it)", lim.events)}
	}
	v, err := dec.ReadValue()
	if err != nil {
		if f := lr.failure(index, lim); f != nil {
			return f
		}
		return errSkipLine
	}
	if !bytes.Contains(v, []byte(`"decision_id"`)) {
		return nil // no decision event; not worth decoding
	}
	var e loggedDecision
	if json.Unmarshal(v, &e) != nil || !e.isDecision() {
		return nil // JSON, not a decision event
	}
	return fn(&e)
}

// errSkipLine ends a line whose JSON does not parse (a truncated line, a
// line that only starts like JSON).
var errSkipLine = errors.New("skip the line")

// lineReader reads one line of br at a time, without holding it: Read
// returns io.EOF at the line's end (the newline is consumed), and an
// error once the current event would pass limit.
type lineReader struct {
	br    *bufio.Reader
	line  int   // the current line, 1-based
	n     int64 // bytes of the line read
	limit int64 // the current event ends by this offset of the line
	eol   bool  // the line's newline (or the file's end) was reached
	atEOF bool  // the file's end was reached
	over  bool  // an event passed limit
	err   error // br's error other than io.EOF
}

// errEventTooLarge is returned by lineReader.Read past an event's limit.
var errEventTooLarge = errors.New("event too large")

// next starts the next line.
func (l *lineReader) next() {
	l.line++
	l.n, l.eol, l.over = 0, false, false
}

func (l *lineReader) Read(p []byte) (int, error) {
	if l.eol {
		return 0, io.EOF
	}
	if l.n >= l.limit {
		l.over = true
		return 0, errEventTooLarge
	}
	if int64(len(p)) > l.limit-l.n {
		p = p[:l.limit-l.n]
	}
	if l.br.Buffered() == 0 {
		if _, err := l.br.Peek(1); err != nil {
			l.eol = true
			if err == io.EOF {
				l.atEOF = true
			} else {
				l.err = err
			}
			return 0, io.EOF
		}
	}
	b, _ := l.br.Peek(min(len(p), l.br.Buffered()))
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		n := copy(p, b[:i])
		_, _ = l.br.Discard(i + 1)
		l.n += int64(n)
		l.eol = true
		return n, nil
	}
	n := copy(p, b)
	_, _ = l.br.Discard(n)
	l.n += int64(n)
	return n, nil
}

// skipRest discards the rest of the current line, without holding it.
func (l *lineReader) skipRest() {
	for !l.eol {
		_, err := l.br.ReadSlice('\n')
		switch {
		case err == nil:
			l.eol = true
		case errors.Is(err, bufio.ErrBufferFull):
		case err == io.EOF:
			l.eol, l.atEOF = true, true
		default:
			l.eol, l.err = true, err
		}
	}
}

// failure turns a decoding error into the line's outcome: an event
// larger than the limit is refused (*logError); anything else ends the
// line (nil: JSON that does not parse is skipped, as other lines are).
func (l *lineReader) failure(index int, lim logLimits) error {
	if l.over {
		return &logError{line: l.line, event: index,
			err: fmt.Errorf("an event of more than %d bytes (capgate's events are a few KiB; this is not a decision log)", lim.eventBytes)}
	}
	return nil
}

// boundedReader reads at most n bytes of r, then fails (where
// io.LimitedReader would end quietly, cutting the file short).
type boundedReader struct {
	r    io.Reader
	n    int64
	over bool
}

// errLogTooLarge is returned by boundedReader past its bound.
var errLogTooLarge = errors.New("decision log too large")

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.n <= 0 {
		// Past the bound only if there is more to read.
		var one [1]byte
		if n, _ := b.r.Read(one[:]); n > 0 {
			b.over = true
			return 0, errLogTooLarge
		}
		return 0, io.EOF
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	n, err := b.r.Read(p)
	b.n -= int64(n)
	return n, err
}
