package tests

// An ACP v2 editor, the official TypeScript SDK's v2 client
// (testdata/v2editor/editor.mjs), in front of the built binary and each
// kind of agent: the fake ACP v1 agent (relayed), the acp-v0 fake, the
// claude-stream-json fake and a rules profile. The SDK validates every
// message it receives against v2 and fails on a mismatch; the harness
// validates every stdout line against the embedded v2 schema as well.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	fakeclaude "github.com/acp-bridge/acp-bridge/tests/fakeagent/claude"
	"github.com/acp-bridge/acp-bridge/translate/acpschema"
	"github.com/coder/acp-go-sdk"
	"github.com/tidwall/gjson"
)

// SpeaksV2 makes the stdout checks those of ACP v2: call it before the
// editor writes anything.
func (b *Bridge) SpeaksV2(t *testing.T) {
	s, err := acpschema.LoadSchemaV2()
	if err != nil {
		t.Fatal(err)
	}
	b.Out.v.mu.Lock()
	b.Out.v.v2 = s
	b.Out.v.mu.Unlock()
}

func (v *validator) schemaV2() *acpschema.Schema {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.v2
}

// checkV2 validates one stdout line against the v2 schema, with the same
// exactly-once rule for answers as v1's check.
func (v *validator) checkV2(s *acpschema.Schema, line []byte) []string {
	r := gjson.ParseBytes(line)
	answered := ""
	var probs []string
	if id := r.Get("id"); id.Exists() && !r.Get("method").Exists() {
		v.mu.Lock()
		n := v.answered[id.Raw]
		v.answered[id.Raw] = n + 1
		v.mu.Unlock()
		method, sent := v.in.methodOf(id.Raw, n)
		if !sent && id.Raw != "null" {
			probs = append(probs, fmt.Sprintf("answer for id %s, which the editor did not send (or not that often)", id.Raw))
		}
		answered = method
	}
	for _, p := range s.ValidateToClient(line, answered) {
		probs = append(probs, "ACP v2: "+p)
	}
	return probs
}

// v2Result is what editor.mjs reports.
type v2Result struct {
	Initialize  json.RawMessage   `json:"initialize"`
	Session     json.RawMessage   `json:"session"`
	Steps       []json.RawMessage `json:"steps"`
	Permissions []json.RawMessage `json:"permissions"`
	Received    []string          `json:"received"`
	Updates     []json.RawMessage `json:"updates"`
	Error       string            `json:"error"`
	List        json.RawMessage   `json:"list"`
	Resume      json.RawMessage   `json:"resume"`
	Replayed    []json.RawMessage `json:"replayed"`
}

type v2EditorTurn struct {
	Prompt     string          `json:"prompt"`
	Ack        json.RawMessage `json:"ack"`
	StopReason string          `json:"stopReason"`
	Error      json.RawMessage `json:"error"`
	Text       string          `json:"text"`
	MessageIDs []string        `json:"messageIds"`
	Echo       *string         `json:"echo"`
	Kinds      []string        `json:"kinds"`
}

func (r v2Result) turn(t *testing.T, i int) v2EditorTurn {
	t.Helper()
	if i >= len(r.Steps) {
		t.Fatalf("step %d never ran; the editor reported %d (error: %s)", i, len(r.Steps), r.Error)
	}
	var tr v2EditorTurn
	if err := json.Unmarshal(r.Steps[i], &tr); err != nil {
		t.Fatal(err)
	}
	return tr
}

