// Package diag collects validation problems (file, line, field, message)
// so that loaders can report every problem at once.
package diag

import (
	"fmt"
	"sort"
	"strings"
)

// Problem is one validation finding.
type Problem struct {
	File    string `json:"file"`
	Line    int    `json:"line,omitempty"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// String renders "file:line: field: message" (line and field when known).
func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d", p.Line)
	}
	b.WriteString(": ")
	if p.Field != "" {
		b.WriteString(p.Field)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// Set is an error made of many problems.
type Set struct {
	Problems []Problem
}

// Add records a problem.
func (s *Set) Add(file string, line int, field, format string, args ...any) {
	s.Problems = append(s.Problems, Problem{File: file, Line: line, Field: field, Message: fmt.Sprintf(format, args...)})
}

// Merge appends the problems of another error: a *Set is flattened, any other
// error becomes one problem without position.
func (s *Set) Merge(err error) {
	if err == nil {
		return
	}
	if o, ok := err.(*Set); ok {
		s.Problems = append(s.Problems, o.Problems...)
		return
	}
	s.Problems = append(s.Problems, Problem{Message: err.Error()})
}

// Error lists every problem, one per line, sorted by file, line and field.
func (s *Set) Error() string {
	lines := make([]string, 0, len(s.Problems))
	for _, p := range s.sorted() {
		lines = append(lines, p.String())
	}
	return strings.Join(lines, "\n")
}

func (s *Set) sorted() []Problem {
	ps := append([]Problem(nil), s.Problems...)
	sort.SliceStable(ps, func(i, j int) bool {
		if ps[i].File != ps[j].File {
			return ps[i].File < ps[j].File
		}
		if ps[i].Line != ps[j].Line {
			return ps[i].Line < ps[j].Line
		}
		return ps[i].Field < ps[j].Field
	})
	return ps
}

// Sorted returns the problems in reporting order.
func (s *Set) Sorted() []Problem { return s.sorted() }

// ErrOrNil returns s when it holds a problem, nil otherwise.
func (s *Set) ErrOrNil() error {
	if s == nil || len(s.Problems) == 0 {
		return nil
	}
	return s
}
