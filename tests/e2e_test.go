package tests

// Scenarios for the ACP relay (--dialect acp, the default), each run over a
// WebSocket agent and a child-process agent with the same assertions. The
// editor is acp-go-sdk's client; raw stdout lines are inspected wherever
// the SDK would hide the property under test (ordering, exact bytes, which
// peer produced an error).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/acp-go-sdk"
	"github.com/tidwall/gjson"

	"github.com/acp-bridge/acp-bridge/tests/fakeagent"
)

type promptResult struct {
	res acp.PromptResponse
	err error
	at  time.Time
}

// promptAsync runs a prompt on its own goroutine.
func promptAsync(ctx context.Context, e *Editor, sid acp.SessionId, text string) <-chan promptResult {
	ch := make(chan promptResult, 1)
	go func() {
		res, err := e.Prompt(ctx, sid, text)
		ch <- promptResult{res, err, time.Now()}
	}()
	return ch
}

func await(t *testing.T, ch <-chan promptResult, what string) promptResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(WaitTimeout):
		t.Fatalf("%s: no answer within %v", what, WaitTimeout)
		return promptResult{}
	}
}

// The relay is transparent: the agent's own agentInfo reaches the editor
// (clients switch on agentInfo.name), and the bridge names itself in _meta.
func TestInitialize_BridgeIdentityAndPassthrough(t *testing.T) {
	t.Parallel()
	ForEachTransport(t, func(t *testing.T, tr Transport) {
		e := NewEditor(t, tr, EditorOptions{})
		res := e.Initialize(t)
		if res.ProtocolVersion != 1 {
			t.Errorf("protocolVersion = %d, want 1", res.ProtocolVersion)
		}
		if res.AgentInfo == nil || res.AgentInfo.Name != fakeagent.Name {
			t.Errorf("agentInfo = %+v, want the agent's own, name %q", res.AgentInfo, fakeagent.Name)
		}
		if !res.AgentCapabilities.PromptCapabilities.Image || !res.AgentCapabilities.PromptCapabilities.EmbeddedContext {
			t.Errorf("agent's promptCapabilities lost: %+v", res.AgentCapabilities.PromptCapabilities)
		}

		// The SDK drops unknown fields; look at the bytes.
		l := e.Out.Response(t, e.In.LastID("initialize"))
		if b := l.Get(`result._meta.acp-bridge`); !b.IsObject() || b.Get("name").Str != "acp-bridge" || b.Get("dialect").Str != "acp" {
			t.Errorf(`result._meta["acp-bridge"] = %s, want an object naming the bridge and its dialect`, b.Raw)
		}
		if got := l.Get(`result._meta.fake-agent.transport`).Str; got != map[string]string{"ws": "ws", "child": "stdio"}[tr.Name] {
			t.Errorf(`agent's own result._meta["fake-agent"] lost: %s`, l.Get("result._meta").Raw)
		}
		if got, want := l.Get("result.unknownInitField").Raw, `{"keep":[1,2.50,"three"]}`; got != want {
			t.Errorf("unknown result field = %s, want byte-exact %s", got, want)
		}
		if got, want := l.Get(`result.agentCapabilities._meta.fake\.dev/caps`).Raw, `{"x":1}`; got != want {
			t.Errorf("agentCapabilities._meta entry = %q, want %s", got, want)
		}

		// The editor's initialize reached the agent with its capabilities.
		j := e.Journal(t)
		var init gjson.Result
		for _, f := range j.Frames {
			if gjson.Get(f, "method").Str == "initialize" {
				init = gjson.Parse(f)
			}
		}
		if !init.Exists() {
			t.Fatalf("agent never received initialize; frames: %q", j.Frames)
		}
		if !init.Get("params.clientCapabilities.fs.readTextFile").Bool() || !init.Get("params.clientCapabilities.terminal").Bool() {
			t.Errorf("agent's initialize lost the editor's capabilities: %s", init.Get("params").Raw)
		}
	})
}

