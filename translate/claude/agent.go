package claude

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/acp-bridge/acp-bridge/translate"
)

// decode checks that frame is one stream-json message (a JSON object with a
// string "type", docs/agent-protocols.md#claude-stream-json-messages) and
// returns it parsed. The result holds a copy of the frame: it may be kept
// after the call.
func decode(frame []byte) (gjson.Result, error) {
	if err := translate.Valid(frame); err != nil {
		return gjson.Result{}, err
	}
	r := gjson.ParseBytes(frame)
	if !r.IsObject() {
		return gjson.Result{}, errors.New("not a JSON object")
	}
	if typ := r.Get("type"); typ.Type != gjson.String || typ.Str == "" {
		return gjson.Result{}, errors.New(`no "type" string`)
	}
	return r, nil
}

// FromAgent implements translate.Translator for one line of the CLI's
// stdout. Control requests of the CLI are answered in the same call or,
// for permissions, once the editor has answered; an error comes with the
// answer the CLI needs already in the outputs.
func (t *translator) FromAgent(frame []byte) ([]translate.Out, error) {
	msg, err := decode(frame)
	if err != nil {
		return nil, fmt.Errorf("claude: unusable line from the CLI: %w", err)
	}
	typ := msg.Get("type").Str
	switch typ {
	case "control_response":
		return t.controlResponse(msg)
	case "control_request":
		return t.cliControlRequest(msg)
	case "control_cancel_request":
		return t.controlCancel(msg), nil
	}
	if t.session == "" || t.closed {
		return []translate.Out{note("CLI message " + typ + " with no session open")}, nil
	}
	if typ == "user" {
		if outs, ok := t.echo(msg); ok {
			return outs, nil
		}
	}
	if t.staleTurns > 0 && (typ == "stream_event" || typ == "assistant" || typ == "user") {
		// Output of a turn the engine gave up on (see result): the
		// editor already saw it end.
		return nil, nil
	}
	switch typ {
	case "system":
		return t.system(msg), nil
	case "stream_event":
		return t.streamEvent(msg), nil
	case "assistant":
		return t.assistant(msg), nil
	case "user":
		return t.userMessage(msg), nil
	case "result":
		return t.result(msg), nil
	}
	// rate_limit_event, tool_progress, auth_status, keep_alive… from
	// newer CLIs (docs/agent-protocols.md#claude-stream-json-messages).
	return []translate.Out{t.note("CLI message type " + typ)}, nil
}

func (t *translator) note(detail string) translate.Out {
	o := note(detail)
	o.Session = t.session
	return o
}

// controlResponse handles the CLI's answer to one of the translator's
// control requests.
func (t *translator) controlResponse(msg gjson.Result) ([]translate.Out, error) {
	resp := msg.Get("response")
	id := resp.Get("request_id").Str
	c, ok := t.ctl[id]
	if !ok {
		return nil, fmt.Errorf("claude: the CLI answered control request %s, which claude has not sent or no longer waits for", resp.Get("request_id").Raw)
	}
	delete(t.ctl, id)
	if resp.Get("subtype").Str == "success" {
		return t.controlAnswered(c, compactJSON([]byte(resp.Get("response").Raw)), ""), nil
	}
	why := resp.Get("error").Str
	if why == "" {
		why = "the CLI answered with an error and gave no reason"
	}
	return t.controlAnswered(c, nil, why), nil
}

// cliControlRequest handles a control request of the CLI: can_use_tool
// becomes a permission request; every other subtype (hook_callback,
// mcp_message: the bridge registers no hooks and hosts no MCP server) is
// refused at once so that the CLI does not wait.
func (t *translator) cliControlRequest(msg gjson.Result) ([]translate.Out, error) {
	rid := msg.Get("request_id")
	if rid.Type != gjson.String || rid.Str == "" {
		return nil, fmt.Errorf("claude: control request without a request_id string cannot be answered: %.200s", msg.Raw)
	}
	req := msg.Get("request")
	subtype := req.Get("subtype").Str
	if subtype != "can_use_tool" {
		return []translate.Out{
			controlError(rid.Str, "acp-bridge does not handle control request "+quoteSubtype(subtype)),
			t.note("CLI control request " + quoteSubtype(subtype) + " refused"),
		}, nil
	}
	return t.canUseTool(rid.Str, req), nil
}

func quoteSubtype(s string) string {
	if s == "" {
		return "without a subtype"
	}
	return fmt.Sprintf("%q", s)
}

