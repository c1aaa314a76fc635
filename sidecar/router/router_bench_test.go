package router

import (
	"fmt"
	"testing"

	"github.com/capgate/capgate/policy/manifest"
	"github.com/capgate/capgate/sidecar/protocol"
)

// BenchmarkRoute150 routes a message that accepts JSON over 150 entitled
// capabilities (the gateway benchmark's shape): candidates, then the
// classifier; by id (a map lookup per capability) and by position (an
// IndexedCaller, as Rights answers from its view's bitset).
func BenchmarkRoute150(b *testing.B) {
	caps := make([]manifest.Capability, 150)
	entitled := map[string]bool{}
	topics := []string{"invoice", "ledger", "payment", "refund", "forecast", "budget", "expense", "payroll", "tax", "audit"}
	for i := range caps {
		id := fmt.Sprintf("cap-%03d", i)
		topic := topics[i%len(topics)]
		caps[i] = manifest.Capability{ID: id, State: manifest.StateGA, Skill: manifest.Skill{
			Name:        fmt.Sprintf("%s task %d", topic, i),
			Description: "A synthetic capability.",
			Examples:    []string{fmt.Sprintf("please handle the %s number %d", topic, i), fmt.Sprintf("%s %d status", topic, i)},
			InputModes:  []string{"text/plain"}, OutputModes: []string{"application/json"}}}
		entitled[id] = true
	}
	ix := NewIndex(manifest.NewRegistry(caps), 0.6)
	byID := rights{entitled: entitled}
	at := make([]bool, len(caps))
	for i := range at {
		at[i] = true
	}
	msg := &protocol.MessageInfo{AcceptedOutputModes: []string{"application/json"},
		Parts: []protocol.PartInfo{text("what is the status of the refund number 42")}}
	for _, bc := range []struct {
		name string
		c    Caller
	}{{"by id", byID}, {"by position", positions{rights: byID, reg: ix.reg, at: at}}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ix.Route(msg, bc.c); err != nil {
					b.Fatal(err.Message)
				}
			}
		})
	}
}

// positions is an IndexedCaller answering from a slice by position, as Rights does from a bitset.
type positions struct {
	rights
	reg *manifest.Registry
	at  []bool
}

func (p positions) EntitledAt(reg *manifest.Registry, i int) (bool, bool) {
	if reg != p.reg {
		return false, false
	}
	return p.at[i], true
}
