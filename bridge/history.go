package bridge

// A session's history read back from its transcript, in one streaming pass:
// the session/update params that replay it to the editor (session/load)
// and the preamble that primes a new agent session with it. Records are
// taken one at a time, so a 64 MiB transcript costs about its largest
// record in memory, and the first replayed update reaches the editor as
// soon as it is read.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/acp-bridge/acp-bridge/bridge/store"
	"github.com/tidwall/gjson"
)

// replayed are the session/update kinds session/load replays: history, not
// state the agent announces afresh (commands, modes, usage).
var replayed = map[string]bool{
	"user_message_chunk": true, "agent_message_chunk": true, "agent_thought_chunk": true,
	"tool_call": true, "tool_call_update": true, "plan": true,
}

// replayRecord returns the session/update params that replay r for session
// sid, in order: a prompt's blocks as user_message_chunk, and the updates
// the editor was sent as they came (tool calls patched by their updates, as
// the agent sent them). Payloads the store omitted become text saying so.
func replayRecord(sid string, r store.Record) []json.RawMessage {
	var out []json.RawMessage
	switch r.Kind {
	case store.KindPrompt:
		// A prompt a v2 editor sent keeps the messageId it was given
		// (v2front names it in the prompt's _meta).
		idMember := ""
		if id := gjson.GetBytes(r.Body, `_meta.acp-bridge.messageId`); id.Type == gjson.String {
			idMember = `,"messageId":` + mustJSON(id.Str)
		}
		gjson.GetBytes(r.Body, "prompt").ForEach(func(_, block gjson.Result) bool {
			u := `{"sessionUpdate":"user_message_chunk","content":` + string(replayBlock(block)) + idMember + `}`
			out = append(out, updateParams(sid, u))
			return true
		})
	case store.KindUpdate:
		u := gjson.GetBytes(r.Body, "update")
		kind := u.Get("sessionUpdate").Str
		if !u.IsObject() || !replayed[kind] {
			return nil
		}
		raw := u.Raw
		if c := u.Get("content"); c.IsObject() && strings.HasSuffix(kind, "_chunk") {
			if _, ok := omitted(c); ok {
				raw = string(withKey(json.RawMessage(raw), "content", replayBlock(c)))
			}
		}
		out = append(out, updateParams(sid, raw))
	case store.KindGap:
		out = append(out, updateParams(sid, gapUpdate(r, "")))
	}
	return out
}

// gapUpdate is the update that replays a gap record: an agent message
// saying what the transcript is missing there, the record's body in
// _meta["acp-bridge"].gap for a client that looks. messageID, when not
// empty, is the chunk's messageId (ACP v2).
func gapUpdate(r store.Record, messageID string) string {
	g := gjson.ParseBytes(r.Body)
	var text string
	switch {
	case g.Get("interrupted").Bool():
		text = "[acp-bridge: this turn was interrupted: the bridge recording it stopped (killed or crashed), and what the agent sent after this point may be missing from the transcript]"
	case g.Get("dropped").Exists():
		text = fmt.Sprintf("[acp-bridge: %d updates are missing from the transcript here: the disk fell behind the agent's stream]", g.Get("dropped").Int())
	default:
		text = fmt.Sprintf("[acp-bridge: %d records are missing from the transcript here: writing it failed (%s)]", g.Get("lost").Int(), g.Get("cause").Str)
	}
	body := json.RawMessage(r.Body)
	if !g.IsObject() {
		body = json.RawMessage("{}")
	}
	u := map[string]any{
		"sessionUpdate": "agent_message_chunk",
		"content":       map[string]string{"type": "text", "text": text},
		"_meta":         map[string]any{"acp-bridge": map[string]any{"gap": body}},
	}
	if messageID != "" {
		u["messageId"] = messageID
	}
	b, _ := json.Marshal(u)
	return string(b)
}

func updateParams(sid, update string) json.RawMessage {
	return json.RawMessage(`{"sessionId":` + mustJSON(sid) + `,"update":` + update + `}`)
}

// replayBlock returns a content block as replayed: one whose payload the
// store omitted becomes a text block saying so.
func replayBlock(block gjson.Result) json.RawMessage {
	if n, ok := omitted(block); ok {
		text := fmt.Sprintf("[%s omitted from the session transcript: %s bytes of %s]", block.Get("type").Str, n, block.Get("mimeType").Str)
		b, _ := json.Marshal(map[string]string{"type": "text", "text": text})
		return b
	}
	return json.RawMessage(block.Raw)
}

// omitted reports whether the store omitted a content block's payload,
// and its size.
func omitted(block gjson.Result) (string, bool) {
	for _, k := range []string{"data", "resource.blob"} {
		if v := block.Get(k).Str; strings.HasPrefix(v, store.Omitted) {
			return strings.TrimPrefix(v, store.Omitted), true
		}
	}
	return "", false
}

