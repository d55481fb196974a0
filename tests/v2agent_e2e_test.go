package tests

// End-to-end tests of ACP v2 agents behind the bridge: a v2-only agent
// written with the official TypeScript SDK's v2 API
// (testdata/sdkagentv2/agent.mjs), driven by the v1 Go SDK client as an
// editor. The SDK's v2 agent validates every message it receives against
// the v2 schema and refuses anything else, and the harness validates every
// line the bridge writes against the v1 schema: both hops are checked.
// TestV1Agent_SeesWhatItSawBefore checks that negotiation leaves v1 agents
// as they were.

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/coder/acp-go-sdk"
	"github.com/tidwall/gjson"
)

const sdkAgentV2Script = "testdata/sdkagentv2/agent.mjs"

// v2AgentTransport runs the SDK's v2 agent as the bridge's child.
func v2AgentTransport(args ...string) Transport {
	return Transport{Name: "sdk-v2", Start: func(t *testing.T) Agent {
		argv := NodeScript(t, sdkAgentV2Script)
		return Agent{Args: append(append(append([]string{}, args...), "--"), argv...)}
	}}
}

// v2Turn runs one prompt and returns its answer, the text of the turn's
// agent_message_chunk updates, and the updates themselves.
func v2Turn(t *testing.T, e *Editor, sid acp.SessionId, text string) (acp.PromptResponse, string, []acp.SessionNotification, error) {
	t.Helper()
	before := len(e.Fake.Updates(sid))
	res, err := e.Prompt(sdkCtx(t), sid, text)
	updates := e.Fake.Updates(sid)[before:]
	var b strings.Builder
	for _, u := range updates {
		if m := u.Update.AgentMessageChunk; m != nil && m.Content.Text != nil {
			b.WriteString(m.Content.Text.Text)
		}
	}
	return res, b.String(), updates, err
}

