package acpv2

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/acp-bridge/acp-bridge/translate"
)

// update translates one v2 session/update notification into what a v1
// editor receives: zero or more v1 updates, the answer of a turn that
// ended, and notes.
func (t *Translator) update(params json.RawMessage) []translate.Out {
	p := decode(params)
	sid := p.str("sessionId")
	u := decode(p["update"])
	kind := u.str("sessionUpdate")
	if sid == "" || kind == "" {
		return []translate.Out{note("unroutable-updates", "session/update without sessionId or update.sessionUpdate dropped")}
	}
	s := t.session(sid)
	switch kind {
	case "agent_message_chunk", "agent_thought_chunk", "user_message_chunk":
		if kind == "user_message_chunk" && s.turn != nil && !s.replaying {
			return nil // the live echo of the editor's own prompt
		}
		return t.chunk(sid, s, kind, u)
	case "agent_message", "agent_thought", "user_message":
		if kind == "user_message" && s.turn != nil && !s.replaying {
			return nil
		}
		return t.upsert(sid, s, kind+"_chunk", u)
	case "tool_call_update":
		return t.toolUpdate(sid, s, u)
	case "tool_call_content_chunk":
		return t.toolChunk(sid, s, u)
	case "plan_update":
		plan := decode(u["plan"])
		if plan.str("type") != "items" {
			return []translate.Out{note(NoteUnrepresentable, "plan_update of type %q has no v1 form", plan.str("type"))}
		}
		v1 := object{"sessionUpdate": quoted("plan"), "entries": planEntries(plan["entries"])}
		meta := decode(u["_meta"])
		if meta == nil {
			meta = object{}
		}
		meta["acp-bridge"] = marshal(object{"planId": plan["planId"]})
		v1["_meta"] = marshal(meta)
		return []translate.Out{update(sid, marshal(v1))}
	case "state_update":
		return t.state(sid, s, u)
	case "available_commands_update":
		out, _ := t.availableCommands(sid, u)
		return out
	case "config_option_update":
		renameConfigOptions(u)
		return []translate.Out{update(sid, marshal(u))}
	case "session_info_update", "usage_update", "notice", "compaction_update", "compaction_summary_chunk":
		// The same shape in both versions.
		return []translate.Out{update(sid, marshal(u))}
	}
	// terminal_update, terminal_output_chunk (agent-owned terminals, v2
	// only), extension and future kinds: v1's list of kinds is closed.
	return []translate.Out{note(NoteUnrepresentable, "session/update %q has no v1 form; dropped", kind)}
}

// state handles a state_update: an idle one ends the running turn.
func (t *Translator) state(sid string, s *session, u object) []translate.Out {
	var outs []translate.Out
	if bg := gjson.GetBytes(u["background"], "#"); bg.Int() > 0 {
		outs = append(outs, note(NoteUnrepresentable, "state_update reports %d background task(s), which v1 cannot show", bg.Int()))
	}
	state := u.str("state")
	if state != "idle" || s.turn == nil {
		return outs
	}
	reason, present := u["stopReason"]
	var stop string
	if present {
		_ = json.Unmarshal(reason, &stop)
	}
	if stop == "" && !s.turn.acked {
		// An idle snapshot before the prompt was accepted ends nothing.
		return outs
	}
	tr := s.turn
	s.turn = nil
	if p := t.requests[tr.id]; p != nil {
		// Ended before its acknowledgement: the late one is swallowed.
		p.abandoned = true
		delete(t.byRef, tr.ref)
	}
	meta := decode(tr.meta)
	switch stop {
	case "end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled":
	case "error":
		e := decode(u["error"])
		msg := e.str("message")
		if msg == "" {
			msg = "no message"
		}
		code := translate.CodeInternalError
		if c := gjson.GetBytes(u["error"], "code"); c.Type == gjson.Number {
			code = int(c.Int())
		}
		obj := &translate.Error{Code: code, Message: "Error", Reason: "the agent's turn ended with an error: " + msg}
		if e != nil {
			obj = obj.With("agentError", json.RawMessage(compact(u["error"])))
		}
		return append(outs, translate.Out{Kind: translate.Fail, Ref: tr.ref, Body: obj.JSON()})
	case "":
		stop = "end_turn"
		outs = append(outs, note(NoteFallback, "idle state_update without a stop reason ended the turn as end_turn"))
	default:
		if meta == nil {
			meta = object{}
		}
		meta["acp-bridge"] = marshal(object{"stopReason": quoted(stop)})
		outs = append(outs, note(NoteFallback, "stop reason %q has no v1 form; answered end_turn", stop))
		stop = "end_turn"
	}
	answer := object{"stopReason": quoted(stop)}
	if meta != nil {
		answer["_meta"] = marshal(meta)
	}
	return append(outs, reply(tr.ref, marshal(answer)))
}

