// Package lifecycle builds the capability lifecycle report: each
// capability's state, usage over the last 30 days and replacement, and which
// deprecated capabilities are safe to remove.
package lifecycle

import (
	"context"
	"fmt"
	"time"

	"github.com/capgate/capgate/policy/manifest"
	"github.com/capgate/capgate/sidecar/tasks"
)

// Window is how long a deprecated capability must go without calls before
// it is safe to remove (the store's usage window).
const Window = tasks.Window

// Verdict says whether a capability's manifest may be removed now.
type Verdict string

// Verdicts.
const (
	// Safe: deprecated and no calls for Window.
	Safe Verdict = "yes"
	// NotSafe: called within Window, or not deprecated.
	NotSafe Verdict = "no"
	// Unknown: deprecated, but its usage could not be read — never read as
	// "no calls".
	Unknown Verdict = "unknown"
	// NotEnoughHistory: deprecated and no calls seen, but the store has
	// counted calls for less than Window (a memory store since its process
	// started, say): the absence of calls proves nothing yet.
	NotEnoughHistory Verdict = "not enough history"
)

// Source reads the usage of capabilities as of now. It returns the usage it
// could read; ids missing from the map have unknown usage. A non-nil error
// means nothing could be read.
type Source interface {
	Usage(ctx context.Context, ids []string, now time.Time) (map[string]tasks.Usage, error)
}

// Entry is one capability's line of the report.
type Entry struct {
	Capability string `json:"capability"`
	State      string `json:"state"`
	Visibility string `json:"visibility"`
	ReplacedBy string `json:"replacedBy,omitempty"`
	// UsageKnown is false when the usage could not be read; the counts are
	// then absent, not zero.
	UsageKnown bool       `json:"usageKnown"`
	Calls30d   *int64     `json:"calls30d"`
	Total      *int64     `json:"total"`
	LastUsed   *time.Time `json:"lastUsed"`
	// SafeToRemove is Safe only for a deprecated capability with no calls in
	// the window; Reason says why.
	SafeToRemove Verdict `json:"safeToRemove"`
	Reason       string  `json:"reason"`
}

// Report is the lifecycle report of a registry.
type Report struct {
	Now    time.Time `json:"now"`
	Window string    `json:"window"`
	// UsageSource names where usage was read from; UsageError is set when it
	// could not be read at all.
	UsageSource string `json:"usageSource"`
	UsageError  string `json:"usageError,omitempty"`
	// ObservedSince is when the usage source began counting calls (the
	// latest start over the capabilities read); Observed is how long that
	// is before Now. Zero when unknown.
	ObservedSince *time.Time `json:"observedSince"`
	Observed      string     `json:"observed"`
	Entries       []Entry    `json:"capabilities"`
	// SafeToRemove lists the ids whose verdict is Safe; UnknownUsage the
	// deprecated ids whose usage could not be read.
	SafeToRemove []string `json:"safeToRemove"`
	UnknownUsage []string `json:"unknownUsage"`
}

// Build reads usage for every capability of reg from src and decides, for
// each, whether it is safe to remove at now. A Source failure does not fail
// the report: the affected capabilities are reported with unknown usage.
func Build(ctx context.Context, reg *manifest.Registry, src Source, sourceName string, now time.Time) Report {
	all := reg.All()
	ids := make([]string, len(all))
	for i := range all {
		ids[i] = all[i].ID
	}
	rep := Report{
		Now: now, Window: Window.String(), UsageSource: sourceName,
		Entries: make([]Entry, 0, len(all)), SafeToRemove: []string{}, UnknownUsage: []string{},
	}
	var usage map[string]tasks.Usage
	if src == nil {
		rep.UsageError = "no usage source"
	} else if u, err := src.Usage(ctx, ids, now); err != nil {
		rep.UsageError = err.Error()
	} else {
		usage = u
	}
	for i := range all {
		c := &all[i]
		u, known := usage[c.ID]
		e := Entry{
			Capability: c.ID, State: string(c.State), Visibility: string(c.Visibility),
			ReplacedBy: c.ReplacedBy, UsageKnown: known,
		}
		if known {
			if since := u.ObservedSince.UTC(); !u.ObservedSince.IsZero() && (rep.ObservedSince == nil || since.After(*rep.ObservedSince)) {
				rep.ObservedSince = &since
			}
			e.Calls30d, e.Total = &u.Calls30d, &u.Total
			if !u.LastUsed.IsZero() {
				lu := u.LastUsed.UTC()
				e.LastUsed = &lu
			}
		}
		e.SafeToRemove, e.Reason = verdict(c, u, known, now)
		switch e.SafeToRemove {
		case Safe:
			rep.SafeToRemove = append(rep.SafeToRemove, c.ID)
		case Unknown:
			rep.UnknownUsage = append(rep.UnknownUsage, c.ID)
		}
		rep.Entries = append(rep.Entries, e)
	}
	rep.Observed = "unknown"
	if rep.ObservedSince != nil {
		rep.Observed = now.Sub(*rep.ObservedSince).Round(time.Second).String()
	}
	return rep
}

// verdict decides whether c may be removed at now given its usage.
func verdict(c *manifest.Capability, u tasks.Usage, known bool, now time.Time) (Verdict, string) {
	switch c.State {
	case manifest.StateRemoved:
		return NotSafe, "already removed: its tombstone tells callers to use " + c.ReplacedBy
	case manifest.StateDeprecated:
	default:
		return NotSafe, fmt.Sprintf("state %s: deprecate it first", c.State)
	}
	if !known {
		return Unknown, "usage could not be read"
	}
	if u.Calls30d > 0 {
		return NotSafe, fmt.Sprintf("%d calls in the last %d days", u.Calls30d, windowDays())
	}
	// Calls30d counts whole days; LastUsed is checked too, so that a call
	// near the edge of the window keeps the capability.
	if !u.LastUsed.IsZero() && now.Sub(u.LastUsed) < Window {
		return NotSafe, "last used " + u.LastUsed.UTC().Format(time.RFC3339)
	}
	// No call in the window — but only a window observed in full shows it.
	if u.ObservedSince.IsZero() {
		return NotEnoughHistory, fmt.Sprintf("no calls seen, but when usage counting began is unknown; the rule needs %d days of history", windowDays())
	}
	if observed := now.Sub(u.ObservedSince); observed < Window {
		return NotEnoughHistory, fmt.Sprintf("no calls seen, but usage has been counted only since %s (%s); the rule needs %d days",
			u.ObservedSince.UTC().Format(time.RFC3339), observed.Round(time.Second), windowDays())
	}
	if u.Total == 0 {
		return Safe, "deprecated and never called"
	}
	return Safe, fmt.Sprintf("deprecated and no calls in the last %d days", windowDays())
}

func windowDays() int { return int(Window / (24 * time.Hour)) }