// A v1 editor drives a v2-only agent through the bridge: the negotiated
// version is reported, every turn ends with the stop reason of the agent's
// closing state_update, whole-message upserts after chunks add nothing the
// editor already has, the editor's own prompt is not echoed back, tool
// calls arrive as v1 tool_call and tool_call_update, permission requests
// in v1 shape (and the answer reaches the agent), cancel ends the turn,
// and the agent's errors arrive with words that say what to do.
func TestV2Agent_Turns(t *testing.T) {
	t.Parallel()
	e := NewEditor(t, v2AgentTransport(), EditorOptions{Args: []string{"--log-level", "debug"}})
	init, err := e.Conn.Initialize(sdkCtx(t), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber,
		ClientCapabilities: acp.ClientCapabilities{Fs: acp.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true}}})
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	initLine, _ := e.Out.Find(sdkWait, func(l Line) bool { return l.IsResponse() && l.Get("result.agentCapabilities").Exists() })
	if got := initLine.Get(`result._meta.acp-bridge.agentProtocol`).Int(); got != 2 {
		t.Errorf("initialize: _meta[acp-bridge].agentProtocol = %d, want 2: %s", got, initLine)
	}
	if init.ProtocolVersion != 1 || init.AgentInfo == nil || init.AgentInfo.Name != "sdk-agent-v2" ||
		!init.AgentCapabilities.LoadSession || !init.AgentCapabilities.PromptCapabilities.EmbeddedContext || init.AgentCapabilities.PromptCapabilities.Image {
		t.Errorf("initialize = %+v, want v1 with the v2 agent's info, loadSession, embeddedContext only", init)
	}
	res, err := e.Conn.NewSession(sdkCtx(t), acp.NewSessionRequest{Cwd: t.TempDir(), McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatalf("session/new: %v", err)
	}
	sid := res.SessionId
	if _, ok := e.Out.Find(sdkWait, func(l Line) bool {
		return l.Get("params.update.sessionUpdate").Str == "available_commands_update" &&
			l.Get("params.update.availableCommands.0.name").Str == "explain"
	}); !ok {
		t.Error("session/new: the agent's availableCommands did not arrive as an available_commands_update")
	}

	t.Run("streamed", func(t *testing.T) {
		r, text, updates, err := v2Turn(t, e, sid, "hello small world")
		if err != nil || r.StopReason != acp.StopReasonEndTurn || text != "heard: hello small world" {
			t.Fatalf("prompt = %+v, %q, %v; want end_turn and the words once", r, text, err)
		}
		for _, u := range updates {
			if u.Update.UserMessageChunk != nil {
				t.Errorf("the editor was sent its own prompt back: %+v", u.Update.UserMessageChunk)
			}
		}
	})
	t.Run("upsert after chunks", func(t *testing.T) {
		r, text, _, err := v2Turn(t, e, sid, "upsert")
		if err != nil || r.StopReason != acp.StopReasonEndTurn || text != "Hello, world" {
			t.Fatalf("prompt = %+v, %q, %v; want \"Hello, world\": chunks Hel, lo and only the upsert's new suffix", r, text, err)
		}
	})
	t.Run("tool and permission", func(t *testing.T) {
		for _, allow := range []bool{true, false} {
			e.Fake.OnPermission(func(_ context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
				if p.ToolCall.Title == nil || *p.ToolCall.Title != "Write /tmp/a?" || !strings.HasPrefix(string(p.ToolCall.ToolCallId), "call-") {
					t.Errorf("permission request toolCall = %+v, want the tool call with the prompt's title", p.ToolCall)
				}
				id := "no"
				if allow {
					id = "yes"
				}
				return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeSelected(acp.PermissionOptionId(id))}, nil
			})
			r, text, updates, err := v2Turn(t, e, sid, "tool")
			want, status := "did not write it", acp.ToolCallStatusFailed
			if allow {
				want, status = "wrote it", acp.ToolCallStatusCompleted
			}
			if err != nil || r.StopReason != acp.StopReasonEndTurn || text != want {
				t.Fatalf("allow=%v: prompt = %+v, %q, %v; want %q", allow, r, text, err, want)
			}
			var kinds []string
			var last *acp.SessionToolCallUpdate
			for _, u := range updates {
				switch {
				case u.Update.ToolCall != nil:
					kinds = append(kinds, "tool_call:"+u.Update.ToolCall.Title)
				case u.Update.ToolCallUpdate != nil:
					kinds = append(kinds, "tool_call_update")
					last = u.Update.ToolCallUpdate
				}
			}
			if len(kinds) != 4 || kinds[0] != "tool_call:write_file" || last == nil || last.Status == nil || *last.Status != status {
				t.Fatalf("allow=%v: tool updates %q, last %+v; want a tool_call titled by its name, three updates, status %s", allow, kinds, last, status)
			}
		}
		e.Fake.OnPermission(nil)
	})
	t.Run("command permission", func(t *testing.T) {
		var got acp.RequestPermissionRequest
		e.Fake.OnPermission(func(_ context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
			got = p
			return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeCancelled()}, nil
		})
		defer e.Fake.OnPermission(nil)
		_, text, _, err := v2Turn(t, e, sid, "command")
		if err != nil || text != "command: cancelled" {
			t.Fatalf("prompt = %q, %v; want the agent to learn the editor's cancelled outcome", text, err)
		}
		if got.ToolCall.Kind == nil || *got.ToolCall.Kind != acp.ToolKindExecute || !strings.Contains(string(mustMarshal(t, got.ToolCall.RawInput)), "make test") {
			t.Errorf("command permission toolCall = %+v, want an execute tool call showing the command", got.ToolCall)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), sdkWait)
		defer cancel()
		done := promptAsync(ctx, e, sid, "slow")
		if _, ok := e.Out.Find(sdkWait, func(l Line) bool {
			return l.Get("params.update.content.text").Str == "tick-1"
		}); !ok {
			t.Fatal("the slow turn streamed no tick-1")
		}
		if err := e.Conn.Cancel(ctx, acp.CancelNotification{SessionId: sid}); err != nil {
			t.Fatalf("session/cancel: %v", err)
		}
		select {
		case r := <-done:
			if r.err != nil || r.res.StopReason != acp.StopReasonCancelled {
				t.Fatalf("cancelled turn: %+v, %v; want stopReason cancelled", r.res, r.err)
			}
		case <-time.After(sdkWait):
			t.Fatal("the cancelled turn was not answered")
		}
	})
	t.Run("errors", func(t *testing.T) {
		_, _, _, err := v2Turn(t, e, sid, "fail")
		if err == nil || !strings.Contains(err.Error(), "the agent's turn ended with an error: model overloaded") {
			t.Errorf("turn ending with stop reason error: %v, want the agent's error", err)
		}
		_, _, _, err = v2Turn(t, e, sid, "refuse")
		var re *acp.RequestError
		if !errors.As(err, &re) || re.Code != -32002 || !strings.Contains(re.Message, "start a new session") {
			t.Errorf("refused prompt: %v, want -32002 saying to start a new session", err)
		}
		r, text, _, err := v2Turn(t, e, sid, "after errors")
		if err != nil || r.StopReason != acp.StopReasonEndTurn || text != "heard: after errors" {
			t.Errorf("prompt after the errors = %+v, %q, %v", r, text, err)
		}
	})
	t.Run("what v1 lacks", func(t *testing.T) {
		r, text, updates, err := v2Turn(t, e, sid, "extras")
		if err != nil || r.StopReason != acp.StopReasonEndTurn || text != "extras" {
			t.Fatalf("prompt = %+v, %q, %v", r, text, err)
		}
		var stop string
		if m, ok := r.Meta["acp-bridge"].(map[string]any); ok {
			stop, _ = m["stopReason"].(string)
		}
		if stop != "_handoff" {
			t.Errorf("answer _meta = %v, want the agent's stop reason _handoff under acp-bridge", r.Meta)
		}
		plans := 0
		for _, u := range updates {
			if u.Update.Plan != nil {
				plans++
			}
		}
		if plans != 1 {
			t.Errorf("%d plan updates, want the plan_update as one v1 plan", plans)
		}
	})
	t.Run("load replays", func(t *testing.T) {
		before := len(e.Fake.Updates(sid))
		if _, err := e.Conn.LoadSession(sdkCtx(t), acp.LoadSessionRequest{SessionId: sid, Cwd: t.TempDir(), McpServers: []acp.McpServer{}}); err != nil {
			t.Fatalf("session/load: %v", err)
		}
		var text strings.Builder
		for _, u := range e.Fake.Updates(sid)[before:] {
			if m := u.Update.AgentMessageChunk; m != nil && m.Content.Text != nil {
				text.WriteString(m.Content.Text.Text)
			}
		}
		if !strings.Contains(text.String(), "heard: hello small world") {
			t.Errorf("session/load replayed %q, want the earlier turns", text.String())
		}
	})
	if !strings.Contains(e.Stderr(), "agent initialized: agent_protocol=2") {
		t.Errorf("the log does not say which version the agent speaks:\n%s", e.Stderr())
	}
	if n := strings.Count(e.Stderr(), "sdk-agent-v2: connection closed"); n != 0 {
		t.Errorf("the v2 agent closed the connection (it does on a message its schema rejects):\n%s", e.Stderr())
	}
}