// A v2 editor offers protocolVersion 2 to a bridge forced to v1 with
// --editor-protocol 1; the agent (which echoes the offer) says 2; the bridge
// must still answer 1 (ACP spec, Initialization: version negotiation), and
// the editor decides.
func TestInitialize_VersionForcedTo1(t *testing.T) {
	t.Parallel()
	ForEachTransport(t, func(t *testing.T, tr Transport) {
		e := NewEditor(t, tr, EditorOptions{Args: []string{"--editor-protocol", "1"}})
		l := e.RawCall(t, "initialize", `{"protocolVersion":2,"clientCapabilities":{}}`)
		if got := l.Get("result.protocolVersion").Raw; got != "1" {
			t.Errorf("protocolVersion = %s, want 1 (line %s)", got, l)
		}
	})
}

func TestPrompt_Stream1000InOrder(t *testing.T) {
	t.Parallel()
	ForEachTransport(t, func(t *testing.T, tr Transport) {
		e := NewEditor(t, tr, EditorOptions{})
		sid := e.Start(t)
		res, err := e.Prompt(ctxT(t), sid, "stream 1000")
		if err != nil {
			t.Fatalf("prompt: %v", err)
		}
		if res.StopReason != acp.StopReasonEndTurn {
			t.Errorf("stopReason = %q, want end_turn", res.StopReason)
		}
		chunks := e.Fake.Chunks(sid)
		if len(chunks) != 1000 {
			t.Fatalf("editor got %d chunks, want 1000", len(chunks))
		}
		for i, c := range chunks {
			if want := fmt.Sprintf("chunk-%04d", i); c != want {
				t.Fatalf("chunk %d = %q, want %q (order lost)", i, c, want)
			}
		}

		// On the wire: all 1000 updates precede the prompt response
		// (ACP spec, Prompt Turn: a turn's updates come before its answer), in
		// order, and none follows it.
		resp := e.Out.Response(t, e.In.LastID("session/prompt"))
		n := 0
		for _, l := range e.Out.Lines() {
			if l.Method() != "session/update" || l.Get("params.sessionId").Str != string(sid) {
				continue
			}
			if l.N > resp.N {
				t.Errorf("update after the prompt response: %s", l)
				continue
			}
			if want := fmt.Sprintf("chunk-%04d", n); l.Get("params.update.content.text").Str != want {
				t.Fatalf("stdout update #%d = %s, want %s", n, l, want)
			}
			n++
		}
		if n != 1000 {
			t.Errorf("%d updates before the prompt response on stdout, want 1000", n)
		}
	})
}

func TestPermission_RoundTrip(t *testing.T) {
	t.Parallel()
	ForEachTransport(t, func(t *testing.T, tr Transport) {
		e := NewEditor(t, tr, EditorOptions{})
		sid := e.Start(t)

		res, err := e.Prompt(ctxT(t), sid, "permission")
		if err != nil || res.StopReason != acp.StopReasonEndTurn {
			t.Fatalf("prompt = %+v, %v; want end_turn", res, err)
		}
		if !slices.Contains(e.Fake.Chunks(sid), "permission:selected:allow-once") {
			t.Errorf("agent did not get the editor's choice; chunks %q", e.Fake.Chunks(sid))
		}
		perms := e.Fake.Permissions()
		if len(perms) != 1 {
			t.Fatalf("editor got %d permission requests, want 1", len(perms))
		}
		p := perms[0]
		if p.SessionId != sid || p.ToolCall.ToolCallId != "perm-1" || len(p.Options) != 2 {
			t.Errorf("permission request = %+v", p)
		}
		// The tool_call announcing perm-1 reached the editor before the
		// request that asks about it.
		call, ok1 := e.Out.Find(time.Second, func(l Line) bool { return l.Get("params.update.sessionUpdate").Str == "tool_call" })
		ask, ok2 := e.Out.Find(time.Second, func(l Line) bool { return l.Method() == "session/request_permission" })
		if !ok1 || !ok2 || call.N > ask.N {
			t.Errorf("tool_call (line %d, %v) must precede session/request_permission (line %d, %v)", call.N, ok1, ask.N, ok2)
		}

		// The editor can also refuse: a cancelled outcome reaches the agent.
		e.Fake.OnPermission(func(context.Context, acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
			return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeCancelled()}, nil
		})
		if _, err := e.Prompt(ctxT(t), sid, "permission"); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(e.Fake.Chunks(sid), "permission:cancelled") {
			t.Errorf("cancelled outcome lost; chunks %q", e.Fake.Chunks(sid))
		}
	})
}

