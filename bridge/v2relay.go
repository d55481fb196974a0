package bridge

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge/store"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/acp-bridge/acp-bridge/translate/v2front"
	"github.com/hashicorp/go-hclog"
	"github.com/tidwall/gjson"
)

// A v2 editor in front of an agent that speaks v2 is relayed, not
// translated twice (v2 → v1 → v2): the editor's frames reach the engine as
// they came, the link's translator (an acpv2.Negotiator told the editor
// speaks v2) passes them to the agent untouched but for the per-hop id
// renumbering every relay does, and the agent's frames come back the same
// way. The engine reads only what it routes on, which v2 keeps where v1
// had it: ids, method, params.sessionId.
//
// Which way a v2 editor goes is known only when the agent answers
// initialize. Until then the editor's initialize goes out as written (with
// the v1 members of the Front's translation beside v2's, for an agent that
// turns out to speak v1), and the editor's other messages wait. An agent
// answering 2 makes the link a relay: the Front is dropped and the
// agent's answer reaches the editor as it came, _meta["acp-bridge"] added.
// An agent answering 1 keeps the Front, which then translates as it does
// for any v1 agent.
//
// The engine's guarantees, in v2's terms (v2editor's turn state): a prompt
// is answered by the agent's acknowledgement and its turn ends with an
// idle state_update. After session/cancel, the turn's idle closes it:
// what the agent still sends for it is dropped until it starts new
// foreground work (running) or the editor prompts again; an agent that
// does not close the turn within the cancel grace gets it closed by the
// bridge (idle, stopReason cancelled). An agent lost mid-turn gets its
// turn closed with idle, stopReason error and the cause. Prompts sent
// while a turn runs go to the agent, which holds them as v2 defines.

// v2Hooks is what serving a v2 editor asks of the rest of the engine: the
// core's handling of the editor's messages (v1, or v2 relayed) and its
// writes to the editor. *engine implements it (hooks.go). Every method
// but post is called on the loop only.
type v2Hooks interface {
	// editorLine handles one line the editor sent, as if just read: the
	// v2 part first (chooseFront, the relay, the Front), then the core.
	editorLine(frame []byte)
	// fromEditor handles one message for the core, in v1 (or relayed v2):
	// parsed, routed, answered; shown to the tap unless viaFront is set.
	fromEditor(frame []byte)
	// tappedFromEditor shows the tap and the trace log a message the
	// editor sent (its own, before the Front translated it).
	tappedFromEditor(frame []byte)
	// tap shows the tap an event of the bridge's own.
	tap(ev TapEvent)
	// writeEditorSession writes m to the editor, in order with the other
	// messages of session; through the Front unless m.translated.
	writeEditorSession(m editorMsg, session string)
	// repaired counts a repair of the compliance shim (and taps it).
	repaired(r Repair, session, detail string)
	// post runs f on the loop; from any goroutine. Once Serve stops, f
	// is dropped.
	post(f func())
}

// v2editor serves an editor that speaks ACP v2, in one of two ways: its
// frames relayed untouched to an agent that speaks v2 (this file), or
// translated for one that speaks v1 by the front (v2front.go). Loop-owned;
// it reaches the rest of the engine through core alone.
type v2editor struct {
	core v2Hooks
	cfg  *Bridge // its configuration: EditorProtocol, the dialect, the agent
	log  hclog.Logger
	// init is where the editor's initialize stands, shared with the core
	// (editorInit): a v2 editor's lines wait while it is pending, and the
	// relay answers it.
	init *editorInit

	// front translates for an editor that speaks ACP v2 (v2front.go);
	// frontChosen says the editor's version is known, frontReplies are
	// the front's answers to the engine's calls, for the next turn.
	front        *v2front.Front
	frontChosen  bool
	frontReplies [][]byte
	// viaFront is set while the front's messages for the engine are
	// handled: the tap saw the editor's own message (tappedFromEditor).
	viaFront bool
	// trying: the editor speaks v2 and the link could relay it; the
	// editor's initialize went out as written, and its other messages
	// wait in held until the agent's answer decides.
	trying bool
	// on: the agent answered 2; frames pass both ways untouched.
	on   bool
	held [][]byte
	// initID is the editor's own id of the initialize in flight;
	// v1Params the Front's translation of its params, which the engine
	// replays on new links if the agent turns out to speak v1.
	initID   json.RawMessage
	v1Params json.RawMessage
	turns    map[string]*v2turn
}

