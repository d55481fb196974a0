package rules

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acp-bridge/acp-bridge/internal/wire"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/tidwall/gjson"
)

// Note names (translate.Out Note): what the engine counts and logs.
const (
	noteUnmatched = "unmatched-frames"
	noteDropped   = "drained-turn-updates"
	noteAgentCall = "unsupported-agent-requests"
	// noteCancelRefused: the agent answered a forwarded cancel with an
	// error. The engine logs it at WARN: the agent may still be running the
	// turn the editor was told is over.
	noteCancelRefused = "cancel-refused"
	// noteTurnQuiet: no frame of a turn matched a rule for Profile.quiet.
	// The engine logs it at WARN: a typo in a match hangs a turn silently.
	noteTurnQuiet = "turn-quiet"
	// noteCancelUnacked: a forwarded stop was not acknowledged (the
	// cancel block's ack) within its grace. The engine logs it at WARN.
	noteCancelUnacked = "cancel-unacknowledged"
	// noteCancelAcked: the agent acknowledged a forwarded stop.
	noteCancelAcked = "cancel-acknowledged"
	// noteCancelIgnored: a turn whose stop was forwarded ended through an
	// end rule saying the agent finished it. The engine logs it at WARN:
	// the editor's stop did not stop the agent.
	noteCancelIgnored = "cancel-ignored"
	// noteConnectExpect says which frame the connect block waits for, when
	// it starts waiting: a person told only that initialize timed out
	// learns what never came (acp-bridge doctor reports it).
	noteConnectExpect = "connect-expect"
	// noteConnectRejected: the connect block's reject matched, with the
	// frame and the environment variables the profile reads (most often
	// the credentials it sent). The engine logs it at WARN; acp-bridge
	// doctor reports it.
	noteConnectRejected = "connect-rejected"
	// noteInvalidStop: an end_turn expression gave a value that is no
	// stop reason; the turn ended end_turn. The engine logs it at WARN.
	noteInvalidStop = "invalid-stop-reason"
)

type connState int

const (
	connOpen      connState = iota // no connect block, or its work is done
	connWaitUp                     // waiting for LinkUp
	connWaitFrame                  // connect frames sent, waiting for expect
	connRejected                   // the agent refused the connection
)

// translator is one agent link driven by a profile.
type translator struct {
	// cur is the envelope of the JSON-RPC frame fromAgent is translating,
	// nil otherwise: lookups under params start from its params.
	cur     *translate.Envelope
	env     translate.Envelope // the storage cur points to
	p       *Profile
	envVars map[string]string
	now     time.Time
	// rule names the rule that handled the last agent frame (an event's
	// name, "reply METHOD", "error", "connect.expect"…), for traces.
	rule string
	// grace is the engine's cancel grace, as its last cancel said
	// (translate.Msg.Grace): how long the agent has to acknowledge a stop
	// when the cancel block does not say.
	grace time.Duration

	conn      connState
	rejectErr json.RawMessage
	held      []translate.Msg

	nextID   uint64
	waiting  []*exchange
	byID     map[string]*exchange
	sessions []*session
	minted   int

	nextCall translate.Ref
	perms    map[translate.Ref]*pendingPermission
	stale    map[translate.Ref]bool

	// ended are the keys of the last turns that ended, when the turn key
	// is a value the agent assigns (turn { key = { turn = NAME } }): a
	// frame naming one is a late frame of that turn, not the first frame
	// of a turn whose id is not kept yet.
	ended []string

	nextBeat time.Time
	armed    time.Time
	// st is the match state of the frame being handled (reused).
	st state
	// keyed says the frame being handled named its turn by the turn key:
	// it belongs to that turn, whatever rule it matches.
	keyed bool
}

// exchange is one request sent to the agent whose reply is awaited.
type exchange struct {
	req    *requestRule
	method string
	ref    translate.Ref // 0 once answered or abandoned
	id     uint64
	sent   []byte
	sess   *session
	turn   *turn
	// session/new
	cwd       string
	sessionID string
}

type session struct {
	id   string
	cwd  string
	kept map[string][]byte
	// agentSession is the text of kept["agent_session"], for routing.
	agentSession string
	turns        []*turn // oldest first; only the last can be live
	tools        []*tool
	seq          int
	// toolIDs are the toolCallIds the session has used: an agent that
	// numbers its tool calls per turn would otherwise give two turns the
	// same ids, which editors merge.
	toolIDs map[string]bool
	// lateRefused are the last calls the editor refused that the agent had
	// not closed when their turn ended: a report of one after that is
	// noted as late, not dropped without a word.
	lateRefused []*tool
	// draining: the last turn ended cancelled (or was answered by the
	// engine), and the agent may not have stopped with it: updates of no
	// turn are dropped until the next prompt, as the engine does for the
	// turns it answers itself.
	draining bool
}

type turn struct {
	ref       translate.Ref
	sess      *session
	ex        *exchange
	cancelled bool // session/cancel was forwarded: the end is answered "cancelled"
	dropped   bool // already answered: frames until its end are dropped
	// refused: the agent answered the cancel with an error, so it may never
	// end the turn; the next prompt of the session forgets it.
	refused  bool
	streamed bool // an agent_message_chunk was sent
	deadline time.Time
	perm     translate.Ref
	// quietAt and giveUpAt are when the turn has gone Profile.quiet and
	// Profile.giveUp without a frame a rule matched (zero: not armed);
	// unmatched is the last frame no rule matched meanwhile, for the
	// warning.
	quietAt, giveUpAt time.Time
	unmatched         []byte
	// key is the turn's value of the profile's turn key (turn { key }),
	// read from the frame its prompt was sent as; keyed says it has one.
	key   string
	keyed bool
	// ackBy is when a forwarded stop must have been acknowledged (the
	// cancel block's ack and grace); zero when none is awaited. ackGrace
	// is the grace it was given.
	ackBy    time.Time
	ackGrace time.Duration
	// stopKey is the value of the turn key (its sent path) in the stop
	// frame forwarded for the turn, when it has one: an error frame naming
	// it is the agent refusing that stop.
	stopKey   string
	stopKeyed bool
	// kept are the values events kept for the turn (turn.NAME).
	kept map[string][]byte
	// reportBy: the editor refused a permission whose rule ends the turn,
	// and the turn's end waits until then for the agent's report of the
	// refused call (each report moves it reportWait on); the agent's own
	// end of the turn comes first if it comes. Zero when not waiting.
	reportBy   time.Time
	reportWait time.Duration
}

type tool struct {
	id, key, name, title, kind string
	input, output              strings.Builder
	rawInput                   []byte
	announced                  bool
	// rejected: the editor refused the permission the tool asked for, and
	// it was reported failed. It is no longer open (no permission or
	// $tool state refers to it), but the agent's own report of it (its
	// output, its status) still finds it by key or name, until the agent
	// closes it or the turn ends.
	rejected bool
}

type pendingPermission struct {
	rule    *permissionRule
	turn    *turn
	tool    *tool
	frame   []byte
	options map[string]string // optionId → kind
}

func newTranslator(p *Profile, envVars map[string]string) *translator {
	t := &translator{p: p, envVars: envVars, grace: defaultCancelGrace, byID: map[string]*exchange{},
		perms: map[translate.Ref]*pendingPermission{}, stale: map[translate.Ref]bool{}}
	if p.connect != nil {
		t.conn = connWaitUp
	}
	return t
}

var _ translate.AgentClock = (*translator)(nil)

// --- editor side -----------------------------------------------------------------

// FromEditor implements translate.Translator.
func (t *translator) FromEditor(m translate.Msg) ([]translate.Out, error) {
	if !m.At.IsZero() {
		t.now = m.At
	}
	if m.Grace > 0 {
		t.grace = m.Grace
	}
	var outs []translate.Out
	var err error
	switch m.Kind {
	case translate.Request, translate.Notification:
		if t.conn == connWaitUp || t.conn == connWaitFrame {
			m.Body = append(json.RawMessage(nil), m.Body...)
			t.held = append(t.held, m)
			return t.wake(nil), nil
		}
		if m.Kind == translate.Request {
			outs = t.request(m)
		} else {
			outs = t.notification(m)
		}
	case translate.Response:
		outs, err = t.permissionAnswer(m)
	case translate.CancelRequest:
		if tr := t.turnByRef(m.Ref); tr != nil && !tr.dropped {
			outs = t.cancelTurn(tr)
		}
	case translate.Abandon:
		outs = t.abandon(m.Ref)
	case translate.LinkUp:
		outs = t.linkUp()
	case translate.LinkDown:
		grace := t.grace
		*t = *newTranslator(t.p, t.envVars)
		t.grace = grace
		return nil, nil
	case translate.Tick:
		t.armed = time.Time{}
		outs = t.tick()
	default:
		return nil, fmt.Errorf("rules: unexpected editor input kind %d", m.Kind)
	}
	return t.wake(outs), err
}

func (t *translator) request(m translate.Msg) []translate.Out {
	switch m.Method {
	case "initialize":
		return t.initialize(m)
	case "session/new", "session/load", "session/resume":
		return t.newSession(m)
	case "session/prompt":
		return t.prompt(m)
	case "session/close":
		return t.closeSession(m)
	}
	if t.conn == connRejected {
		return []translate.Out{fail(m.Ref, t.rejectErr)}
	}
	req := t.p.requests[m.Method]
	if req == nil {
		return []translate.Out{failf(m.Ref, translate.CodeMethodNotFound,
			"%s is not available: profile %s does not say how to send it to the agent", m.Method, t.p.Name)}
	}
	sess := t.session(gjson.GetBytes(m.Body, "sessionId").Str)
	return t.send(req, m, sess, nil)
}

