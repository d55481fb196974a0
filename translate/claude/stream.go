// The assistant's output: streamed events and their text and image
// chunks, whole assistant messages, and the tool uses they announce.

package claude

import (
	"encoding/json"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/tidwall/gjson"
)

// streamEvent handles one raw Anthropic stream event (with
// --include-partial-messages).
func (t *translator) streamEvent(msg gjson.Result) []translate.Out {
	if isSubagent(msg) {
		return nil
	}
	ev := msg.Get("event")
	index := int(ev.Get("index").Int())
	switch ev.Get("type").Str {
	case "message_start":
		t.stream.reset(ev.Get("message.id").Str)
	case "content_block_start":
		delete(t.stream.seen, index)
		block := ev.Get("content_block")
		if block.Get("type").Str == "tool_use" {
			if id := block.Get("id").Str; id != "" {
				return t.toolUse(id, block.Get("name").Str, json.RawMessage("{}"), false)
			}
		}
	case "content_block_delta":
		delta := ev.Get("delta")
		switch delta.Get("type").Str {
		case "text_delta":
			if !t.stream.seen[index] {
				t.stream.seen[index] = true
				t.stream.text++
			}
			if s := delta.Get("text").Str; s != "" {
				return []translate.Out{t.chunk("agent_message_chunk", s)}
			}
		case "thinking_delta":
			if !t.stream.seen[index] {
				t.stream.seen[index] = true
				t.stream.thinking++
			}
			if s := delta.Get("thinking").Str; s != "" {
				return []translate.Out{t.chunk("agent_thought_chunk", s)}
			}
		}
	}
	// content_block_stop, message_delta, message_stop, ping, input and
	// signature deltas: nothing to show.
	return nil
}

// isSubagent reports whether a message comes from a subagent (Task).
func isSubagent(msg gjson.Result) bool {
	p := msg.Get("parent_tool_use_id")
	return p.Exists() && p.Type != gjson.Null
}

func (t *translator) chunk(kind, text string) translate.Out {
	return t.update(struct {
		SessionUpdate string      `json:"sessionUpdate"`
		Content       textContent `json:"content"`
	}{kind, textContent{"text", text}})
}

// imageChunk shows an image of the agent's message: base64 data with its
// MIME type, or a URL (with empty data, as claude-agent-acp sends it).
func (t *translator) imageChunk(source gjson.Result) translate.Out {
	type image struct {
		Type     string `json:"type"`
		Data     string `json:"data"`
		MimeType string `json:"mimeType"`
		URI      string `json:"uri,omitempty"`
	}
	img := image{Type: "image"}
	if source.Get("type").Str == "base64" {
		img.Data, img.MimeType = source.Get("data").Str, source.Get("media_type").Str
	} else {
		img.URI = source.Get("url").Str
	}
	return t.update(struct {
		SessionUpdate string `json:"sessionUpdate"`
		Content       image  `json:"content"`
	}{"agent_message_chunk", img})
}

// assistant handles an aggregate assistant message: blocks whose deltas
// were streamed are dropped, the rest are shown
// (docs/agent-protocols.md#deltas-and-aggregates).
func (t *translator) assistant(msg gjson.Result) []translate.Out {
	message := msg.Get("message")
	sub := isSubagent(msg)
	if u := message.Get("usage"); u.IsObject() && !sub && t.turn != nil {
		t.turn.contextUsed = contextTokens(u)
		t.turn.haveContext = true
	}
	synthetic := message.Get("model").Str == "<synthetic>"
	// The aggregate matches the streamed message when the ids agree (or
	// either is unknown).
	id := message.Get("id").Str
	streamed := t.stream.msgID == "" || id == "" || id == t.stream.msgID
	var outs []translate.Out
	for _, block := range message.Get("content").Array() {
		switch block.Get("type").Str {
		case "text":
			text := block.Get("text").Str
			switch {
			case sub:
			case streamed && t.stream.usedText < t.stream.text:
				t.stream.usedText++
			case synthetic && t.turn != nil:
				// "API Error: …", "Invalid API key · Please run /login":
				// the CLI's own words, shown as the prompt's error if
				// the result says the turn failed, else as a message.
				t.turn.withheld = append(t.turn.withheld, text)
			case text != "":
				outs = append(outs, t.chunk("agent_message_chunk", text))
			}
		case "thinking":
			text := block.Get("thinking").Str
			switch {
			case sub:
			case streamed && t.stream.usedThinking < t.stream.thinking:
				t.stream.usedThinking++
			case text != "":
				outs = append(outs, t.chunk("agent_thought_chunk", text))
			}
		case "image":
			// Shown as claude-agent-acp shows it: inline data, or the URL.
			if !sub {
				outs = append(outs, t.imageChunk(block.Get("source")))
			}
		case "tool_use":
			if id := block.Get("id").Str; id != "" {
				input := compactJSON([]byte(block.Get("input").Raw))
				if input == nil {
					input = json.RawMessage("{}")
				}
				if sub {
					if tl := t.tools[id]; tl == nil {
						t.tools[id] = &tool{parent: msg.Get("parent_tool_use_id").Str}
					}
				}
				outs = append(outs, t.toolUse(id, block.Get("name").Str, input, true)...)
			}
		}
	}
	return outs
}

// toolUse shows a tool use: a pending tool_call when it is first seen, a
// tool_call_update with the full input when the CLI sends it whole, or for
// TodoWrite a plan.
func (t *translator) toolUse(id, name string, input json.RawMessage, final bool) []translate.Out {
	tl := t.tools[id]
	if tl == nil {
		tl = &tool{}
		t.tools[id] = tl
	}
	tl.name = name
	if final {
		tl.input = input
	}
	if name == "TodoWrite" {
		tl.plan = true
		entries, ok := planEntries(input)
		if !ok {
			return nil
		}
		return []translate.Out{t.update(struct {
			SessionUpdate string      `json:"sessionUpdate"`
			Entries       []planEntry `json:"entries"`
		}{"plan", entries})}
	}
	if tl.announced {
		return []translate.Out{t.refine(id, name, input)}
	}
	return []translate.Out{t.announce(id, name, input)}
}

// refine sends the editor what more the translator learnt of an announced
// tool call (its full input, once the CLI has it): a tool_call_update, as
// claude-agent-acp sends it, never a second tool_call with the same id.
func (t *translator) refine(id, name string, input json.RawMessage) translate.Out {
	v := t.viewTool(name, input)
	return t.update(toolCall{
		Meta:          toolMeta(name, t.tools[id].parent),
		SessionUpdate: "tool_call_update",
		ToolCallID:    id,
		Title:         &v.title,
		Kind:          v.kind,
		Content:       v.content,
		Locations:     v.locations,
		RawInput:      input,
		emptyContent:  true,
	})
}

// announce sends the editor a pending tool_call for a tool use.
func (t *translator) announce(id, name string, input json.RawMessage) translate.Out {
	tl := t.tools[id]
	if tl == nil {
		tl = &tool{name: name, input: input}
		t.tools[id] = tl
	}
	if !tl.announced {
		t.nextTool++
		tl.seq = t.nextTool
	}
	tl.announced = true
	v := t.viewTool(name, input)
	return t.update(toolCall{
		Meta:          toolMeta(name, tl.parent),
		SessionUpdate: "tool_call",
		ToolCallID:    id,
		Title:         &v.title,
		Kind:          v.kind,
		Status:        "pending",
		Content:       v.content,
		Locations:     v.locations,
		RawInput:      input,
		emptyContent:  true,
	})
}