// start makes vr the v2 editor part of a Serve, reaching the rest of its
// engine through core.
func (vr *v2editor) start(core v2Hooks, cfg *Bridge, log hclog.Logger, init *editorInit) {
	vr.core, vr.cfg, vr.log, vr.init = core, cfg, log, init
}

// The v2 editor tells the durable part about relayed turns (v2Turns,
// durable.go) and the supervisor's new links that the editor speaks v2
// (v2Links, supervise.go).
var (
	_ v2Turns = (*v2editor)(nil)
	_ v2Links = (*v2editor)(nil)
)

// relayingV2 reports whether the editor's frames are relayed to a v2 agent.
func (vr *v2editor) relayingV2() bool { return vr.on }

// v2turn is what the engine knows of a session's foreground work.
type v2turn struct {
	active    bool // prompted or running, not yet idle
	cancelled bool // the editor cancelled the active turn
	// closed: the cancelled turn's idle reached the editor; the agent's
	// updates for it are dropped until new work starts.
	closed bool
	grace  *time.Timer
}

// relaysV2 reports whether the agent links can carry a v2 editor's frames
// untouched: an acp agent whose protocol version is not forced to 1.
func (vr *v2editor) relaysV2() bool {
	if !vr.cfg.Dialect.Relay || vr.cfg.BindSession != nil {
		return false
	}
	n, ok := vr.cfg.NewTranslator().(interface{ CanRelayV2() bool })
	return ok && n.CanRelayV2()
}

// v2Link tells a new link's translator that the editor speaks v2 when the
// link relays it.
func (vr *v2editor) v2Link(tr translate.Translator) {
	if !vr.trying && !vr.on {
		return
	}
	if n, ok := tr.(interface{ SetEditorProtocol(int) }); ok {
		n.SetEditorProtocol(v2front.ProtocolVersion)
	}
}

// v2Line handles a v2 editor's line while the agent's version is not
// known, and reports whether it took the line.
func (vr *v2editor) v2Line(frame []byte) bool {
	if vr.init.state == initPending {
		vr.held = append(vr.held, frame)
		return true
	}
	r := gjson.ParseBytes(frame)
	if r.Get("method").Str != "initialize" || !r.Get("id").Exists() || !r.Get("params").IsObject() {
		return false // the Front's, until an initialize goes out as written
	}
	vr.core.tappedFromEditor(frame)
	// The Front learns of the request (it translates the answer if the
	// agent speaks v1) and gives the engine its own id for it.
	outs := vr.front.FromEditor(frame)
	var toEngine []byte
	for _, o := range outs {
		if o.To == v2front.ToEngine {
			toEngine = o.Frame
		}
	}
	mint := gjson.GetBytes(toEngine, "id")
	v1 := gjson.GetBytes(toEngine, "params")
	vr.viaFront = true
	defer func() { vr.viaFront = false }()
	if !mint.Exists() || !v1.IsObject() {
		vr.applyFront(outs) // not an initialize the Front took: the usual path
		return true
	}
	vr.initID = json.RawMessage(bytes.Clone([]byte(r.Get("id").Raw)))
	vr.v1Params = withKey(json.RawMessage(v1.Raw), "protocolVersion", json.RawMessage("1"))
	// The params as written, but for the version: the bridge asks the
	// agent for the one it chose toward the editor (2), the highest it
	// speaks, not a higher one the editor may have asked for. A v1 agent
	// reads what it knows of them (its client capabilities default to
	// none, which is what a v2 editor has).
	params := json.RawMessage(r.Get("params").Raw)
	if r.Get("params.protocolVersion").Raw != "2" {
		params = withKey(params, "protocolVersion", json.RawMessage("2"))
	}
	vr.core.fromEditor(translate.RequestFrame(json.RawMessage(mint.Raw), "initialize", params))
	return true
}

