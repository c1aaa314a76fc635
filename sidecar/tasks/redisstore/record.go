package redisstore

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/capgate/capgate/sidecar/jsonplain"
	"github.com/capgate/capgate/sidecar/tasks"
)

// A Sent record is written twice per message (reserve, settle). encoding/json builds it by
// reflection, with three allocations of its own; appendSent writes the same bytes into a
// pooled buffer (TestAppendSentMatchesJSON holds it to json.Marshal).

// recordBuffers are the buffers of encodeSent; one larger than maxPooledRecord is dropped.
var recordBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

const maxPooledRecord = 4 << 10

// encodeSent is s as json.Marshal encodes it, in a pooled buffer (buf; nil when not pooled)
// that releaseRecord returns once the record is sent.
func encodeSent(s tasks.Sent) (rec []byte, buf *[]byte, err error) {
	bp := recordBuffers.Get().(*[]byte)
	b, ok := appendSent((*bp)[:0], s)
	if !ok {
		recordBuffers.Put(bp)
		rec, err = json.Marshal(s)
		return rec, nil, err
	}
	*bp = b
	return b, bp, nil
}

// releaseRecord returns encodeSent's buffer (nil: none) to the pool.
func releaseRecord(buf *[]byte) {
	if buf != nil && cap(*buf) <= maxPooledRecord {
		recordBuffers.Put(buf)
	}
}

// appendSent appends s as json.Marshal encodes it; ok is false, and the caller marshals it with
// encoding/json, for a record whose text needs escaping (a string with a byte outside printable
// ASCII, a quote, a backslash or one of <, >, &, which encoding/json escapes) or whose time
// encoding/json refuses or writes otherwise (a year outside 0-9999).
func appendSent(b []byte, s tasks.Sent) (_ []byte, ok bool) {
	if !plainTime(s.Started) || !plainTime(s.Deadline) {
		return b, false
	}
	for _, v := range [...]string{s.Digest, s.TaskID, s.ContextID, s.Capability, s.Handler} {
		if !jsonplain.String(v) {
			return b, false
		}
	}
	b = append(b, `{"started":"`...)
	b = s.Started.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","deadline":"`...)
	b = s.Deadline.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	b = appendField(b, "digest", s.Digest)
	if s.Done {
		b = append(b, `,"done":true`...)
	}
	b = appendField(b, "taskId", s.TaskID)
	b = appendField(b, "contextId", s.ContextID)
	b = appendField(b, "capability", s.Capability)
	b = appendField(b, "handler", s.Handler)
	if s.Lost {
		b = append(b, `,"lost":true`...)
	}
	return append(b, '}'), true
}

// appendField appends ,"name":"v" unless v is empty (omitempty).
func appendField(b []byte, name, v string) []byte {
	if v == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, `":"`...)
	b = append(b, v...)
	return append(b, '"')
}

// plainTime reports whether encoding/json writes t as AppendFormat(RFC3339Nano) does: a year
// in 0-9999 and a zone offset under a day (time.Time.MarshalJSON refuses the others).
func plainTime(t time.Time) bool {
	_, off := t.Zone()
	return t.Year() >= 0 && t.Year() <= 9999 && off > -24*3600 && off < 24*3600
}