// v1Blocks are the content block types of v1, whose list is closed; v2's
// is open.
var v1Blocks = map[string]bool{"text": true, "image": true, "audio": true, "resource_link": true, "resource": true}

// chunk passes a message chunk on and records what the editor now has.
func (t *Translator) chunk(sid string, s *session, kind string, u object) []translate.Out {
	if typ := gjson.GetBytes(u["content"], "type").Str; !v1Blocks[typ] {
		return []translate.Out{note(NoteUnrepresentable, "%s with a content block of type %q, which v1 lacks; dropped", kind, typ)}
	}
	m := s.message(u.str("messageId"), kind)
	m.append(contentBlock(u["content"]))
	return []translate.Out{update(sid, marshal(u))}
}

func (s *session) message(id, kind string) *message {
	m := s.messages[id]
	if m == nil || id == "" {
		m = &message{kind: kind}
		if id != "" {
			s.messages[id] = m
			delete(s.messages, remember(&s.msgOrder, id))
		}
	}
	return m
}

func contentBlock(raw json.RawMessage) block {
	if gjson.GetBytes(raw, "type").Str == "text" {
		if text := gjson.GetBytes(raw, "text"); text.Type == gjson.String {
			return block{text: []byte(text.Str), isText: true}
		}
	}
	return block{raw: compact(raw)}
}

// append adds b to what the editor has of m. Text joins the text before
// it in place: a message streamed as many chunks costs each chunk its own
// length, not the message's.
func (m *message) append(b block) {
	if n := len(m.blocks); n > 0 && b.isText && m.blocks[n-1].isText {
		m.blocks[n-1].text = append(m.blocks[n-1].text, b.text...)
		return
	}
	if b.isText {
		b.text = bytes.Clone(b.text) // m's own, to grow in place
	}
	m.blocks = append(m.blocks, b)
}

// upsert handles a whole-message update: the editor is sent what the new
// content adds to what it has, as chunks. A v1 editor cannot take text
// back, so a rewrite of content it has is dropped with a note.
func (t *Translator) upsert(sid string, s *session, kind string, u object) []translate.Out {
	id := u.str("messageId")
	raw, present := u["content"]
	if !present {
		return nil // a patch of _meta alone: nothing to show
	}
	m := s.message(id, kind)
	var next []block
	var items []json.RawMessage
	_ = json.Unmarshal(raw, &items) // null and [] clear: no blocks
	nm := &message{}
	var outs []translate.Out
	for _, item := range items {
		if typ := gjson.GetBytes(item, "type").Str; !v1Blocks[typ] {
			outs = append(outs, note(NoteUnrepresentable, "%s with a content block of type %q, which v1 lacks; left out", strings.TrimSuffix(kind, "_chunk"), typ))
			continue
		}
		nm.append(contentBlock(item))
	}
	next = nm.blocks
	add, ok := extends(m.blocks, next)
	if !ok {
		return append(outs, note(NoteUnrepresentable, "%s %q rewrites content the editor already shows; v1 cannot take it back, so the rewrite was not sent", strings.TrimSuffix(kind, "_chunk"), id))
	}
	for i, b := range add {
		content := b.raw
		if b.isText {
			content = marshal(object{"type": quoted("text"), "text": quoted(string(b.text))})
		}
		chunk := object{"sessionUpdate": quoted(kind), "content": content}
		if id != "" {
			chunk["messageId"] = quoted(id)
		}
		if meta, ok := u["_meta"]; ok && i == 0 && !isNull(meta, true) {
			chunk["_meta"] = meta
		}
		outs = append(outs, update(sid, marshal(chunk)))
		m.append(b)
	}
	return outs
}