func TestFS_EditorRoundTrip(t *testing.T) {
	t.Parallel()
	ForEachTransport(t, func(t *testing.T, tr Transport) {
		e := NewEditor(t, tr, EditorOptions{})
		dir := t.TempDir()
		path := filepath.Join(dir, "in.txt")
		// The disk and the editor's buffer differ: an editor that
		// advertises fs must be the one asked (ACP spec, File System).
		if err := os.WriteFile(path, []byte("on disk"), 0o644); err != nil {
			t.Fatal(err)
		}
		e.Fake.SetFile(path, "unsaved buffer")
		e.Initialize(t)
		sid := e.NewSession(t, dir)

		if _, err := e.Prompt(ctxT(t), sid, "fs "+path); err != nil {
			t.Fatal(err)
		}
		chunks := e.Fake.Chunks(sid)
		if !slices.Contains(chunks, "fs:read:unsaved buffer") || !slices.Contains(chunks, "fs:wrote") {
			t.Errorf("chunks = %q, want fs:read:unsaved buffer and fs:wrote", chunks)
		}
		reads, writes := e.Fake.Reads(), e.Fake.Writes()
		if len(reads) != 1 || reads[0].Path != path || reads[0].SessionId != sid {
			t.Errorf("editor reads = %+v", reads)
		}
		if len(writes) != 1 || writes[0].Path != path+".out" || writes[0].Content != "copied:unsaved buffer" || writes[0].SessionId != sid {
			t.Errorf("editor writes = %+v", writes)
		}
		if _, err := os.Stat(path + ".out"); !os.IsNotExist(err) {
			t.Errorf("the bridge wrote %s.out to disk although the editor serves fs (stat: %v)", path, err)
		}
	})
}

// An editor that does not advertise fs never sees fs/* requests; the bridge
// serves them from disk, confined to the session's cwd.
func TestFS_LocalFallbackConfinedToCwd(t *testing.T) {
	t.Parallel()
	ForEachTransport(t, func(t *testing.T, tr Transport) {
		e := NewEditor(t, tr, EditorOptions{NoFS: true})
		dir := t.TempDir()
		path := filepath.Join(dir, "in.txt")
		if err := os.WriteFile(path, []byte("on disk"), 0o644); err != nil {
			t.Fatal(err)
		}
		outside := filepath.Join(t.TempDir(), "secret.txt")
		if err := os.WriteFile(outside, []byte("secret"), 0o644); err != nil {
			t.Fatal(err)
		}
		e.Initialize(t)
		sid := e.NewSession(t, dir)

		if _, err := e.Prompt(ctxT(t), sid, "fs "+path); err != nil {
			t.Fatal(err)
		}
		chunks := e.Fake.Chunks(sid)
		if !slices.Contains(chunks, "fs:read:on disk") || !slices.Contains(chunks, "fs:wrote") {
			t.Errorf("chunks = %q, want fs:read:on disk and fs:wrote", chunks)
		}
		if b, err := os.ReadFile(path + ".out"); err != nil || string(b) != "copied:on disk" {
			t.Errorf("%s.out = %q, %v; want copied:on disk", path, b, err)
		}

		if _, err := e.Prompt(ctxT(t), sid, "fs "+outside); err != nil {
			t.Fatal(err)
		}
		if c, ok := hasPrefixed(e.Fake.Chunks(sid), "fs:read-error:"); !ok {
			t.Errorf("reading %s outside the session cwd succeeded; chunks %q", outside, e.Fake.Chunks(sid))
		} else if strings.Contains(strings.Join(e.Fake.Chunks(sid), "\n"), "secret") {
			t.Errorf("outside file leaked: %q", c)
		}
		if _, err := os.Stat(outside + ".out"); !os.IsNotExist(err) {
			t.Errorf("%s.out was written outside the session cwd", outside)
		}

		reads, writes := e.Fake.Reads(), e.Fake.Writes()
		if len(reads)+len(writes) != 0 {
			t.Errorf("editor without the fs capability got fs calls: %v %v", reads, writes)
		}
		for _, l := range e.Out.Lines() {
			if strings.HasPrefix(l.Method(), "fs/") {
				t.Errorf("fs request sent to an editor without the capability: %s", l)
			}
		}
	})
}

