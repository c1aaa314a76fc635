package dispatch

import (
	"context"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"go.uber.org/zap"

	"github.com/capgate/capgate/policy/manifest"
	"github.com/capgate/capgate/sidecar/exchange"
	"github.com/capgate/capgate/sidecar/protocol"
	"github.com/capgate/capgate/sidecar/router"
	"github.com/capgate/capgate/sidecar/router/learn"
)

// Learner keeps candidate routing examples for review (tasks.Memory and
// redisstore.Store do; a store that does not keeps none).
type Learner interface {
	AddExample(ctx context.Context, capability, text string, ttl time.Duration, maxPerCapability int) error
}

// heldText is the text of the first message a clarification held: the first
// parts of the combined message msg, as many as held has (text parts only;
// file and data parts are never kept).
func heldText(msg *protocol.MessageInfo, held []byte) string {
	var parts []jsontext.Value
	if msg == nil || json.Unmarshal(held, &parts) != nil {
		return ""
	}
	n := min(len(parts), len(msg.Parts))
	return router.MessageText(&protocol.MessageInfo{Parts: msg.Parts[:n]})
}

// candidateExample is what an answered clarification may add to the
// candidate examples of the capability the caller chose: the first message's
// text, redacted and bounded; "" when capture is off for the capability (the
// deployment's router.learn.capture, overridden by its routing.learn), the
// message was not the answer to a clarification, or nothing is left of its
// text. Nothing of the caller goes with it.
func (d *Dispatcher) candidateExample(call *exchange.Call, r routed, m *manifest.Capability) string {
	if d.learner == nil || r.pending == nil || r.example == "" {
		return ""
	}
	cfg := call.Rev.Config().Router.Learn
	if !m.Routing.LearnOn(cfg.Capture) {
		return ""
	}
	return learn.Redact(r.example, cfg.MaxTextBytes)
}

// keepExample stores a candidate example; a failure costs the example only.
// The text is never logged.
func (d *Dispatcher) keepExample(ctx context.Context, call *exchange.Call, capability, text string) {
	if text == "" {
		return
	}
	cfg := call.Rev.Config().Router.Learn
	if err := d.learner.AddExample(context.WithoutCancel(ctx), capability, text, cfg.TTL, cfg.MaxPerCapability); err != nil {
		d.log.Warn("candidate routing example not kept", zap.String("decision_id", call.DecisionID),
			zap.String("capability", capability), zap.Error(err))
	}
}

// unsuccessful reports whether a handler's answer (a result or stream event)
// says its task failed, was rejected or was canceled: the caller's choice is
// then not kept as an example.
func unsuccessful(result jsontext.Value) bool {
	var p struct {
		Task *struct {
			Status struct {
				State string `json:"state"`
			} `json:"status"`
		} `json:"task"`
		StatusUpdate *struct {
			Status struct {
				State string `json:"state"`
			} `json:"status"`
		} `json:"statusUpdate"`
		Status struct { // 0.3: the task or status update itself
			State string `json:"state"`
		} `json:"status"`
	}
	if json.Unmarshal(result, &p, json.RejectUnknownMembers(false)) != nil {
		return false
	}
	state := p.Status.State
	switch {
	case p.Task != nil:
		state = p.Task.Status.State
	case p.StatusUpdate != nil:
		state = p.StatusUpdate.Status.State
	}
	switch strings.TrimPrefix(strings.ToLower(state), "task_state_") {
	case "failed", "rejected", "canceled", "cancelled":
		return true
	}
	return false
}

// learnFromStream keeps text as a candidate of capability once the stream
// has ended without error and without a failed, rejected or canceled state.
func (d *Dispatcher) learnFromStream(ctx context.Context, call *exchange.Call, res exchange.Result, capability, text string) exchange.Result {
	if text == "" || res.Stream == nil {
		return res
	}
	inner := res.Stream
	res.Stream = func(yield func(exchange.Event) error) *protocol.Error {
		bad := false
		err := inner(func(ev exchange.Event) error {
			bad = bad || unsuccessful(ev.JSON)
			return yield(ev)
		})
		if err == nil && !bad {
			d.keepExample(ctx, call, capability, text)
		}
		return err
	}
	return res
}
