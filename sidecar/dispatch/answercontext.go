package dispatch

import (
	"go.uber.org/zap"

	"github.com/capgate/capgate/sidecar/exchange"
	"github.com/capgate/capgate/sidecar/protocol"
)

// answerContext is the context a message's answer must be in: the contextId the message names,
// else the context of the bound task it continues (when the handler said which). "" when it
// names neither: a new conversation, which the handler's answer starts.
func answerContext(call *exchange.Call) string {
	msg := call.Request.Message
	if msg == nil {
		return ""
	}
	if msg.ContextID != "" {
		return msg.ContextID
	}
	if t := call.Task; t != nil && !t.Pending && msg.TaskID != "" && t.TaskID == msg.TaskID {
		return t.ContextID
	}
	return ""
}

// inContext refuses an answer — a task, a message or a stream event — that names a context
// other than want (answerContext): the handler filed the caller's work in another
// conversation. It is the handler's error (InvalidAgentResponse), refused before anything is
// bound from the answer, so the other context does not become the caller's; the operator's log
// names both ids (bounded), never the answer's content.
func (d *Dispatcher) inContext(call *exchange.Call, want, got string) *protocol.Error {
	if want == "" || got == "" || got == want {
		return nil
	}
	d.log.Warn("handler answered in another context than the message's; answer refused",
		zap.String("decision_id", call.DecisionID), zap.String("context", protocol.ForLog(want)),
		zap.String("answer_context", protocol.ForLog(got)))
	return protocol.Errorf(protocol.InvalidAgentResponse, "the handler answered in another context than the message's")
}