// --agent-protocol 1 in front of a v2-only agent fails initialize with the
// agent's reason and the versions it supports.
func TestV2Agent_ForcedV1(t *testing.T) {
	t.Parallel()
	e := NewEditor(t, v2AgentTransport("--agent-protocol", "1"), EditorOptions{})
	_, err := e.Conn.Initialize(sdkCtx(t), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber})
	if err == nil || !strings.Contains(err.Error(), "Unsupported protocol version") {
		t.Fatalf("initialize = %v, want the agent's refusal of version 1", err)
	}
}

// A v1 agent answers 1 to the request for 2, and from then on receives
// exactly what it receives with --agent-protocol 1 (the bridge as it was
// before negotiation); the editor, too, is sent the same lines. Only the
// initialize request differs: protocolVersion 2 and v2's info beside
// clientInfo.
func TestV1Agent_SeesWhatItSawBefore(t *testing.T) {
	t.Parallel()
	run := func(args ...string) (agent []string, editor []string) {
		e := NewEditor(t, ChildTransport("acp"), EditorOptions{Args: append([]string{"--no-sessions"}, args...)})
		e.Initialize(t)
		sid := e.NewSession(t, "/tmp/project")
		if _, err := e.Prompt(ctxT(t), sid, "hello there"); err != nil {
			t.Fatalf("prompt: %v", err)
		}
		for _, l := range e.Out.Lines() {
			editor = append(editor, normalizeFakeMeta(t, l.Raw))
		}
		// (The journal, asked last, holds the initialize frames that differ.)
		return e.Journal(t).Frames, editor
	}
	agentNow, editorNow := run()
	agentBefore, editorBefore := run("--agent-protocol", "1")
	if len(agentNow) != len(agentBefore) || len(agentNow) < 3 {
		t.Fatalf("the agent received %d frames negotiating, %d with --agent-protocol 1:\n%q\n%q", len(agentNow), len(agentBefore), agentNow, agentBefore)
	}
	init := gjson.Parse(agentNow[0])
	if init.Get("params.protocolVersion").Int() != 2 || init.Get("params.info.name").Str != init.Get("params.clientInfo.name").Str {
		t.Errorf("initialize offered %s, want protocolVersion 2 with info beside clientInfo", agentNow[0])
	}
	if gjson.Get(agentBefore[0], "params.protocolVersion").Int() != 1 {
		t.Errorf("with --agent-protocol 1 the initialize was %s", agentBefore[0])
	}
	for i := 1; i < len(agentNow); i++ {
		if agentNow[i] != agentBefore[i] {
			t.Errorf("agent frame %d differs:\nnegotiated: %s\nforced v1:  %s", i, agentNow[i], agentBefore[i])
		}
	}
	if strings.Join(editorNow, "\n") != strings.Join(editorBefore, "\n") {
		t.Errorf("the editor was sent other lines:\nnegotiated:\n%s\nforced v1:\n%s", strings.Join(editorNow, "\n"), strings.Join(editorBefore, "\n"))
	}
	for _, l := range editorNow {
		if p := gjson.Get(l, "result._meta.acp-bridge.agentProtocol"); p.Exists() && p.Int() != 1 {
			t.Errorf("initialize answer %s: agentProtocol want 1", l)
		}
	}
}