// extends returns the blocks that turn sent into next, when next only adds
// to sent (text appended to its last text block, blocks after it).
func extends(sent, next []block) ([]block, bool) {
	if len(next) < len(sent) {
		return nil, false
	}
	var add []block
	for i, s := range sent {
		n := next[i]
		switch {
		case s.isText && n.isText && i == len(sent)-1:
			if !bytes.HasPrefix(n.text, s.text) {
				return nil, false
			}
			if suffix := n.text[len(s.text):]; len(suffix) > 0 {
				add = append(add, block{text: suffix, isText: true})
			}
		case s.isText && n.isText:
			if !bytes.Equal(s.text, n.text) {
				return nil, false
			}
		case s.isText || n.isText || !bytes.Equal(s.raw, n.raw):
			return nil, false
		}
	}
	return append(add, next[len(sent):]...), true
}

// toolUpdate turns a tool_call_update upsert into a v1 tool_call (an id the
// editor has not seen) or tool_call_update.
func (t *Translator) toolUpdate(sid string, s *session, u object) []translate.Out {
	id := u.str("toolCallId")
	if id == "" {
		return []translate.Out{note(NoteUnrepresentable, "tool_call_update without a toolCallId dropped")}
	}
	tl, seen := s.tools[id]
	if !seen {
		tl = &tool{}
		s.tools[id] = tl
		delete(s.tools, remember(&s.toolOrder, id))
	}
	v1, notes := toolFields(u, seen)
	if raw, ok := v1["content"]; ok {
		tl.content = nil
		_ = json.Unmarshal(raw, &tl.content)
	}
	v1["sessionUpdate"] = quoted("tool_call_update")
	if !seen {
		v1["sessionUpdate"] = quoted("tool_call")
	}
	return append(notes, update(sid, marshal(v1)))
}

// toolChunk appends one content item to a tool call; v1 replaces content
// whole, so the update carries all of it.
func (t *Translator) toolChunk(sid string, s *session, u object) []translate.Out {
	id := u.str("toolCallId")
	tl, seen := s.tools[id]
	item, notes := toolContent(u["content"])
	if item == nil {
		return notes
	}
	if !seen {
		tl = &tool{}
		s.tools[id] = tl
		delete(s.tools, remember(&s.toolOrder, id))
	}
	tl.content = append(tl.content, item)
	v1 := object{"toolCallId": quoted(id), "content": marshal(tl.content)}
	v1["sessionUpdate"] = quoted("tool_call_update")
	if !seen {
		v1["sessionUpdate"] = quoted("tool_call")
		v1["title"] = quoted("")
	}
	return append(notes, update(sid, marshal(v1)))
}

// toolFields maps the members of a v2 ToolCallUpdate to v1's ToolCall or
// ToolCallUpdate (seen: the editor knows the tool call). Omitted stays
// omitted; null clears, which v1 spells with the field's empty value.
func toolFields(u object, seen bool) (object, []translate.Out) {
	var notes []translate.Out
	v1 := object{}
	for _, k := range slices.Sorted(maps.Keys(u)) { // notes in a stable order
		v := u[k]
		null := isNull(v, true)
		switch k {
		case "sessionUpdate":
			continue
		case "title":
			if null {
				v = quoted("")
			}
		case "kind":
			switch kind := gjson.GetBytes(v, "@this").Str; kind {
			case "read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other":
			default:
				if !null {
					notes = append(notes, note(NoteFallback, "tool kind %q sent as other", kind))
				}
				v = quoted("other")
			}
		case "status":
			switch status := gjson.GetBytes(v, "@this").Str; status {
			case "pending", "in_progress", "completed", "failed":
			case "cancelled":
				v = quoted("failed")
				notes = append(notes, note(NoteFallback, "tool status cancelled sent as failed"))
			case "paused":
				v = quoted("in_progress")
				notes = append(notes, note(NoteFallback, "tool status paused sent as in_progress"))
			default:
				if null {
					v = quoted("pending")
					break
				}
				notes = append(notes, note(NoteFallback, "tool status %q has no v1 form; left out", status))
				continue
			}
		case "content":
			var items []json.RawMessage
			_ = json.Unmarshal(v, &items)
			out := []json.RawMessage{}
			for _, item := range items {
				c, more := toolContent(item)
				notes = append(notes, more...)
				if c != nil {
					out = append(out, c)
				}
			}
			v = marshal(out)
		case "locations":
			if null {
				v = json.RawMessage("[]")
			}
		case "rawInput", "rawOutput", "name", "capabilities", "_meta":
			if null {
				continue // v1 cannot clear them: left as they were
			}
		}
		v1[k] = v
	}
	if _, ok := v1["title"]; !ok && !seen {
		// A new v1 tool call needs a title; v2's starts without one.
		title := u.str("name")
		v1["title"] = quoted(title)
	}
	return v1, notes
}

