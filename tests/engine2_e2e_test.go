package tests

// Scenarios for the second round of engine behaviours: frames that are not
// single lines, a transparent agentInfo, repeated initialize, forwarding of
// unknown methods, recovery from an agent that was unreachable, killed or
// restarted, errors whose message names their cause, duplicate in-flight
// ids, and a stalled editor. Each runs through the built binary with every
// stdout line checked against the ACP schema by the harness.

import (
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/tests/fakeagent"
	"github.com/coder/acp-go-sdk"
	"github.com/tidwall/gjson"
)

// --- helpers -----------------------------------------------------------------

// promptTurn runs "stream n" on sid and requires a complete turn: the n
// chunks in order, then end_turn. Only this turn's chunks count: a restarted
// agent may hand out a session id the editor has seen before.
func promptTurn(t *testing.T, e *Editor, sid acp.SessionId, n int) {
	t.Helper()
	before := len(e.Fake.Chunks(sid))
	res, err := e.Prompt(ctxT(t), sid, fmt.Sprintf("stream %d", n))
	if err != nil {
		t.Fatalf("prompt on %s: %v", sid, err)
	}
	if res.StopReason != acp.StopReasonEndTurn {
		t.Errorf("prompt on %s: stopReason %q, want end_turn", sid, res.StopReason)
	}
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf("chunk-%04d", i)
	}
	if got := e.Fake.Chunks(sid)[before:]; !slices.Equal(got, want) {
		t.Errorf("session %s: this turn's chunks = %q, want %q", sid, got, want)
	}
}

// writeLines writes lines to the bridge's stdin in one write: pipelined, as
// an editor that does not wait for answers sends them.
func writeLines(t *testing.T, b *Bridge, lines ...string) {
	t.Helper()
	if _, err := b.In.Write([]byte(strings.Join(lines, "\n") + "\n")); err != nil {
		t.Fatalf("writing to bridge stdin: %v", err)
	}
}

