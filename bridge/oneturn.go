package bridge

import (
	"encoding/json"

	"github.com/acp-bridge/acp-bridge/translate"
)

// OneTurnMode says what the engine does with a session/prompt for a session
// whose turn is still running (the compliance shim's one-turn rule). ACP
// has one turn per session at a time; an agent handed a second prompt runs
// both, or silently preempts one, and the editor's view of the session
// falls apart.
type OneTurnMode int

const (
	// OneTurnReject answers the second prompt at once with -32600 and a
	// message saying to wait for the running turn or cancel it.
	OneTurnReject OneTurnMode = iota
	// OneTurnQueue holds the second prompt until the running turn is
	// answered, then sends it to the agent. A session/cancel answers the
	// queued prompts "cancelled" as well.
	OneTurnQueue
	// OneTurnOff passes every prompt to the agent.
	OneTurnOff
)

// RepairOneTurn: a second prompt on a session with a running turn was
// rejected or queued.
const RepairOneTurn Repair = "one-turn"

// queuedPrompt is a prompt waiting for its session's running turn.
type queuedPrompt struct {
	req    *request
	params json.RawMessage
	frame  []byte
	idAt   int
}

// oneTurn applies the one-turn rule to a prompt the editor just sent, and
// reports whether it took the prompt (answered or queued it).
func (e *engine) oneTurn(req *request, env *translate.Envelope) bool {
	s := e.sessions[req.session]
	if e.b.OneTurn == OneTurnOff || s == nil || len(s.prompts)+len(s.queued) == 0 || s.link.queuesPrompts || e.v2.on {
		return false
	}
	if e.b.OneTurn == OneTurnQueue {
		l, err := e.route(req.session)
		if err != nil {
			return false // the usual path answers the routing error
		}
		req.link = l // a lost link answers the queued prompt too
		s.queued = append(s.queued, queuedPrompt{req: req, params: env.Params, frame: env.Frame, idAt: env.IDAt})
		e.repaired(RepairOneTurn, s.id, "a prompt sent while a turn was running waits for it")
		return true
	}
	rejectSecondPrompt(e, req, s)
	return true
}

// rejectSecondPrompt answers req, a prompt for s while s has a turn
// running, with the one-turn rule's error (for the core, and for durable
// sessions re-attaching s, through their hooks).
func rejectSecondPrompt(h sessionHooks, req *request, s *session) {
	h.repaired(RepairOneTurn, s.id, "a prompt sent while a turn was running was rejected")
	h.fail(req, translate.Errorf(translate.CodeInvalidRequest,
		"session %s already has a prompt running, and ACP allows one turn per session: wait for its answer, or send session/cancel and wait for the cancelled answer, then prompt again", s.id).
		With("sessionId", s.id))
}

// dequeue sends the next queued prompt of req's session once req, a
// prompt, was answered and no other turn runs.
func (e *engine) dequeue(req *request) {
	if req.method != "session/prompt" {
		return
	}
	s := e.sessions[req.session]
	for s != nil && len(s.prompts) == 0 && len(s.queued) > 0 {
		q := s.queued[0]
		s.queued = s.queued[1:]
		if q.req.retired {
			continue
		}
		e.promptStarted(q.req, q.params)
		if q.req.link == nil || q.req.link.down != nil {
			l, err := e.route(s.id)
			if err != nil {
				e.fail(q.req, err)
				continue
			}
			q.req.link = l
		}
		e.feed(q.req.link, translate.Msg{Kind: translate.Request, Ref: q.req.ref, Method: q.req.method, Body: q.params, Frame: q.frame, IDAt: q.idAt})
		return
	}
}

// cancelQueued answers the prompts queued on sid "cancelled": the editor's
// session/cancel covers every turn it asked for.
func (e *engine) cancelQueued(sid string) {
	s := e.sessions[sid]
	if s == nil || len(s.queued) == 0 {
		return
	}
	q := s.queued
	s.queued = nil
	for _, p := range q {
		if !p.req.retired {
			e.answer(p.req, json.RawMessage(`{"stopReason":"cancelled"}`))
		}
	}
}
