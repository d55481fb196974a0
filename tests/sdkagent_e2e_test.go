package tests

// End-to-end tests against an agent built on the official TypeScript SDK
// (testdata/sdkagent/agent.mjs on @agentclientprotocol/sdk, see NodeSDK).
// Such an agent refuses every request that comes before its initialize
// answer, so these tests catch a bridge that opens a new agent link and
// sends on it without waiting for the handshake: agent switching,
// re-attaching after the agent was lost, resuming after a restart.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/acp-go-sdk"
)

// sdkAgentScript is the SDK-built agent, relative to the tests package.
const sdkAgentScript = "testdata/sdkagent/agent.mjs"

// sdkWait bounds each step against the SDK agent: a Node process that loads
// the SDK can take seconds to start on a loaded machine, and a step may
// start one.
const sdkWait = 60 * time.Second

// sdkRefusedMarker starts the stderr line agent.mjs writes for every request
// the SDK refused because it came before the initialize answer.
const sdkRefusedMarker = "sdk-agent: refused before initialize:"

// newSDKEditor is NewEditor for a bridge in front of SDK agents. The bridge
// logs its agents' stderr at Info; when the test ends, every request an
// agent refused for coming before its initialize answer fails the test,
// even one the bridge recovered from (a refused session/resume it retried
// as session/new, say).
func newSDKEditor(t *testing.T, tr Transport, o EditorOptions) *Editor {
	t.Helper()
	o.Args = append([]string{"--log-level", "info"}, o.Args...)
	e := NewEditor(t, tr, o)
	t.Cleanup(func() {
		for _, line := range strings.Split(e.Stderr(), "\n") {
			if strings.Contains(line, sdkRefusedMarker) {
				t.Errorf("the bridge sent an SDK agent a request before that agent's initialize answer: %s", line)
			}
		}
	})
	return e
}

// sdkAgentTransport runs the SDK agent named name as the bridge's child.
func sdkAgentTransport(name string) Transport {
	return Transport{Name: "sdk", Start: func(t *testing.T) Agent {
		argv := NodeScript(t, sdkAgentScript)
		return Agent{Args: append(append([]string{"--"}, argv...), "--name", name)}
	}}
}

// sdkAgentsConfig writes a configuration with an agent block per name, each
// running the SDK agent under that name; the first is the default.
func sdkAgentsConfig(t *testing.T, names ...string) string {
	t.Helper()
	argv := NodeScript(t, sdkAgentScript)
	var b strings.Builder
	fmt.Fprintf(&b, "default_agent = %q\n", names[0])
	for _, n := range names {
		fmt.Fprintf(&b, "agent %q {\n  command = [%q, %q, \"--name\", %q]\n}\n", n, argv[0], argv[1], n)
	}
	path := filepath.Join(t.TempDir(), "agents.hcl")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func sdkCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), sdkWait)
	t.Cleanup(cancel)
	return ctx
}

// sdkTurn is what one prompt to the SDK agent produced.
type sdkTurn struct {
	Stop  acp.StopReason
	Agent string // the name in the agent's first chunk "[NAME pid=PID] "
	PID   int
	Text  string // the rest of the turn's chunks, joined
}

var sdkHeader = regexp.MustCompile(`^\[(\S+) pid=(\d+)\] $`)

// sdkPrompt sends text on sid and returns the turn; any failure ends the
// test.
func sdkPrompt(t *testing.T, e *Editor, sid acp.SessionId, text string) sdkTurn {
	t.Helper()
	before := len(e.Fake.Chunks(sid))
	res, err := e.Prompt(sdkCtx(t), sid, text)
	if err != nil {
		t.Fatalf("prompt %q on %s: %v", text, sid, err)
	}
	chunks := e.Fake.Chunks(sid)[before:]
	turn := sdkTurn{Stop: res.StopReason}
	if len(chunks) == 0 {
		t.Fatalf("prompt %q on %s: no chunks (stopReason %q)", text, sid, res.StopReason)
	}
	m := sdkHeader.FindStringSubmatch(chunks[0])
	if m == nil {
		t.Fatalf("prompt %q on %s: first chunk %q, want the SDK agent's \"[NAME pid=PID] \"", text, sid, chunks[0])
	}
	turn.Agent = m[1]
	turn.PID, _ = strconv.Atoi(m[2])
	turn.Text = strings.Join(chunks[1:], "")
	return turn
}