func rawRequest(id, method, params string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q,"params":%s}`, id, method, params)
}

func rawPrompt(id, sid, text string) string {
	return rawRequest(id, "session/prompt", fmt.Sprintf(`{"sessionId":%q,"prompt":[{"type":"text","text":%q}]}`, sid, text))
}

// responseBy waits until deadline for the response with raw id.
func responseBy(t *testing.T, out *Stdout, id string, deadline time.Time) Line {
	t.Helper()
	l, ok := out.Find(time.Until(deadline), func(l Line) bool { return l.IsResponse() && l.ID() == id })
	if !ok {
		t.Fatalf("no response with id %s by the deadline (stdout has %d lines)", id, out.Len())
	}
	return l
}

// bareMessages are the standard JSON-RPC messages, which say nothing about
// why a request failed.
var bareMessages = []string{"", "Error", "Internal error", "Invalid request", "Invalid Request", "Invalid params", "Method not found", "Parse error"}

// causeMessage requires l to be an error with code whose message is more
// than a bare JSON-RPC message and whose data is an object, and returns the
// message.
func causeMessage(t *testing.T, l Line, code int) string {
	t.Helper()
	got, ok := l.ErrorCode()
	if !ok {
		t.Errorf("answer %s is not an error", l)
		return ""
	}
	if got != code {
		t.Errorf("error code %d, want %d: %s", got, code, l)
	}
	msg := l.Get("error.message").Str
	if slices.Contains(bareMessages, msg) {
		t.Errorf("error message is the bare %q; it must name the cause: %s", msg, l)
	}
	if !l.Get("error.data").IsObject() {
		t.Errorf("error data is not an object: %s", l)
	}
	return msg
}

// containsAny reports whether s contains one of subs, ignoring case.
func containsAny(s string, subs ...string) bool {
	s = strings.ToLower(s)
	for _, sub := range subs {
		if strings.Contains(s, strings.ToLower(sub)) {
			return true
		}
	}
	return false
}

// reservePort returns a loopback "host:port" where nothing listens (now).
func reservePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// urlTransport points the bridge at url, whoever listens there (or no one).
func urlTransport(url string) Transport {
	return Transport{Name: "ws", Start: func(*testing.T) Agent { return Agent{Args: []string{"--url", url}} }}
}

// childWithEnv is ChildTransport(name) with env added to the child's
// environment.
func childWithEnv(name string, env ...string) Transport {
	tr := ChildTransport(name)
	start := tr.Start
	tr.Start = func(t *testing.T) Agent {
		a := start(t)
		a.Env = append(a.Env, env...)
		return a
	}
	return tr
}

// agentInfoPID asks the agent behind e for its pid (_test/info).
func agentInfoPID(t *testing.T, e *Editor) int {
	t.Helper()
	l := e.RawCall(t, "_test/info", "")
	pid := int(l.Get("result.pid").Int())
	if pid <= 0 {
		t.Fatalf("_test/info answered %s", l)
	}
	return pid
}

// wantFreshAgentInitialized requires that the first frame the agent behind
// e received was initialize: a bridge that reconnects must initialize the
// new agent before relaying anything to it (initialize comes first on
// every connection).
func wantFreshAgentInitialized(t *testing.T, e *Editor) {
	t.Helper()
	j := e.Journal(t)
	if len(j.Frames) == 0 || gjson.Get(j.Frames[0], "method").Str != "initialize" {
		first := "(none)"
		if len(j.Frames) > 0 {
			first = truncate(j.Frames[0], 300)
		}
		t.Errorf("the new agent's first frame was %s, want initialize", first)
	}
}

// waitChunk waits for an agent_message_chunk with text on stdout.
func waitChunk(t *testing.T, out *Stdout, text string) Line {
	t.Helper()
	l, ok := out.Find(WaitTimeout, func(l Line) bool {
		return l.Method() == "session/update" && l.Get("params.update.content.text").Str == text
	})
	if !ok {
		t.Fatalf("no %q update on stdout within %v", text, WaitTimeout)
	}
	return l
}

// --- 1. pretty-printed WebSocket frames ----------------------------------------

// The WebSocket transport carries one message per text frame; nothing says a
// frame is one line. An agent that indents its JSON must work end to end, and
// the editor must still get one message per line.
func TestE2_IndentedWSFrames(t *testing.T) {
	t.Parallel()
	e := NewEditor(t, WSTransportWith(fakeagent.WSOptions{Indent: true}), EditorOptions{})
	res := e.Initialize(t)
	if res.ProtocolVersion != 1 {
		t.Errorf("protocolVersion = %d, want 1", res.ProtocolVersion)
	}
	sid := e.NewSession(t, "")
	promptTurn(t, e, sid, 20)

	resp := e.Out.Response(t, e.In.LastID("session/prompt"))
	updates := 0
	for _, l := range e.Out.Lines() {
		if !json.Valid(l.Raw) || len(l.Raw) == 0 || l.Raw[0] != '{' {
			t.Errorf("stdout line %d is not one complete JSON object: %s", l.N, l)
		}
		if l.Method() == "session/update" && l.N < resp.N {
			updates++
		}
	}
	if updates != 20 {
		t.Errorf("%d session/update lines before the prompt response, want 20", updates)
	}
}

// --- 2. agentInfo is the agent's own --------------------------------------------

func TestE2_AgentInfoIsTheAgents(t *testing.T) {
	t.Parallel()
	ForEachTransport(t, func(t *testing.T, tr Transport) {
		e := NewEditor(t, tr, EditorOptions{})
		res := e.Initialize(t)
		if res.AgentInfo == nil || res.AgentInfo.Name != fakeagent.Name {
			t.Errorf("agentInfo = %+v, want the agent's own, name %q", res.AgentInfo, fakeagent.Name)
		}
		l := e.Out.Response(t, e.In.LastID("initialize"))
		if got := l.Get("result.agentInfo").Raw; gjson.Get(got, "name").Str != fakeagent.Name || gjson.Get(got, "version").Str != "0.0.1" {
			t.Errorf(`agentInfo = %s, want the agent's {"name":%q,"version":"0.0.1"}`, got, fakeagent.Name)
		}
		if b := l.Get(`result._meta.acp-bridge`); !b.IsObject() || b.Get("dialect").Str != "acp" {
			t.Errorf(`result._meta["acp-bridge"] = %s, want an object with "dialect":"acp"`, b.Raw)
		}
		if !l.Get(`result._meta.fake-agent`).IsObject() {
			t.Errorf(`the agent's own result._meta["fake-agent"] was lost: %s`, l.Get("result._meta").Raw)
		}
	})
}