func TestTerminal_RoundTrip(t *testing.T) {
	t.Parallel()
	ForEachTransport(t, func(t *testing.T, tr Transport) {
		e := NewEditor(t, tr, EditorOptions{})
		sid := e.Start(t)
		if _, err := e.Prompt(ctxT(t), sid, "terminal"); err != nil {
			t.Fatal(err)
		}
		want := "terminal:" + editorTerminalID + ":hello:7"
		if !slices.Contains(e.Fake.Chunks(sid), want) {
			t.Errorf("chunks = %q, want %q", e.Fake.Chunks(sid), want)
		}
		terms, released := e.Fake.Terminals(), e.Fake.Released()
		if len(terms) != 1 || terms[0].Command != "echo" || !slices.Equal(terms[0].Args, []string{"hello"}) || terms[0].SessionId != sid {
			t.Errorf("terminal/create calls = %+v", terms)
		}
		if !slices.Equal(released, []string{editorTerminalID}) {
			t.Errorf("released = %q, want [%s]", released, editorTerminalID)
		}
	})
}

// The agent honours session/cancel: its own stopReason cancelled comes back
// long before the bridge's grace period would have answered for it.
func TestCancel_Honoured(t *testing.T) {
	t.Parallel()
	ForEachTransport(t, func(t *testing.T, tr Transport) {
		e := NewEditor(t, tr, EditorOptions{Args: []string{"--cancel-grace", "10s"}})
		sid := e.Start(t)
		done := promptAsync(ctxT(t), e, sid, "wait-cancel")
		waitUntil(t, WaitTimeout, "tick-2", func() bool { return slices.Contains(e.Fake.Chunks(sid), "tick-2") })
		start := time.Now()
		if err := e.Conn.Cancel(ctxT(t), acp.CancelNotification{SessionId: sid}); err != nil {
			t.Fatal(err)
		}
		r := await(t, done, "cancelled prompt")
		if r.err != nil {
			t.Fatalf("cancelled prompt failed: %v (a cancelled turn is a success, ACP spec, Prompt Turn: cancellation)", r.err)
		}
		if r.res.StopReason != acp.StopReasonCancelled {
			t.Errorf("stopReason = %q, want cancelled", r.res.StopReason)
		}
		if d := r.at.Sub(start); d > 3*time.Second {
			t.Errorf("cancel took %v; the agent answers at once", d)
		}
		// The agent's update sent after the cancel, before its answer,
		// is delivered and precedes the answer.
		resp := e.Out.Response(t, e.In.LastID("session/prompt"))
		seen, ok := e.Out.Find(time.Second, func(l Line) bool { return l.Get("params.update.content.text").Str == "cancel-seen" })
		if !ok || seen.N > resp.N {
			t.Errorf("cancel-seen update (found %v, line %d) must precede the prompt response (line %d)", ok, seen.N, resp.N)
		}
		e.WaitEvent(t, "cancel:"+string(sid))
	})
}