// canUseTool asks the editor for permission
// (docs/agent-protocols.md#claude-stream-json-captured-run and
// #claude-stream-json-mapping). Each request gets its own Call, whatever else
// is pending, so several subagents asking at once never block each other or
// the session.
func (t *translator) canUseTool(requestID string, req gjson.Result) []translate.Out {
	if t.session == "" || t.closed || t.turn == nil || t.turn.cancelled || t.staleTurns > 0 {
		return []translate.Out{controlSuccess(requestID, deny("No prompt is running: the turn was cancelled or has ended", true))}
	}
	name := req.Get("tool_name").Str
	input := compactJSON([]byte(req.Get("input").Raw))
	if input == nil {
		input = json.RawMessage("{}")
	}
	toolID := req.Get("tool_use_id").Str
	if toolID == "" {
		toolID = "permission-" + requestID
	}
	var outs []translate.Out
	if tl := t.tools[toolID]; tl == nil || !tl.announced {
		// The editor must see the tool call it is asked about.
		outs = append(outs, t.announce(toolID, name, input))
	}
	v := t.viewTool(name, input)
	p := &permission{requestID: requestID, toolID: toolID, toolName: name, input: input, exitPlan: name == "ExitPlanMode"}
	options := permissionOptions
	if p.exitPlan {
		options = t.exitPlanChoices()
		p.bypass = options[0] == exitPlanBypass
	}
	if s := req.Get("permission_suggestions"); s.IsArray() {
		p.suggestions = compactJSON([]byte(s.Raw))
	}
	return append(outs, t.perms.Call(t.session, "session/request_permission", marshal(struct {
		Options   []permissionOption `json:"options"`
		SessionID string             `json:"sessionId"`
		ToolCall  toolCall           `json:"toolCall"`
	}{options, t.session, toolCall{ToolCallID: toolID, Title: &v.title, Kind: v.kind, Content: v.content, Locations: v.locations, RawInput: input}}), p))
}

// controlCancel handles the CLI withdrawing one of its control requests: a
// pending permission request is withdrawn from the editor as well. The CLI
// no longer waits, so it gets no answer.
func (t *translator) controlCancel(msg gjson.Result) []translate.Out {
	id := msg.Get("request_id").Str
	return t.perms.Withdraw(func(p *permission) bool { return p.requestID == id }, nil)
}

// system handles system messages: init reports the session's permission
// mode, which the editor is told of when it changed; compaction and local
// command output are shown as agent messages; other subtypes (hooks, task
// progress, session state…) are ignored. Nothing here depends on where in
// the turn a system message comes: Claude Code 2.1 sends them between a
// tool result and the next assistant message.
func (t *translator) system(msg gjson.Result) []translate.Out {
	subtype := msg.Get("subtype").Str
	switch subtype {
	case "init":
	case "status":
		// Compacting takes a while; say so, as claude-agent-acp does.
		if msg.Get("status").Str == "compacting" {
			return []translate.Out{t.chunk("agent_message_chunk", "Compacting...")}
		}
		return nil
	case "compact_boundary":
		// The context was compacted: its size is unknown until the next
		// assistant message, and taken as empty until then.
		if t.turn != nil {
			t.turn.contextUsed, t.turn.haveContext = 0, true
		}
		return []translate.Out{t.chunk("agent_message_chunk", "\n\nCompacting completed.")}
	case "local_command_output":
		if s := msg.Get("content").Str; s != "" {
			return []translate.Out{t.chunk("agent_message_chunk", s)}
		}
		return nil
	default:
		// session_state_changed, hooks, task progress, api_retry and the
		// subtypes of newer CLIs: nothing an editor shows.
		return []translate.Out{t.note("CLI system message " + quoteSubtype(subtype))}
	}
	mode := msg.Get("permissionMode").Str
	if !isMode(mode) || mode == t.mode {
		return nil
	}
	t.mode = mode
	return []translate.Out{t.modeUpdate(), t.configUpdate()}
}

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