// --- 3. initialize again --------------------------------------------------------

// An editor that reconnects its UI, or a second tab, may initialize again;
// the answer must be a success, and the connection must keep working.
func TestE2_Reinitialize(t *testing.T) {
	t.Parallel()
	ForEachTransport(t, func(t *testing.T, tr Transport) {
		e := NewEditor(t, tr, EditorOptions{})
		e.Initialize(t)
		res := e.Initialize(t) // fails the test on an error answer
		if res.ProtocolVersion != 1 {
			t.Errorf("second initialize: protocolVersion %d, want 1", res.ProtocolVersion)
		}
		sid := e.NewSession(t, "")
		promptTurn(t, e, sid, 3)
	})
}

// Two initialize requests written at once: the second arrives while the
// first is still pending, and must be answered successfully too.
func TestE2_ReinitializePipelined(t *testing.T) {
	t.Parallel()
	ForEachTransport(t, func(t *testing.T, tr Transport) {
		e := NewEditor(t, tr, EditorOptions{})
		writeLines(t, e.Bridge,
			rawRequest(`"init-a"`, "initialize", initParams),
			rawRequest(`"init-b"`, "initialize", initParams))
		for _, id := range []string{`"init-a"`, `"init-b"`} {
			l := e.Out.Response(t, id)
			if _, failed := l.ErrorCode(); failed || l.Get("result.protocolVersion").Raw != "1" {
				t.Errorf("initialize %s answered %s, want a result with protocolVersion 1", id, l)
			}
		}
		sid := e.NewSession(t, "")
		promptTurn(t, e, sid, 3)
	})
}

// --- 4. unknown methods and notifications reach the agent ---------------------------

