package tests

// A v2 editor in front of a v2 agent: the SDK's v2 client
// (testdata/v2editor/editor.mjs) and a raw-line client, the built binary,
// and the SDK's v2 agent (testdata/sdkagentv2/agent.mjs). The bridge relays
// v2 untouched: what the agent says reaches the editor as the agent said
// it (whole-message upserts, its own message ids, fields v1 lacks), and the
// editor's ids come back byte for byte. Every stdout line is validated
// against the v2 schema (SpeaksV2).

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// The SDK's v2 client and agent through the relay: initialize and
// session/new as the agent answered them, a streamed turn with chunks and
// the whole-message upsert, a tool call with a permission request, a
// command permission, a cancelled turn, a failed one with the agent's
// error data, and updates v1 has no place for.
func TestV2Relay_SDK(t *testing.T) {
	NodeSDK(t)
	t.Parallel()
	steps := `[{"prompt":"upsert"},{"prompt":"tool"},{"prompt":"command"},{"prompt":"slow","cancelAfter":150},{"prompt":"fail"},{"prompt":"extras"},{"prompt":"after the cancel"}]`
	res := runV2Editor(t, v2AgentTransport(), nil, t.TempDir(), steps)

	if p := gjson.GetBytes(res.Initialize, `_meta.acp-bridge.agentProtocol`).Int(); p != 2 {
		t.Errorf(`_meta["acp-bridge"].agentProtocol = %d, want 2: %s`, p, res.Initialize)
	}
	// The agent's own answer: its info, its capabilities as it wrote
	// them (a translation would have made them the bridge's).
	if name := gjson.GetBytes(res.Initialize, "info.name").Str; name != "sdk-agent-v2" {
		t.Errorf("initialize info.name = %q, want the agent's own sdk-agent-v2: %s", name, res.Initialize)
	}
	if !gjson.GetBytes(res.Initialize, "capabilities.session.prompt.embeddedContext").IsObject() {
		t.Errorf("initialize lost capabilities.session.prompt.embeddedContext: %s", res.Initialize)
	}
	if c := gjson.GetBytes(res.Session, "availableCommands.0.name").Str; c != "explain" {
		t.Errorf("session/new answer %s: want the agent's availableCommands (explain)", res.Session)
	}

	upsert := res.turn(t, 0)
	wantV2Turn(t, upsert, "end_turn", "Hello")
	// The agent's own user message id in the acknowledgement, and its
	// whole-message upsert after the chunks of the same message.
	if id := gjson.GetBytes(upsert.Ack, "messageId").Str; !strings.HasPrefix(id, "u-") {
		t.Errorf("prompt acknowledgement %s: want the agent's own messageId (u-N)", upsert.Ack)
	}
	if i := slices.Index(upsert.Kinds, "agent_message"); i < 0 || !slices.Contains(upsert.Kinds[:i], "agent_message_chunk") {
		t.Errorf("upsert turn updates %v: want the chunks, then the whole agent_message", upsert.Kinds)
	}
	if len(upsert.MessageIDs) != 1 || !strings.HasPrefix(upsert.MessageIDs[0], "m-") {
		t.Errorf("upsert turn chunk message ids %q: want the agent's one (m-N)", upsert.MessageIDs)
	}
	whole := false
	for _, u := range res.Updates {
		if gjson.GetBytes(u, "sessionUpdate").Str == "agent_message" && gjson.GetBytes(u, "content.0.text").Str == "Hello, world" {
			whole = true
		}
	}
	if !whole {
		t.Errorf("no agent_message upsert with the whole text %q reached the editor", "Hello, world")
	}

	tool := res.turn(t, 1)
	wantV2Turn(t, tool, "end_turn", "wrote it")
	for _, k := range []string{"tool_call_update", "tool_call_content_chunk", "state_update:requires_action"} {
		if !slices.Contains(tool.Kinds, k) {
			t.Errorf("tool turn updates %v: want %s", tool.Kinds, k)
		}
	}
	if len(res.Permissions) != 2 {
		t.Fatalf("permission requests %s, want two (tool, command)", res.Permissions)
	}
	if got := gjson.GetBytes(res.Permissions[0], "title").Str; got != "Write /tmp/a?" ||
		!strings.HasPrefix(gjson.GetBytes(res.Permissions[0], "subject.toolCall.toolCallId").Str, "call-") {
		t.Errorf("tool permission request %s: want the agent's title and subject", res.Permissions[0])
	}
	if got := gjson.GetBytes(res.Permissions[1], "subject.command").Str; got != "make test" {
		t.Errorf("command permission request %s: want subject.command make test", res.Permissions[1])
	}
	wantV2Turn(t, res.turn(t, 2), "end_turn", "command: selected")
	wantV2Turn(t, res.turn(t, 3), "cancelled", "tick-0")

	fail := res.turn(t, 4)
	wantV2Turn(t, fail, "error", "trying")
	if gjson.GetBytes(fail.Error, "message").Str != "model overloaded" || gjson.GetBytes(fail.Error, "data.retryAfter").Int() != 5 {
		t.Errorf("failed turn's error %s: want the agent's, data included", fail.Error)
	}

	extras := res.turn(t, 5)
	wantV2Turn(t, extras, "_handoff", "extras")
	for _, k := range []string{"plan_update", "terminal_output_chunk"} {
		if !slices.Contains(extras.Kinds, k) {
			t.Errorf("extras turn updates %v: want %s", extras.Kinds, k)
		}
	}
	var idle []byte
	for _, u := range res.Updates {
		if gjson.GetBytes(u, "stopReason").Str == "_handoff" {
			idle = u
		}
	}
	if gjson.GetBytes(idle, "background.0.toolCallId").Str != "bg-1" {
		t.Errorf("the _handoff idle state_update %s lost its background work", idle)
	}

	// The turn after the cancelled one: nothing of the cancelled turn
	// leaks into it.
	last := res.turn(t, 6)
	wantV2Turn(t, last, "end_turn", "heard: after the cancel")
	if strings.Contains(last.Text, "tick") {
		t.Errorf("the cancelled turn's ticks reached a later turn: %q", last.Text)
	}
}