// The agent ignores session/cancel: the bridge answers cancelled once the
// grace period runs out, then drops the agent's late update and late answer.
func TestCancel_IgnoredAnsweredAfterGrace(t *testing.T) {
	t.Parallel()
	ForEachTransport(t, func(t *testing.T, tr Transport) {
		const grace = 500 * time.Millisecond
		e := NewEditor(t, tr, EditorOptions{Args: []string{"--cancel-grace", grace.String()}})
		sid := e.Start(t)
		done := promptAsync(ctxT(t), e, sid, "ignore-cancel")
		waitUntil(t, WaitTimeout, "tick-1", func() bool { return slices.Contains(e.Fake.Chunks(sid), "tick-1") })
		start := time.Now()
		if err := e.Conn.Cancel(ctxT(t), acp.CancelNotification{SessionId: sid}); err != nil {
			t.Fatal(err)
		}
		r := await(t, done, "cancelled prompt")
		if r.err != nil {
			t.Fatalf("prompt failed: %v; want stopReason cancelled from the bridge", r.err)
		}
		if r.res.StopReason != acp.StopReasonCancelled {
			t.Errorf("stopReason = %q, want cancelled", r.res.StopReason)
		}
		if d := r.at.Sub(start); d < grace*8/10 || d > grace+2*time.Second {
			t.Errorf("answered %v after the cancel; want about the %v grace period", d, grace)
		}
		promptID := e.In.LastID("session/prompt")

		// The agent's journal answer travels the same ordered link as its
		// late frames, so once it says "late-sent" the late update has
		// reached the bridge; the extra pause covers the late answer,
		// which the SDK writes just after.
		e.WaitEvent(t, "late-sent:"+string(sid))
		time.Sleep(300 * time.Millisecond)
		answers := 0
		for _, l := range e.Out.Lines() {
			if strings.Contains(string(l.Raw), "late-update") {
				t.Errorf("late update reached the editor: %s", l)
			}
			if l.IsResponse() && l.ID() == promptID {
				answers++
			}
		}
		if answers != 1 {
			t.Errorf("prompt %s answered %d times, want exactly once", promptID, answers)
		}

		// The session still works, and the old turn's late answer was not
		// mistaken for the new one's.
		res, err := e.Prompt(ctxT(t), sid, "hello")
		if err != nil || res.StopReason != acp.StopReasonEndTurn {
			t.Fatalf("next prompt = %+v, %v; want end_turn", res, err)
		}
		if !slices.Contains(e.Fake.Chunks(sid), "echo:hello") {
			t.Errorf("next prompt's chunk missing: %q", e.Fake.Chunks(sid))
		}
	})
}

// checkAgentGone asserts the prompt failed with a bridge-made -32603 whose
// data names a reason, soon after the agent went away.
func checkAgentGone(t *testing.T, e *Editor, r promptResult, start time.Time) {
	t.Helper()
	if r.err == nil {
		t.Fatalf("prompt succeeded (%+v) although the agent went away mid-turn", r.res)
	}
	if d := r.at.Sub(start); d > 1500*time.Millisecond {
		t.Errorf("error came %v after the agent went away; want about 1 s at most", d)
	}
	// The SDK makes up its own -32603 when stdout closes; insist the
	// bridge wrote the error and kept its stdout open.
	l := e.Out.Response(t, e.In.LastID("session/prompt"))
	if code, ok := l.ErrorCode(); !ok || code != -32603 {
		t.Fatalf("prompt answer = %s, want error -32603", l)
	}
	if reason := l.Get("error.data.reason").Str; reason == "" {
		t.Errorf("error has no data.reason saying why: %s", l)
	}
	// The editor is not left hanging afterwards either.
	ctx, cancel := context.WithTimeout(context.Background(), WaitTimeout)
	defer cancel()
	_, err := e.Conn.NewSession(ctx, acp.NewSessionRequest{Cwd: t.TempDir(), McpServers: []acp.McpServer{}})
	if ctx.Err() != nil {
		t.Errorf("session/new after the agent went away hung: %v", err)
	}
}