// On the acp dialect the bridge is a relay: a method it does not know may be
// one the agent knows, so it is forwarded and the agent's answer relayed.
func TestE2_UnknownMethodsForwarded(t *testing.T) {
	t.Parallel()
	ForEachTransport(t, func(t *testing.T, tr Transport) {
		e := NewEditor(t, tr, EditorOptions{})
		e.Start(t)

		const params = `{"x":[1,2.50],"s":"é"}`
		l := e.RawCall(t, "custom/echo", params)
		var seen gjson.Result
		for _, f := range e.Journal(t).Frames {
			if m := gjson.Parse(f); m.Get("method").Str == "custom/echo" {
				seen = m
			}
		}
		if !seen.Exists() {
			t.Errorf("the agent never received custom/echo")
		} else if got := seen.Get("params").Raw; got != params {
			t.Errorf("agent got custom/echo params %s, want byte-exact %s", got, params)
		}
		// acp-go-sdk (the fake agent) answers unknown methods itself with
		// NewMethodNotFound: that object, not one the bridge makes up.
		if code, _ := l.ErrorCode(); code != -32601 || l.Get("error.message").Str != "Method not found" || l.Get("error.data.method").Str != "custom/echo" {
			t.Errorf(`custom/echo answered %s, want the agent's error {"code":-32601,"message":"Method not found","data":{"method":"custom/echo"}}`, l)
		}

		mark := e.Out.Len()
		e.WriteLine(`{"jsonrpc":"2.0","method":"custom/ping","params":{"n":1}}`)
		deadline := time.Now().Add(WaitTimeout)
		for {
			var got []string
			for _, f := range e.Journal(t).Frames {
				if gjson.Get(f, "method").Str == "custom/ping" {
					got = append(got, f)
				}
			}
			if len(got) > 0 {
				if len(got) != 1 || gjson.Get(got[0], "id").Exists() || gjson.Get(got[0], "params").Raw != `{"n":1}` {
					t.Errorf("agent received custom/ping as %q, want one notification with params {\"n\":1}", got)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the agent never received the custom/ping notification")
			}
			time.Sleep(20 * time.Millisecond)
		}
		// The notification reached the agent before the journal request
		// that showed it, so anything the bridge answered to it is on
		// stdout already: only journal answers may follow the mark.
		for _, l := range e.Out.Lines()[mark:] {
			if l.IsResponse() && (l.ID() == "null" || l.Get("error").Exists()) {
				t.Errorf("the custom/ping notification was answered: %s", l)
			}
		}
	})
}

// --- 5. unreachable agent, then reachable ---------------------------------------

// The agent is not listening yet: initialize and a pipelined session/new
// both fail at once with the cause, without waiting for more input; once the
// agent is up, initialize again works and so does a whole turn.
func TestE2_InitializeFailsThenSucceeds(t *testing.T) {
	t.Parallel()
	addr := reservePort(t)
	e := NewEditor(t, urlTransport("ws://"+addr+"/acp"), EditorOptions{})

	start := time.Now()
	writeLines(t, e.Bridge,
		rawRequest(`"init-1"`, "initialize", initParams),
		rawRequest(`"new-1"`, "session/new", fmt.Sprintf(`{"cwd":%q,"mcpServers":[]}`, t.TempDir())))
	deadline := start.Add(2 * time.Second)
	li := responseBy(t, e.Out, `"init-1"`, deadline)
	ln := responseBy(t, e.Out, `"new-1"`, deadline)
	t.Logf("both answered within %v", time.Since(start).Round(time.Millisecond))

	if msg := causeMessage(t, li, -32603); !containsAny(msg, "unreachable") || !strings.Contains(msg, addr) {
		t.Errorf("initialize error message %q must say the agent is unreachable and name %s", msg, addr)
	}
	if msg := causeMessage(t, ln, -32603); !containsAny(msg, "initialize") {
		t.Errorf("session/new error message %q must say initialize failed", msg)
	}

	agent := StartWSAgent(t, fakeagent.WSOptions{Addr: addr})
	if res := e.Initialize(t); res.ProtocolVersion != 1 {
		t.Errorf("initialize once the agent is up: protocolVersion %d, want 1", res.ProtocolVersion)
	}
	sid := e.NewSession(t, "")
	promptTurn(t, e, sid, 5)
	if n := agent.Dials(); n != 1 {
		t.Errorf("the agent was dialed %d times, want 1", n)
	}
}

// --- 6. WebSocket agent killed and restarted --------------------------------------

func TestE2_WSAgentRestartedOnSamePort(t *testing.T) {
	t.Parallel()
	first := StartWSAgent(t, fakeagent.WSOptions{})
	e := NewEditor(t, urlTransport(first.URL), EditorOptions{})
	sid := e.Start(t)

	done := promptAsync(ctxT(t), e, sid, "hold forever")
	waitChunk(t, e.Out, "holding:forever")
	killed := time.Now()
	first.Close()
	r := await(t, done, "prompt to a killed agent")
	if r.err == nil {
		t.Fatalf("prompt succeeded (%+v) although its agent was killed", r.res)
	}
	if d := r.at.Sub(killed); d > 2*time.Second {
		t.Errorf("the pending prompt failed %v after the agent was killed, want within 2 s", d)
	}
	l := e.Out.Response(t, e.In.LastID("session/prompt"))
	if msg := causeMessage(t, l, -32603); !containsAny(msg, "closed", "unreachable", "lost") || !containsAny(msg, "agent") {
		t.Errorf("prompt error message %q must say the agent's connection was closed or lost", msg)
	}

	// The restarted agent numbers its sessions from sess-1 again, the id
	// of the dead session: the new one must route to the new connection.
	second := StartWSAgent(t, fakeagent.WSOptions{Addr: first.Addr})
	sid2 := e.NewSession(t, "")
	promptTurn(t, e, sid2, 5)
	if n := second.Dials(); n != 1 {
		t.Errorf("the restarted agent was dialed %d times, want 1", n)
	}
	wantFreshAgentInitialized(t, e)
	select {
	case <-e.Exited():
		t.Fatalf("the bridge (pid %d) exited", e.Pid())
	default:
	}
}

// --- 7. child killed between turns -----------------------------------------------

func TestE2_ChildKilledBetweenTurns(t *testing.T) {
	t.Parallel()
	e := NewEditor(t, ChildTransport("acp"), EditorOptions{Args: []string{"--no-sessions"}})
	sid := e.Start(t)
	promptTurn(t, e, sid, 3)

	pid := agentInfoPID(t, e)
	if err := killPID(pid); err != nil {
		t.Fatalf("killing the agent (pid %d): %v", pid, err)
	}
	waitUntil(t, WaitTimeout, fmt.Sprintf("agent pid %d to die", pid), func() bool { return processGone(pid) })

	if res, err := e.Prompt(ctxT(t), sid, "hello"); err == nil {
		t.Fatalf("prompt on the killed agent's session succeeded: %+v", res)
	}
	l := e.Out.Response(t, e.In.LastID("session/prompt"))
	if msg := causeMessage(t, l, -32603); !containsAny(msg, "killed", "exited") {
		t.Errorf("prompt error message %q must name the agent's exit (killed/exited)", msg)
	}

	// The new child numbers its sessions from sess-1 again, the id of the
	// dead session: the new one must route to the new child.
	sid2 := e.NewSession(t, "")
	pid2 := agentInfoPID(t, e)
	if pid2 == pid || processGone(pid2) {
		t.Errorf("after session/new the agent is pid %d (killed one: %d), want a new live process", pid2, pid)
	}
	promptTurn(t, e, sid2, 3)
	wantFreshAgentInitialized(t, e)
}

// --- 9. the child's exit status and last words ----------------------------------

// An agent that dies at initialize (no API key) leaves its reason on stderr;
// the editor's error must carry it with the exit status.
func TestE2_ChildExitAtInitializeExplained(t *testing.T) {
	t.Parallel()
	e := NewEditor(t, childWithEnv("acp", fakeagent.EnvInitExit+"=3:error: FAKE_API_KEY not set"), EditorOptions{})
	l := e.RawCall(t, "initialize", initParams)
	msg := causeMessage(t, l, -32603)
	if !strings.Contains(msg, "status 3") || !strings.Contains(msg, "FAKE_API_KEY not set") {
		t.Errorf("initialize error message %q must carry the exit status (\"status 3\") and the agent's stderr (\"FAKE_API_KEY not set\")", msg)
	}
}

// --- 10. duplicate in-flight ids -------------------------------------------------

// A second request reusing the id of one still pending cannot be answered
// unambiguously: it is refused at once, never forwarded, and the first one
// still gets its own answer.
func TestE2_DuplicateInFlightID(t *testing.T) {
	t.Parallel()
	b := startRaw(t)
	rawInit(t, b)
	sid := rawNewSession(t, b, `"s"`)

	b.WriteLine(rawPrompt("7", sid, "hold dup"))
	waitChunk(t, b.Out, "holding:dup")
	sent := time.Now()
	b.WriteLine(rawPrompt("7", sid, "second"))
	isID7 := func(l Line) bool { return l.IsResponse() && l.ID() == "7" }
	dup, ok := b.Out.Find(2*time.Second, isID7)
	if !ok {
		t.Fatalf("the duplicate id 7 was not answered within 2 s")
	}
	t.Logf("duplicate answered after %v", dup.At.Sub(sent).Round(time.Millisecond))
	if code, _ := dup.ErrorCode(); code != -32600 || !containsAny(dup.Get("error.message").Str, "in use", "already", "duplicate") {
		t.Fatalf("first answer with id 7 = %s, want error -32600 saying id 7 is already in use", dup)
	}

	b.WriteLine(rawRequest(`"j"`, "_test/journal", "{}"))
	for _, f := range b.Out.Response(t, `"j"`).Get("result.frames").Array() {
		if gjson.Get(f.Str, "params.prompt.0.text").Str == "second" {
			t.Errorf("the refused duplicate reached the agent: %s", f.Str)
		}
	}

	b.WriteLine(rawRequest(`"r"`, "_test/release", `{"key":"dup"}`))
	b.Out.Response(t, `"r"`)
	first, ok := b.Out.Find(WaitTimeout, func(l Line) bool { return isID7(l) && l.N > dup.N })
	if !ok {
		t.Fatalf("the held prompt with id 7 never got its own answer")
	}
	if first.Get("result.stopReason").Str != "end_turn" {
		t.Errorf("held prompt answered %s, want stopReason end_turn", first)
	}
	if rel := waitChunk(t, b.Out, "released:dup"); rel.N > first.N {
		t.Errorf("the held prompt's last update (line %d) came after its answer (line %d)", rel.N, first.N)
	}

	// Nothing more for id 7: a probe's answer comes after anything
	// already on its way.
	b.WriteLine(rawRequest(`"probe"`, "_test/echo", "{}"))
	b.Out.Response(t, `"probe"`)
	n := 0
	for _, l := range b.Out.Lines() {
		if isID7(l) {
			n++
		}
	}
	if n != 2 {
		t.Errorf("id 7 was answered %d times, want exactly 2 (the refusal and the held prompt's answer)", n)
	}
}

// --- 11. a stalled editor ----------------------------------------------------------

// stallFeed is a StartBridge feed that, once armed, blocks the harness's
// stdout reader until released: the editor stops reading.
type stallFeed struct {
	armed   atomic.Bool
	once    sync.Once
	blocked chan struct{} // closed when the reader is stuck
	release chan struct{}
	relOnce sync.Once
}

func newStallFeed() *stallFeed {
	return &stallFeed{blocked: make(chan struct{}), release: make(chan struct{})}
}

func (s *stallFeed) Write(p []byte) (int, error) {
	if s.armed.Load() {
		s.once.Do(func() { close(s.blocked) })
		<-s.release
	}
	return len(p), nil
}

func (s *stallFeed) Close() error { return nil }

func (s *stallFeed) Release() { s.relOnce.Do(func() { close(s.release) }) }

// An editor that stops reading while an agent floods it, then closes the
// bridge's stdin, must not keep the bridge (or the agent) alive.
func TestE2_StalledEditorCannotKeepBridgeAlive(t *testing.T) {
	t.Parallel()
	agent := ChildTransport("acp").Start(t)
	feed := newStallFeed()
	b := StartBridge(t, agent.Args, agent.Env, feed)
	t.Cleanup(feed.Release) // runs before the bridge's cleanup, which reads stdout to EOF
	b.Out.AllowCutLastLine()
	pid := agentPID(t, b)
	sid := rawNewSession(t, b, `"s"`)

	feed.armed.Store(true)
	b.WriteLine(rawPrompt(`"flood"`, sid, "stream 100000"))
	select {
	case <-feed.blocked:
	case <-time.After(WaitTimeout):
		t.Fatal("the flood never reached stdout")
	}
	if _, ok := b.StdoutBlocked(); ok {
		waitUntil(t, WaitTimeout, "the bridge to block writing its full stdout", func() bool {
			blocked, _ := b.StdoutBlocked()
			return blocked
		})
	} else {
		t.Logf("cannot see whether the bridge is blocked on stdout; going on")
	}

	start := time.Now()
	b.In.Close()
	if _, ok := b.WaitExit(3 * time.Second); !ok {
		t.Errorf("bridge still running 3 s after stdin closed with its stdout stalled")
	} else {
		t.Logf("bridge exited %v after stdin closed", time.Since(start).Round(time.Millisecond))
	}
	if !processGone(pid) {
		t.Errorf("agent process %d still running after the bridge exited", pid)
		_ = killPID(pid)
	}
}
