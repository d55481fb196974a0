package check

import (
	"fmt"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// Comparing across protocol versions (CompareOptions.AProtocol or
// BProtocol 2). v1 and v2 encode one turn differently: v1 streams chunks
// and ends the turn with the prompt's answer, v2 upserts messages, tool
// calls and plans by id and ends the turn with an idle state_update. So
// each side's turn is reduced to what it leaves the user with, which both
// versions can say: the agent's message text and thought text, each tool
// call's final kind, title and status, the permission requests, the final
// plan, and the stop reason (or error code). Those outcomes are compared;
// the way they were streamed is not.

// recordOutcomes plays o's session in the run's version and records each
// turn's outcome. Capabilities are not recorded: v1 and v2 name and nest
// them differently.
func (r *run) recordOutcomes(rec *Recording, o CompareOptions) {
	if _, err := r.initialize(); err != nil {
		rec.Error = err.Error()
		return
	}
	if _, err := r.newSession(); err != nil {
		rec.Error = err.Error()
		return
	}
	ids := map[string]string{}
	for _, text := range o.Prompts {
		turn, err := r.playTurn(text)
		msgs := r.messages()[turn.from:]
		turn.Events = outcomeOf(msgs, r.sid, turn.end, ids, o.Text)
		turn.FirstUpdate = firstUpdate(msgs, r.sid, turn.end)
		rec.Turns = append(rec.Turns, turn.Turn)
		if err != nil {
			rec.Error = err.Error()
			return
		}
	}
}

// playedTurn is a Turn with the transcript span it was played in.
type playedTurn struct {
	Turn
	from int // the transcript index of the prompt
	end  int // the transcript index of the turn's end (answer or idle)
}

// playTurn plays one prompt to the end of its turn (protocol.turnEnded).
func (r *run) playTurn(text string) (playedTurn, error) {
	t := playedTurn{Turn: Turn{Prompt: text}, from: len(r.messages())}
	cancel := strings.HasPrefix(text, CancelPrefix)
	id, err := r.request("session/prompt", textPrompt(r.sid, strings.TrimPrefix(text, CancelPrefix)))
	if err != nil {
		return t, err
	}
	ended := func(m Msg) bool { return r.proto.turnEnded(r, m, id) }
	if cancel {
		r.cancelAfterFirst(ended)
	}
	end, err := r.awaitCancelled(r.opts.Timeout, ended)
	r.holdPermissions = false
	if err != nil {
		return t, fmt.Errorf("prompt %q: %s", text, waitErr("no "+r.proto.turnEnd, err))
	}
	r.settle()
	t.end = end.N
	t.End = end.At - r.messages()[t.from].At
	t.ErrorCode = end.Get("error.code").Int()
	t.StopReason = end.Get(r.proto.stopReason).Str
	return t, nil
}

// cancelAfterFirst waits for the turn's first update that is not a state
// change (or CancelAfter), then cancels it and holds permission requests
// to answer them "cancelled".
func (r *run) cancelAfterFirst(ended func(Msg) bool) {
	_, _ = r.await(r.opts.CancelAfter, func(m Msg) bool {
		return (isUpdate(m, r.sid) && !isState(m, r.sid, "")) || ended(m)
	})
	_, _ = r.notify("session/cancel", map[string]any{"sessionId": r.sid})
	r.holdPermissions = true
	r.answerHeld()
}

// firstUpdate is the time from the prompt (msgs[0]) to the turn's first
// update that is not a state change, before its end; 0 when none.
func firstUpdate(msgs []Msg, sid string, end int) time.Duration {
	if len(msgs) == 0 {
		return 0
	}
	for _, m := range msgs {
		if m.N < end && isUpdate(m, sid) && !isState(m, sid, "") {
			return m.At - msgs[0].At
		}
	}
	return 0
}

// toolState is a tool call as the user last saw it.
type toolState struct {
	kind, title, status string
}

// outcomeOf reduces a turn's messages, v1 or v2, to what it leaves the
// user with: see the comment at the top of this file. Messages after end
// (the turn's end) count, marked late. ids renumbers tool calls across
// the session.
func outcomeOf(msgs []Msg, sid string, end int, ids map[string]string, text bool) []string {
	var (
		msgOrder, thoughtOrder []string
		messages               = map[string]*strings.Builder{}
		thoughts               = map[string]*strings.Builder{}
		toolOrder              []string
		tools                  = map[string]*toolState{}
		plan                   []string
		hasPlan                bool
		requests               []string
		late                   int
	)
	// v1 chunks have no messageId: a run of chunks is one message.
	lastKind := ""
	v1Msg := 0
	appendText := func(order *[]string, into map[string]*strings.Builder, id, s string, replace bool) {
		b, ok := into[id]
		if !ok {
			b = &strings.Builder{}
			into[id] = b
			*order = append(*order, id)
		}
		if replace {
			b.Reset()
		}
		b.WriteString(s)
	}
	for _, m := range msgs {
		if m.Out {
			continue
		}
		if m.IsRequest() && m.method == "session/request_permission" {
			tc := m.Get("params.toolCall.toolCallId").Str
			if tc == "" {
				tc = m.Get("params.subject.toolCall.toolCallId").Str
			}
			var kinds []string
			for _, op := range m.Get("params.options").Array() {
				kinds = append(kinds, op.Get("kind").Str)
			}
			requests = append(requests, fmt.Sprintf("permission %s options=%s", toolID(tc, ids), strings.Join(kinds, ",")))
			continue
		}
		if !isUpdate(m, sid) {
			continue
		}
		if m.N > end && !isState(m, sid, "") {
			late++
		}
		u := m.Get("params.update")
		kind := u.Get("sessionUpdate").Str
		if kind != lastKind {
			v1Msg++
		}
		lastKind = kind
		msgID := u.Get("messageId").Str
		if msgID == "" {
			msgID = fmt.Sprintf("v1-%d", v1Msg)
		}
		switch kind {
		case "agent_message_chunk":
			appendText(&msgOrder, messages, msgID, u.Get("content.text").Str, false)
		case "agent_thought_chunk":
			appendText(&thoughtOrder, thoughts, msgID, u.Get("content.text").Str, false)
		case "agent_message":
			appendText(&msgOrder, messages, msgID, blocksText(u.Get("content")), true)
		case "agent_thought":
			appendText(&thoughtOrder, thoughts, msgID, blocksText(u.Get("content")), true)
		case "tool_call", "tool_call_update":
			id := u.Get("toolCallId").Str
			tc, ok := tools[id]
			if !ok {
				tc = &toolState{}
				tools[id] = tc
				toolOrder = append(toolOrder, id)
			}
			patch(&tc.kind, u.Get("kind"))
			patch(&tc.title, u.Get("title"))
			patch(&tc.status, u.Get("status"))
		case "plan":
			hasPlan = true
			plan = planEntries(u.Get("entries"))
		case "plan_update":
			switch p := u.Get("plan"); {
			case p.Type == gjson.Null:
				hasPlan, plan = false, nil
			case p.Exists():
				hasPlan = true
				plan = planEntries(p.Get("entries"))
			}
		}
	}
	out := []string{}
	join := func(order []string, texts map[string]*strings.Builder) string {
		var b strings.Builder
		for _, id := range order {
			b.WriteString(texts[id].String())
		}
		return b.String()
	}
	for _, x := range []struct {
		name  string
		order []string
		texts map[string]*strings.Builder
	}{{"message", msgOrder, messages}, {"thought", thoughtOrder, thoughts}} {
		if len(x.order) == 0 {
			continue
		}
		if text {
			out = append(out, x.name+" "+strconvQuote(join(x.order, x.texts)))
		} else {
			out = append(out, x.name)
		}
	}
	out = append(out, requests...)
	for _, id := range toolOrder {
		tc := tools[id]
		out = append(out, fmt.Sprintf("tool %s kind=%s status=%s title=%s", toolID(id, ids), orDash(tc.kind), orDash(tc.status), strconvQuote(tc.title)))
	}
	if hasPlan {
		out = append(out, "plan "+strings.Join(plan, "; "))
	}
	if late > 0 {
		out = append(out, fmt.Sprintf("%d update(s) after the turn ended", late))
	}
	return out
}

// patch applies an upsert field: omitted leaves it, null clears it.
func patch(f *string, v gjson.Result) {
	switch {
	case !v.Exists():
	case v.Type == gjson.Null:
		*f = ""
	default:
		*f = v.Str
	}
}

// blocksText is the text of a whole message's content blocks.
func blocksText(content gjson.Result) string {
	var b strings.Builder
	for _, c := range content.Array() {
		if c.Get("type").Str == "text" {
			b.WriteString(c.Get("text").Str)
		}
	}
	return b.String()
}

func planEntries(entries gjson.Result) []string {
	var out []string
	for _, e := range entries.Array() {
		out = append(out, fmt.Sprintf("[%s] %s", e.Get("status").Str, e.Get("content").Str))
	}
	return out
}
