package router

import (
	"fmt"
	"testing"

	"github.com/capgate/capgate/policy/manifest"
	"github.com/capgate/capgate/sidecar/protocol"
)

// BenchmarkRoute150 routes a message that accepts JSON over 150 entitled
// capabilities (the gateway benchmark's shape): candidates, then the
// classifier.
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
	c := rights{entitled: entitled}
	msg := &protocol.MessageInfo{AcceptedOutputModes: []string{"application/json"},
		Parts: []protocol.PartInfo{text("what is the status of the refund number 42")}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := ix.Route(msg, c); err != nil {
			b.Fatal(err.Message)
		}
	}
}