func (t *translator) notification(m translate.Msg) []translate.Out {
	if m.Method != "session/cancel" {
		return nil
	}
	sess := t.session(gjson.GetBytes(m.Body, "sessionId").Str)
	if sess == nil {
		return nil
	}
	if tr := sess.live(); tr != nil {
		return t.cancelTurn(tr)
	}
	return nil
}

// send builds and sends the frames of req and answers or awaits the reply.
func (t *translator) send(req *requestRule, m translate.Msg, sess *session, setup func(*exchange)) []translate.Out {
	t.nextID++
	e := t.evalEnv(nil, m.Body, sess, nil)
	if m.Method == "session/prompt" {
		e.prompt = promptText(m.Body)
	}
	var outs []translate.Out
	var first []byte
	if req.agentMethod != "" {
		var params []byte
		if req.params != nil {
			if v := req.params.eval(e); !v.absent() {
				params = v.appendJSON(nil)
			}
		}
		f := t.rpcFrame(req.agentMethod, params, !req.notify)
		first = f
		outs = append(outs, frameOut(f))
	}
	for _, f := range t.evalFrames(req.send, e, false) {
		if first == nil {
			first = f
		}
		outs = append(outs, frameOut(f))
	}
	awaits := req.reply != nil || (req.agentMethod != "" && !req.notify)
	ex := &exchange{req: req, method: m.Method, ref: m.Ref, id: t.nextID, sent: first, sess: sess}
	if setup != nil {
		setup(ex)
	}
	if !awaits {
		if ex.turn != nil {
			return outs // the turn ends by an event or by silence
		}
		return append(outs, t.finish(ex, nil)...)
	}
	t.waiting = append(t.waiting, ex)
	if req.agentMethod != "" && !req.notify {
		t.byID[strconv.FormatUint(ex.id, 10)] = ex
	}
	return outs
}

func (t *translator) rpcFrame(method string, params []byte, withID bool) []byte {
	b := make([]byte, 0, len(params)+len(method)+48)
	b = append(b, '{')
	if t.p.envelope == envJSONRPC {
		b = append(b, `"jsonrpc":"2.0",`...)
	}
	if withID {
		b = append(b, `"id":`...)
		b = strconv.AppendUint(b, t.nextID, 10)
		b = append(b, ',')
	}
	b = append(b, `"method":`...)
	b = wire.AppendString(b, method)
	if params != nil {
		b = append(b, `,"params":`...)
		b = append(b, params...)
	}
	return append(b, '}')
}

func (t *translator) initialize(m translate.Msg) []translate.Out {
	if t.conn == connRejected {
		return []translate.Out{fail(m.Ref, t.rejectErr)}
	}
	if req := t.p.requests["initialize"]; req != nil {
		return t.send(req, m, nil, nil)
	}
	return []translate.Out{{Kind: translate.Reply, Ref: m.Ref, Body: t.initializeResult()}}
}

// initializeResult advertises what the profile can deliver: text and
// resource-link prompts only, session/close when the profile can close.
func (t *translator) initializeResult() json.RawMessage {
	b := []byte(`{"protocolVersion":1,"agentCapabilities":{"loadSession":`)
	b = strconv.AppendBool(b, t.p.requests["session/load"] != nil)
	b = append(b, `,"promptCapabilities":{"image":false,"audio":false,"embeddedContext":true}`...)
	// session/close is always served: by the profile's frame, by closing
	// a per-session link, or on the bridge's side alone (closeSession).
	caps := []string{`"close":{}`}
	if t.p.requests["session/resume"] != nil {
		caps = append(caps, `"resume":{}`)
	}
	b = append(b, `,"sessionCapabilities":{`+strings.Join(caps, ",")+`}`...)
	b = append(b, `},"authMethods":[],"agentInfo":{"name":`...)
	b = wire.AppendString(b, t.p.Name)
	b = append(b, `,"version":"profile"}}`...)
	return b
}

func (t *translator) newSession(m translate.Msg) []translate.Out {
	if t.conn == connRejected {
		return []translate.Out{fail(m.Ref, t.rejectErr)}
	}
	cwd := gjson.GetBytes(m.Body, "cwd")
	if cwd.Type != gjson.String || !strings.HasPrefix(cwd.Str, "/") {
		return []translate.Out{failf(m.Ref, translate.CodeInvalidParams, "session/new needs an absolute cwd")}
	}
	if t.p.PerSession && len(t.sessions) > 0 {
		return []translate.Out{failf(m.Ref, translate.CodeInternalError,
			"profile %s holds one conversation per connection and this one already serves a session", t.p.Name)}
	}
	pending := &session{id: m.Session, cwd: cwd.Str, kept: map[string][]byte{}}
	req := t.p.requests[m.Method]
	if m.Method != "session/new" {
		// session/load and session/resume name the session they reopen.
		if req == nil {
			return []translate.Out{failf(m.Ref, translate.CodeMethodNotFound,
				"%s is not available: profile %s does not say how to send it to the agent", m.Method, t.p.Name)}
		}
		if pending.id == "" {
			pending.id = gjson.GetBytes(m.Body, "sessionId").Str
		}
		if t.session(pending.id) != nil {
			return []translate.Out{failf(m.Ref, translate.CodeInvalidParams, "session %q is already open", pending.id)}
		}
		if !t.p.PerSession {
			// The ACP id is the agent's: keep it for templates and routing.
			pending.kept["agent_session"] = wire.AppendString(nil, pending.id)
			pending.agentSession = pending.id
		}
	}
	if req == nil {
		return []translate.Out{t.opened(pending, m.Ref, nil)}
	}
	return t.send(req, m, pending, func(ex *exchange) { ex.cwd = cwd.Str; ex.sessionID = m.Session })
}

// opened registers a session and answers session/new.
func (t *translator) opened(s *session, ref translate.Ref, result []byte) translate.Out {
	if s.id == "" {
		if v, ok := s.kept["agent_session"]; ok && gjson.ParseBytes(v).String() != "" {
			s.id = gjson.ParseBytes(v).String()
		} else {
			t.minted++
			s.id = "session-" + strconv.Itoa(t.minted)
		}
	}
	t.sessions = append(t.sessions, s)
	if result == nil {
		result = append(wire.AppendString([]byte(`{"sessionId":`), s.id), '}')
	}
	return translate.Out{Kind: translate.Reply, Ref: ref, Body: result, Session: s.id}
}

func (t *translator) prompt(m translate.Msg) []translate.Out {
	if t.conn == connRejected {
		return []translate.Out{fail(m.Ref, t.rejectErr)}
	}
	sid := gjson.GetBytes(m.Body, "sessionId").Str
	sess := t.session(sid)
	if sess == nil {
		return []translate.Out{failf(m.Ref, translate.CodeInvalidParams, "unknown session %q", sid)}
	}
	if sess.live() != nil {
		return []translate.Out{failf(m.Ref, translate.CodeInvalidRequest,
			"a prompt is already running in this session: wait for its response or send session/cancel first")}
	}
	if bad := unsupportedBlock(m.Body); bad != "" {
		return []translate.Out{failf(m.Ref, translate.CodeInvalidParams,
			"profile %s sends the agent text only; a %s prompt block cannot be sent", t.p.Name, bad)}
	}
	var outs []translate.Out
	for _, old := range slices.Clone(sess.turns) {
		if old.refused {
			// Its end may never come, and the agent's frames cannot say
			// which turn they belong to: from here on they are the new one's.
			t.popTurn(old)
			outs = append(outs, t.closeToolsQuiet(sess, nil)...)
		}
	}
	sess.draining = false
	tr := &turn{ref: m.Ref, sess: sess}
	if t.p.silence > 0 {
		tr.deadline = t.now.Add(t.p.silence)
	}
	t.matched(tr)
	sess.turns = append(sess.turns, tr)
	outs = append(outs, t.send(t.p.requests["session/prompt"], m, sess, func(ex *exchange) {
		ex.turn = tr
		tr.ex = ex
	})...)
	if k := t.p.turnKey; k != nil && k.kept == "" && tr.ex != nil {
		if v := get(tr.ex.sent, k.sent); v.Exists() {
			tr.key, tr.keyed = v.String(), true
		} else {
			outs = append(outs, translate.Out{Kind: translate.Note, Method: noteUnmatched, Session: sess.id,
				Body: fmt.Appendf(nil, "profile %s: the prompt frame has no turn key at %s, so no frame of the agent can name this turn: %.200s", t.p.Name, k.sent, tr.ex.sent)})
		}
	}
	return outs
}

// closeSession closes a session: its live turn is cancelled, and the
// profile's session/close frame is sent when it has one. A profile
// without one (and not per-session, whose link the engine closes) is
// closed on the bridge's side alone: ACP v2 makes session/close
// mandatory, and the session is forgotten here either way, so a prompt
// naming it is refused and its late frames are not passed on.
func (t *translator) closeSession(m translate.Msg) []translate.Out {
	sid := gjson.GetBytes(m.Body, "sessionId").Str
	sess := t.session(sid)
	if sess == nil {
		return []translate.Out{failf(m.Ref, translate.CodeInvalidParams, "unknown session %q", sid)}
	}
	var outs []translate.Out
	if tr := sess.live(); tr != nil {
		// Closing implies cancelling (ACP spec, session/close); the agent's own
		// end of the turn may never come once the link is closed.
		outs = t.cancelTurn(tr)
		if !tr.dropped {
			tr.dropped = true
			outs = append(outs, reply(tr.ref, stopReasonBody("cancelled"), sess.id))
		}
	}
	t.sessions = slices.DeleteFunc(t.sessions, func(s *session) bool { return s == sess })
	if req := t.p.requests["session/close"]; req != nil && t.conn != connRejected {
		return append(outs, t.send(req, m, sess, nil)...)
	}
	return append(outs, reply(m.Ref, []byte("{}"), sess.id))
}