// v2RelayBridge starts the bridge in front of the SDK's v2 agent for a
// raw-line editor, with every stdout line checked against v2.
func v2RelayBridge(t *testing.T, args ...string) *Bridge {
	t.Helper()
	agent := v2AgentTransport().Start(t)
	b := StartBridge(t, append(args, agent.Args...), agent.Env, nil)
	b.SpeaksV2(t)
	return b
}

// initAnswer waits for the answer to the initialize with id: the first
// request starts node, which takes seconds on a loaded machine.
func initAnswer(t *testing.T, b *Bridge, id string) Line {
	t.Helper()
	l, ok := b.Out.Find(60*time.Second, func(l Line) bool { return l.IsResponse() && l.ID() == id })
	if !ok {
		t.Fatalf("no answer to initialize %s within 60 s", id)
	}
	return l
}

// v2RelayOpen initializes a raw-line editor's connection under the id
// init and opens a session; it returns the session id.
func v2RelayOpen(t *testing.T, b *Bridge, init string) string {
	t.Helper()
	b.WriteLine(`{"jsonrpc":"2.0","id":` + init + `,"method":"initialize","params":{"protocolVersion":2,"info":{"name":"raw","version":"1"},"capabilities":{}}}`)
	if r := initAnswer(t, b, init); r.Get("result.protocolVersion").Int() != 2 || r.Get("result._meta.acp-bridge.agentProtocol").Int() != 2 {
		t.Fatalf("initialize answer %s: want protocolVersion 2, relayed to a v2 agent", r)
	}
	b.WriteLine(`{"jsonrpc":"2.0","id":"new","method":"session/new","params":{"cwd":"/tmp"}}`)
	sid := b.Out.Response(t, `"new"`).Get("result.sessionId").Str
	if sid == "" {
		t.Fatal("session/new answered no sessionId")
	}
	return sid
}