// toolContent maps one v2 ToolCallContent item to v1's; nil when v1 has no
// form for it.
func toolContent(raw json.RawMessage) (json.RawMessage, []translate.Out) {
	o := decode(raw)
	switch o.str("type") {
	case "content":
		return compact(raw), nil
	case "diff":
		// v2 diffs are structured changes with patch text; v1's are one
		// file's old and new text. The patch text is what a v1 editor can
		// show.
		if patch := gjson.GetBytes(o["patch"], "text"); patch.Type == gjson.String {
			return marshal(object{"type": quoted("content"), "content": marshal(object{"type": quoted("text"), "text": quoted(patch.Str)})}),
				[]translate.Out{note(NoteUnrepresentable, "v2 diff sent to the v1 editor as its patch text")}
		}
		return nil, []translate.Out{note(NoteUnrepresentable, "v2 diff without patch text has no v1 form; dropped")}
	}
	return nil, []translate.Out{note(NoteUnrepresentable, "tool call content of type %q has no v1 form; dropped", o.str("type"))}
}

// planEntries maps v2 plan entries to v1's: open enum values v1 lacks take
// their fallback (a cancelled entry is shown completed).
func planEntries(raw json.RawMessage) json.RawMessage {
	var entries []object
	if json.Unmarshal(raw, &entries) != nil {
		return json.RawMessage("[]")
	}
	for _, e := range entries {
		switch e.str("status") {
		case "pending", "in_progress", "completed":
		case "cancelled":
			e["status"] = quoted("completed")
		default:
			e["status"] = quoted("pending")
		}
		switch e.str("priority") {
		case "high", "medium", "low":
		default:
			e["priority"] = quoted("medium")
		}
	}
	if entries == nil {
		entries = []object{}
	}
	return marshal(entries)
}

// availableCommands maps v2 commands ({type:"command", name, description,
// input}) to v1's (untagged); other types have no v1 form.
func (t *Translator) availableCommands(sid string, u object) ([]translate.Out, bool) {
	var cmds []object
	if json.Unmarshal(u["availableCommands"], &cmds) != nil {
		return []translate.Out{note(NoteUnrepresentable, "available_commands_update without a list of commands dropped")}, false
	}
	var outs []translate.Out
	kept := []object{}
	for _, c := range cmds {
		if typ := c.str("type"); typ != "command" && typ != "" {
			outs = append(outs, note(NoteUnrepresentable, "available command of type %q has no v1 form; dropped", typ))
			continue
		}
		delete(c, "type")
		// v2 tags the text input ({type:"text", hint}); v1's is untagged,
		// and has no other kind.
		if in := decode(c["input"]); in != nil {
			switch in.str("type") {
			case "text", "":
				delete(in, "type")
				c["input"] = marshal(in)
			default:
				outs = append(outs, note(NoteUnrepresentable, "command %q input of type %q has no v1 form; left out", c.str("name"), in.str("type")))
				delete(c, "input")
			}
		}
		if _, ok := c["description"]; !ok {
			c["description"] = quoted("")
		}
		kept = append(kept, c)
	}
	u["availableCommands"] = marshal(kept)
	return append(outs, update(sid, marshal(u))), true
}

// renameConfigOptions gives each of o's configOptions v1's "id" for v2's
// "configId".
func renameConfigOptions(o object) {
	var opts []object
	if json.Unmarshal(o["configOptions"], &opts) != nil || opts == nil {
		return
	}
	for _, opt := range opts {
		if id, ok := opt["configId"]; ok {
			opt["id"] = id
			delete(opt, "configId")
		}
	}
	o["configOptions"] = marshal(opts)
}
