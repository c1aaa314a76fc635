package manifest

import (
	"encoding/binary"
	"strings"

	"github.com/capgate/capgate/policy/diag"
)

// session is what the manifests decoded by one Load (or LoadJSONArray, or
// Parse) share. It interns the strings and string lists that repeat across
// manifests (states, handlers, tags, media types, scopes, tenant lists), so
// that a large registry keeps one copy of each instead of one per manifest.
// A session is dropped when loading ends: nothing is kept globally, and the
// registry retains only the values it uses.
//
// Interned lists are shared among capabilities, which is safe because a
// registry's capabilities are read-only (see Registry.All); every shared
// list has cap == len, so even an append by a careless caller copies it
// rather than writing into another capability's list.
type session struct {
	strs  map[string]string
	lists map[string][]string
	key   []byte         // scratch: the key of a list
	buf   []string       // scratch: a list being read
	lines map[string]int // scratch: the decoder's field lines, cleared per manifest
	// meant are the fields an unknown key was taken to misspell (cleared
	// per manifest), whose "required" problem is then not reported twice.
	meant map[string]bool
	// warnings are the findings that do not stop loading (deprecations).
	warnings diag.Set
}

func newSession() *session {
	return &session{strs: map[string]string{}, lists: map[string][]string{}, lines: map[string]int{}, meant: map[string]bool{}}
}

// str returns the session's copy of s.
func (s *session) str(v string) string {
	if w, ok := s.strs[v]; ok {
		return w
	}
	s.strs[v] = v
	return v
}

// list returns the session's copy of l, whose elements are interned too.
// The result is never nil (an empty list stays an empty list) and has
// cap == len; l itself is not kept, so it may be scratch space.
func (s *session) list(l []string) []string {
	k := s.key[:0]
	for _, v := range l {
		k = binary.AppendUvarint(k, uint64(len(v)))
		k = append(k, v...)
	}
	s.key = k
	if w, ok := s.lists[string(k)]; ok {
		return w
	}
	w := make([]string, len(l))
	for i, v := range l {
		w[i] = s.str(v)
	}
	s.lists[string(k)] = w
	return w
}

// within returns v as a substring of s when s contains it, so that v shares
// s's memory. The registry keeps both a capability's id and its file name,
// and manifests are usually named after their id ("capabilities/<id>.yaml").
func within(s, v string) string {
	if i := strings.LastIndex(s, v); i >= 0 {
		return s[i : i+len(v)]
	}
	return v
}