// cancelTurn handles session/cancel (or $/cancel_request on the prompt).
func (t *translator) cancelTurn(tr *turn) []translate.Out {
	tr.reportBy = time.Time{} // the stop decides the turn's end now
	outs := t.withdrawPermission(tr)
	if t.p.cancel != nil && len(t.p.cancel.send) > 0 {
		if tr.cancelled {
			return outs
		}
		tr.cancelled = true
		e := t.evalEnv(nil, nil, tr.sess, tr.sess.lastTool())
		e.turn = tr
		t.nextID++
		e.id = t.nextID
		if t.p.cancel.ack != nil {
			grace := t.p.cancel.grace
			if grace == 0 {
				grace = t.grace
			}
			tr.ackBy, tr.ackGrace = t.now.Add(grace), grace
		}
		frames := t.evalFrames(t.p.cancel.send, e, false)
		if k := t.p.turnKey; k != nil && k.kept == "" && len(frames) > 0 {
			if v := get(frames[0], k.sent); v.Exists() {
				tr.stopKey, tr.stopKeyed = v.String(), true
			}
		}
		return append(outs, frameOuts(frames)...)
	}
	// Nothing to tell the agent: the bridge ends the turn itself and drops
	// what the agent still sends for it.
	outs = append(outs, t.closeTools(tr.sess, "failed")...)
	tr.dropped = true
	return append(outs, reply(tr.ref, stopReasonBody("cancelled"), tr.sess.id))
}

func (t *translator) abandon(ref translate.Ref) []translate.Out {
	for i, m := range t.held {
		if m.Kind == translate.Request && m.Ref == ref {
			t.held = slices.Delete(t.held, i, i+1)
			return nil
		}
	}
	if tr := t.turnByRef(ref); tr != nil {
		var outs []translate.Out
		if !tr.dropped && t.p.cancel != nil && len(t.p.cancel.send) > 0 && !tr.cancelled {
			outs = t.cancelTurn(tr)
		} else {
			outs = t.withdrawPermission(tr)
		}
		tr.dropped = true
		return outs
	}
	for _, ex := range t.waiting {
		if ex.ref == ref {
			ex.ref = 0
		}
	}
	return nil
}

func (t *translator) linkUp() []translate.Out {
	if t.p.connect == nil || t.conn != connWaitUp {
		return t.startHeartbeat(nil)
	}
	var outs []translate.Out
	outs = append(outs, frameOuts(t.evalFrames(t.p.connect.send, t.evalEnv(nil, nil, nil, nil), true))...)
	if t.p.connect.expect != nil {
		t.conn = connWaitFrame
		return append(outs, translate.Out{Kind: translate.Note, Method: noteConnectExpect,
			Body: []byte(fmt.Sprintf("profile %s waits for the agent's connect frame matching %s", t.p.Name, t.p.connect.expect))})
	}
	return t.ready(outs)
}

// ready ends the connect phase: held editor messages are handled now.
func (t *translator) ready(outs []translate.Out) []translate.Out {
	t.conn = connOpen
	outs = t.startHeartbeat(outs)
	held := t.held
	t.held = nil
	for _, m := range held {
		if m.Kind == translate.Request {
			outs = append(outs, t.request(m)...)
		} else {
			outs = append(outs, t.notification(m)...)
		}
	}
	return outs
}

func (t *translator) startHeartbeat(outs []translate.Out) []translate.Out {
	if t.p.heartbeat != nil && t.nextBeat.IsZero() {
		t.nextBeat = t.now.Add(t.p.heartbeat.every)
	}
	return outs
}

// tick sends due heartbeats and ends turns whose silence ran out.
func (t *translator) tick() []translate.Out {
	var outs []translate.Out
	if hb := t.p.heartbeat; hb != nil && !t.nextBeat.IsZero() && !t.now.Before(t.nextBeat) {
		outs = append(outs, frameOuts(t.evalFrames(hb.send, t.evalEnv(nil, nil, nil, nil), true))...)
		t.nextBeat = t.now.Add(hb.every)
	}
	for _, s := range slices.Clone(t.sessions) {
		for _, tr := range slices.Clone(s.turns) {
			if !tr.ackBy.IsZero() && !t.now.Before(tr.ackBy) {
				outs = append(outs, t.cancelUnacked(tr)...)
				continue
			}
			switch {
			case t.p.silence > 0 && !tr.deadline.IsZero() && !t.now.Before(tr.deadline):
				outs = append(outs, t.endTurn(tr, t.p.silenceTo)...)
				continue
			case tr.dropped:
				// Answered already and watched for nothing but its end: a
				// deadline left set would be past at every later tick,
				// and wake would ask for a tick a millisecond on, forever.
				tr.quietAt, tr.giveUpAt, tr.reportBy = time.Time{}, time.Time{}, time.Time{}
				continue
			case !tr.reportBy.IsZero() && !t.now.Before(tr.reportBy):
				// The agent sent no (more) report of the refused call in
				// time: the refusal ends the turn, as its rule says.
				outs = append(outs, t.endTurn(tr, "end_turn")...)
				continue
			case !tr.giveUpAt.IsZero() && !t.now.Before(tr.giveUpAt):
				msg := fmt.Sprintf("profile %s: no frame of the turn matched a rule for %s; the turn is given up", t.p.Name, t.p.giveUp)
				if tr.unmatched != nil {
					msg += fmt.Sprintf(" (the last frame no rule matched: %s)", tr.unmatched)
				}
				outs = append(outs, t.failTurn(tr, translate.Errorf(translate.CodeInternalError, "%s", msg).JSON())...)
				continue
			}
			if !tr.quietAt.IsZero() && !t.now.Before(tr.quietAt) {
				tr.quietAt = time.Time{} // once, until a frame matches again
				body := fmt.Sprintf("no frame of the turn matched a rule of profile %s for %s", t.p.Name, t.p.quiet)
				if tr.unmatched != nil {
					body += fmt.Sprintf("; the last frame no rule matched: %s", tr.unmatched)
				} else {
					body += "; the agent sent nothing no rule matched either"
				}
				outs = append(outs, translate.Out{Kind: translate.Note, Method: noteTurnQuiet, Session: s.id, Body: []byte(body)})
			}
		}
	}
	return outs
}

// matched rearms tr's quiet warning and give-up deadline: a frame of the
// turn matched a rule (or the turn just started).
func (t *translator) matched(tr *turn) {
	if tr == nil || tr.dropped {
		return
	}
	if t.p.quiet > 0 {
		tr.quietAt = t.now.Add(t.p.quiet)
	}
	if t.p.giveUp > 0 {
		tr.giveUpAt = t.now.Add(t.p.giveUp)
	}
	tr.unmatched = nil
}

// wake appends a Timer output when the next deadline moved.
func (t *translator) wake(outs []translate.Out) []translate.Out {
	var next time.Time
	if !t.nextBeat.IsZero() {
		next = t.nextBeat
	}
	for _, s := range t.sessions {
		for _, tr := range s.turns {
			for _, d := range [...]time.Time{tr.deadline, tr.quietAt, tr.giveUpAt, tr.ackBy, tr.reportBy} {
				if !d.IsZero() && (next.IsZero() || d.Before(next)) {
					next = d
				}
			}
		}
	}
	if next.IsZero() || next.Equal(t.armed) {
		return outs
	}
	t.armed = next
	d := next.Sub(t.now)
	if d < time.Millisecond {
		d = time.Millisecond
	}
	return append(outs, translate.Out{Kind: translate.Timer, Delay: d})
}

// --- permissions -------------------------------------------------------------------

var defaultOptions = []byte(`[{"optionId":"allow","name":"Allow","kind":"allow_once"},{"optionId":"reject","name":"Reject","kind":"reject_once"}]`)

func (t *translator) askPermission(pr *permissionRule, frame []byte, tr *turn) []translate.Out {
	sess := tr.sess
	var outs []translate.Out
	tl := sess.lastTool()
	if tl == nil {
		// Nothing announced yet: the request needs a tool call to name.
		tl = &tool{id: sess.toolID(""), title: "Permission"}
		sess.tools = append(sess.tools, tl)
	}
	if !tl.announced {
		outs = append(outs, t.announce(sess, tl, ""))
	}
	e := t.evalEnv(frame, nil, sess, tl)
	e.turn = tr
	options := defaultOptions
	if pr.options != nil {
		if v := pr.options.eval(e); v.kind == vRaw && gjson.ParseBytes(v.raw).IsArray() {
			options = v.raw
		}
	}
	kinds := map[string]string{}
	gjson.ParseBytes(options).ForEach(func(_, o gjson.Result) bool {
		kinds[o.Get("optionId").String()] = o.Get("kind").String()
		return true
	})
	b := wire.AppendString([]byte(`{"sessionId":`), sess.id)
	b = append(b, `,"toolCall":{"toolCallId":`...)
	b = wire.AppendString(b, tl.id)
	if pr.title != nil {
		if v := pr.title.eval(e); !v.missing() {
			b = append(b, `,"title":`...)
			b = v.appendTextJSON(b)
		}
	}
	b = append(b, `,"status":"pending"},"options":`...)
	b = append(b, options...)
	b = append(b, '}')
	t.nextCall++
	ref := t.nextCall
	t.perms[ref] = &pendingPermission{rule: pr, turn: tr, tool: tl, frame: frame, options: kinds}
	tr.perm = ref
	return append(outs, translate.Out{Kind: translate.Call, Ref: ref, Method: "session/request_permission", Body: b, Session: sess.id})
}

