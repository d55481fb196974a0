package bridge

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/tidwall/gjson"
)

// What an agent link sends, through its translator, and what the
// translator's outputs do: frames to the agent, notifications and calls
// to the editor, answers to pending requests.

// feed hands l's translator one input: an editor message, or an event the
// engine decided on (link up or down, a tick), and carries out its outputs.
func (e *engine) feed(l *link, m translate.Msg) {
	if l.initRef != 0 && !(m.Kind == translate.Request && m.Ref == l.initRef) {
		switch m.Kind {
		case translate.Request, translate.Notification, translate.Response:
			l.gated = append(l.gated, m)
			return
		}
	}
	m.At = time.Now()
	outs, err := l.tr.FromEditor(m)
	// Outputs first: a translator that also returns an error may already
	// have answered the request more precisely than -32603 can.
	e.apply(l, outs)
	switch {
	case err == nil:
	case m.Kind == translate.LinkUp || m.Kind == translate.LinkDown || m.Kind == translate.Tick:
		e.log.Debug("translator did not take a link event", "link", l.String(), "kind", m.Kind, "error", err)
	default:
		e.log.Error("translator failed on an editor message", "link", l.String(), "method", m.Method, "error", err)
		if m.Kind == translate.Request {
			if req := e.pending.get(m.Ref); req != nil {
				e.fail(req, translate.Errorf(translate.CodeInternalError, "acp-bridge could not translate %s for dialect %s: %v", m.Method, l.bind.Dialect.Name, err))
			}
		}
	}
}

// agentEvent handles one event from a link's goroutine.
func (e *engine) agentEvent(ev *agentEvent) {
	l := ev.link
	switch {
	case ev.err != nil:
		e.sup.linkLost(l, ev.err)
	case ev.up:
		l.canLend = ev.idler
		e.sup.linkUp(l)
	default:
		l.handled++
		e.fromAgent(l, ev, false)
	}
}

// fromAgent hands a frame to its link's translator. The frame was put on
// one line, and parsed when the translator takes parsed frames, by the
// link's goroutine (agentEvent.prepare). lent says the frame is handled
// under a lease (lend.go): the translator, which promised its output for
// such frames, is not called, and everything else is done as always.
func (e *engine) fromAgent(l *link, ev *agentEvent, lent bool) {
	if l.down != nil {
		return
	}
	frame := ev.frame
	defer e.afterLarge(len(frame))
	if ev.compacted {
		e.repaired(RepairMultiLineFrames, "", "")
	}
	if e.log.IsTrace() {
		e.log.Trace("agent → bridge", "link", l.String(), "frame", truncate(frame, 2048))
	}
	var outs []translate.Out
	var err error
	switch tr := l.tr.(type) {
	case translate.EnvelopeTranslator:
		if lent {
			break // (its one output is notify's, below)
		}
		if !ev.parsed { // (every link parses for such a translator: a guard)
			ev.env, ev.perr = translate.ParseEnvelope(frame)
		}
		// Through the engine's own envelope, not ev's: a pointer given
		// to an interface method escapes, and &ev.env would move every
		// event of the inbox's batch to the heap.
		e.agentEnv = ev.env
		outs, err = tr.FromAgentEnvelope(frame, &e.agentEnv, ev.perr)
		e.agentEnv = translate.Envelope{} // (it holds the frame)
	case translate.AgentClock:
		outs, err = tr.FromAgentAt(frame, time.Now())
	default:
		outs, err = l.tr.FromAgent(frame)
	}
	if e.b.Tap != nil { // (tested here: building the event costs, per frame)
		// After the translator, which names the rule that took the frame,
		// and before what it made of it is applied (and tapped).
		rule := ""
		if rr, ok := l.tr.(translate.RuleReporter); ok && !lent {
			rule = rr.MatchedRule()
		}
		e.tap(TapEvent{Hop: AgentHop, Inbound: true, Link: l.id, Message: frame, Rule: rule})
	}
	if err != nil {
		e.log.Warn("unusable frame from the agent", "link", l.String(), "error", err, "frame", truncate(frame, 200))
	}
	if ev.oneLine {
		e.agentLine = frame
		if translate.PlainChunk(&ev.env) {
			e.agentChunk = ev.env.UpdateKind
		}
	}
	if lent {
		// The one Forward the translator promised (translate.UpdatePasser),
		// carried out as apply would.
		e.notify(l, translate.Out{Kind: translate.Forward, Method: "session/update",
			Body: frame, Params: ev.env.Params, Session: ev.env.SessionID})
	} else {
		e.apply(l, outs)
	}
	e.agentLine, e.agentChunk = nil, ""
}