// Odd ids come back byte for byte (a string with escapes, an integer
// beyond float64's, a negative exponent form), an extension method the
// agent does not know gets the agent's own answer, and _meta and unknown
// fields reach the agent as the editor wrote them.
func TestV2Relay_RawIDsAndExtensions(t *testing.T) {
	NodeSDK(t)
	t.Parallel()
	b := v2RelayBridge(t)
	sid := v2RelayOpen(t, b, `"init\u00e9/1"`)

	bigID := `123456789012345678901234567890`
	b.WriteLine(`{"jsonrpc":"2.0","id":` + bigID + `,"method":"session/prompt","params":{"sessionId":"` + sid + `","prompt":[{"type":"text","text":"upsert","_meta":{"k":"v"}}],"_meta":{"trace":"t-1"},"zzzUnknown":{"a":[1,2]}}}`)
	ack := b.Out.Response(t, bigID)
	if !strings.HasPrefix(ack.Get("result.messageId").Str, "u-") {
		t.Errorf("prompt answer %s: want the agent's acknowledgement", ack)
	}
	if !strings.Contains(string(ack.Raw), `"id":`+bigID) {
		t.Errorf("prompt answer %s: id not byte-exact %s", ack, bigID)
	}
	if _, ok := b.Out.Find(WaitTimeout, func(l Line) bool {
		return l.Get("params.update.sessionUpdate").Str == "state_update" && l.Get("params.update.state").Str == "idle"
	}); !ok {
		t.Fatal("the turn never ended with an idle state_update")
	}

	b.WriteLine(`{"jsonrpc":"2.0","id":-7,"method":"_acme/ping","params":{"x":1,"_meta":{"m":true}}}`)
	ext := b.Out.Response(t, `-7`)
	if code, _ := ext.ErrorCode(); code != -32601 {
		t.Errorf("extension method answer %s: want the agent's -32601", ext)
	}
	b.WriteLine(`{"jsonrpc":"2.0","method":"_acme/note","params":{"y":2}}`)

	// What reached the agent (it logs every line it receives).
	recv := func(has ...string) bool {
		for _, line := range strings.Split(b.Stderr(), "\n") {
			i := strings.Index(line, "sdk-agent-v2: recv ")
			if i < 0 {
				continue
			}
			all := true
			for _, h := range has {
				all = all && strings.Contains(line[i:], h)
			}
			if all {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(WaitTimeout)
	for !recv(`"method":"_acme/note"`) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	for _, want := range [][]string{
		{`"method":"session/prompt"`, `"_meta":{"trace":"t-1"}`, `"zzzUnknown":{"a":[1,2]}`, `"_meta":{"k":"v"}`},
		{`"method":"_acme/ping"`, `"params":{"x":1,"_meta":{"m":true}}`},
		{`"method":"_acme/note"`, `"params":{"y":2}`},
	} {
		if !recv(want...) {
			t.Errorf("the agent never received a line with %q", want)
		}
	}
	// The editor's initialize reached the agent as written, not as v1.
	if !recv(`"method":"initialize","params":{"protocolVersion":2,"info":{"name":"raw","version":"1"},"capabilities":{}}}`) {
		t.Errorf("the agent did not receive the editor's initialize as written")
	}
}

// agentPid finds the bridge's child, the agent, among the children of
// the bridge's threads.
func agentPid(t *testing.T, b *Bridge) int {
	t.Helper()
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", b.Pid()))
	for _, task := range tasks {
		raw, err := os.ReadFile(task)
		if err != nil {
			continue
		}
		if fields := strings.Fields(string(raw)); len(fields) > 0 {
			pid, err := strconv.Atoi(fields[0])
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
	}
	t.Fatalf("the bridge (pid %d) has no child process: where is its agent?", b.Pid())
	return 0
}

// The agent killed mid-turn: the turn the agent acknowledged ends with an
// idle state_update whose stopReason is error and whose error says what
// happened, and a prompt still waiting for the agent's acknowledgement is
// answered with an error, once.
func TestV2Relay_AgentKilledMidTurn(t *testing.T) {
	NodeSDK(t)
	t.Parallel()
	b := v2RelayBridge(t)
	sid := v2RelayOpen(t, b, `0`)
	pid := agentPid(t, b)

	b.WriteLine(`{"jsonrpc":"2.0","id":"p1","method":"session/prompt","params":{"sessionId":"` + sid + `","prompt":[{"type":"text","text":"slow"}]}}`)
	b.Out.Response(t, `"p1"`)
	if _, ok := b.Out.Find(WaitTimeout, func(l Line) bool {
		return strings.HasPrefix(l.Get("params.update.content.text").Str, "tick-")
	}); !ok {
		t.Fatal("the slow turn never ticked")
	}
	// Stopped, the agent cannot acknowledge the next prompt; killed, it
	// never will.
	if err := stopPID(pid); err != nil {
		t.Fatal(err)
	}
	b.WriteLine(`{"jsonrpc":"2.0","id":"p2","method":"session/prompt","params":{"sessionId":"` + sid + `","prompt":[{"type":"text","text":"again"}]}}`)
	time.Sleep(100 * time.Millisecond)
	if err := killPID(pid); err != nil {
		t.Fatal(err)
	}
	p2 := b.Out.Response(t, `"p2"`)
	if code, ok := p2.ErrorCode(); !ok || code != -32603 || p2.Get("error.message").Str == "" {
		t.Errorf("the prompt pending when the agent died was answered %s: want -32603 with the cause", p2)
	}
	end, ok := b.Out.Find(WaitTimeout, func(l Line) bool {
		return l.Get("params.update.state").Str == "idle"
	})
	if !ok {
		t.Fatal("the running turn never ended after the agent died")
	}
	if end.Get("params.update.stopReason").Str != "error" || end.Get("params.update.error.message").Str == "" {
		t.Errorf("the turn's end %s: want stopReason error with the cause", end)
	}
	time.Sleep(300 * time.Millisecond) // room for a second answer, which must not come
	var answers int
	for _, l := range b.Out.Lines() {
		if l.IsResponse() && l.ID() == `"p2"` {
			answers++
		}
	}
	if answers != 1 {
		t.Errorf("the pending prompt was answered %d times, want once", answers)
	}
}

// The bridge's durable sessions for a relayed v2 editor: a session the
// first bridge recorded is listed by the next, resumed with a replay of
// its history (the agent's v2 updates as they were recorded, then the idle
// snapshot v2 requires before the answer), prompted again, and closed.
func TestV2Relay_DurableResume(t *testing.T) {
	NodeSDK(t)
	t.Parallel()
	state, cwd := t.TempDir(), t.TempDir()
	args := []string{"--state-dir", state}
	first := runV2Editor(t, v2AgentTransport(), args, cwd, `[{"prompt":"upsert"}]`)
	wantV2Turn(t, first.turn(t, 0), "end_turn", "Hello")
	sid := gjson.GetBytes(first.Session, "sessionId").Str

	res := runV2Editor(t, v2AgentTransport(), args, cwd, `[{"prompt":"again"}]`, "V2E_RESUME="+sid, "V2E_REPLAY=1")
	if !strings.Contains(string(res.List), sid) {
		t.Errorf("session/list %s lacks %s", res.List, sid)
	}
	var kinds []string
	whole := ""
	for _, u := range res.Replayed {
		r := gjson.ParseBytes(u)
		kinds = append(kinds, r.Get("sessionUpdate").Str+":"+r.Get("state").Str)
		if r.Get("sessionUpdate").Str == "agent_message" {
			whole = r.Get("content.0.text").Str
		}
	}
	want := []string{"user_message:", "agent_message_chunk:", "agent_message_chunk:", "agent_message:", "state_update:idle"}
	if !slices.Equal(kinds, want) {
		t.Errorf("replay %v, want %v: the recorded v2 updates, then the idle snapshot before the answer", kinds, want)
	}
	if whole != "Hello, world" {
		t.Errorf("replayed agent_message %q, want the agent's whole message", whole)
	}
	wantV2Turn(t, res.turn(t, 0), "end_turn", "heard:")

	// Without replayFrom: the snapshot alone.
	quiet := runV2Editor(t, v2AgentTransport(), args, cwd, `[]`, "V2E_RESUME="+sid)
	var quietKinds []string
	for _, u := range quiet.Replayed {
		quietKinds = append(quietKinds, gjson.GetBytes(u, "sessionUpdate").Str)
	}
	if !slices.Equal(quietKinds, []string{"state_update"}) {
		t.Errorf("resume without replayFrom sent %v, want the state_update alone", quietKinds)
	}

	// A raw editor: a cursor v2 does not define is refused, not replaced;
	// close answers and ends the session here.
	b := v2RelayBridge(t, args...)
	b.WriteLine(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":2,"info":{"name":"raw","version":"1"},"capabilities":{}}}`)
	initAnswer(t, b, `1`)
	b.WriteLine(`{"jsonrpc":"2.0","id":2,"method":"session/resume","params":{"sessionId":"` + sid + `","cwd":"` + cwd + `","replayFrom":{"type":"_from_message","messageId":"m-2"}}}`)
	if r := b.Out.Response(t, `2`); r.Get("error.code").Int() != -32602 || !strings.Contains(r.Get("error.message").Str, "replayFrom") {
		t.Errorf("resume with an unknown replayFrom answered %s, want -32602 naming replayFrom", r)
	}
	b.WriteLine(`{"jsonrpc":"2.0","id":3,"method":"session/resume","params":{"sessionId":"` + sid + `","cwd":"` + cwd + `"}}`)
	if r := b.Out.Response(t, `3`); !r.Get("result").IsObject() {
		t.Errorf("resume answered %s, want a result", r)
	}
	b.WriteLine(`{"jsonrpc":"2.0","id":4,"method":"session/close","params":{"sessionId":"` + sid + `"}}`)
	if r := b.Out.Response(t, `4`); !r.Get("result").IsObject() {
		t.Errorf("close answered %s, want a result", r)
	}
	b.WriteLine(`{"jsonrpc":"2.0","id":5,"method":"session/list","params":{}}`)
	if r := b.Out.Response(t, `5`); !strings.Contains(r.Get("result.sessions").Raw, sid) {
		t.Errorf("session/list after close %s: the closed session's transcript stays listed", r)
	}
}

// v2RelayPrompt sends a prompt under id and waits for its acknowledgement.
func v2RelayPrompt(t *testing.T, b *Bridge, id, sid, text string) {
	t.Helper()
	b.WriteLine(`{"jsonrpc":"2.0","id":` + id + `,"method":"session/prompt","params":{"sessionId":"` + sid + `","prompt":[{"type":"text","text":"` + text + `"}]}}`)
	if r := b.Out.Response(t, id); r.Get("result.messageId").Str == "" {
		t.Fatalf("prompt %s answered %s, want the acknowledgement", text, r)
	}
}

// waitLine waits for the first stdout line from index from on that
// matches, and returns it with its index.
func waitLine(t *testing.T, b *Bridge, from int, what string, match func(Line) bool) (Line, int) {
	t.Helper()
	deadline := time.Now().Add(WaitTimeout)
	for time.Now().Before(deadline) {
		lines := b.Out.Lines()
		for i := from; i < len(lines); i++ {
			if match(lines[i]) {
				return lines[i], i
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no %s on stdout within %v", what, WaitTimeout)
	return Line{}, 0
}

func isState(state string) func(Line) bool {
	return func(l Line) bool {
		return l.Method() == "session/update" && l.Get("params.update.sessionUpdate").Str == "state_update" && l.Get("params.update.state").Str == state
	}
}

func chunkText(l Line) string {
	if l.Get("params.update.sessionUpdate").Str != "agent_message_chunk" {
		return ""
	}
	return l.Get("params.update.content.text").Str
}

// session/cancel in v2's terms: the agent's own idle closes the cancelled
// turn, and what it sends for the turn after that is dropped; an agent
// that ignores the cancel gets its turn closed by the bridge after the
// cancel grace, and its updates for it dropped, its own idle included;
// the next prompt's turn is the agent's again.
func TestV2Relay_Cancel(t *testing.T) {
	NodeSDK(t)
	t.Parallel()
	b := v2RelayBridge(t, "--cancel-grace", "150ms")
	sid := v2RelayOpen(t, b, `"i"`)
	cancel := `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"` + sid + `"}}`

	// The agent closes the turn, then sends one more chunk for it.
	from := b.Out.Len()
	v2RelayPrompt(t, b, `"late"`, sid, "late")
	waitLine(t, b, from, "tick", func(l Line) bool { return strings.HasPrefix(chunkText(l), "tick-") })
	b.WriteLine(cancel)
	idle, at := waitLine(t, b, from, "idle state_update", isState("idle"))
	if r := idle.Get("params.update.stopReason").Str; r != "cancelled" {
		t.Errorf("the cancelled turn ended %s, want stopReason cancelled", idle)
	}
	if idle.Get("params.update._meta.acp-bridge").Exists() {
		t.Errorf("the agent closed the turn itself, yet the idle is the bridge's: %s", idle)
	}
	// The next turn starts after the late chunk reached the bridge (the
	// agent sends it right after its idle, before it reads the prompt).
	time.Sleep(200 * time.Millisecond)
	v2RelayPrompt(t, b, `"next"`, sid, "next words")
	end, endAt := waitLine(t, b, at+1, "idle state_update", isState("idle"))
	if end.Get("params.update.stopReason").Str != "end_turn" {
		t.Errorf("the turn after the cancelled one ended %s, want end_turn", end)
	}
	var text string
	for _, l := range b.Out.Lines()[at+1 : endAt] {
		if c := chunkText(l); c == "late-after-idle" {
			t.Errorf("the chunk the agent sent after the cancelled turn's idle reached the editor: %s", l)
		} else {
			text += c
		}
	}
	if text != "heard: next words" {
		t.Errorf("the next turn's text %q, want %q", text, "heard: next words")
	}

	// A permission request after the cancelled turn's idle belongs to
	// that turn: the bridge answers it cancelled, the editor never sees it.
	from = b.Out.Len()
	v2RelayPrompt(t, b, `"ask"`, sid, "ask-late")
	waitLine(t, b, from, "tick", func(l Line) bool { return strings.HasPrefix(chunkText(l), "tick-") })
	b.WriteLine(cancel)
	waitLine(t, b, from, "idle state_update", isState("idle"))
	deadline := time.Now().Add(WaitTimeout)
	for !strings.Contains(b.Stderr(), "late permission: ") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(b.Stderr(), "late permission: cancelled") {
		t.Errorf("the agent's permission request after the cancelled turn's idle was not answered cancelled by the bridge")
	}
	for _, l := range b.Out.Lines()[from:] {
		if l.Method() == "session/request_permission" {
			t.Errorf("the editor was asked a permission for a turn it saw end: %s", l)
		}
	}

	// The agent ignores the cancel: the bridge closes the turn.
	from = b.Out.Len()
	v2RelayPrompt(t, b, `"stubborn"`, sid, "stubborn")
	waitLine(t, b, from, "stubborn chunk", func(l Line) bool { return strings.HasPrefix(chunkText(l), "stubborn-") })
	b.WriteLine(cancel)
	closed, at := waitLine(t, b, from, "idle state_update", isState("idle"))
	if closed.Get("params.update.stopReason").Str != "cancelled" || closed.Get("params.update._meta.acp-bridge.closedBy").Str != "acp-bridge" {
		t.Errorf("the ignored cancel ended the turn with %s, want the bridge's idle, stopReason cancelled", closed)
	}
	// The agent goes on for about a second, then sends its own idle: all
	// of it dropped.
	time.Sleep(1500 * time.Millisecond)
	for _, l := range b.Out.Lines()[at+1:] {
		t.Errorf("after the bridge closed the cancelled turn the editor got %s", l)
	}
	from = b.Out.Len()
	v2RelayPrompt(t, b, `"after"`, sid, "after")
	if end, _ := waitLine(t, b, from, "idle state_update", isState("idle")); end.Get("params.update.stopReason").Str != "end_turn" {
		t.Errorf("the turn after the bridge closed one ended %s, want end_turn", end)
	}
}

// session/close during a turn: the turn is closed (idle, cancelled)
// before the close is answered, and nothing of the session follows.
func TestV2Relay_CloseMidTurn(t *testing.T) {
	NodeSDK(t)
	t.Parallel()
	b := v2RelayBridge(t, "--state-dir", t.TempDir())
	sid := v2RelayOpen(t, b, `1`)
	from := b.Out.Len()
	v2RelayPrompt(t, b, `2`, sid, "stubborn")
	waitLine(t, b, from, "stubborn chunk", func(l Line) bool { return strings.HasPrefix(chunkText(l), "stubborn-") })
	b.WriteLine(`{"jsonrpc":"2.0","id":3,"method":"session/close","params":{"sessionId":"` + sid + `"}}`)
	_, closedAt := waitLine(t, b, from, "close answer", func(l Line) bool { return l.IsResponse() && l.ID() == `3` })
	idle, idleAt := waitLine(t, b, from, "idle state_update", isState("idle"))
	if idleAt > closedAt || idle.Get("params.update.stopReason").Str != "cancelled" {
		t.Errorf("close answered at line %d, the turn's end %s at %d: want idle cancelled before the answer", closedAt, idle, idleAt)
	}
	if r := b.Out.Lines()[closedAt]; !r.Get("result").IsObject() {
		t.Errorf("close answered %s", r)
	}
	time.Sleep(1200 * time.Millisecond) // the agent's turn would have gone on for a second
	for _, l := range b.Out.Lines()[closedAt+1:] {
		t.Errorf("after session/close the editor got %s", l)
	}
}

// Messages pipelined behind the initialize wait for the agent's answer,
// then take the way it chose: relayed to a v2 agent (here with both
// versions forced), translated by the v2 front for a v1 agent.
func TestV2Relay_PipelinedBehindInitialize(t *testing.T) {
	NodeSDK(t)
	t.Parallel()
	pipeline := func(b *Bridge) (init, created Line) {
		b.WriteLine(`{"jsonrpc":"2.0","id":"a","method":"initialize","params":{"protocolVersion":2,"info":{"name":"raw","version":"1"},"capabilities":{}}}`)
		b.WriteLine(`{"jsonrpc":"2.0","id":"b","method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
		b.WriteLine(`{"jsonrpc":"2.0","id":"c","method":"_acme/ping","params":{}}`)
		init, created = initAnswer(t, b, `"a"`), b.Out.Response(t, `"b"`)
		b.Out.Response(t, `"c"`)
		lines := b.Out.Lines()
		if i, j := slices.IndexFunc(lines, func(l Line) bool { return l.ID() == `"a"` }), slices.IndexFunc(lines, func(l Line) bool { return l.ID() == `"b"` }); i > j {
			t.Errorf("session/new answered (line %d) before initialize (line %d)", j, i)
		}
		if created.Get("result.sessionId").Str == "" {
			t.Errorf("pipelined session/new answered %s", created)
		}
		return init, created
	}

	b := v2RelayBridge(t, "--editor-protocol", "2", "--agent-protocol", "2")
	init, created := pipeline(b)
	if init.Get("result.info.name").Str != "sdk-agent-v2" || init.Get("result._meta.acp-bridge.agentProtocol").Int() != 2 {
		t.Errorf("initialize answered %s: want the v2 agent's own answer, relayed", init)
	}
	if created.Get("result.availableCommands.0.name").Str != "explain" {
		t.Errorf("session/new answered %s: want the v2 agent's own answer", created)
	}

	agent := ChildTransport("acp").Start(t)
	v1 := StartBridge(t, agent.Args, agent.Env, nil)
	v1.SpeaksV2(t)
	init, _ = pipeline(v1)
	if init.Get("result._meta.acp-bridge.agentProtocol").Int() != 1 || !init.Get("result.info").IsObject() {
		t.Errorf("initialize answered %s: want v2, translated from the v1 agent's", init)
	}
}

// The editor leaves while the agent has not answered its initialize: the
// initialize and the requests held behind it (a v2 editor's, waiting for
// the agent's version) are each answered once, with the cause.
func TestV2Relay_HeldAnsweredAtShutdown(t *testing.T) {
	NodeSDK(t)
	t.Parallel()
	// The agent never answers its initialize: the initialize stays in
	// flight and what the editor sends next is held behind it.
	agent := v2AgentTransport().Start(t)
	b := StartBridge(t, agent.Args, append(agent.Env, "SDK_AGENT_V2_DEFECTS=mute-initialize"), nil)
	b.SpeaksV2(t)
	b.WriteLine(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":2,"info":{"name":"raw","version":"1"},"capabilities":{}}}`)
	b.WriteLine(`{"jsonrpc":"2.0","id":"new","method":"session/new","params":{"cwd":"/tmp"}}`)
	b.WriteLine(`{"jsonrpc":"2.0","method":"_acme/note","params":{}}`)
	b.WriteLine(`{"jsonrpc":"2.0","id":"list","method":"session/list","params":{}}`)
	time.Sleep(100 * time.Millisecond)
	b.In.Close()
	select {
	case <-b.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("the bridge did not exit after its editor left")
	}
	answers := map[string]int{}
	for _, l := range b.Out.Lines() {
		if l.IsResponse() {
			answers[l.ID()]++
			if code, ok := l.ErrorCode(); !ok || code != -32603 || l.Get("error.message").Str == "" {
				t.Errorf("answer %s: want -32603 with the cause", l)
			}
		}
	}
	for _, id := range []string{`"init"`, `"new"`, `"list"`} {
		if answers[id] != 1 {
			t.Errorf("request %s answered %d times, want once (answers %v)", id, answers[id], answers)
		}
	}
	if len(answers) != 3 {
		t.Errorf("answers %v: want one each for init, new and list", answers)
	}
}

// A v2 turn outlives its prompt's answer: a durable session's idle timer
// does not close the backend session while the turn runs.
func TestV2Relay_LongTurnNotIdle(t *testing.T) {
	NodeSDK(t)
	t.Parallel()
	// The turn streams for a second, well past the idle timeout; once it
	// has ended, the timeout rightly closes the session, so it is long
	// enough (400 ms) for the test to look before that on a loaded machine.
	b := v2RelayBridge(t, "--state-dir", t.TempDir(), "--session-idle", "400ms")
	sid := v2RelayOpen(t, b, `1`)
	from := b.Out.Len()
	v2RelayPrompt(t, b, `2`, sid, "stubborn")
	end, at := waitLine(t, b, from, "idle state_update", isState("idle"))
	// What was logged up to the turn's end: once it has ended the session
	// is idle, and closing it 400 ms later is right.
	logged := b.Stderr()
	if end.Get("params.update.stopReason").Str != "end_turn" {
		t.Errorf("the long turn ended %s, want the agent's end_turn", end)
	}
	var n int
	for _, l := range b.Out.Lines()[from:at] {
		if strings.HasPrefix(chunkText(l), "stubborn-") {
			n++
		}
	}
	if n != 50 {
		t.Errorf("the long turn's editor got %d of its 50 chunks", n)
	}
	if strings.Contains(logged, "closing an idle backend session") {
		t.Errorf("the session's backend was closed as idle during its turn")
	}
}