func (t *translator) permissionAnswer(m translate.Msg) ([]translate.Out, error) {
	if t.stale[m.Ref] {
		delete(t.stale, m.Ref)
		return nil, nil
	}
	pp := t.perms[m.Ref]
	if pp == nil {
		return nil, fmt.Errorf("rules: editor answered call %d, which is not outstanding", m.Ref)
	}
	delete(t.perms, m.Ref)
	pp.turn.perm = 0
	outcome := "reject"
	if m.Error == nil {
		r := gjson.GetBytes(m.Body, "outcome")
		switch r.Get("outcome").Str {
		case "selected":
			kind, ok := pp.options[r.Get("optionId").String()]
			if ok && strings.HasPrefix(kind, "allow") {
				outcome = "allow"
			}
		case "cancelled":
			outcome = "cancelled"
		}
	}
	sess := pp.turn.sess
	// The answer frames are built now, when the editor answers, but in
	// the turn that asked: they read its turn.sent and turn.NAME.
	e := t.evalEnv(pp.frame, nil, sess, pp.tool)
	e.turn = pp.turn
	var outs []translate.Out
	frames := pp.rule.reject
	switch outcome {
	case "allow":
		frames = pp.rule.allow
	case "cancelled":
		frames = pp.rule.cancelled
	}
	sent := t.evalFrames(frames, e, true)
	outs = append(outs, frameOuts(sent)...)
	if pp.turn.dropped {
		return outs, nil
	}
	if outcome == "allow" {
		outs = append(outs, t.toolUpdate(sess, pp.tool, `"in_progress"`, false, nil))
		return outs, nil
	}
	outs = append(outs, t.toolUpdate(sess, pp.tool, `"failed"`, false, nil))
	pp.tool.rejected = true
	if outcome == "reject" && pp.rule.rejectEndsTurn {
		if pp.rule.reportWait > 0 && len(sent) > 0 && !pp.turn.cancelled {
			// The agent was told of the refusal and may report the call
			// (its output, why it stopped): the answer waits for that,
			// as every update of a turn comes before its answer.
			pp.turn.reportBy, pp.turn.reportWait = t.now.Add(pp.rule.reportWait), pp.rule.reportWait
			return outs, nil
		}
		outs = append(outs, t.endTurn(pp.turn, "end_turn")...)
	}
	return outs, nil
}

// withdrawPermission cancels the turn's pending permission request: the
// editor is told to drop it and the agent gets the cancelled frames.
func (t *translator) withdrawPermission(tr *turn) []translate.Out {
	if tr.perm == 0 {
		return nil
	}
	ref := tr.perm
	pp := t.perms[ref]
	delete(t.perms, ref)
	tr.perm = 0
	t.stale[ref] = true
	outs := []translate.Out{{Kind: translate.CancelCall, Ref: ref}}
	if pp != nil {
		e := t.evalEnv(pp.frame, nil, tr.sess, pp.tool)
		e.turn = tr
		outs = append(outs, frameOuts(t.evalFrames(pp.rule.cancelled, e, true))...)
	}
	return outs
}

// --- agent side --------------------------------------------------------------------

// MatchedRule implements translate.RuleReporter: the rule that handled
// the last agent frame, "" when none did.
func (t *translator) MatchedRule() string { return t.rule }

// FromAgent implements translate.Translator.
func (t *translator) FromAgent(frame []byte) ([]translate.Out, error) {
	return t.FromAgentAt(frame, t.now)
}

// FromAgentAt implements translate.AgentClock.
func (t *translator) FromAgentAt(frame []byte, at time.Time) ([]translate.Out, error) {
	if !at.IsZero() {
		t.now = at
	}
	outs, err := t.fromAgent(frame)
	return t.wake(outs), err
}

func (t *translator) fromAgent(frame []byte) ([]translate.Out, error) {
	t.rule = ""
	frame = bytes.TrimSpace(frame)
	// The iterative scanner, not gjson's validator: a deeply nested frame
	// cannot overflow the stack. With a JSON-RPC envelope the same pass
	// reads the envelope, which spares the rules a look for an id that a
	// streamed notification does not have (a scan of the whole frame).
	env := &t.env // the translator's own, so that no frame allocates one
	var envErr *translate.Error
	if t.p.envelope != envNone {
		*env, envErr = translate.ParseEnvelope(frame)
		if envErr != nil && envErr.Code == translate.CodeParseError {
			return nil, fmt.Errorf("rules: the agent sent a frame that is not JSON: %.80q", frame)
		}
		t.cur = envOf(env, envErr)
		defer func() { t.cur, t.env = nil, translate.Envelope{} }() // keep no frame
	} else if translate.Valid(frame) != nil {
		return nil, fmt.Errorf("rules: the agent sent a frame that is not JSON: %.80q", frame)
	}
	if t.p.silence > 0 {
		for _, s := range t.sessions {
			for _, tr := range s.turns {
				tr.deadline = t.now.Add(t.p.silence)
			}
		}
	}
	if t.conn == connWaitFrame {
		c := t.p.connect
		if c.reject != nil && c.reject.matches(frame, nil) {
			t.rule = "connect.reject"
			return t.rejected(frame), nil
		}
		if c.expect.matches(frame, nil) {
			t.rule = "connect.expect"
			return t.ready(nil), nil
		}
	}
	if hb := t.p.heartbeat; hb != nil && hb.reply != nil && hb.reply.matches(frame, nil) {
		t.rule = "heartbeat.reply"
		return nil, nil
	}
	if t.p.envelope != envNone && (envErr != nil || !env.IsNotification()) {
		if outs, done, err := t.rpcFrameIn(frame); done {
			return outs, err
		}
	}
	sess := t.route(frame, envOf(env, envErr))
	tr := t.currentTurn(sess)
	keyed := false
	t.keyed = false
	defer func() { t.keyed = false }()
	if k := t.p.turnKey; k != nil {
		if v := envGet(envOf(env, envErr), frame, k.frame); v.Exists() {
			s, ktr := t.turnByKey(v.String())
			switch {
			case ktr != nil:
				sess, tr, keyed = s, ktr, true
				t.keyed = true
			case k.kept != "" && sess.live() != nil && !sess.live().keyed && !slices.Contains(t.ended, v.String()):
				// The agent's first frame of the running turn, naming the
				// id it assigned, which the turn's rules keep.
				tr = sess.live()
			default:
				if outs, ok := t.stopRefused(frame, v.String()); ok {
					return outs, nil
				}
				// No session either: the turn that would say which is gone.
				return []translate.Out{{Kind: translate.Note, Method: noteDropped,
					Body: fmt.Appendf(nil, "frame of turn %s=%s, which is not running: %.120s", k.frame, v.String(), frame)}}, nil
			}
		}
	}
	st := &t.st
	*st = state{sess: sess, turn: tr, env: envOf(env, envErr)}
	if tr != nil && !tr.ackBy.IsZero() && t.p.cancel.ack.matches(frame, st) {
		t.rule = "cancel.ack"
		return t.cancelAcked(tr), nil
	}
	for _, er := range t.p.errors {
		if er.match.matches(frame, st) {
			return t.agentError(er, frame, sess, tr, keyed), nil
		}
	}
	for _, ex := range t.waiting {
		if keyed && ex.turn != nil && ex.turn != tr {
			continue
		}
		r := ex.req.reply
		if r == nil || (r.match == nil && r.correlate == "") {
			continue
		}
		if r.match != nil && !r.match.matches(frame, st) {
			continue
		}
		if r.correlate != "" && gjson.GetBytes(frame, r.correlate).String() != gjson.GetBytes(ex.sent, r.correlate).String() {
			continue
		}
		return t.replied(ex, frame), nil
	}
	for _, r := range t.p.events {
		if r.match.matches(frame, st) {
			return t.apply(r, frame, sess, tr, false), nil
		}
	}
	hint := t.p.nearMiss(frame)
	if hint != "" {
		hint = NearMissMark + hint
	}
	if t.conn == connWaitFrame {
		return []translate.Out{{Kind: translate.Note, Method: noteUnmatched, Body: []byte(fmt.Sprintf("profile %s still waits for the connect frame matching %s; got %.120s%s", t.p.Name, t.p.connect.expect, frame, hint))}}, nil
	}
	o := translate.Out{Kind: translate.Note, Method: noteUnmatched, Body: []byte(fmt.Sprintf("no rule of profile %s matches %.120s%s", t.p.Name, frame, hint))}
	if sess != nil {
		o.Session = sess.id
		if tr := sess.live(); tr != nil {
			tr.unmatched = fmt.Appendf(tr.unmatched[:0], "%.200s%s", frame, hint)
		}
	}
	return []translate.Out{o}, nil
}

// stopRefused handles an error frame naming, by the turn key, a value no
// turn has (v), while a stop forwarded for a turn is unanswered: it is the
// agent refusing that stop (most often because the stop named a job it
// does not know, such as a constant in the cancel block). The turn is the
// one whose stop frame named v, else the oldest awaiting an answer to its
// stop. ok is false when the frame is no such refusal.
func (t *translator) stopRefused(frame []byte, v string) ([]translate.Out, bool) {
	var stopped *turn
find:
	for _, s := range t.sessions {
		for _, tr := range s.turns {
			if !refusesCancel(tr) {
				continue
			}
			if tr.stopKeyed && tr.stopKey == v {
				stopped = tr
				break find
			}
			if stopped == nil {
				stopped = tr
			}
		}
	}
	if stopped == nil {
		return nil, false
	}
	st := &t.st
	*st = state{sess: stopped.sess, turn: stopped, env: t.cur}
	for _, er := range t.p.errors {
		if er.match.matches(frame, st) {
			return t.agentError(er, frame, stopped.sess, stopped, true), true
		}
	}
	return nil, false
}