// v2Initialized rewrites an initialize answer when the editor speaks v2 and
// the link relays it, and reports whether it did: an agent that answered 2
// is relayed from now on; one that answered 1 leaves the answer to the
// usual path and the Front.
func (vr *v2editor) v2Initialized(l *link, result json.RawMessage) (json.RawMessage, bool) {
	if agentProtocol(l) != v2front.ProtocolVersion {
		if vr.trying {
			vr.log.Info("a v2 editor and an agent that answered v1: the editor's messages are translated")
			vr.trying = false
			vr.init.params = vr.v1Params
		}
		return nil, false
	}
	if vr.trying {
		vr.trying, vr.on = false, true
		vr.front = nil
		if vr.init.req != nil {
			vr.init.req.id = vr.initID // answered under the editor's own id
		}
		vr.log.Info("v2 editor and v2 agent: relayed untouched")
	}
	version := vr.cfg.Version
	if version == "" {
		version = "dev"
	}
	own := map[string]any{"name": "acp-bridge", "version": version, "agent": vr.cfg.AgentName, "dialect": vr.cfg.Dialect.Name,
		"editorProtocol": v2front.ProtocolVersion, "agentProtocol": v2front.ProtocolVersion}
	var m map[string]json.RawMessage
	if json.Unmarshal(result, &m) != nil || m == nil {
		return result, true // the agent's, to the letter: not an object
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := m["_meta"]; ok {
		_ = json.Unmarshal(raw, &meta)
	}
	meta["acp-bridge"], _ = json.Marshal(own)
	m["_meta"], _ = json.Marshal(meta)
	out, err := json.Marshal(m)
	if err != nil {
		return result, true
	}
	vr.init.succeeded(out)
	return out, true
}

// releaseV2Held hands the lines held while the agent's version was unknown
// back to editorLine, in order, once it is known (or the initialize
// failed).
func (vr *v2editor) releaseV2Held() {
	for len(vr.held) > 0 && vr.init.state != initPending {
		frame := vr.held[0]
		vr.held[0] = nil
		vr.held = vr.held[1:]
		vr.core.editorLine(frame)
	}
	if len(vr.held) == 0 {
		vr.held = nil
	}
}

// v2FromEditor handles a v2 editor's line on a relayed connection.
func (vr *v2editor) v2FromEditor(frame []byte) {
	r := gjson.GetManyBytes(frame, "method", "params.sessionId", "id")
	method, sid := r[0].Str, r[1].Str
	switch {
	case method == "session/prompt" && r[2].Exists():
		t := vr.v2Turn(sid)
		t.active, t.cancelled, t.closed = true, false, false
		t.stopGrace()
	case method == "session/cancel" && !r[2].Exists():
		if t := vr.turns[sid]; t != nil && t.active && !t.cancelled {
			t.cancelled = true
			d := vr.cfg.cancelGrace()
			t.grace = time.AfterFunc(d, func() { vr.core.post(func() { vr.v2GraceExpired(sid, t, d) }) })
		}
	}
	vr.core.fromEditor(frame)
}

func (vr *v2editor) v2Turn(sid string) *v2turn {
	if vr.turns == nil {
		vr.turns = map[string]*v2turn{}
	}
	t := vr.turns[sid]
	if t == nil {
		t = &v2turn{}
		vr.turns[sid] = t
	}
	return t
}

func (t *v2turn) stopGrace() {
	if t.grace != nil {
		t.grace.Stop()
		t.grace = nil
	}
}

// v2Drop follows a session's foreground state in the agent's session/update
// and reports whether the update belongs to a cancelled turn already
// closed, and is dropped.
func (vr *v2editor) v2Drop(sid string, o translate.Out) bool {
	body := o.Body
	path := "update"
	if o.Kind == translate.Forward {
		path = "params.update"
	}
	u := gjson.GetBytes(body, path)
	kind := u.Get("sessionUpdate").Str
	t := vr.turns[sid]
	if kind == "state_update" {
		if t == nil {
			t = vr.v2Turn(sid)
		}
		switch u.Get("state").Str {
		case "idle":
			if t.closed {
				break // the bridge closed it already
			}
			t.active = false
			if t.cancelled {
				t.cancelled, t.closed = false, true
				t.stopGrace()
			}
			return false
		default: // running, requires_action: foreground work goes on or starts
			if t.closed {
				t.closed = false // new work
			}
			t.active = true
			return false
		}
	}
	if t == nil || !t.closed {
		return false
	}
	vr.core.repaired(RepairDrainedTurnUpdates, sid, "update after the cancelled turn's idle state_update: "+kind)
	return true
}

// v2GraceExpired closes a cancelled turn the agent did not close in time.
func (vr *v2editor) v2GraceExpired(sid string, t *v2turn, d time.Duration) {
	if vr.turns[sid] != t || !t.active || !t.cancelled {
		return
	}
	t.grace = nil
	vr.log.Warn("agent did not end the cancelled turn in time; closed it with an idle state_update", "session", sid, "grace", d)
	vr.core.tap(TapEvent{Hop: BridgeHop, Session: sid, Note: "cancel-grace",
		Detail: "the agent did not end the cancelled turn within " + d.String() + "; the bridge sent the idle state_update"})
	vr.v2Idle(sid, t, "cancelled", nil)
}

// v2LinkLost closes the turn a lost link's session had running: v2's
// prompt was answered long ago, so the turn's end is where the editor
// learns of the loss.
func (vr *v2editor) v2LinkLost(sid string, cause *translate.Error) {
	t := vr.turns[sid]
	if t == nil || !t.active {
		return
	}
	vr.v2Idle(sid, t, "error", cause.JSON())
}

// v2Idle sends the idle state_update that ends t, its late updates dropped
// from then on.
func (vr *v2editor) v2Idle(sid string, t *v2turn, stopReason string, errObj json.RawMessage) {
	t.stopGrace()
	t.active, t.cancelled, t.closed = false, false, true
	update := map[string]any{"sessionUpdate": "state_update", "state": "idle", "stopReason": stopReason,
		"_meta": map[string]any{"acp-bridge": map[string]any{"closedBy": "acp-bridge"}}}
	if errObj != nil {
		update["error"] = errObj
	}
	params, _ := json.Marshal(map[string]any{"sessionId": sid, "update": update})
	vr.core.writeEditorSession(editorMsg{body: translate.NotificationFrame("session/update", params)}, sid)
}

// --- durable sessions ------------------------------------------------------------

// v2Replayed are the update kinds a relayed v2 editor's replay carries:
// the conversation, not its state (the resume's own snapshot follows) nor
// the session's settings (the resume's answer has them).
var v2Replayed = map[string]bool{
	"user_message": true, "agent_message": true, "agent_thought": true,
	"user_message_chunk": true, "agent_message_chunk": true, "agent_thought_chunk": true,
	"tool_call_update": true, "tool_call_content_chunk": true, "plan_update": true,
}

// replayRecordV2 is replayRecord for a relayed v2 editor: the agent's own
// v2 updates as they were recorded. A v2 agent echoes the user's message
// itself, so prompts are not replayed as chunks; a chunk without the
// messageId v2 requires (recorded from a v1 agent) is left out.
func replayRecordV2(sid string, r store.Record) []json.RawMessage {
	if r.Kind == store.KindGap {
		return []json.RawMessage{updateParams(sid, gapUpdate(r, "acp-bridge-gap-"+strconv.FormatInt(r.At.UnixNano(), 36)))}
	}
	if r.Kind != store.KindUpdate {
		return nil
	}
	u := gjson.GetBytes(r.Body, "update")
	kind := u.Get("sessionUpdate").Str
	if !u.IsObject() || !v2Replayed[kind] || strings.HasSuffix(kind, "_chunk") && u.Get("messageId").Type != gjson.String {
		return nil
	}
	raw := u.Raw
	if c := u.Get("content"); c.IsObject() && strings.HasSuffix(kind, "_chunk") {
		if _, ok := omitted(c); ok {
			raw = string(withKey(json.RawMessage(raw), "content", replayBlock(c)))
		}
	}
	return []json.RawMessage{updateParams(sid, raw)}
}

// v2EndTurn closes sid's running turn (idle, stopReason cancelled) as its
// session is closed, and forgets the session's turn state.
func (vr *v2editor) v2EndTurn(sid string) {
	if t := vr.turns[sid]; t != nil && t.active {
		vr.v2Idle(sid, t, "cancelled", nil)
	}
	delete(vr.turns, sid)
}

// codeRequestCancelled is JSON-RPC's "Request cancelled", which v2 gives a
// prompt its session's close kept from being inserted.
const codeRequestCancelled = -32800

// v2Closed reports whether sid's cancelled turn was closed and no new work
// has started: a permission request now belongs to that turn.
func (vr *v2editor) v2Closed(sid string) bool {
	t := vr.turns[sid]
	return t != nil && t.closed
}

// v2Running reports whether a relayed v2 session has foreground work: its
// prompt was answered, and it is not idle.
func (vr *v2editor) v2Running(sid string) bool {
	t := vr.turns[sid]
	return vr.on && t != nil && t.active
}