// preambleBuilder renders a transcript as the text that primes a new agent
// session, keeping only its tail: memory stays near twice the bound
// whatever the transcript's length.
type preambleBuilder struct {
	max  int
	b    strings.Builder
	last string // who spoke last ("User", "Assistant"), for grouping
	// pending is the last prompt, held back until a record follows it: the
	// prompt being sent now is not history.
	pending []store.Record
}

func newPreambleBuilder(max int) *preambleBuilder {
	if max <= 0 {
		max = 32 << 10
	}
	return &preambleBuilder{max: max}
}

func (p *preambleBuilder) add(r store.Record) {
	if r.Kind == store.KindPrompt {
		p.commit()
		p.pending = append(p.pending, r)
		return
	}
	switch r.Kind {
	case store.KindUpdate, store.KindSwitch:
		p.commit()
		p.render(r)
	}
}

func (p *preambleBuilder) commit() {
	for _, r := range p.pending {
		p.render(r)
	}
	p.pending = p.pending[:0]
}

func (p *preambleBuilder) say(who, text string) {
	if who != p.last {
		p.b.WriteString("\n\n" + who + ": ")
		p.last = who
	}
	p.b.WriteString(text)
	if p.b.Len() > 2*p.max {
		tail := p.b.String()[p.b.Len()-p.max:]
		p.b.Reset()
		p.b.WriteString(tail)
	}
}

func (p *preambleBuilder) render(r store.Record) {
	switch r.Kind {
	case store.KindPrompt:
		gjson.GetBytes(r.Body, "prompt").ForEach(func(_, block gjson.Result) bool {
			if block.Get("type").Str == "text" {
				p.say("User", block.Get("text").Str)
			} else {
				p.say("User", "["+block.Get("type").Str+"]")
			}
			return true
		})
	case store.KindUpdate:
		u := gjson.GetBytes(r.Body, "update")
		switch u.Get("sessionUpdate").Str {
		case "agent_message_chunk":
			if u.Get("content.type").Str == "text" {
				p.say("Assistant", u.Get("content.text").Str)
			}
		case "tool_call":
			p.say("Assistant", "\n[tool: "+u.Get("title").Str+"]\n")
		}
	case store.KindSwitch:
		p.last = ""
		p.b.WriteString("\n\n[the conversation moved to agent " + r.Agent + "]")
	}
}

// text is the preamble: "" when the transcript holds no conversation.
func (p *preambleBuilder) text() string {
	text := strings.TrimSpace(p.b.String())
	if text == "" {
		return ""
	}
	if len(text) > p.max {
		text = "…" + strings.ToValidUTF8(text[len(text)-p.max:], "")
	}
	return "[acp-bridge] This conversation was started earlier, in another session; its transcript so far follows. Continue from it; the user's new message comes after it.\n\n" +
		text + "\n\n[end of the earlier transcript]"
}

// replayBatch bounds what one hand-off of replayed updates to the loop holds.
const (
	replayBatchUpdates = 64
	replayBatchBytes   = 256 << 10
)

// readHistory reads session sid's transcript in one pass off the loop.
// With replay set, the updates that replay it are written to the editor as
// they are read, in order (the first on its own, the rest in batches).
// done then runs on the loop with the history preamble, the number of
// unreadable lines skipped, and the error that ended the read, if any.
func (d *durableSessions) readHistory(sid string, replay bool, done func(primer string, skipped int, err error)) {
	max, v2 := 0, d.v2.relayingV2()
	if d.cfg.Sessions != nil {
		max = d.cfg.Sessions.PreambleBytes
	}
	d.helpers.Add(1)
	d.store().Read(sid, func(r *store.Reader, err error) {
		if err != nil {
			d.helpers.Done()
			d.core.post(func() { done("", 0, err) })
			return
		}
		go d.history(sid, r, replay, v2, max, done)
	})
}

// history is the goroutine of one readHistory.
func (d *durableSessions) history(sid string, r *store.Reader, replay, v2 bool, max int, done func(string, int, error)) {
	defer d.helpers.Done()
	defer r.Close()
	pre := newPreambleBuilder(max)
	var batch []json.RawMessage
	size, first := 0, true
	flush := func() {
		if len(batch) == 0 {
			return
		}
		out := batch
		batch, size = nil, 0
		d.core.post(func() {
			for _, u := range out {
				d.core.writeEditorSession(editorMsg{head: updateHead, body: u, tail: closeBrace}, sid)
			}
		})
	}
	var rerr error
	for !d.stopping() {
		rec, err := r.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				rerr = err
			}
			break
		}
		pre.add(rec)
		if !replay {
			continue
		}
		replayed := replayRecord
		if v2 {
			replayed = replayRecordV2
		}
		for _, u := range replayed(sid, rec) {
			batch = append(batch, u)
			size += len(u)
		}
		if first && len(batch) > 0 || len(batch) >= replayBatchUpdates || size >= replayBatchBytes {
			first = false
			flush()
		}
	}
	flush()
	primer, skipped := pre.text(), r.Skipped()
	d.core.post(func() { done(primer, skipped, rerr) })
}