// rpcFrameIn handles JSON-RPC responses and agent requests; done is false
// for notifications, which the event rules handle.
func (t *translator) rpcFrameIn(frame []byte) ([]translate.Out, bool, error) {
	id, method := get(frame, "id"), get(frame, "method")
	switch {
	case id.Exists() && !method.Exists():
		key := id.Raw
		if id.Type == gjson.String {
			key = id.Str
		}
		ex := t.byID[key]
		if ex == nil {
			return []translate.Out{{Kind: translate.Note, Method: noteUnmatched,
				Body: []byte("a reply to agent request " + id.Raw + ", which is not outstanding")}}, true, nil
		}
		delete(t.byID, key)
		if errObj := get(frame, "error"); errObj.Exists() {
			return t.failExchange(ex, passError([]byte(errObj.Raw))), true, nil
		}
		return t.replied(ex, frame), true, nil
	case id.Exists() && method.Exists():
		st := &t.st
		*st = state{sess: t.route(frame, nil)}
		st.turn = t.currentTurn(st.sess)
		for _, ev := range t.p.events {
			if ev.match.matches(frame, st) {
				return t.apply(ev, frame, st.sess, st.turn, false), true, nil
			}
		}
		e := translate.Errorf(translate.CodeMethodNotFound, "%s is not handled by the bridge's profile %s", method.Str, t.p.Name)
		return []translate.Out{
			frameOut(t.rpcError([]byte(id.Raw), e.JSON())),
			{Kind: translate.Note, Method: noteAgentCall, Body: []byte(method.Str)},
		}, true, nil
	}
	return nil, false, nil
}

func (t *translator) rpcError(id, errObj []byte) []byte {
	b := []byte{'{'}
	if t.p.envelope == envJSONRPC {
		b = append(b, `"jsonrpc":"2.0",`...)
	}
	b = append(b, `"id":`...)
	b = append(b, id...)
	b = append(b, `,"error":`...)
	b = append(b, errObj...)
	return append(b, '}')
}

// rejected handles the frame that means the agent refused the connection.
func (t *translator) rejected(frame []byte) []translate.Out {
	msg := "the agent refused the connection"
	if n := t.p.connect.rejectMessage; n != nil {
		if v := n.eval(t.evalEnv(frame, nil, nil, nil)); v.text() != "" {
			msg = v.text()
		}
	}
	t.conn = connRejected
	t.rejectErr = translate.Errorf(translate.CodeInternalError, "%s", msg).JSON()
	held := t.held
	t.held = nil
	body := fmt.Sprintf("profile %s: the agent refused the connection with %.200s (connect's reject matched %s)", t.p.Name, frame, t.p.connect.reject)
	if len(t.envVars) > 0 {
		body += "; the profile reads the environment variable(s) " + strings.Join(slices.Sorted(maps.Keys(t.envVars)), ", ")
	}
	outs := []translate.Out{{Kind: translate.Note, Method: noteConnectRejected, Body: []byte(body)}}
	for _, m := range held {
		if m.Kind == translate.Request {
			outs = append(outs, fail(m.Ref, t.rejectErr))
		}
	}
	return outs
}

// replied handles the reply to an exchange.
func (t *translator) replied(ex *exchange, frame []byte) []translate.Out {
	defer func() { t.rule = "reply " + ex.req.method }()
	t.removeWaiting(ex)
	if ex.turn != nil {
		r := ex.req.reply
		if r == nil {
			r = &rule{}
		}
		return t.apply(r, frame, ex.turn.sess, ex.turn, true)
	}
	return t.finish(ex, frame)
}

// finish answers a non-prompt exchange after its reply (frame nil: no reply
// was awaited).
func (t *translator) finish(ex *exchange, frame []byte) []translate.Out {
	var outs []translate.Out
	r := ex.req.reply
	sess := ex.sess
	if r != nil && frame != nil && sess != nil {
		for _, k := range r.keep {
			if v := gjson.GetBytes(frame, k.path); v.Exists() {
				sess.kept[k.name] = []byte(v.Raw)
				if k.name == "agent_session" {
					sess.agentSession = v.String()
				}
			}
		}
	}
	var result []byte
	if r != nil && r.result != nil {
		if v := r.result.eval(t.evalEnv(frame, nil, sess, nil)); !v.absent() {
			result = v.appendJSON(nil)
		}
	}
	if ex.ref == 0 {
		return nil // abandoned: the engine answered it (a session stays unknown)
	}
	switch ex.method {
	case "initialize":
		return append(outs, translate.Out{Kind: translate.Reply, Ref: ex.ref, Body: t.initializeResult()})
	case "session/new", "session/load", "session/resume":
		if result == nil && ex.method != "session/new" {
			result = []byte("{}") // their results carry no sessionId
		}
		return append(outs, t.opened(sess, ex.ref, result))
	}
	if result == nil {
		result = []byte("{}")
	}
	sid := ""
	if sess != nil {
		sid = sess.id
	}
	return append(outs, reply(ex.ref, result, sid))
}

// failExchange fails an exchange with the agent's error object.
func (t *translator) failExchange(ex *exchange, errObj []byte) []translate.Out {
	t.rule = "reply " + ex.req.method
	t.removeWaiting(ex)
	if ex.turn != nil {
		return t.failTurn(ex.turn, errObj)
	}
	if ex.ref == 0 {
		return nil
	}
	return []translate.Out{fail(ex.ref, errObj)}
}

// agentError applies an error rule: it fails the turn the frame names by
// the profile's turn key (keyed), else the oldest request waiting for the
// agent, else the running turn of the frame's session.
func (t *translator) agentError(er *errorRule, frame []byte, sess *session, tr *turn, keyed bool) []translate.Out {
	t.rule = "error"
	e := t.evalEnv(frame, nil, sess, nil)
	e.turn = tr
	msg := er.message.eval(e).text()
	if msg == "" {
		msg = "the agent reported an error"
	}
	code := translate.CodeInternalError
	if er.code != nil {
		if n, err := strconv.Atoi(er.code.eval(e).text()); err == nil {
			code = n
		}
	}
	errObj := translate.Errorf(code, "%s", msg).JSON()
	if len(t.waiting) > 0 && !keyed {
		if tr := t.waiting[0].turn; refusesCancel(tr) {
			return t.cancelRefused(tr, errObj)
		}
		return t.failExchange(t.waiting[0], errObj)
	}
	if tr != nil {
		if refusesCancel(tr) {
			return t.cancelRefused(tr, errObj)
		}
		return t.failTurn(tr, errObj)
	}
	return []translate.Out{{Kind: translate.Note, Method: noteUnmatched, Body: []byte("agent error outside any request: " + msg)}}
}

// apply carries out a rule. A reply rule of a prompt ends its turn.
func (t *translator) apply(r *rule, frame []byte, sess *session, tr *turn, promptReply bool) []translate.Out {
	t.rule = r.name
	outs := t.applyRule(r, frame, sess, tr, promptReply)
	if t.progress(r, tr, promptReply, outs) {
		t.matched(tr)
	}
	return outs
}

// progress reports whether the frame a rule matched counts as the turn's
// progress toward its quiet and give_up: the frame named the turn by its
// key, or the rule kept a value for it, touched a tool call, ended it,
// asked for permission or told the editor something. A frame that only
// answers (a ping a rule replies to) or an event marked keepalive does
// not: an agent's keepalive would otherwise keep a turn whose end no rule
// matches alive forever.
func (t *translator) progress(r *rule, tr *turn, promptReply bool, outs []translate.Out) bool {
	if tr == nil || r.keepalive {
		return false
	}
	if t.keyed || promptReply || len(r.keep) > 0 || r.tool != nil || r.endTurn != nil || r.fail != nil || r.permission != nil {
		return true
	}
	for _, o := range outs {
		switch o.Kind {
		case translate.Notify, translate.Call, translate.Reply, translate.Fail:
			return true
		}
	}
	return false
}

