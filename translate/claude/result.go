// A turn's end: the CLI's result message answering the prompt with its
// stop reason, usage and context window, tools left open closed, and the
// errors a failed turn reports.

package claude

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/tidwall/gjson"
)

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