// runV2Editor starts the agent tr, a bridge with args in front of it, and
// editor.mjs on the bridge's stdio running steps (see editor.mjs), and
// returns the editor's report once it has exited.
func runV2Editor(t *testing.T, tr Transport, args []string, cwd string, steps string, env ...string) v2Result {
	t.Helper()
	argv := NodeScript(t, "testdata/v2editor/editor.mjs")
	agent := tr.Start(t)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	b := StartBridge(t, append(slices.Clone(args), agent.Args...), agent.Env, pw)
	b.SpeaksV2(t)
	resultFile := filepath.Join(t.TempDir(), "result.json")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(append(os.Environ(), "V2E_STEPS="+steps, "V2E_RESULT="+resultFile, "V2E_CWD="+cwd), env...)
	cmd.Stdin = pr
	cmd.Stdout = b.In
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pr.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		err = <-done
		t.Errorf("the v2 editor did not finish within 60 s")
	}
	pw.Close()
	if err != nil {
		t.Errorf("v2 editor: %v\nstderr:\n%s", err, stderr.String())
	}
	// The editor is gone: so is the bridge, soon, releasing its sessions.
	b.In.Close()
	select {
	case <-b.Exited():
	case <-time.After(5 * time.Second):
		t.Errorf("the bridge did not exit within 5 s of its editor")
	}
	raw, rerr := os.ReadFile(resultFile)
	if rerr != nil {
		t.Fatalf("the v2 editor wrote no result: %v\nstderr:\n%s", rerr, stderr.String())
	}
	var res v2Result
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatalf("result %s: %v", raw, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the v2 editor received:\n%s", strings.Join(res.Received, "\n"))
		}
	})
	if res.Error != "" {
		t.Errorf("the v2 SDK editor failed: %s\nstderr:\n%s", res.Error, stderr.String())
	}
	// The SDK saw every line the bridge wrote, and the harness checked
	// each against the v2 schema (reported at cleanup).
	if n := b.Out.Len(); n != len(res.Received) {
		t.Errorf("the bridge wrote %d lines, the SDK editor received %d", n, len(res.Received))
	}
	if v := gjson.GetBytes(res.Initialize, "protocolVersion").Int(); v != 2 {
		t.Errorf("initialize answered protocolVersion %d, want 2: %s", v, res.Initialize)
	}
	if p := gjson.GetBytes(res.Initialize, `_meta.acp-bridge.editorProtocol`).Int(); p != 2 {
		t.Errorf(`_meta["acp-bridge"].editorProtocol = %d, want 2: %s`, p, res.Initialize)
	}
	return res
}

// wantTurn checks a turn's outline: acknowledged with a message id, the
// prompt echoed under it, the running state first, one message id for the
// agent's text, and the stop reason.
func wantV2Turn(t *testing.T, tr v2EditorTurn, stopReason, textHas string) {
	t.Helper()
	if gjson.GetBytes(tr.Ack, "messageId").Str == "" {
		t.Errorf("%q: the prompt answer %s has no messageId", tr.Prompt, tr.Ack)
	}
	// v2: the user message the prompt inserted is echoed under that id.
	switch {
	case tr.Echo == nil:
		t.Errorf("%q: no user_message or user_message_chunk under the acknowledgement's messageId %s; updates %v", tr.Prompt, tr.Ack, tr.Kinds)
	case *tr.Echo != tr.Prompt:
		t.Errorf("%q: the prompt was echoed as %q", tr.Prompt, *tr.Echo)
	}
	var states []string
	for _, k := range tr.Kinds {
		if strings.HasPrefix(k, "state_update:") {
			states = append(states, k)
		}
	}
	if len(states) == 0 || states[0] != "state_update:running" || tr.Kinds[len(tr.Kinds)-1] != "state_update:idle" {
		t.Errorf("%q: updates %v, want state_update running first and idle last", tr.Prompt, tr.Kinds)
	}
	if tr.StopReason != stopReason {
		t.Errorf("%q: stopReason %q, want %q (error %s)", tr.Prompt, tr.StopReason, stopReason, tr.Error)
	}
	if !strings.Contains(tr.Text, textHas) {
		t.Errorf("%q: the agent's text %q lacks %q", tr.Prompt, tr.Text, textHas)
	}
}