func (t *translator) applyRule(r *rule, frame []byte, sess *session, tr *turn, promptReply bool) []translate.Out {
	if tr != nil && tr.dropped {
		// The editor was already answered for this turn: only its end
		// matters, and nothing reaches the editor.
		var outs []translate.Out
		if r.endTurn != nil || r.fail != nil || promptReply {
			t.popTurn(tr)
			outs = append(outs, t.closeToolsQuiet(tr.sess, nil)...)
		}
		if len(r.updates) > 0 || r.tool != nil {
			outs = append(outs, translate.Out{Kind: translate.Note, Method: noteDropped, Session: tr.sess.id,
				Body: fmt.Appendf(nil, "frame of a turn the bridge already ended: %.120s", frame)})
		}
		return outs
	}
	t.keep(r, frame, sess, tr, promptReply)
	var outs []translate.Out
	e := t.evalEnv(frame, nil, sess, nil)
	e.turn = tr
	if sess != nil {
		e.tool = sess.lastTool()
	}
	outs = append(outs, frameOuts(t.evalFrames(r.send, e, true))...)
	if sess == nil {
		if len(r.updates) > 0 || r.tool != nil || r.finalMessage != nil {
			outs = append(outs, translate.Out{Kind: translate.Note, Method: "unroutable-updates", Body: []byte("no session for " + r.name)})
		}
		return outs
	}
	if tr == nil && sess.draining {
		if len(r.updates) > 0 || r.tool != nil {
			outs = append(outs, translate.Out{Kind: translate.Note, Method: noteDropped, Session: sess.id,
				Body: []byte("frame after a cancelled turn ended, before the next prompt")})
		}
		return outs
	}
	if r.tool != nil {
		tos, tl := t.applyTool(r.tool, e, sess)
		outs = append(outs, tos...)
		if tl != nil && tl.rejected && tr != nil && !tr.reportBy.IsZero() {
			// A report of the refused call: the turn waits on for more.
			tr.reportBy = t.now.Add(tr.reportWait)
		}
		e.tool = sess.lastTool()
	}
	for _, u := range r.updates {
		if o, ok := t.updateOut(u, e, sess, tr); ok {
			outs = append(outs, o)
		}
	}
	if r.finalMessage != nil && tr != nil && !tr.streamed {
		if o, ok := t.updateOut(update{kind: "agent_message_chunk", n: r.finalMessage}, e, sess, tr); ok {
			outs = append(outs, o)
		}
	}
	askPermission := r.permission != nil && tr != nil && tr.perm == 0 && !tr.cancelled && tr.reportBy.IsZero()
	if askPermission {
		outs = append(outs, t.askPermission(r.permission, frame, tr)...)
	}
	switch {
	case tr == nil:
	case r.permission != nil && tr.cancelled:
		// The agent stopped to ask after the editor cancelled: the turn is over.
		outs = append(outs, t.endTurn(tr, "cancelled")...)
	case r.permission != nil && !tr.reportBy.IsZero():
		// The agent moved on from the refused call to ask again: the
		// refusal ended the turn, and the ask is not put to the editor;
		// the call it asked for did not run.
		if tl := sess.lastTool(); tl != nil && tl.announced {
			outs = append(outs, t.toolUpdate(sess, tl, `"failed"`, false, nil))
			tl.rejected = true
		}
		outs = append(outs, t.endTurn(tr, "end_turn")...)
	case r.fail != nil:
		msg := r.fail.eval(e).text()
		errObj := translate.Errorf(translate.CodeInternalError, "%s", msg).JSON()
		if refusesCancel(tr) {
			outs = append(outs, t.cancelRefused(tr, errObj)...)
		} else {
			outs = append(outs, t.failTurn(tr, errObj)...)
		}
	case r.endTurn != nil:
		reason := r.endTurn.eval(e)
		stop := reason.text()
		isString := reason.kind == vStr || reason.kind == vRaw && len(reason.raw) > 0 && reason.raw[0] == '"'
		if !isString || !stopReasons[stop] {
			// An expression over the frame gave no stop reason ACP knows:
			// the rule still ends the turn, as end_turn, and says so.
			got := string(reason.appendJSON(nil))
			if reason.absent() {
				got = "nothing"
			}
			outs = append(outs, translate.Out{Kind: translate.Note, Method: noteInvalidStop, Session: tr.sess.id,
				Body: fmt.Appendf(nil, "profile %s: event %q's end_turn gave %.80s, which is none of end_turn, max_tokens, max_turn_requests, refusal, cancelled; the turn ends end_turn (frame %.120s)", t.p.Name, r.name, got, frame)})
			stop = "end_turn"
		}
		if tr.cancelled && stop != "cancelled" && !promptReply {
			outs = append(outs, translate.Out{Kind: translate.Note, Method: noteCancelIgnored, Session: tr.sess.id,
				Body: fmt.Appendf(nil, "the agent finished the turn instead of stopping it (event %q ends it %s); the prompt is answered cancelled", r.name, stop)})
		}
		outs = append(outs, t.endTurn(tr, stop)...)
	case promptReply:
		outs = append(outs, t.endTurn(tr, "end_turn")...)
	}
	return outs
}

// keep stores the values r keeps from frame: the session's for the reply
// of a prompt, the turn's for an event. They are stored before the rule's
// templates run, which may read them.
func (t *translator) keep(r *rule, frame []byte, sess *session, tr *turn, promptReply bool) {
	for _, k := range r.keep {
		v := get(frame, k.path)
		if !v.Exists() {
			continue
		}
		raw := []byte(v.Raw)
		switch {
		case promptReply && sess != nil:
			sess.kept[k.name] = raw
			if k.name == "agent_session" {
				sess.agentSession = v.String()
			}
		case !promptReply && tr != nil:
			if tr.kept == nil {
				tr.kept = map[string][]byte{}
			}
			tr.kept[k.name] = raw
			if key := t.p.turnKey; key != nil && key.kept == k.name {
				tr.key, tr.keyed = v.String(), true
			}
		}
	}
}

func (t *translator) updateOut(u update, e *evalEnv, sess *session, tr *turn) (translate.Out, bool) {
	v := u.n.eval(e)
	if v.missing() {
		return translate.Out{}, false
	}
	// Room for the longest wrapper below (a text chunk's) around the value.
	b := make([]byte, 0, 112+len(sess.id)+len(u.kind)+len(v.raw)+len(v.str))
	b = append(b, `{"sessionId":`...)
	b = wire.AppendString(b, sess.id)
	b = append(b, `,"update":`...)
	switch u.kind {
	case "":
		if v.kind != vRaw || gjson.GetBytes(v.raw, "sessionUpdate").Type != gjson.String {
			return translate.Out{Kind: translate.Note, Method: "unroutable-updates", Body: []byte("update without sessionUpdate")}, true
		}
		b = append(b, v.raw...)
		if tr != nil && gjson.GetBytes(v.raw, "sessionUpdate").Str == "agent_message_chunk" {
			tr.streamed = true
		}
	case "plan":
		if v.kind != vRaw || !gjson.ParseBytes(v.raw).IsArray() {
			return translate.Out{}, false
		}
		b = append(b, `{"sessionUpdate":"plan","entries":`...)
		b = append(b, v.raw...)
		b = append(b, '}')
	default:
		b = append(b, `{"sessionUpdate":"`...)
		b = append(b, u.kind...)
		b = append(b, `","content":{"type":"text","text":`...)
		b = v.appendTextJSON(b)
		b = append(b, `}}`...)
		if tr != nil && u.kind == "agent_message_chunk" {
			tr.streamed = true
		}
	}
	b = append(b, '}')
	return translate.Out{Kind: translate.Notify, Method: "session/update", Body: b, Session: sess.id}, true
}

// endTurn answers the turn's prompt with reason ("cancelled" when a cancel
// was forwarded) after closing its tool calls.
func (t *translator) endTurn(tr *turn, reason string) []translate.Out {
	outs := t.withdrawPermission(tr)
	t.popTurn(tr)
	if tr.dropped {
		return append(outs, t.closeToolsQuiet(tr.sess, nil)...)
	}
	status := "completed"
	if tr.cancelled {
		reason, status = "cancelled", "failed"
	}
	outs = append(outs, t.closeTools(tr.sess, status)...)
	return append(outs, reply(tr.ref, stopReasonBody(reason), tr.sess.id))
}

// failTurn fails the turn's prompt with errObj; a turn the editor cancelled
// ends "cancelled" instead (ACP spec, Prompt Turn: cancellation).
func (t *translator) failTurn(tr *turn, errObj []byte) []translate.Out {
	if tr.cancelled {
		return t.endTurn(tr, "cancelled")
	}
	outs := t.withdrawPermission(tr)
	t.popTurn(tr)
	if tr.dropped {
		return append(outs, t.closeToolsQuiet(tr.sess, nil)...)
	}
	outs = append(outs, t.closeTools(tr.sess, "failed")...)
	return append(outs, fail(tr.ref, errObj))
}

// refusesCancel reports whether an agent error, one not correlated to a
// request of its own, answers the cancel forwarded for tr: the error may
// just as well end the turn, but an agent that refused the stop goes on, and
// what it sends then must not reach the editor after "cancelled".
// An error reply to the prompt itself is the turn's end, not a refusal.
func refusesCancel(tr *turn) bool {
	return tr != nil && tr.cancelled && !tr.dropped
}

// cancelRefused handles an error from the agent after a forwarded cancel:
// most often the agent refusing the stop (a wrong id, a turn it no longer
// knows) and going on with the turn. The editor is answered "cancelled" as
// the cancel promises, and the turn stays, dropped, so that whatever the
// agent still sends for it is dropped rather than shown after that answer.
func (t *translator) cancelRefused(tr *turn, errObj []byte) []translate.Out {
	outs := t.withdrawPermission(tr)
	outs = append(outs, t.closeTools(tr.sess, "failed")...)
	tr.dropped, tr.refused = true, true
	// A refusal is the agent's answer to the stop; and a dropped turn is
	// watched for nothing but its end.
	tr.ackBy, tr.quietAt, tr.giveUpAt = time.Time{}, time.Time{}, time.Time{}
	msg := gjson.GetBytes(errObj, "message").Str
	outs = append(outs, translate.Out{Kind: translate.Note, Method: noteCancelRefused, Session: tr.sess.id,
		Body: []byte("the agent answered the cancel with an error; the turn is answered cancelled and its later frames dropped: " + msg)})
	return append(outs, reply(tr.ref, stopReasonBody("cancelled"), tr.sess.id))
}

// cancelAcked handles the agent's acknowledgement of a forwarded stop
// (the cancel block's ack): the agent says the turn is over, so it ends
// cancelled now, and what the agent still sends for it is dropped.
func (t *translator) cancelAcked(tr *turn) []translate.Out {
	tr.ackBy = time.Time{}
	outs := []translate.Out{{Kind: translate.Note, Method: noteCancelAcked, Session: tr.sess.id,
		Body: []byte("the agent acknowledged the stop")}}
	return append(outs, t.endTurn(tr, "cancelled")...)
}