// userMessage handles a user message the CLI wrote: tool results become
// tool_call_updates; its own notes ("[Request interrupted by user]") are
// not shown.
func (t *translator) userMessage(msg gjson.Result) []translate.Out {
	var outs []translate.Out
	for _, block := range msg.Get("message.content").Array() {
		if block.Get("type").Str != "tool_result" {
			continue
		}
		id := block.Get("tool_use_id").Str
		tl := t.tools[id]
		if tl == nil {
			outs = append(outs, t.note("tool result for tool use "+fmt.Sprintf("%q", id)+", which was never announced"))
			continue
		}
		delete(t.tools, id)
		if tl.name == "EnterPlanMode" && !block.Get("is_error").Bool() {
			// claude-agent-acp's PostToolUse hook: the CLI is planning now.
			t.mode = "plan"
			outs = append(outs, t.modeUpdate(), t.configUpdate())
		}
		if tl.plan || !tl.announced {
			continue
		}
		failed := block.Get("is_error").Bool()
		status := "completed"
		if failed {
			status = "failed"
		} else {
			outs = append(outs, t.postToolUse(id, tl, msg.Get("tool_use_result"))...)
		}
		content := block.Get("content")
		raw := compactJSON([]byte(content.Raw))
		if raw == nil {
			raw = json.RawMessage(`""`)
		}
		u := toolCall{
			Meta:          toolMeta(tl.name, tl.parent),
			SessionUpdate: "tool_call_update",
			ToolCallID:    id,
			Status:        status,
			RawOutput:     raw,
		}
		var title string
		u.Content, title = resultView(tl.name, content, failed)
		if title != "" {
			u.Title = &title
		}
		outs = append(outs, t.update(u))
	}
	return outs
}

// postToolUse shows what claude-agent-acp's PostToolUse hook shows once a
// tool succeeded, before its result: a tool_call_update carrying the tool's
// own response (the user message's tool_use_result, which is the hook's
// tool_response) in _meta.claudeCode.toolResponse, and for Edit the diff
// and locations of the patch the CLI applied.
func (t *translator) postToolUse(id string, tl *tool, response gjson.Result) []translate.Out {
	if !response.Exists() {
		return nil
	}
	raw := compactJSON([]byte(response.Raw))
	if raw == nil {
		return nil
	}
	meta := map[string]any{"toolResponse": raw, "toolName": tl.name}
	if tl.parent != "" {
		meta["parentToolUseId"] = tl.parent
	}
	u := toolCall{
		Meta:          marshal(map[string]any{"claudeCode": meta}),
		SessionUpdate: "tool_call_update",
		ToolCallID:    id,
	}
	if tl.name == "Edit" {
		u.Content, u.Locations = patchView(response)
	}
	return []translate.Out{t.update(u)}
}

// patchView is the diff of an Edit's response, hunk by hunk, as
// claude-agent-acp shows it: each hunk of structuredPatch is one diff
// (context lines on both sides) located at the hunk's first new line.
func patchView(response gjson.Result) ([]toolContent, []location) {
	path := response.Get("filePath").Str
	patch := response.Get("structuredPatch")
	if path == "" || !patch.IsArray() {
		return nil, nil
	}
	var content []toolContent
	var locations []location
	for _, hunk := range patch.Array() {
		var oldLines, newLines []string
		for _, l := range hunk.Get("lines").Array() {
			line := l.String()
			text := ""
			if line != "" {
				text = line[1:]
			}
			switch {
			case strings.HasPrefix(line, "-"):
				oldLines = append(oldLines, text)
			case strings.HasPrefix(line, "+"):
				newLines = append(newLines, text)
			default:
				oldLines = append(oldLines, text)
				newLines = append(newLines, text)
			}
		}
		if len(oldLines) == 0 && len(newLines) == 0 {
			continue
		}
		start := hunk.Get("newStart").Int()
		locations = append(locations, location{Path: path, Line: &start})
		var oldText *string
		if s := strings.Join(oldLines, "\n"); s != "" {
			oldText = &s
		}
		content = append(content, diffItem(path, oldText, strings.Join(newLines, "\n")))
	}
	return content, locations
}

// echo handles the CLI's echo of a queued prompt (--replay-user-messages),
// which says the CLI took it, as claude-agent-acp reads it: the running
// prompt is answered end_turn (with the usage of the results it saw, none)
// and what follows is the queued prompt's turn. The echo of a prompt
// answered "cancelled" while queued starts a turn nobody waits for: it is
// interrupted and its output dropped. It reports false for other user
// messages.
func (t *translator) echo(msg gjson.Result) ([]translate.Out, bool) {
	id := msg.Get("uuid").Str
	if id == "" {
		return nil, false
	}
	if t.dropped[id] {
		delete(t.dropped, id)
		if t.turn != nil {
			// Taken into the running turn, which is being cancelled.
			return nil, true
		}
		t.staleTurns++
		return []translate.Out{t.controlRequest(&ctlRequest{kind: ctlInterrupt}, struct {
			Subtype string `json:"subtype"`
		}{"interrupt"})}, true
	}
	i := slices.IndexFunc(t.queue, func(q *turn) bool { return q.uuid == id })
	if i < 0 {
		return nil, false
	}
	next := t.queue[i]
	if next.cancelled {
		// Taken into the running turn, which is being cancelled: the
		// prompt is answered after it (see result).
		return nil, true
	}
	t.queue = slices.Delete(t.queue, i, i+1)
	var outs []translate.Out
	if tr := t.turn; tr != nil && !tr.abandoned && t.staleTurns == 0 {
		outs = append(outs, reply(tr.ref, stopReason{StopReason: "end_turn", Usage: &usage{}}))
	}
	t.turn = next
	return outs, true
}

