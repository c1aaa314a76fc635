package enforce

import (
	"mime"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/capgate/capgate/sidecar/protocol"
)

// Bounds on what an output-mode refusal repeats of the caller's list.
const (
	maxListedModes = 8
	maxModeBytes   = 64
)

// OutputModes checks a handler's final answer to SendMessage (result, in
// the wire shape of protocol version v) against the caller's
// acceptedOutputModes. The answer's output is a message's parts, or a
// task's artifact parts (a task's status message is not output). When the
// caller named accepted modes and the answer carries output of which no
// part is in an accepted mode (type/* and */* match), the caller gets
// ContentTypeNotSupported naming what it accepts and what the capability
// produced, instead of output it cannot use. No preference, no output yet
// (a task still working) or an answer that cannot be read passes: the
// first two are not a mismatch, and reading the answer is the dispatcher's
// concern. produced is the sorted distinct media types of the output, for
// the audit line.
func OutputModes(capability string, accepted []string, result jsontext.Value, v protocol.Version) (produced []string, err *protocol.Error) {
	if len(accepted) == 0 {
		return nil, nil
	}
	produced = producedTypes(result, v)
	if len(produced) == 0 {
		return nil, nil
	}
	for _, a := range accepted {
		a = normalize(a)
		for _, p := range produced {
			if match(a, p) {
				return produced, nil
			}
		}
	}
	acc := ClipModes(accepted)
	return produced, protocol.Errorf(protocol.ContentTypeNotSupported,
		"capability %s answered with %s, none of which you accept (acceptedOutputModes: %s)",
		capability, strings.Join(produced, ", "), strings.Join(acc, ", ")).
		WithMetadata("capabilityId", capability).
		WithMetadata("accepted", strings.Join(acc, ",")).
		WithMetadata("produced", strings.Join(produced, ","))
}

// wirePart is a part in either version: 1.0 has one of text, raw, url,
// data and an optional mediaType; 0.3 has a kind and, for files,
// file.mimeType.
type wirePart struct {
	Text      *jsontext.Value `json:"text"`
	Raw       *jsontext.Value `json:"raw"`
	URL       *jsontext.Value `json:"url"`
	Data      *jsontext.Value `json:"data"`
	MediaType string          `json:"mediaType"`
	Kind      string          `json:"kind"`
	File      *struct {
		MimeType string `json:"mimeType"`
	} `json:"file"`
}

type wireMessage struct {
	Parts []wirePart `json:"parts"`
}

type wireTask struct {
	Artifacts []struct {
		Parts []wirePart `json:"parts"`
	} `json:"artifacts"`
}

// producedTypes lists the media types of an answer's output.
func producedTypes(result jsontext.Value, v protocol.Version) []string {
	var parts []wirePart
	if v == protocol.V03 {
		var probe struct {
			Kind string `json:"kind"`
			wireMessage
			wireTask
		}
		if json.Unmarshal(result, &probe, json.RejectUnknownMembers(false)) != nil {
			return nil
		}
		switch probe.Kind {
		case "message":
			parts = probe.Parts
		case "task":
			for _, a := range probe.Artifacts {
				parts = append(parts, a.Parts...)
			}
		}
	} else {
		var probe struct {
			Message *wireMessage `json:"message"`
			Task    *wireTask    `json:"task"`
		}
		if json.Unmarshal(result, &probe, json.RejectUnknownMembers(false)) != nil {
			return nil
		}
		switch {
		case probe.Message != nil:
			parts = probe.Message.Parts
		case probe.Task != nil:
			for _, a := range probe.Task.Artifacts {
				parts = append(parts, a.Parts...)
			}
		}
	}
	var out []string
	for _, p := range parts {
		out = append(out, p.mediaType(v))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// mediaType is the part's declared type, or the default for its kind (as
// the request parser reads parts).
func (p wirePart) mediaType(v protocol.Version) string {
	declared, kind := p.MediaType, ""
	if v == protocol.V03 {
		kind = p.Kind
		if p.File != nil {
			declared = p.File.MimeType
		}
	} else {
		switch {
		case p.Text != nil:
			kind = "text"
		case p.Data != nil:
			kind = "data"
		}
	}
	if t := normalize(declared); t != "" {
		return t
	}
	switch kind {
	case "text":
		return "text/plain"
	case "data":
		return "application/json"
	}
	return "application/octet-stream"
}

func normalize(t string) string {
	if mt, _, err := mime.ParseMediaType(t); err == nil {
		return mt
	}
	return strings.ToLower(strings.TrimSpace(t))
}

// match is protocol.MediaTypeMatches.
func match(p, t string) bool { return protocol.MediaTypeMatches(p, t) }

// ClipModes bounds the caller's list before it is repeated in an error or
// a log line: at most 8 entries of at most 64 bytes (cut at a character
// boundary).
func ClipModes(modes []string) []string {
	out := make([]string, 0, min(len(modes), maxListedModes))
	for i, m := range modes {
		if i == maxListedModes {
			out = append(out, "…")
			break
		}
		if len(m) > maxModeBytes {
			n := maxModeBytes
			for n > 0 && !utf8.RuneStart(m[n]) {
				n--
			}
			m = m[:n] + "…"
		}
		out = append(out, m)
	}
	return out
}
