package tests

// The fault matrix: what the network and the agent can do to a bridge, each
// through the built binary, each ending in a clear answer and a bridge that
// keeps serving.

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/tests/fakeagent"
	"github.com/gorilla/websocket"
	"github.com/tidwall/gjson"
)

// fdCount is how many file descriptors process pid has open.
func fdCount(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Skipf("cannot count descriptors: %v", err)
	}
	return len(ents)
}

// A WebSocket agent killed in the middle of a turn, 50 times in a row with
// the same bridge: every running prompt gets an error naming the lost
// connection, the link supervisor dials the restarted agent for the next
// session, a full turn works, and the bridge's descriptors do not grow.
func TestFault_WSAgentKilledMidTurn50Times(t *testing.T) {
	t.Parallel()
	agent := StartWSAgent(t, fakeagent.WSOptions{})
	addr := agent.Addr
	e := NewEditor(t, urlTransport(agent.URL), EditorOptions{})
	e.Initialize(t)
	var fdsAt5 int
	const rounds = 50
	for i := range rounds {
		sid := e.NewSession(t, "")
		key := fmt.Sprintf("round-%d", i)
		done := promptAsync(ctxT(t), e, sid, "hold "+key)
		waitChunk(t, e.Out, "holding:"+key)
		agent.Close()
		r := await(t, done, "prompt to a killed agent")
		if r.err == nil {
			t.Fatalf("round %d: the prompt succeeded although its agent was killed", i)
		}
		l := e.Out.Response(t, e.In.LastID("session/prompt"))
		if msg := causeMessage(t, l, -32603); !containsAny(msg, "closed", "lost") {
			t.Fatalf("round %d: prompt error %q does not say the connection was lost", i, msg)
		}
		agent = StartWSAgent(t, fakeagent.WSOptions{Addr: addr})
		// The editor closes the session it lost; an open session keeps
		// its transcript lock (a descriptor) for the bridge's life.
		if l := e.RawCall(t, "session/close", fmt.Sprintf(`{"sessionId":%q}`, sid)); !l.Get("result").IsObject() {
			t.Fatalf("round %d: session/close = %s", i, l)
		}
		if i == 4 {
			fdsAt5 = fdCount(t, e.Pid())
		}
	}
	sid := e.NewSession(t, "")
	promptTurn(t, e, sid, 3)
	// Counted as after round 5, with the session closed; but the bridge
	// now holds the live agent's connection, which after round 5 it had
	// not dialled yet: one descriptor more. A file the store's syncer has
	// open for a moment (a sidecar being replaced) is not a leak, so the
	// count may take a moment to come down; a leak never does (the
	// deadline is only a hang guard).
	if l := e.RawCall(t, "session/close", fmt.Sprintf(`{"sessionId":%q}`, sid)); !l.Get("result").IsObject() {
		t.Fatalf("final session/close = %s", l)
	}
	want := fdsAt5 + 1
	fds := fdCount(t, e.Pid())
	for deadline := time.Now().Add(10 * time.Second); fds > want && time.Now().Before(deadline); fds = fdCount(t, e.Pid()) {
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("%d rounds: descriptors %d after round 5, %d at the end (the agent's connection one of them); %d dials of the last agent", rounds, fdsAt5, fds, agent.Dials())
	if fds > want {
		t.Errorf("descriptors grew from %d (round 5, no agent connection) to %d (after %d rounds, one agent connection)", fdsAt5, fds, rounds)
	}
	select {
	case <-e.Exited():
		t.Fatal("the bridge exited")
	default:
	}
}

// An agent that accepts the WebSocket and never answers: initialize fails
// after --request-timeout with a message that says so, and the editor may
// try again.
func TestFault_AgentAcceptsButNeverAnswers(t *testing.T) {
	t.Parallel()
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for { // read (so pings are answered) and never reply
			if _, _, err := c.ReadMessage(); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/acp"
	b := StartBridge(t, []string{"--request-timeout", "1s", "--url", url}, nil, nil)
	start := time.Now()
	b.WriteLine(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	l := b.Next(WaitTimeout)
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("answered after %v, want about the 1 s timeout", d)
	}
	if msg := causeMessage(t, l, -32603); !strings.Contains(msg, "did not answer initialize within 1s") {
		t.Errorf("initialize answered %q", msg)
	}
}

// TCP accepted but no HTTP answer to the WebSocket handshake: initialize
// fails after --connect-timeout, naming the handshake.
func TestFault_TCPAcceptedNoHandshake(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, silent, until the test ends
		}
	}()
	b := StartBridge(t, []string{"--connect-timeout", "500ms", "--url", "ws://" + ln.Addr().String() + "/acp"}, nil, nil)
	start := time.Now()
	b.WriteLine(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	l := b.Next(WaitTimeout)
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("answered after %v, want about the 500 ms connect timeout", d)
	}
	if msg := causeMessage(t, l, -32603); !strings.Contains(msg, "no WebSocket handshake within 500ms") {
		t.Errorf("initialize answered %q", msg)
	}
}