// cancelUnacked handles a stop the agent has not acknowledged within the
// cancel block's grace: it is reported, and the prompt, if still open, is
// answered cancelled as the cancel promises, with the turn kept, dropped,
// as for a refused stop.
func (t *translator) cancelUnacked(tr *turn) []translate.Out {
	tr.ackBy = time.Time{}
	body := fmt.Sprintf("profile %s: the agent did not acknowledge the stop within %s (no frame matched the cancel block's ack %s); it may still be running the turn, whose later frames are dropped",
		t.p.Name, tr.ackGrace, t.p.cancel.ack)
	outs := []translate.Out{{Kind: translate.Note, Method: noteCancelUnacked, Session: tr.sess.id, Body: []byte(body)}}
	outs = append(outs, t.withdrawPermission(tr)...)
	tr.refused = true
	tr.quietAt, tr.giveUpAt = time.Time{}, time.Time{}
	if tr.dropped {
		return outs
	}
	outs = append(outs, t.closeTools(tr.sess, "failed")...)
	tr.dropped = true
	return append(outs, reply(tr.ref, stopReasonBody("cancelled"), tr.sess.id))
}

func (t *translator) popTurn(tr *turn) {
	if tr.cancelled || tr.dropped {
		tr.sess.draining = true
	}
	if tr.keyed && t.p.turnKey.kept != "" {
		if len(t.ended) == maxEnded {
			t.ended = slices.Delete(t.ended, 0, 1)
		}
		t.ended = append(t.ended, tr.key)
	}
	tr.sess.turns = slices.DeleteFunc(tr.sess.turns, func(x *turn) bool { return x == tr })
	if tr.ex != nil {
		t.removeWaiting(tr.ex)
		delete(t.byID, strconv.FormatUint(tr.ex.id, 10))
	}
}

func (t *translator) removeWaiting(ex *exchange) {
	t.waiting = slices.DeleteFunc(t.waiting, func(x *exchange) bool { return x == ex })
}

// --- tools -----------------------------------------------------------------------------

var toolKinds = map[string]bool{"read": true, "edit": true, "delete": true, "move": true, "search": true,
	"execute": true, "think": true, "fetch": true, "switch_mode": true, "other": true}
var toolStatuses = map[string]bool{"pending": true, "in_progress": true, "completed": true, "failed": true}

// applyTool carries out a tool rule; tl is the call it touched (nil: none).
func (t *translator) applyTool(tr *toolRule, e *evalEnv, sess *session) (outs []translate.Out, tl *tool) {
	text := func(n node) (string, bool) {
		if n == nil {
			return "", false
		}
		v := n.eval(e)
		if v.missing() {
			return "", false
		}
		return v.text(), true
	}
	key, _ := text(tr.key)
	name, _ := text(tr.name)
	if tr.open {
		tl = &tool{key: key, name: name, id: sess.toolID(key)}
		sess.tools = append(sess.tools, tl)
	} else {
		tl = sess.findTool(key, name)
		if tl == nil {
			return t.lateReport(sess, key, name, e.frame), nil
		}
	}
	e.tool = tl
	if s, ok := text(tr.title); ok {
		tl.title = s
	}
	if s, ok := text(tr.kind); ok {
		tl.kind = s
	}
	changed := false
	if s, ok := text(tr.input); ok {
		tl.input.WriteString(s)
		changed = true
	}
	if tr.rawInput != nil {
		if v := tr.rawInput.eval(e); !v.missing() {
			tl.rawInput = v.appendJSON(nil)
		}
	}
	if s, ok := text(tr.output); ok {
		tl.output.WriteString(s)
		changed = true
	}
	var rawOutput []byte
	if tr.rawOutput != nil {
		if v := tr.rawOutput.eval(e); !v.missing() {
			rawOutput = v.appendJSON(nil)
		}
	}
	status, _ := text(tr.status)
	if tr.close && status == "" && !tl.rejected {
		status = "completed" // (a refused tool stays failed unless the agent says otherwise)
	}
	if !toolStatuses[status] {
		status = ""
	}
	if !tr.quiet {
		if !tl.announced {
			outs = append(outs, t.announce(sess, tl, status))
		} else {
			q := ""
			if status != "" {
				q = `"` + status + `"`
			}
			outs = append(outs, t.toolUpdate(sess, tl, q, changed, rawOutput))
		}
	}
	if tr.close {
		sess.removeTool(tl)
	}
	return outs, tl
}

// lateReport notes a tool rule's frame for a call the editor refused whose
// turn has ended (by key or name only: a rule that names no call pairs
// with whatever is open).
func (t *translator) lateReport(sess *session, key, name string, frame []byte) []translate.Out {
	if key == "" && name == "" {
		return nil
	}
	for _, tl := range sess.lateRefused {
		if key != "" && tl.key == key || key == "" && tl.name == name {
			return []translate.Out{{Kind: translate.Note, Method: noteDropped, Session: sess.id,
				Body: fmt.Appendf(nil, "the agent's report of tool call %s, which the editor refused, came after its turn ended (raise the permission's reject_report_wait to show it): %.120s", tl.id, frame)}}
		}
	}
	return nil
}

// announce emits the tool_call that makes tl known to the editor.
func (t *translator) announce(sess *session, tl *tool, status string) translate.Out {
	tl.announced = true
	if status == "" {
		status = "pending"
	}
	title := tl.title
	if title == "" {
		title = tl.name
	}
	if title == "" {
		title = "tool"
	}
	kind := tl.kind
	if !toolKinds[kind] {
		kind = "other"
	}
	b := wire.AppendString([]byte(`{"sessionId":`), sess.id)
	b = append(b, `,"update":{"sessionUpdate":"tool_call","toolCallId":`...)
	b = wire.AppendString(b, tl.id)
	b = append(b, `,"title":`...)
	b = wire.AppendString(b, title)
	b = append(b, `,"kind":"`...)
	b = append(b, kind...)
	b = append(b, `","status":"`...)
	b = append(b, status...)
	b = append(b, '"')
	if tl.input.Len() > 0 || tl.output.Len() > 0 {
		b = append(b, `,"content":`...)
		b = tl.appendContent(b)
	}
	if tl.rawInput != nil {
		b = append(b, `,"rawInput":`...)
		b = append(b, tl.rawInput...)
	}
	if tl.name != "" {
		// The agent's name for the tool, which ACP's tool call has no
		// field for (the title is for people): traces name the tool's
		// span by it, as claude-agent-acp's _meta.claudeCode.toolName.
		b = append(b, `,"_meta":{"acpBridge":{"toolName":`...)
		b = wire.AppendString(b, tl.name)
		b = append(b, `}}`...)
	}
	b = append(b, `}}`...)
	return translate.Out{Kind: translate.Notify, Method: "session/update", Body: b, Session: sess.id}
}

// toolUpdate emits a tool_call_update; status is JSON ("" to leave it).
func (t *translator) toolUpdate(sess *session, tl *tool, status string, content bool, rawOutput []byte) translate.Out {
	b := wire.AppendString([]byte(`{"sessionId":`), sess.id)
	b = append(b, `,"update":{"sessionUpdate":"tool_call_update","toolCallId":`...)
	b = wire.AppendString(b, tl.id)
	if status != "" {
		b = append(b, `,"status":`...)
		b = append(b, status...)
	}
	if content {
		b = append(b, `,"content":`...)
		b = tl.appendContent(b)
	}
	if rawOutput != nil {
		b = append(b, `,"rawOutput":`...)
		b = append(b, rawOutput...)
	}
	b = append(b, `}}`...)
	return translate.Out{Kind: translate.Notify, Method: "session/update", Body: b, Session: sess.id}
}

func (tl *tool) appendContent(b []byte) []byte {
	b = append(b, '[')
	if tl.input.Len() > 0 {
		b = append(b, `{"type":"content","content":{"type":"text","text":`...)
		b = wire.AppendString(b, tl.input.String())
		b = append(b, `}}`...)
	}
	if tl.output.Len() > 0 {
		if tl.input.Len() > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":"content","content":{"type":"text","text":`...)
		b = wire.AppendString(b, tl.output.String())
		b = append(b, `}}`...)
	}
	return append(b, ']')
}

// closeTools ends every open tool call of sess with status; a refused one
// was reported failed already.
func (t *translator) closeTools(sess *session, status string) []translate.Out {
	var outs []translate.Out
	for _, tl := range sess.tools {
		if tl.announced && !tl.rejected {
			outs = append(outs, t.toolUpdate(sess, tl, `"`+status+`"`, false, nil))
		}
	}
	return t.closeToolsQuiet(sess, outs)
}

// closeToolsQuiet forgets the session's tool calls; the refused ones the
// agent did not close are remembered as such for a while.
func (t *translator) closeToolsQuiet(sess *session, outs []translate.Out) []translate.Out {
	for _, tl := range sess.tools {
		if tl.rejected {
			if len(sess.lateRefused) == maxLateRefused {
				sess.lateRefused = slices.Delete(sess.lateRefused, 0, 1)
			}
			sess.lateRefused = append(sess.lateRefused, tl)
		}
	}
	sess.tools = nil
	return outs
}

// maxLateRefused is how many refused calls of ended turns a session
// remembers.
const maxLateRefused = 8

// toolID returns a toolCallId the session has not used: the agent's key
// when it has one and it is new to the session, else the key (or "tool")
// with a number.
func (s *session) toolID(key string) string {
	if s.toolIDs == nil {
		s.toolIDs = map[string]bool{}
	}
	id := key
	for id == "" || s.toolIDs[id] {
		s.seq++
		if key == "" {
			id = "tool-" + strconv.Itoa(s.seq)
		} else {
			id = key + "~" + strconv.Itoa(s.seq)
		}
	}
	s.toolIDs[id] = true
	return id
}