// The fake v1 ACP agent, relayed, over a WebSocket and as a child: a
// streamed turn, a tool call that asks permission, file access served by
// the bridge from disk (v2 editors have no fs), a terminal refused (v2 has
// none), and a cancelled turn.
func TestV2Editor_ACPAgent(t *testing.T) {
	NodeSDK(t)
	t.Parallel()
	ForEachTransport(t, func(t *testing.T, tr Transport) {
		cwd := t.TempDir()
		file := filepath.Join(cwd, "in.txt")
		if err := os.WriteFile(file, []byte("from disk"), 0o644); err != nil {
			t.Fatal(err)
		}
		steps := fmt.Sprintf(`[{"prompt":"stream 3"},{"prompt":"permission"},{"prompt":"fs %s"},{"prompt":"terminal"},{"prompt":"wait-cancel","cancelAfter":150}]`, file)
		res := runV2Editor(t, tr, nil, cwd, steps)
		if p := gjson.GetBytes(res.Initialize, `_meta.acp-bridge.agentProtocol`).Int(); p != 1 {
			t.Errorf(`_meta["acp-bridge"].agentProtocol = %d, want 1`, p)
		}
		stream := res.turn(t, 0)
		wantV2Turn(t, stream, "end_turn", "chunk-0000chunk-0001chunk-0002")
		if len(stream.MessageIDs) != 1 {
			t.Errorf("three chunks of one message got message ids %q, want one", stream.MessageIDs)
		}
		perm := res.turn(t, 1)
		wantV2Turn(t, perm, "end_turn", "permission:selected:allow-once")
		if !slices.Contains(perm.Kinds, "state_update:requires_action") || !slices.Contains(perm.Kinds, "tool_call_update") {
			t.Errorf("permission turn updates %v: want tool_call_update and requires_action", perm.Kinds)
		}
		if len(res.Permissions) != 1 || gjson.GetBytes(res.Permissions[0], "subject.toolCall.toolCallId").Str != "perm-1" ||
			gjson.GetBytes(res.Permissions[0], "title").Str == "" {
			t.Errorf("permission requests %s, want one for perm-1 with a title", res.Permissions)
		}
		wantV2Turn(t, res.turn(t, 2), "end_turn", "fs:read:from disk")
		if got, err := os.ReadFile(file + ".out"); err != nil || string(got) != "copied:from disk" {
			t.Errorf("the agent's write, served by the bridge: %q, %v", got, err)
		}
		wantV2Turn(t, res.turn(t, 3), "end_turn", "terminal:create-error:-32601")
		wantV2Turn(t, res.turn(t, 4), "cancelled", "tick-0")
	})
}

// The acp-v0 fake behind the acp-v0 dialect.
func TestV2Editor_V0Agent(t *testing.T) {
	NodeSDK(t)
	t.Parallel()
	dir := t.TempDir()
	t.Cleanup(func() { v0CheckJournals(t, dir) })
	tr := Transport{Name: "child", Start: func(t *testing.T) Agent {
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		return Agent{Args: []string{"--", exe}, Env: []string{"FAKE_AGENT=acp-v0", "FAKE_V0_JOURNAL=" + dir, "GORACE=atexit_sleep_ms=0"}}
	}}
	res := runV2Editor(t, tr, []string{"--dialect", "acp-v0"}, t.TempDir(), `[{"prompt":"hello"}]`)
	wantV2Turn(t, res.turn(t, 0), "end_turn", "")
}

// The claude-stream-json fake CLI: a streamed turn, and a tool call whose
// permission the v2 editor grants (the editor gets the tool call as the
// request's subject).
func TestV2Editor_ClaudeAgent(t *testing.T) {
	NodeSDK(t)
	t.Parallel()
	journalDir := t.TempDir()
	t.Cleanup(func() { claudeCheckJournals(t, journalDir) })
	tr := Transport{Name: "child", Start: func(t *testing.T) Agent {
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		return Agent{Args: []string{"--", exe}, Env: []string{
			"FAKE_AGENT=claude", fakeclaude.EnvJournal + "=" + journalDir, "GORACE=atexit_sleep_ms=0"}}
	}}
	cwd := t.TempDir()
	res := runV2Editor(t, tr, []string{"--dialect", "claude-stream-json"}, cwd,
		`[{"prompt":"list files"},{"prompt":"touch"},{"setConfig":"model","value":"opus"}]`)
	wantV2Turn(t, res.turn(t, 0), "end_turn", "I'll list the files.")
	touch := res.turn(t, 1)
	wantV2Turn(t, touch, "end_turn", "Created.")
	if len(res.Permissions) != 1 || gjson.GetBytes(res.Permissions[0], "subject.toolCall.toolCallId").Str != "toolu_touch" {
		t.Errorf("permission requests %s, want one for toolu_touch", res.Permissions)
	}
	if _, err := os.Stat(filepath.Join(cwd, "made-by-tool.txt")); err != nil {
		t.Errorf("the granted tool did not run: %v", err)
	}
	if len(res.Steps) > 2 {
		var ids []string
		for _, o := range gjson.GetBytes(res.Steps[2], "configOptions").Array() {
			ids = append(ids, o.Get("configId").Str+"="+o.Get("currentValue").Str)
		}
		if !slices.Contains(ids, "model=opus") {
			t.Errorf("config options after setting the model: %q", ids)
		}
	}
}

