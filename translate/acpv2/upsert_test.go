package acpv2

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/acp-bridge/acp-bridge/translate"
)

// Random sequences of chunks and whole-message upserts for interleaved
// messages: whenever every upsert only adds to a message, what the editor
// was sent for it, joined as editors join chunks, is the message itself,
// nothing duplicated or lost. An upsert that rewrites what the editor has
// sends nothing and leaves a note, and later additions still arrive once.
func TestUpsertsNeverDuplicate(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 7))
		tr := New()
		truth := map[string]*message{}  // what the agent holds
		editor := map[string]*message{} // what the editor was sent
		rewritten := map[string]bool{}  // a rewrite made the editor's view stale
		for step := range 40 {
			id := fmt.Sprintf("m-%d", r.IntN(3))
			m := truth[id]
			if m == nil {
				m = &message{}
				truth[id] = m
			}
			var u map[string]any
			switch op := r.IntN(10); {
			case op < 4: // a chunk
				b := randomBlock(r)
				m.append(b)
				u = map[string]any{"sessionUpdate": "agent_message_chunk", "messageId": id, "content": blockJSON(b)}
			case op < 9: // an upsert that adds (or repeats)
				if r.IntN(3) > 0 {
					m.append(randomBlock(r))
				}
				u = map[string]any{"sessionUpdate": "agent_message", "messageId": id, "content": contentJSON(m.blocks, r)}
			default: // a rewrite
				if len(m.blocks) == 0 {
					continue
				}
				m.blocks = []block{{text: []byte("rewritten " + randomText(r)), isText: true}}
				rewritten[id] = true
				u = map[string]any{"sessionUpdate": "agent_message", "messageId": id, "content": contentJSON(m.blocks, r)}
			}
			frame, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "session/update", "params": map[string]any{"sessionId": "s", "update": u}})
			outs, err := tr.FromAgent(frame)
			if err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
			for _, o := range outs {
				if o.Kind != translate.Notify {
					continue
				}
				up := gjson.GetBytes(o.Body, "update")
				mid := up.Get("messageId").Str
				if editor[mid] == nil {
					editor[mid] = &message{}
				}
				editor[mid].append(contentBlock(json.RawMessage(up.Get("content").Raw)))
			}
		}
		for id, m := range truth {
			if rewritten[id] {
				continue
			}
			got, want := render(editor[id]), render(m)
			if got != want {
				t.Fatalf("seed %d: message %s reached the editor as\n%s\nwant\n%s", seed, id, got, want)
			}
		}
	}
}

func randomText(r *rand.Rand) string {
	words := []string{"a", "bb", " ", "ccc", "é", "\n", "d d"}
	var b strings.Builder
	for range 1 + r.IntN(3) {
		b.WriteString(words[r.IntN(len(words))])
	}
	return b.String()
}

func randomBlock(r *rand.Rand) block {
	if r.IntN(6) == 0 {
		return block{raw: json.RawMessage(fmt.Sprintf(`{"type":"resource_link","name":"f","uri":"file:///%d"}`, r.IntN(3)))}
	}
	return block{text: []byte(randomText(r)), isText: true}
}

func blockJSON(b block) any {
	if b.isText {
		return map[string]any{"type": "text", "text": string(b.text)}
	}
	return json.RawMessage(b.raw)
}

// contentJSON spells blocks as an upsert's content, splitting text blocks
// at random: v2 content is a list, and editors join adjacent text.
func contentJSON(blocks []block, r *rand.Rand) []any {
	var out []any
	for _, b := range blocks {
		if b.isText && len(b.text) > 1 && r.IntN(2) == 0 {
			cut := r.IntN(len(b.text))
			for cut > 0 && cut < len(b.text) && !utf8Start(b.text[cut]) {
				cut--
			}
			out = append(out, blockJSON(block{text: b.text[:cut], isText: true}), blockJSON(block{text: b.text[cut:], isText: true}))
			continue
		}
		out = append(out, blockJSON(b))
	}
	return out
}

func utf8Start(c byte) bool { return c&0xC0 != 0x80 }

func render(m *message) string {
	if m == nil {
		return ""
	}
	var b strings.Builder
	for _, bl := range m.blocks {
		if bl.isText {
			fmt.Fprintf(&b, "text %q\n", bl.text)
		} else {
			fmt.Fprintf(&b, "block %s\n", bl.raw)
		}
	}
	return b.String()
}

// A session remembers its latest keep messages and tool calls, not its
// whole transcript: the oldest are forgotten as new ones come.
func TestSessionMemoryBounded(t *testing.T) {
	tr := New()
	send := func(u string) []translate.Out {
		outs, err := tr.FromAgent([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":` + u + `}}`))
		if err != nil {
			t.Fatal(err)
		}
		return outs
	}
	for i := range 3 * keep {
		send(fmt.Sprintf(`{"sessionUpdate":"agent_message_chunk","messageId":"m-%d","content":{"type":"text","text":"x"}}`, i))
		send(fmt.Sprintf(`{"sessionUpdate":"tool_call_update","toolCallId":"c-%d","status":"pending"}`, i))
	}
	s := tr.sessions["s"]
	if len(s.messages) != keep || len(s.tools) != keep || len(s.msgOrder) != keep || len(s.toolOrder) != keep {
		t.Fatalf("remembered %d messages, %d tools (orders %d, %d); want %d each", len(s.messages), len(s.tools), len(s.msgOrder), len(s.toolOrder), keep)
	}
	// The latest message is still known: an upsert sends only its suffix.
	last := fmt.Sprintf("m-%d", 3*keep-1)
	outs := send(`{"sessionUpdate":"agent_message","messageId":"` + last + `","content":[{"type":"text","text":"xy"}]}`)
	if len(outs) != 1 || gjson.GetBytes(outs[0].Body, "update.content.text").Str != "y" {
		t.Errorf("upsert of the latest message sent %v, want the suffix y", outs)
	}
}