// A half-open connection: the agent stops reading (so it answers no ping)
// in the middle of a turn. The bridge notices within --pong-wait and fails
// the turn with a message that says so.
func TestFault_HalfOpenConnectionFoundByPing(t *testing.T) {
	t.Parallel()
	up := websocket.Upgrader{}
	stop := make(chan struct{})
	defer close(stop)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for {
			_, msg, err := c.ReadMessage()
			if err != nil {
				return
			}
			id, method := gjson.GetBytes(msg, "id").Raw, gjson.GetBytes(msg, "method").Str
			switch method {
			case "initialize":
				c.WriteMessage(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","id":`+id+`,"result":{"protocolVersion":1}}`))
			case "session/new":
				c.WriteMessage(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","id":`+id+`,"result":{"sessionId":"s1"}}`))
			case "session/prompt":
				<-stop // gone quiet: no more reads, so no pongs
				return
			}
		}
	}))
	defer srv.Close()
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/acp"
	b := StartBridge(t, []string{"--pong-wait", "1s", "--url", url}, nil, nil)
	rawInit(t, b)
	sid := rawNewSession(t, b, "1")
	start := time.Now()
	b.WriteLine(rawPrompt(`"p"`, sid, "hi"))
	l := b.Next(WaitTimeout)
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("the half-open connection was found after %v, want within about 1 s", d)
	}
	if msg := causeMessage(t, l, -32603); !strings.Contains(msg, "no pong within 1s") {
		t.Errorf("prompt answered %q", msg)
	}
}

// 10,000 hostile editor lines: garbage, deep nesting, bad UTF-8, invalid
// envelopes, notifications, duplicate-looking ids and valid requests mixed.
// The bridge does not crash, every request with a valid id is answered
// exactly once under that id, nothing else is answered but with id null, and
// stdout stays pure (the harness validates every line).
func TestFault_TenThousandHostileLines(t *testing.T) {
	t.Parallel()
	b := startRaw(t)
	rawInit(t, b)
	rnd := rand.New(rand.NewPCG(13, 19))
	want := map[string]int{} // raw id → answers expected
	var lines []string
	for i := range 10_000 {
		id := fmt.Sprintf(`"h-%d"`, i)
		switch rnd.IntN(10) {
		case 0:
			lines = append(lines, "not json "+strconv.Itoa(i))
		case 1:
			lines = append(lines, strings.Repeat("[", 1000+rnd.IntN(20000)))
		case 2: // bad UTF-8 in a text: answered -32700 under its id
			lines = append(lines, `{"jsonrpc":"2.0","id":`+id+`,"method":"_test/echo","params":{"t":"`+"\xff\xfe"+`"}}`)
			want[id]++
		case 3: // invalid envelope with an id: -32600 under it
			lines = append(lines, `{"jsonrpc":"2.0","id":`+id+`,"method":42}`)
			want[id]++
		case 4: // notification: never answered
			lines = append(lines, `{"jsonrpc":"2.0","method":"_x/note","params":{"i":`+strconv.Itoa(i)+`}}`)
		case 5: // a response to nothing: dropped
			lines = append(lines, `{"jsonrpc":"2.0","id":`+strconv.Itoa(900000+i)+`,"result":{}}`)
		case 6: // numbers that lose precision as float64 must come back exactly
			id = strconv.Itoa(9007199254740993 + i)
			lines = append(lines, `{"jsonrpc":"2.0","id":`+id+`,"method":"_test/echo","params":{"i":`+strconv.Itoa(i)+`}}`)
			want[id]++
		default:
			lines = append(lines, `{"jsonrpc":"2.0","id":`+id+`,"method":"_test/echo","params":{"i":`+strconv.Itoa(i)+`}}`)
			want[id]++
		}
	}
	go func() {
		for i := 0; i < len(lines); i += 100 {
			end := min(i+100, len(lines))
			b.In.Write([]byte(strings.Join(lines[i:end], "\n") + "\n"))
		}
	}()
	answers := 0
	for n := 0; n < len(want); n++ {
		l := b.Next(WaitTimeout)
		if l.Method() != "" {
			t.Fatalf("the bridge sent a %s while answering hostile lines", l.Method())
		}
		if l.ID() == "null" {
			n-- // a -32700 or -32600 for a line without a usable id
			continue
		}
		want[l.ID()]--
		answers++
	}
	for id, left := range want {
		if left != 0 {
			t.Errorf("id %s answered %d times too few (negative: too many)", id, left)
		}
	}
	probe(t, b, 1) // still serving
	t.Logf("%d lines, %d requests answered under their ids", len(lines), answers)
}

// A child that crashes while its permission request waits for the user: the
// editor is told to drop that request ($/cancel_request naming it), the turn
// fails with the exit, and the next session works on a new child.
func TestFault_ChildCrashDuringPermissionRequest(t *testing.T) {
	t.Parallel()
	b := startRaw(t)
	pid := agentPID(t, b)
	sid := rawNewSession(t, b, `"s"`)
	b.WriteLine(rawPrompt(`"p"`, sid, "permission"))
	perm, ok := b.Out.Find(WaitTimeout, func(l Line) bool { return l.Method() == "session/request_permission" })
	if !ok {
		t.Fatal("no permission request reached the editor")
	}
	if err := killPID(pid); err != nil {
		t.Fatal(err)
	}
	cancel, ok := b.Out.Find(WaitTimeout, func(l Line) bool { return l.Method() == "$/cancel_request" })
	if !ok || cancel.Get("params.requestId").Raw != perm.ID() {
		t.Errorf("the editor was not told to drop permission request %s (got %v)", perm.ID(), cancel)
	}
	l := b.Out.Response(t, `"p"`)
	if msg := causeMessage(t, l, -32603); !containsAny(msg, "killed", "exited") {
		t.Errorf("the turn failed with %q, want the agent's exit", msg)
	}
	b.WriteLine(fmt.Sprintf(`{"jsonrpc":"2.0","id":"s2","method":"session/new","params":{"cwd":%q,"mcpServers":[]}}`, t.TempDir()))
	sid2 := b.Out.Response(t, `"s2"`).Get("result.sessionId").Str
	if sid2 == "" {
		t.Fatal("session/new on the respawned agent failed")
	}
	b.WriteLine(rawPrompt(`"p2"`, sid2, "stream 2"))
	if l := b.Out.Response(t, `"p2"`); l.Get("result.stopReason").Str != "end_turn" {
		t.Errorf("a turn on the respawned agent answered %s", l)
	}
}