// A rules profile (agent-rpc, its fake as a child).
func TestV2Editor_RulesProfile(t *testing.T) {
	NodeSDK(t)
	t.Parallel()
	res := runV2Editor(t, ChildTransport("rules-agent-rpc"), []string{"--dialect", "agent-rpc", "--no-sessions"}, t.TempDir(),
		`[{"prompt":"hello there"},{"prompt":"tool"}]`)
	wantV2Turn(t, res.turn(t, 0), "end_turn", "You said: hello there")
	tool := res.turn(t, 1)
	wantV2Turn(t, tool, "end_turn", "Found a.txt")
	if !slices.Contains(tool.Kinds, "tool_call_update") || !slices.Contains(tool.Kinds, "agent_thought_chunk") {
		t.Errorf("tool turn updates %v, want a thought and tool_call_update", tool.Kinds)
	}
}

// A session recorded by one bridge, resumed by a v2 editor through the
// next: listed, resumed with replayFrom (the bridge's own session/load from
// its transcript, translated: the user's and the agent's messages with
// message ids, then an idle snapshot before the answer), and prompted
// again; and resumed without a replay, which replays nothing.
func TestV2Editor_ResumeWithReplay(t *testing.T) {
	NodeSDK(t)
	t.Parallel()
	state, cwd := t.TempDir(), t.TempDir()
	args := []string{"--state-dir", state}
	first := runV2Editor(t, ChildTransport("acp"), args, cwd, `[{"prompt":"stream 2"}]`)
	wantV2Turn(t, first.turn(t, 0), "end_turn", "chunk-0000chunk-0001")
	sid := gjson.GetBytes(first.Session, "sessionId").Str
	promptID := gjson.GetBytes(first.turn(t, 0).Ack, "messageId").Str

	res := runV2Editor(t, ChildTransport("acp"), args, cwd, `[{"prompt":"again"}]`, "V2E_RESUME="+sid, "V2E_REPLAY=1")
	if !strings.Contains(string(res.List), sid) {
		t.Errorf("session/list %s lacks %s", res.List, sid)
	}
	var kinds []string
	var user, agent string
	for _, u := range res.Replayed {
		r := gjson.ParseBytes(u)
		kinds = append(kinds, r.Get("sessionUpdate").Str+":"+r.Get("state").Str)
		switch r.Get("sessionUpdate").Str {
		case "user_message_chunk":
			user += r.Get("content.text").Str
			// The replayed prompt is the message the editor was told
			// of when it sent it: the same messageId.
			if got := r.Get("messageId").Str; got != promptID {
				t.Errorf("replayed prompt under messageId %q, want %q, the one its acknowledgement named", got, promptID)
			}
		case "agent_message_chunk":
			agent += r.Get("content.text").Str
			if r.Get("messageId").Str == "" {
				t.Errorf("replayed chunk without messageId: %s", u)
			}
		}
	}
	if !strings.Contains(user, "stream 2") || !strings.Contains(agent, "chunk-0000chunk-0001") {
		t.Errorf("replay: user %q, agent %q (updates %v)", user, agent, kinds)
	}
	if len(kinds) == 0 || kinds[len(kinds)-1] != "state_update:idle" {
		t.Errorf("replay %v does not end with an idle snapshot before the resume answer", kinds)
	}
	wantV2Turn(t, res.turn(t, 0), "end_turn", "echo:again")

	quiet := runV2Editor(t, ChildTransport("acp"), args, cwd, `[]`, "V2E_RESUME="+sid)
	for _, u := range quiet.Replayed {
		if k := gjson.GetBytes(u, "sessionUpdate").Str; strings.HasSuffix(k, "_chunk") {
			t.Errorf("resume without replayFrom replayed %s", u)
		}
	}

	// The transcript is the engine's (v1): a v1 editor loads what the v2
	// editor recorded.
	e := NewEditor(t, ChildTransport("acp"), EditorOptions{Args: args})
	e.Initialize(t)
	id := e.RawSend(t, "session/load", fmt.Sprintf(`{"sessionId":%q,"cwd":%q,"mcpServers":[]}`, sid, cwd))
	want := append(streamed("stream 2", 2), "user:again", "agent:echo:again")
	if got := replayBefore(t, e, acp.SessionId(sid), id); !slices.Equal(got, want) {
		t.Errorf("a v1 editor's load of the v2 editor's session replayed\n got %q\nwant %q", got, want)
	}
}
