package tasks

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"
)

// Example is a candidate routing example: a redacted message text and the
// capability the caller chose for it when asked, with how many answers gave
// it and when (capgate's clock). It holds nothing about who answered.
type Example struct {
	Capability string
	Text       string
	Count      int
	First      time.Time
	Last       time.Time
}

// Examples keeps candidate routing examples per capability until they are
// reviewed (`capgate route examples`): at most maxPerCapability distinct texts
// per capability (the least recently seen go first), each kept ttl after it
// was last seen. The same text again counts once more.
type Examples interface {
	// AddExample records one answer: text (already redacted and bounded) for
	// capability.
	AddExample(ctx context.Context, capability, text string, ttl time.Duration, maxPerCapability int) error
	// ExamplesOf lists capability's candidates seen within ttl, by text.
	ExamplesOf(ctx context.Context, capability string, ttl time.Duration) ([]Example, error)
	// DropExamples forgets the given texts of capability (accepted or rejected).
	DropExamples(ctx context.Context, capability string, texts []string) error
}

var _ Examples = (*Memory)(nil)

// memoryExamples is the memory store's candidates; the zero value is empty.
type memoryExamples struct {
	mu   sync.Mutex
	caps map[string]map[string]*Example
}

// AddExample implements Examples.
func (m *Memory) AddExample(_ context.Context, capability, text string, ttl time.Duration, maxPerCapability int) error {
	x := &m.examples
	now := m.now()
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.caps == nil {
		x.caps = map[string]map[string]*Example{}
	}
	set := x.caps[capability]
	if set == nil {
		set = map[string]*Example{}
		x.caps[capability] = set
	}
	for t, e := range set {
		if !now.Before(e.Last.Add(ttl)) {
			delete(set, t)
		}
	}
	if e, ok := set[text]; ok {
		e.Count++
		e.Last = now
		return nil
	}
	for len(set) >= max(maxPerCapability, 1) {
		var oldest *Example
		for _, e := range set {
			if oldest == nil || e.Last.Before(oldest.Last) || (e.Last.Equal(oldest.Last) && e.Text < oldest.Text) {
				oldest = e
			}
		}
		delete(set, oldest.Text)
	}
	set[text] = &Example{Capability: capability, Text: text, Count: 1, First: now, Last: now}
	return nil
}

// ExamplesOf implements Examples.
func (m *Memory) ExamplesOf(_ context.Context, capability string, ttl time.Duration) ([]Example, error) {
	x := &m.examples
	now := m.now()
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []Example
	for _, e := range x.caps[capability] {
		if now.Before(e.Last.Add(ttl)) {
			out = append(out, *e)
		}
	}
	slices.SortFunc(out, func(a, b Example) int { return strings.Compare(a.Text, b.Text) })
	return out, nil
}

// DropExamples implements Examples.
func (m *Memory) DropExamples(_ context.Context, capability string, texts []string) error {
	x := &m.examples
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, t := range texts {
		delete(x.caps[capability], t)
	}
	return nil
}