// result ends the turn (docs/agent-protocols.md#claude-stream-json-mapping,
// #how-turns-end).
func (t *translator) result(msg gjson.Result) []translate.Out {
	if t.staleTurns > 0 {
		// The end of a turn the engine gave up on, which the CLI finished
		// before the prompt that came after it.
		t.staleTurns--
		t.stream.reset("")
		clear(t.tools)
		return nil
	}
	if t.turn == nil {
		return []translate.Out{t.note("result with no prompt running")}
	}
	cancelled := t.dropQueued(false)
	return append(t.endTurn(msg), cancelled...)
}

// endTurn answers the running prompt with the result msg, and makes the
// next queued prompt the running one.
func (t *translator) endTurn(msg gjson.Result) []translate.Out {
	tr := t.turn
	t.turn = nil
	if len(t.queue) > 0 {
		// The CLI takes the next queued prompt now, as claude-agent-acp
		// expects when no echo handed the turn over.
		t.turn, t.queue = t.queue[0], t.queue[1:]
	}
	t.stream.reset("")
	// Permission requests the CLI left open are moot once its turn ended,
	// and so are tool calls without a result (an interrupted tool, one
	// whose permission was withdrawn): they are closed as failed, the
	// nearest ACP v1 status, so that no editor shows them running.
	outs := t.withdrawPermissions("The turn has ended", false)
	outs = append(outs, t.closeTools()...)
	if tr.abandoned {
		return outs
	}
	if tr.haveContext {
		outs = append(outs, t.usageUpdate(msg, tr.contextUsed))
	}
	subtype := msg.Get("subtype").Str
	answer := stopReason{Usage: promptUsage(msg), Meta: resultMeta(msg)}
	switch {
	case tr.cancelled:
		// Without usage, as claude-agent-acp answers a cancelled turn.
		answer.StopReason, answer.Usage = "cancelled", nil
		return append(outs, reply(tr.ref, answer))
	case subtype == "error_max_turns" || subtype == "error_max_budget_usd" || subtype == "error_max_structured_output_retries":
		answer.StopReason = "max_turn_requests"
		return append(outs, reply(tr.ref, answer))
	case msg.Get("stop_reason").Str == "max_tokens":
		answer.StopReason = "max_tokens"
		return append(outs, reply(tr.ref, answer))
	case msg.Get("is_error").Bool() || strings.HasPrefix(subtype, "error") && (subtype != "error_during_execution" || len(msg.Get("errors").Array()) > 0):
		// An error_during_execution that is no error and names none ends
		// the turn as claude-agent-acp ends it, end_turn; one that names
		// errors fails the prompt with them, so that the user learns of
		// them (claude-agent-acp drops them).
		return append(outs, fail(tr.ref, turnError(msg, tr.withheld)))
	}
	for _, text := range tr.withheld {
		outs = append(outs, t.chunk("agent_message_chunk", text))
	}
	if text := msg.Get("result").Str; tr.local && text != "" {
		// A local command's output is only in the result.
		outs = append(outs, t.chunk("agent_message_chunk", text))
	}
	answer.StopReason = "end_turn"
	return append(outs, reply(tr.ref, answer))
}

// defaultContextWindow is the context size reported when the result names
// none, as claude-agent-acp assumes it.
const defaultContextWindow = 200000

// contextTokens is the context an assistant message's usage fills: its
// input, output and cache tokens.
func contextTokens(usage gjson.Result) int64 {
	var n int64
	for _, k := range []string{"input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"} {
		n += max(usage.Get(k).Int(), 0)
	}
	return n
}

// usageUpdate reports at the end of a turn how full the context is (the
// last assistant message's tokens) of how large a window (the smallest
// contextWindow among the result's models), and what the session cost
// so far (the CLI's total_cost_usd), as claude-agent-acp does.
func (t *translator) usageUpdate(result gjson.Result, used int64) translate.Out {
	size := int64(0)
	result.Get("modelUsage").ForEach(func(_, m gjson.Result) bool {
		if w := m.Get("contextWindow").Int(); w > 0 && (size == 0 || w < size) {
			size = w
		}
		return true
	})
	if size == 0 {
		size = defaultContextWindow
	}
	type cost struct {
		Amount   float64 `json:"amount"`
		Currency string  `json:"currency"`
	}
	u := struct {
		SessionUpdate string `json:"sessionUpdate"`
		Used          int64  `json:"used"`
		Size          int64  `json:"size"`
		Cost          *cost  `json:"cost,omitempty"`
	}{SessionUpdate: "usage_update", Used: used, Size: size}
	if c := result.Get("total_cost_usd"); c.Type == gjson.Number {
		u.Cost = &cost{c.Float(), "USD"}
	}
	return t.update(u)
}