// sdkStart initializes e and opens a session, with sdkWait for each.
func sdkStart(t *testing.T, e *Editor, cwd string) acp.SessionId {
	t.Helper()
	if _, err := e.Conn.Initialize(sdkCtx(t), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	res, err := e.Conn.NewSession(sdkCtx(t), acp.NewSessionRequest{Cwd: cwd, McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatalf("session/new: %v", err)
	}
	return res.SessionId
}

// The bridge relays an SDK-built agent: initialize, session/new, a streamed
// prompt, and a cancel that ends the turn as cancelled.
func TestSDKAgent_Relay(t *testing.T) {
	t.Parallel()
	e := newSDKEditor(t, sdkAgentTransport("solo"), EditorOptions{})
	sid := sdkStart(t, e, t.TempDir())

	turn := sdkPrompt(t, e, sid, "hello small world")
	if turn.Stop != acp.StopReasonEndTurn || turn.Agent != "solo" || turn.Text != "solo heard: hello small world" {
		t.Fatalf("prompt: %+v, want end_turn and \"solo heard: hello small world\" from solo", turn)
	}

	ctx, cancel := context.WithTimeout(context.Background(), sdkWait)
	defer cancel()
	done := promptAsync(ctx, e, sid, "slow")
	if _, ok := e.Out.Find(sdkWait, func(l Line) bool {
		return l.Method() == "session/update" && l.Get("params.update.content.text").Str == "tick-1"
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

	if turn := sdkPrompt(t, e, sid, "still here"); turn.Stop != acp.StopReasonEndTurn || turn.Text != "solo heard: still here" {
		t.Fatalf("prompt after the cancel: %+v", turn)
	}
}

// Switching a session to another agent (session/set_config_option "agent")
// opens a link to that agent, which must be initialized before the session
// is opened on it; the next prompt is answered by the other agent, with the
// conversation so far as its history preamble. After a bridge restart,
// session/load brings the session back on the agent it was switched to,
// again on a new link to a new process.
func TestSDKAgent_SwitchAgents(t *testing.T) {
	t.Parallel()
	cfg, cwd := sdkAgentsConfig(t, "v1", "v2"), t.TempDir()
	tr := Transport{Name: "config", Start: func(*testing.T) Agent { return Agent{Args: []string{"--config", cfg}} }}
	args := EditorOptions{Args: []string{"--state-dir", t.TempDir()}}
	e := newSDKEditor(t, tr, args)
	sid := sdkStart(t, e, cwd)

	first := sdkPrompt(t, e, sid, "remember pineapple")
	if first.Agent != "v1" || first.Text != "v1 heard: remember pineapple" {
		t.Fatalf("first prompt: %+v, want v1 to hear it", first)
	}

	id := e.RawSend(t, "session/set_config_option", fmt.Sprintf(`{"sessionId":%q,"configId":"agent","value":"v2"}`, sid))
	l, ok := e.Out.Find(sdkWait, func(l Line) bool { return l.IsResponse() && l.ID() == id })
	if !ok {
		t.Fatal("session/set_config_option was not answered")
	}
	if got := l.Get(`result.configOptions.#(id=="agent").currentValue`).Str; got != "v2" {
		t.Fatalf("switch to v2 = %s, want currentValue v2", l)
	}

	second := sdkPrompt(t, e, sid, "recall")
	if second.Agent != "v2" || second.Stop != acp.StopReasonEndTurn {
		t.Fatalf("prompt after the switch: %+v, want v2 to answer with end_turn", second)
	}
	if second.PID == first.PID {
		t.Errorf("v2 answered from v1's process %d", first.PID)
	}
	if !strings.HasPrefix(second.Text, "v2 recalls:") || !strings.Contains(second.Text, "pineapple") {
		t.Errorf("v2 recalls %q, want the conversation so far (pineapple) as its history", second.Text)
	}
	if third := sdkPrompt(t, e, sid, "and more"); third.Agent != "v2" || third.Text != "v2 heard: and more" {
		t.Errorf("the conversation did not continue on v2: %+v", third)
	}
	stopBridge(t, e.Bridge)

	e2 := newSDKEditor(t, tr, args)
	if _, err := e2.Conn.Initialize(sdkCtx(t), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		t.Fatalf("initialize after the restart: %v", err)
	}
	id = e2.RawSend(t, "session/load", fmt.Sprintf(`{"sessionId":%q,"cwd":%q,"mcpServers":[]}`, sid, cwd))
	l, ok = e2.Out.Find(sdkWait, func(l Line) bool { return l.IsResponse() && l.ID() == id })
	if !ok {
		t.Fatal("session/load after the restart was not answered")
	}
	if got := l.Get(`result.configOptions.#(id=="agent").currentValue`).Str; got != "v2" {
		t.Fatalf("session/load after the restart = %s, want the session on v2", l)
	}
	fourth := sdkPrompt(t, e2, sid, "recall")
	if fourth.Agent != "v2" || fourth.Stop != acp.StopReasonEndTurn || !strings.Contains(fourth.Text, "pineapple") {
		t.Errorf("prompt after the restart: %+v, want v2 to answer, recalling the conversation (pineapple)", fourth)
	}
}

// When the agent's process dies, the next prompt re-attaches the session on
// a fresh link to a new process, which must be initialized first.
func TestSDKAgent_ReattachAfterAgentLoss(t *testing.T) {
	t.Parallel()
	e := newSDKEditor(t, sdkAgentTransport("solo"), EditorOptions{Args: []string{"--state-dir", t.TempDir()}})
	sid := sdkStart(t, e, t.TempDir())
	first := sdkPrompt(t, e, sid, "remember pineapple")
	if first.Agent != "solo" || first.PID <= 0 {
		t.Fatalf("first prompt: %+v", first)
	}

	if err := killPID(first.PID); err != nil {
		t.Fatalf("killing the agent (pid %d): %v", first.PID, err)
	}
	// A prompt already on its way to a dying link fails with it; wait until
	// the bridge has seen the link go.
	deadline := time.Now().Add(sdkWait)
	for !strings.Contains(e.Stderr(), "agent link lost") {
		if time.Now().After(deadline) {
			t.Fatal("the bridge did not notice the agent's death")
		}
		time.Sleep(20 * time.Millisecond)
	}

	second := sdkPrompt(t, e, sid, "recall")
	if second.Stop != acp.StopReasonEndTurn || second.PID == first.PID {
		t.Fatalf("prompt after the agent died: %+v, want end_turn from a new process", second)
	}
	if !strings.Contains(second.Text, "pineapple") {
		t.Errorf("the re-attached session recalls %q, want its history (pineapple)", second.Text)
	}
}

// After the bridge restarts (a new process on the same --state-dir),
// session/load of the old session works against the SDK agent: the bridge
// replays its transcript and re-attaches the session on a new link (the
// agent's session/resume, which a new agent process answers "Resource not
// found", then a new session primed with the history), initializing that
// link first. The next prompt is served with the conversation as history.
func TestSDKAgent_RestartResume(t *testing.T) {
	t.Parallel()
	state, cwd := t.TempDir(), t.TempDir()
	args := EditorOptions{Args: []string{"--state-dir", state}}
	e := newSDKEditor(t, sdkAgentTransport("solo"), args)
	sid := sdkStart(t, e, cwd)
	if turn := sdkPrompt(t, e, sid, "remember pineapple"); turn.Text != "solo heard: remember pineapple" {
		t.Fatalf("first prompt: %+v", turn)
	}
	stopBridge(t, e.Bridge)

	e2 := newSDKEditor(t, sdkAgentTransport("solo"), args)
	if _, err := e2.Conn.Initialize(sdkCtx(t), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		t.Fatalf("initialize after the restart: %v", err)
	}
	if _, err := e2.Conn.LoadSession(sdkCtx(t), acp.LoadSessionRequest{SessionId: sid, Cwd: cwd, McpServers: []acp.McpServer{}}); err != nil {
		t.Fatalf("session/load after the restart: %v", err)
	}
	turn := sdkPrompt(t, e2, sid, "recall")
	if turn.Stop != acp.StopReasonEndTurn || turn.Agent != "solo" {
		t.Fatalf("prompt after the restart: %+v", turn)
	}
	if !strings.Contains(turn.Text, "pineapple") {
		t.Errorf("the resumed session recalls %q, want its history (pineapple)", turn.Text)
	}
}