// normalizeFakeMeta removes what differs between two runs of the fake agent
// (its process id) from a line.
func normalizeFakeMeta(t *testing.T, raw []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	if m, ok := v.(map[string]any); ok {
		if r, ok := m["result"].(map[string]any); ok {
			if meta, ok := r["_meta"].(map[string]any); ok {
				delete(meta, "fake-agent")
			}
		}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The v2 agent served by naming its dialect (--dialect acp-v2) or forcing
// the version (--agent-protocol 2): no negotiation, the same translation.
func TestV2Agent_Forced(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--dialect", "acp-v2"}, {"--agent-protocol", "2"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			e := NewEditor(t, v2AgentTransport(args...), EditorOptions{})
			if _, err := e.Conn.Initialize(sdkCtx(t), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
				t.Fatalf("initialize: %v", err)
			}
			if l, _ := e.Out.Find(sdkWait, func(l Line) bool { return l.IsResponse() }); l.Get("result._meta.acp-bridge.agentProtocol").Int() != 2 {
				t.Errorf("initialize answer %s: want agentProtocol 2", l)
			}
			res, err := e.Conn.NewSession(sdkCtx(t), acp.NewSessionRequest{Cwd: t.TempDir(), McpServers: []acp.McpServer{}})
			if err != nil {
				t.Fatalf("session/new: %v", err)
			}
			r, text, _, err := v2Turn(t, e, res.SessionId, "upsert")
			if err != nil || r.StopReason != acp.StopReasonEndTurn || text != "Hello, world" {
				t.Fatalf("prompt = %+v, %q, %v", r, text, err)
			}
		})
	}
}

// doctor reaches a v2 agent through the same negotiation and says which
// version it speaks.
func TestV2Agent_Doctor(t *testing.T) {
	t.Parallel()
	argv := NodeScript(t, sdkAgentV2Script)
	cmd := exec.Command(BridgeBin, append([]string{"doctor", "--"}, argv...)...)
	cmd.Env = hermeticEnv(t, nil)
	raw, err := cmd.CombinedOutput()
	out := string(raw)
	if err != nil || !strings.Contains(out, "initialize: sdk-agent-v2 2.4.0, protocol version 2 (editors are spoken to in 1)") {
		t.Fatalf("doctor: %v\n%s", err, out)
	}
}