// usage is the unstable ACP token usage of a prompt answer.
type usage struct {
	InputTokens       int64 `json:"inputTokens"`
	OutputTokens      int64 `json:"outputTokens"`
	CachedReadTokens  int64 `json:"cachedReadTokens"`
	CachedWriteTokens int64 `json:"cachedWriteTokens"`
	TotalTokens       int64 `json:"totalTokens"`
}

// promptUsage is the turn's token usage from its result, or nil when the
// result has none.
func promptUsage(result gjson.Result) *usage {
	r := result.Get("usage")
	if !r.IsObject() {
		return nil
	}
	n := func(k string) int64 { return max(r.Get(k).Int(), 0) }
	u := &usage{
		InputTokens:       n("input_tokens"),
		OutputTokens:      n("output_tokens"),
		CachedReadTokens:  n("cache_read_input_tokens"),
		CachedWriteTokens: n("cache_creation_input_tokens"),
	}
	u.TotalTokens = u.InputTokens + u.OutputTokens + u.CachedReadTokens + u.CachedWriteTokens
	return u
}

// closeTools closes every announced tool call that got no result, in the
// order they were announced, and forgets every tool use.
func (t *translator) closeTools() []translate.Out {
	var open []string
	for id, tl := range t.tools {
		if tl.announced {
			open = append(open, id)
		}
	}
	slices.SortFunc(open, func(a, b string) int { return cmp.Compare(t.tools[a].seq, t.tools[b].seq) })
	var outs []translate.Out
	for _, id := range open {
		outs = append(outs, t.update(toolCall{
			Meta:          toolMeta(t.tools[id].name, t.tools[id].parent),
			SessionUpdate: "tool_call_update",
			ToolCallID:    id,
			Status:        "failed",
		}))
	}
	clear(t.tools)
	return outs
}

// turnError is the prompt's error for a failed turn: the CLI's own text in
// the message, the ACP auth-required code when it says the login is
// missing or stale.
func turnError(msg gjson.Result, withheld []string) json.RawMessage {
	subtype := msg.Get("subtype").Str
	text := msg.Get("result").Str
	if text == "" && len(withheld) > 0 {
		text = strings.Join(withheld, "\n")
	}
	if text == "" {
		var errs []string
		for _, e := range msg.Get("errors").Array() {
			errs = append(errs, e.String())
		}
		text = strings.Join(errs, "; ")
	}
	if text == "" {
		text = fmt.Sprintf("Claude Code ended the turn with an error (%s) and gave no reason", orUnknownSubtype(subtype))
	}
	if loginProblem(text) {
		return translate.Errorf(translate.CodeAuthRequired, "Claude Code is not logged in: %s (run `claude /login` in a terminal, then try again)", text).
			With("subtype", subtype).JSON()
	}
	return translate.Errorf(translate.CodeInternalError, "%s", text).With("subtype", subtype).JSON()
}

func orUnknownSubtype(s string) string {
	if s == "" {
		return "no subtype"
	}
	return s
}

// loginProblem reports whether an error text says the CLI's credentials
// are missing or no longer valid (the CLI says "Please run /login",
// docs/agent-protocols.md#claude-stream-json-captured-run).
func loginProblem(text string) bool {
	l := strings.ToLower(text)
	for _, s := range []string{"/login", "invalid api key", "not logged in", "oauth token has expired", "authentication_error"} {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// resultMeta puts the turn's usage and cost under _meta.claudeCode (ACP v1
// has no field for them; docs/agent-protocols.md#claude-stream-json-mapping).
func resultMeta(msg gjson.Result) json.RawMessage {
	m := map[string]json.RawMessage{}
	for _, f := range []struct{ from, to string }{
		{"usage", "usage"},
		{"modelUsage", "modelUsage"},
		{"total_cost_usd", "totalCostUsd"},
		{"duration_ms", "durationMs"},
		{"duration_api_ms", "durationApiMs"},
		{"num_turns", "numTurns"},
	} {
		if v := msg.Get(f.from); v.Exists() {
			if raw := compactJSON([]byte(v.Raw)); raw != nil {
				m[f.to] = raw
			}
		}
	}
	if len(m) == 0 {
		return nil
	}
	return marshal(map[string]any{"claudeCode": m})
}