func TestAgentDies_MidTurn(t *testing.T) {
	t.Parallel()
	ForEachTransport(t, func(t *testing.T, tr Transport) {
		e := NewEditor(t, tr, EditorOptions{})
		sid := e.Start(t)
		start := time.Now()
		r := await(t, promptAsync(ctxT(t), e, sid, "die"), "prompt to a dying agent")
		checkAgentGone(t, e, r, start)
	})
}

func TestAgentCloses_MidTurn(t *testing.T) {
	t.Parallel()
	ForEachTransport(t, func(t *testing.T, tr Transport) {
		e := NewEditor(t, tr, EditorOptions{})
		sid := e.Start(t)
		start := time.Now()
		r := await(t, promptAsync(ctxT(t), e, sid, "close"), "prompt to a closing agent")
		checkAgentGone(t, e, r, start)
	})
}

// Session A waits on a permission the editor has not answered; session B's
// turn and a new session must not wait for it (one session's pending
// permission blocking the others was agentclientprotocol/claude-agent-acp
// #830).
func TestSessions_Independent(t *testing.T) {
	t.Parallel()
	ForEachTransport(t, func(t *testing.T, tr Transport) {
		e := NewEditor(t, tr, EditorOptions{})
		e.Initialize(t)
		a := e.NewSession(t, "")
		b := e.NewSession(t, "")
		if a == b {
			t.Fatalf("two sessions share id %s", a)
		}
		asked := make(chan struct{})
		release := make(chan struct{})
		e.Fake.OnPermission(func(ctx context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
			if p.SessionId == a {
				close(asked)
				select {
				case <-release:
				case <-ctx.Done():
				}
			}
			return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeSelected("allow-once")}, nil
		})
		doneA := promptAsync(ctxT(t), e, a, "permission")
		select {
		case <-asked:
		case <-time.After(WaitTimeout):
			t.Fatal("session A's permission request never reached the editor")
		}

		res, err := e.Prompt(ctxT(t), b, "stream 10")
		if err != nil || res.StopReason != acp.StopReasonEndTurn {
			t.Fatalf("session B's prompt = %+v, %v while A waits on a permission", res, err)
		}
		if n := len(e.Fake.Chunks(b)); n != 10 {
			t.Errorf("session B got %d chunks, want 10", n)
		}
		c := e.NewSession(t, "")
		if c == a || c == b {
			t.Errorf("session/new returned an existing id %s", c)
		}
		select {
		case r := <-doneA:
			t.Fatalf("session A finished (%+v, %v) while its permission was pending", r.res, r.err)
		default:
		}
		for _, chunk := range e.Fake.Chunks(a) {
			if strings.HasPrefix(chunk, "chunk-") {
				t.Errorf("session B's chunk %q delivered to session A", chunk)
			}
		}

		close(release)
		r := await(t, doneA, "session A")
		if r.err != nil || r.res.StopReason != acp.StopReasonEndTurn {
			t.Fatalf("session A = %+v, %v", r.res, r.err)
		}
		if !slices.Contains(e.Fake.Chunks(a), "permission:selected:allow-once") {
			t.Errorf("session A chunks = %q", e.Fake.Chunks(a))
		}
	})
}

