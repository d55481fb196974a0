// Tool calls: announcing them to the editor, their updates and late
// reports, and closing those still open when a turn ends.

package rules

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/acp-bridge/acp-bridge/internal/wire"
	"github.com/acp-bridge/acp-bridge/translate"
)

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