// isAgentLine reports whether b is the agent frame being handled, which
// its link's goroutine has put on one line: the editor writer need not
// look for line breaks in it again.
func (e *engine) isAgentLine(b []byte) bool {
	return len(b) > 0 && len(b) == len(e.agentLine) && &b[0] == &e.agentLine[0]
}

// largeMessage is the size from which a relayed message makes the engine
// give memory back right after it (see afterLarge).
const largeMessage = 8 << 20

// afterLarge, after a message of n bytes, starts a collection that returns
// the memory it took to the OS, unless one is already running: the Go
// runtime would otherwise keep a 60 MiB message's pages for minutes, and its
// garbage would add to the next large message's peak. One at a time, off
// the loop.
func (e *engine) afterLarge(n int) {
	if n < largeMessage || !e.freeing.CompareAndSwap(false, true) {
		return
	}
	e.helperWG.Add(1)
	go e.freeMemory()
}

func (e *engine) freeMemory() {
	defer e.helperWG.Done()
	defer e.freeing.Store(false)
	debug.FreeOSMemory()
}

// additionalDirs returns the absolute additionalDirectories of a session
// request (ACP spec, Session Setup: entries are absolute; others are
// ignored).
func additionalDirs(params json.RawMessage) []string {
	var dirs []string
	gjson.GetBytes(params, "additionalDirectories").ForEach(func(_, d gjson.Result) bool {
		if d.Type == gjson.String && filepath.IsAbs(d.Str) {
			dirs = append(dirs, filepath.Clean(d.Str))
		}
		return true
	})
	return dirs
}

// recoverID finds the id of a request that is valid JSON but for bytes that
// are not UTF-8 (a text field cut in the middle of a character, say), so
// that the error can be answered under the editor's id rather than null:
// with the bad bytes replaced, the rest reads as a request.
func recoverID(frame []byte, perr *translate.Error) json.RawMessage {
	if !strings.Contains(perr.Reason, "UTF-8") {
		return nil
	}
	env, err := translate.ParseEnvelope(bytes.ToValidUTF8(frame, []byte("\uFFFD")))
	if err != nil || !env.IsRequest() || bytes.Contains(env.ID, []byte("\uFFFD")) {
		return nil // an id that held the bad bytes is not the editor's any more
	}
	return bytes.Clone(env.ID)
}

// compact returns frame on one line, in frame's own memory (a pretty-printed
// 60 MiB frame must not cost a second 60 MiB): without the white space
// between tokens when it is valid JSON, as json.Compact would write it, else
// with its line breaks turned into spaces (the translator will judge it).
func compact(frame []byte) []byte {
	if translate.Valid(frame) == nil {
		return compactInPlace(frame)
	}
	for i, c := range frame {
		if c == '\n' || c == '\r' {
			frame[i] = ' '
		}
	}
	return frame
}

// apply carries out a translator's outputs in order. This is the ordering
// guarantee: a turn's updates are written before its prompt response because
// the translator returned them first and nothing here reorders.
func (e *engine) apply(l *link, outs []translate.Out) {
	// Carrying out an output can feed the same translator again (a late
	// permission answered at once, a link retired), and a translator may
	// reuse the slice it returned: work on a copy, on the stack when small.
	var local [4]translate.Out
	returned := outs
	if len(outs) <= len(local) {
		outs = local[:copy(local[:], outs)]
	} else {
		outs = slices.Clone(outs)
	}
	// The slice is the engine's until the translator's next call: clear
	// it, so that a reused one does not keep the last message's bytes.
	clear(returned)
	for _, o := range outs {
		switch o.Kind {
		case translate.Reply, translate.Fail:
			e.translatorAnswer(l, o)
		case translate.Notify, translate.Forward:
			e.notify(l, o)
		case translate.Call:
			e.callEditor(l, o)
		case translate.CancelCall:
			if c := e.calls[l.calls[o.Ref]]; c != nil {
				e.cancelEditorCall(c)
			}
		case translate.Frame:
			e.toAgent(l, o.Body)
		case translate.Timer:
			e.sup.armWake(l, o.Delay)
		case translate.Note:
			e.note(l, o)
		default:
			e.log.Error("translator returned an output of unknown kind", "kind", o.Kind)
		}
	}
}