// lastTool is the session's latest open tool call (a refused one is not
// open).
func (s *session) lastTool() *tool {
	for i := len(s.tools) - 1; i >= 0; i-- {
		if !s.tools[i].rejected {
			return s.tools[i]
		}
	}
	return nil
}

// findTool finds a tool call by key, else the oldest open one with name
// (tools without ids pair by order and name), else the latest open one. A
// call the editor refused is found too, after the open ones, so that the
// agent's own report of it reaches the editor.
func (s *session) findTool(key, name string) *tool {
	if key != "" {
		for _, tl := range s.tools {
			if tl.key == key {
				return tl
			}
		}
		return nil
	}
	var refused *tool
	for _, tl := range s.tools {
		switch {
		case name != "" && tl.name != name:
		case !tl.rejected && name != "":
			return tl
		case tl.rejected && (refused == nil || name == ""):
			refused = tl // by name the oldest, without one the latest
		}
	}
	if name == "" {
		if tl := s.lastTool(); tl != nil {
			return tl
		}
	}
	return refused
}

func (s *session) removeTool(tl *tool) {
	s.tools = slices.DeleteFunc(s.tools, func(x *tool) bool { return x == tl })
}

// live is the session's turn whose prompt is still unanswered (nil for a
// nil session).
func (s *session) live() *turn {
	if s == nil {
		return nil
	}
	if n := len(s.turns); n > 0 && !s.turns[n-1].dropped {
		return s.turns[n-1]
	}
	return nil
}

// --- routing and state -------------------------------------------------------------------

func (t *translator) session(id string) *session {
	if id == "" {
		return nil
	}
	for _, s := range t.sessions {
		if s.id == id {
			return s
		}
	}
	return nil
}

// route finds the session a frame belongs to: by the profile's route paths,
// else the session with a turn in progress, else the only session.
func (t *translator) route(frame []byte, env *translate.Envelope) *session {
	for _, p := range t.p.route {
		v := envGet(env, frame, p)
		if !v.Exists() {
			continue
		}
		for _, s := range t.sessions {
			if s.agentSession != "" && (s.agentSession == v.Str || s.agentSession == v.Raw) {
				return s
			}
		}
	}
	for _, s := range t.sessions {
		if len(s.turns) > 0 {
			return s
		}
	}
	if len(t.sessions) == 1 {
		return t.sessions[0]
	}
	return nil
}

// currentTurn is the oldest turn of sess still in progress (a dropped turn
// the agent has not finished comes before a newer live one).
func (t *translator) currentTurn(sess *session) *turn {
	if sess == nil || len(sess.turns) == 0 {
		return nil
	}
	return sess.turns[0]
}

// maxEnded is how many ended turns' keys a translator remembers.
const maxEnded = 64

// turnByKey finds the turn whose key (turn { key }) is v, and its session.
func (t *translator) turnByKey(v string) (*session, *turn) {
	for _, s := range t.sessions {
		for _, tr := range s.turns {
			if tr.keyed && tr.key == v {
				return s, tr
			}
		}
	}
	return nil, nil
}

func (t *translator) turnByRef(ref translate.Ref) *turn {
	for _, s := range t.sessions {
		for _, tr := range s.turns {
			if tr.ref == ref {
				return tr
			}
		}
	}
	return nil
}

type state struct {
	sess *session
	turn *turn
	// env is the frame's JSON-RPC envelope when one was read: the
	// fields it holds answer the lookups the rules make most.
	env *translate.Envelope
}

func (st *state) stateValue(name string) gjson.Result {
	if st == nil || st.sess == nil {
		if name == "$tool.output" {
			return gjson.Result{}
		}
		return gjson.Result{Type: gjson.False}
	}
	tl := st.sess.lastTool()
	switch name {
	case "$tool.open":
		if tl != nil {
			return gjson.Result{Type: gjson.True}
		}
		return gjson.Result{Type: gjson.False}
	case "$tool.output":
		if tl == nil {
			return gjson.Result{}
		}
		return gjson.Result{Type: gjson.String, Str: tl.output.String()}
	case "$turn.running":
		if st.sess.live() != nil {
			return gjson.Result{Type: gjson.True}
		}
		return gjson.Result{Type: gjson.False}
	}
	return gjson.Result{}
}

func (t *translator) evalEnv(frame, params []byte, sess *session, tl *tool) *evalEnv {
	e := &evalEnv{frame: frame, params: params, sess: sess, tool: tl, id: t.nextID, now: t.now, envVars: t.envVars}
	if t.cur != nil && len(frame) > 0 && len(frame) == len(t.cur.Frame) && &frame[0] == &t.cur.Frame[0] {
		e.frameParams = t.cur.Params
	}
	return e
}

// --- helpers -----------------------------------------------------------------------------

// promptText joins the prompt's text blocks with newlines; a resource link
// becomes its path (file:// URIs) or URI, an embedded text resource its text.
func promptText(params []byte) string {
	var b strings.Builder
	gjson.GetBytes(params, "prompt").ForEach(func(_, blk gjson.Result) bool {
		var s string
		switch blk.Get("type").Str {
		case "text":
			s = blk.Get("text").Str
		case "resource_link":
			s = strings.TrimPrefix(blk.Get("uri").Str, "file://")
		case "resource":
			s = blk.Get("resource.text").Str
		}
		if s == "" {
			return true
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(s)
		return true
	})
	return b.String()
}

// unsupportedBlock names the first prompt block a text profile cannot send.
func unsupportedBlock(params []byte) string {
	bad := ""
	gjson.GetBytes(params, "prompt").ForEach(func(_, blk gjson.Result) bool {
		switch typ := blk.Get("type").Str; typ {
		case "text", "resource_link":
		case "resource":
			if !blk.Get("resource.text").Exists() {
				bad = "binary resource"
			}
		default:
			bad = typ
		}
		return bad == ""
	})
	return bad
}

func frameOut(b []byte) translate.Out { return translate.Out{Kind: translate.Frame, Body: b} }

func frameOuts(frames [][]byte) []translate.Out {
	outs := make([]translate.Out, len(frames))
	for i, f := range frames {
		outs[i] = frameOut(f)
	}
	return outs
}

// evalFrames builds the frames of nodes. With fresh, each frame gets a new
// id (heartbeats, answers); else they share e.id (one request's frames). A
// for expression yields one frame per element.
func (t *translator) evalFrames(nodes []node, e *evalEnv, fresh bool) [][]byte {
	var out [][]byte
	for _, n := range nodes {
		if fresh {
			t.nextID++
			e.id = t.nextID
		}
		sp, spread := n.(*spreadNode)
		if spread {
			n = sp.inner
		}
		v := n.eval(e)
		if v.absent() {
			continue
		}
		if !spread {
			out = append(out, v.appendJSON(nil))
			continue
		}
		gjson.ParseBytes(v.raw).ForEach(func(_, el gjson.Result) bool {
			out = append(out, []byte(el.Raw))
			return true
		})
	}
	return out
}

// spreadNode marks a for expression whose elements are separate frames.
type spreadNode struct{ inner node }

func (n *spreadNode) eval(e *evalEnv) value { return n.inner.eval(e) }

func reply(ref translate.Ref, body []byte, session string) translate.Out {
	return translate.Out{Kind: translate.Reply, Ref: ref, Body: body, Session: session}
}

func fail(ref translate.Ref, errObj []byte) translate.Out {
	return translate.Out{Kind: translate.Fail, Ref: ref, Body: errObj}
}

func failf(ref translate.Ref, code int, format string, args ...any) translate.Out {
	return fail(ref, translate.Errorf(code, format, args...).JSON())
}

func stopReasonBody(reason string) []byte {
	return []byte(`{"stopReason":"` + reason + `"}`)
}

// passError returns the agent's JSON-RPC error object for the editor: as it
// is (compacted) when it has an integer code and a string message, else
// wrapped in a -32603 that carries it.
func passError(raw []byte) []byte {
	r := gjson.ParseBytes(raw)
	code, msg := r.Get("code"), r.Get("message")
	if code.Type == gjson.Number && code.Raw == strconv.FormatInt(code.Int(), 10) && msg.Type == gjson.String {
		var b bytes.Buffer
		if json.Compact(&b, raw) == nil {
			return b.Bytes()
		}
	}
	return translate.Errorf(translate.CodeInternalError, "the agent answered with an error: %.300s", raw).JSON()
}

// envOf returns env when the frame was read as a JSON-RPC message, else nil.
func envOf(env *translate.Envelope, err *translate.Error) *translate.Envelope {
	if err != nil || env.Frame == nil {
		return nil
	}
	return env
}

// envGet is get(frame, path), answered from env (which may be nil) for the
// fields the envelope pass already read: the method and, when they are
// plain strings, params.sessionId and params.update.sessionUpdate. A key
// repeated in the frame reads as its last value there, as the engine routes
// such a frame (gjson reads the first).
func envGet(env *translate.Envelope, frame []byte, path string) gjson.Result {
	if env != nil {
		var v string
		switch path {
		case "method":
			v = env.Method
		case "params.sessionId":
			v = env.SessionID
		case "params.update.sessionUpdate":
			v = env.UpdateKind
		}
		if v != "" && plainASCII(v) {
			// No Raw: the rules compare strings by their value.
			return gjson.Result{Type: gjson.String, Str: v}
		}
	}
	return get(frame, path)
}

// plainASCII reports whether s needs no escaping in a JSON string.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