func TestExtension_Passthrough(t *testing.T) {
	t.Parallel()
	ForEachTransport(t, func(t *testing.T, tr Transport) {
		e := NewEditor(t, tr, EditorOptions{})
		sid := e.Start(t)

		// Editor → agent, byte-exact both ways: escapes, number spellings
		// and key order survive.
		params := `{"z":1,"a":[true,null,1.50e+2],"nested":{"_meta":{"x":"y"},"s":"\u00e9\n","big":12345678901234567890}}`
		l := e.RawCall(t, "_test/echo", params)
		if got := l.Get("result").Raw; got != params {
			t.Errorf("_test/echo result = %s\nwant byte-exact %s", got, params)
		}
		raw, err := e.Conn.CallExtension(ctxT(t), "_test/echo", json.RawMessage(`{"k":"v"}`))
		if err != nil || string(raw) != `{"k":"v"}` {
			t.Errorf("SDK _test/echo = %s, %v", raw, err)
		}
		_, err = e.Conn.CallExtension(ctxT(t), "_test/no-such-method", struct{}{})
		if err == nil {
			t.Errorf("unknown extension method succeeded")
		} else if re := requestError(t, err); re.Code != -32601 {
			t.Errorf("unknown extension method: code %d, want -32601", re.Code)
		}

		// Agent → editor.
		if _, err := e.Prompt(ctxT(t), sid, "ext-editor"); err != nil {
			t.Fatal(err)
		}
		want := `ext:{"editorEcho":{"from":"agent","n":[1,2,3]}}`
		if !slices.Contains(e.Fake.Chunks(sid), want) {
			t.Errorf("chunks = %q, want %q", e.Fake.Chunks(sid), want)
		}
	})
}

// _meta and unknown fields cross the bridge byte for byte in both
// directions (typed SDK layers drop unknown fields;
// agentclientprotocol/typescript-sdk PR #92).
func TestMeta_PassthroughByteExact(t *testing.T) {
	t.Parallel()
	ForEachTransport(t, func(t *testing.T, tr Transport) {
		e := NewEditor(t, tr, EditorOptions{})
		sid := e.Start(t)
		sidJSON, _ := json.Marshal(sid)
		params := fmt.Sprintf(`{"sessionId":%s,"prompt":[{"type":"text","text":"_meta","_meta":{"blockMeta":[1,2]},"unknownBlockField":"b"}],"_meta":{"trace":{"id":"abc","n":1.50}},"unknownTopLevel":{"keep":"me","big":12345678901234567890}}`, sidJSON)
		l := e.RawCall(t, "session/prompt", params)
		if got, want := l.Get("result").Raw, string(fakeagent.MetaResult([]byte(params))); got != want {
			t.Errorf("prompt result (embeds the params the agent received)\n got %s\nwant %s", got, want)
		}
		upd, ok := e.Out.Find(time.Second, func(l Line) bool {
			return l.Method() == "session/update" && l.Get("params.update.content.text").Str == "meta-echo"
		})
		if !ok {
			t.Fatal("the agent's update never reached the editor")
		}
		if got, want := upd.Get("params").Raw, string(fakeagent.MetaUpdateParams(sidJSON)); got != want {
			t.Errorf("update params\n got %s\nwant %s", got, want)
		}
		if upd.N > l.N {
			t.Errorf("update (line %d) after the prompt response (line %d)", upd.N, l.N)
		}
	})
}

