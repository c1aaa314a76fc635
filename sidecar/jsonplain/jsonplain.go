// Package jsonplain says which strings encoding/json writes as they are.
// Hand-written JSON encoders on hot paths (a handler token's claims, a
// message record on Redis) write such strings directly and leave every other
// one to encoding/json, so that their bytes stay json.Marshal's.
package jsonplain

// String reports that encoding/json (json.Marshal, or an Encoder with its
// default HTML escaping) writes s between its quotes byte for byte: s is
// printable ASCII other than the quote, the backslash and the HTML-escaped <,
// > and &. It is false for some strings encoding/json would also write as they
// are (DEL, valid UTF-8 beyond ASCII); those go to encoding/json.
func String(s string) bool {
	for i := range len(s) {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}