func (e *engine) toAgent(l *link, frame []byte) {
	if l.detached {
		e.log.Error("translator sent a frame on a dialect without a control link; dropped", "frame", truncate(frame, 200))
		return
	}
	if l.down != nil {
		return
	}
	e.tap(TapEvent{Hop: AgentHop, Link: l.id, Message: frame})
	if e.log.IsTrace() {
		e.log.Trace("bridge → agent", "link", l.String(), "frame", truncate(frame, 2048))
	}
	l.out.push(frame)
}

// notify writes a translator's notification (Notify, built here, or
// Forward, passed through as it came).
func (e *engine) notify(l *link, o translate.Out) {
	if e.dur.aliasing() {
		var drop bool
		if o, drop = e.dur.unalias(l, o); drop {
			return
		}
	}
	if o.Method == "session/update" {
		sid := o.Session
		if sid == "" {
			sid = updateSession(o)
		}
		if e.v2.on && e.v2.v2Drop(sid, o) {
			return
		}
		s := e.sessions[sid]
		e.streamed += len(o.Body)
		if s != nil && s.draining {
			e.repaired(RepairDrainedTurnUpdates, sid, "update after the bridge ended a cancelled turn: "+
				gjson.GetBytes(o.Body, "update.sessionUpdate").Str)
			return
		}
		if s != nil && e.dur.on() {
			chunk := ""
			if e.isAgentLine(o.Body) {
				chunk = e.agentChunk
			}
			e.dur.recordUpdate(s, o.Body, chunk)
		}
		if e.b.OnSession != nil && s != nil {
			params := o.Body
			if o.Kind == translate.Forward {
				params = o.Params
				if params == nil {
					params = []byte(gjson.GetBytes(o.Body, "params").Raw)
				}
			}
			e.b.OnSession(SessionEvent{Kind: SessionUpdate, Session: s.id, Body: params})
		}
		if o.Kind == translate.Forward {
			// The agent's frame, put on one line by its link's goroutine.
			e.writeEditorSession(editorMsg{body: o.Body, oneLine: e.isAgentLine(o.Body)}, sid)
			return
		}
		e.writeEditorSession(editorMsg{head: notificationHead(o.Method), body: o.Body, tail: closeBrace}, sid)
		return
	}
	if o.Kind == translate.Forward {
		e.writeEditorMsg(editorMsg{body: o.Body})
		return
	}
	e.writeEditorMsg(editorMsg{head: notificationHead(o.Method), body: o.Body, tail: closeBrace})
}

// updateSession finds the session of a session/update output that did not
// name it.
func updateSession(o translate.Out) string {
	if o.Kind == translate.Forward {
		return gjson.GetBytes(o.Body, "params.sessionId").Str
	}
	return gjson.GetBytes(o.Body, "sessionId").Str
}

var (
	closeBrace     = []byte("}")
	updateHead     = []byte(`{"jsonrpc":"2.0","method":"session/update","params":`)
	resultHeadPart = []byte(`{"jsonrpc":"2.0","id":`)
)

func notificationHead(method string) []byte {
	if method == "session/update" {
		return updateHead
	}
	full := translate.NotificationFrame(method, json.RawMessage("0"))
	return full[:len(full)-2] // drop the placeholder params and the brace
}

func (e *engine) callEditor(l *link, o translate.Out) {
	o, _ = e.dur.unalias(l, o)
	sid := o.Session
	if sid == "" {
		sid = gjson.GetBytes(o.Body, "sessionId").Str
	}
	s := e.sessions[sid]
	if (s != nil && s.draining || e.v2.on && e.v2.v2Closed(sid)) && o.Method == "session/request_permission" {
		// The editor already saw this turn end; a permission prompt now would
		// dangle. Cancelled is the answer the editor itself must give after a
		// cancel (ACP spec, Prompt Turn: cancellation).
		e.repaired(RepairDrainedTurnPermissions, sid, "permission request after the bridge ended a cancelled turn answered cancelled")
		e.feed(l, translate.Msg{Kind: translate.Response, Ref: o.Ref, Body: json.RawMessage(`{"outcome":{"outcome":"cancelled"}}`)})
		return
	}
	if e.servesFSLocally(o.Method) {
		e.serveLocalFS(l, o, s)
		return
	}
	e.nextCallID++
	id := translate.IntID(e.nextCallID)
	key := idKey(id)
	e.calls[key] = &call{id: id, link: l, ref: o.Ref}
	l.calls[o.Ref] = key
	e.writeEditorSession(editorMsg{body: translate.RequestFrame(id, o.Method, o.Body)}, sid)
}