// $/cancel_request names an id on its own hop; the bridge must re-issue it
// with the agent hop's id of the request, never forward the editor's
// (ACP spec, $/cancel_request: ids are per hop).
func TestCancelRequest_Translated(t *testing.T) {
	t.Parallel()
	// agentView returns the agent-hop id of the wait-cancel-request prompt
	// and the requestIds of every $/cancel_request the agent received.
	agentView := func(t *testing.T, e *Editor) (promptID string, cancels []string) {
		j := e.Journal(t)
		for _, f := range j.Frames {
			m := gjson.Parse(f)
			switch m.Get("method").Str {
			case "session/prompt":
				if m.Get("params.prompt.0.text").Str == "wait-cancel-request" {
					promptID = m.Get("id").Raw
				}
			case "$/cancel_request":
				cancels = append(cancels, m.Get("params.requestId").Raw)
			}
		}
		if promptID == "" {
			t.Fatalf("agent never received the prompt; frames %q", j.Frames)
		}
		if len(cancels) == 0 {
			t.Fatalf("agent never received a $/cancel_request; frames %q", j.Frames)
		}
		return promptID, cancels
	}

	t.Run("raw", func(t *testing.T) {
		t.Parallel()
		ForEachTransport(t, func(t *testing.T, tr Transport) {
			e := NewEditor(t, tr, EditorOptions{})
			sid := e.Start(t)
			id := e.RawSend(t, "session/prompt", fmt.Sprintf(`{"sessionId":%q,"prompt":[{"type":"text","text":"wait-cancel-request"}]}`, sid))
			waitUntil(t, WaitTimeout, "tick-1", func() bool { return slices.Contains(e.Fake.Chunks(sid), "tick-1") })
			e.WriteLine(fmt.Sprintf(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":%s}}`, id))

			l := e.Out.Response(t, id)
			code, failed := l.ErrorCode()
			if failed && code != -32800 || !failed && l.Get("result.stopReason").Str != "cancelled" {
				t.Errorf("cancelled request answered %s; want stopReason cancelled or error -32800", l)
			}
			agentID, cancels := agentView(t, e)
			if agentID == id {
				t.Fatalf("agent saw the editor's id %s on its hop", id)
			}
			for _, c := range cancels {
				if c != agentID {
					t.Errorf("agent got $/cancel_request for %s; the prompt's id on its hop is %s (editor's was %s)", c, agentID, id)
				}
			}
			if !slices.Contains(e.Fake.Chunks(sid), "cancel-request-seen") {
				t.Errorf("chunks %q lack cancel-request-seen", e.Fake.Chunks(sid))
			}
		})
	})

	t.Run("sdk", func(t *testing.T) {
		t.Parallel()
		ForEachTransport(t, func(t *testing.T, tr Transport) {
			e := NewEditor(t, tr, EditorOptions{})
			sid := e.Start(t)
			// Raw requests advance the agent hop's ids but not the SDK's,
			// so the two hops' ids of the prompt differ.
			for range 5 {
				e.RawCall(t, "_test/echo", `{}`)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := promptAsync(ctx, e, sid, "wait-cancel-request")
			waitUntil(t, WaitTimeout, "tick-1", func() bool { return slices.Contains(e.Fake.Chunks(sid), "tick-1") })
			cancel()
			if r := await(t, done, "prompt with cancelled context"); r.err == nil {
				t.Errorf("SDK prompt with a cancelled context returned %+v", r.res)
			}
			editorID := e.In.LastID("session/prompt")
			e.Out.Response(t, editorID) // the bridge still answers it, once
			agentID, cancels := agentView(t, e)
			if agentID == editorID {
				t.Fatalf("editor and agent hop ids of the prompt are both %s; cannot tell translation from forwarding", agentID)
			}
			for _, c := range cancels {
				if c != agentID {
					t.Errorf("agent got $/cancel_request for %s; the prompt's id on its hop is %s (editor's was %s)", c, agentID, editorID)
				}
			}
		})
	})
}

// --header NAME=ENVVAR sends the variable's value in the WebSocket handshake
// and never writes it to the logs, even at trace level.
func TestWebSocket_HeaderFromEnv(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-token-value"
	agent := WSTransport(nil).Start(t)
	args := append([]string{"--log-level", "trace", "--header", "Authorization=E2E_AGENT_TOKEN"}, agent.Args...)
	fromBridge, toSDK := io.Pipe()
	b := StartBridge(t, args, []string{"E2E_AGENT_TOKEN=Bearer " + secret}, toSDK)
	conn := acp.NewClientSideConnection(newFakeEditor(EditorOptions{}), b.In, fromBridge)
	conn.SetLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	if _, err := conn.Initialize(ctxT(t), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	hs := agent.WS.Headers()
	if len(hs) != 1 {
		t.Fatalf("agent saw %d handshakes, want 1", len(hs))
	}
	if got := hs[0].Get("Authorization"); got != "Bearer "+secret {
		t.Errorf("handshake Authorization = %q, want the value of E2E_AGENT_TOKEN", got)
	}
	b.In.Close()
	if _, ok := b.WaitExit(5 * time.Second); !ok {
		t.Fatal("bridge did not exit after stdin EOF")
	}
	if strings.Contains(b.Stderr(), secret) {
		t.Errorf("the header's secret value appears in the bridge's logs")
	}
}
