package bridge

import (
	"encoding/json"
	"time"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/tidwall/gjson"
)

// cancelRequest handles the editor's $/cancel_request: ids are per hop, so
// the translator re-issues it with its own agent-hop id, or ignores it.
func (e *engine) cancelRequest(params json.RawMessage) {
	r := gjson.GetBytes(params, "requestId")
	if !r.Exists() {
		return
	}
	req := e.pending.byEditorID(idKey(json.RawMessage(r.Raw)))
	if req == nil || req.link == nil || req.link.down != nil {
		return // already answered, or never seen: ignored, as ACP's $/cancel_request asks
	}
	e.feed(req.link, translate.Msg{Kind: translate.CancelRequest, Ref: req.ref, Grace: e.b.cancelGrace()})
}

// armCancelGrace starts the grace period of every prompt of sid that is
// pending and not already cancelled: each cancelled prompt gets its own, so
// a prompt cancelled while an earlier one's grace runs is covered too. When
// a prompt's grace ends, the engine answers it with stopReason "cancelled"
// itself if the agent has not: agents that ignore a cancel and leave the
// turn open are a common bug (agentclientprotocol/claude-agent-acp #442,
// zed-industries/codex-acp #186).
func (e *engine) armCancelGrace(sid string) {
	s := e.sessions[sid]
	if s == nil {
		return
	}
	d := e.b.cancelGrace()
	for _, ref := range s.prompts {
		req := e.pending.get(ref)
		if req == nil || req.grace != nil {
			continue
		}
		req.grace = time.AfterFunc(d, func() { e.post(func() { e.graceExpired(req, s, d) }) })
	}
}

// graceExpired answers a cancelled prompt the agent did not end in time and
// drops what the agent still sends for that turn, unless another turn of
// the session is open.
func (e *engine) graceExpired(req *request, s *session, d time.Duration) {
	if req.retired {
		return
	}
	e.log.Warn("agent did not end the cancelled turn in time; answering cancelled", "session", s.id, "grace", d)
	e.tap(TapEvent{Hop: BridgeHop, Session: s.id, Note: "cancel-grace",
		Detail: "the agent did not end the cancelled turn within " + d.String() + "; the bridge answered stopReason cancelled"})
	e.answer(req, json.RawMessage(`{"stopReason":"cancelled"}`))
	if e.sessions[s.id] == s {
		e.abandoned[req.ref] = s.id
		// Another prompt still open on the session (an agent that queues
		// them) may be what the agent's updates are for: they are dropped
		// only once no turn of the session is open.
		s.draining = len(s.prompts) == 0
	}
	if req.link != nil && req.link.down == nil {
		e.feed(req.link, translate.Msg{Kind: translate.Abandon, Ref: req.ref})
	}
}
