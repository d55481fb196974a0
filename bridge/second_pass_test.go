package bridge_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/translate/acp"
	"github.com/tidwall/gjson"
)

// The engine's second pass (issue 13): behaviours a proxy must have to be
// no stricter than what it fronts, to answer everything exactly once, and to
// recover when the agent comes back.

func TestInitialize_RepeatedIsForwardedAndAnswered(t *testing.T) {
	h := newHarness(t, nil)
	h.initialize()
	h.send(`{"jsonrpc":"2.0","id":"again","method":"initialize","params":{"protocolVersion":1}}`)
	req := h.agentRecv()
	if gjson.Get(req, "method").Str != "initialize" {
		t.Fatalf("agent got %s, want the repeated initialize", req)
	}
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(req, "id").Raw + `,"result":{"protocolVersion":1,"agentInfo":{"name":"fake-agent"}}}`)
	got := h.recv()
	if gjson.Get(got, "id").Raw != `"again"` || gjson.Get(got, "result.protocolVersion").Int() != 1 {
		t.Errorf("repeated initialize answered %s", got)
	}
	h.newSession("5") // still serving
}

func TestInitialize_RepeatedWhilePendingIsHeldThenAnswered(t *testing.T) {
	h := newHarness(t, nil)
	h.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	h.send(`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":1}}`)
	first := h.agentRecv()
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(first, "id").Raw + `,"result":{"protocolVersion":1}}`)
	if got := h.recv(); gjson.Get(got, "id").Raw != "1" || !gjson.Get(got, "result").Exists() {
		t.Fatalf("first initialize answered %s", got)
	}
	second := h.agentRecv()
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(second, "id").Raw + `,"result":{"protocolVersion":1}}`)
	if got := h.recv(); gjson.Get(got, "id").Raw != "2" || !gjson.Get(got, "result").Exists() {
		t.Errorf("second initialize answered %s", got)
	}
}

func TestInitialize_FailureAnswersHeldRequestsAtOnce(t *testing.T) {
	h := newHarness(t, nil)
	h.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	h.send(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	h.send(`{"jsonrpc":"2.0","id":3,"method":"_x/after","params":{}}`)
	h.agentRecv()
	h.agent().die(errors.New("agent unreachable at ws://127.0.0.1:9/acp: connection refused"))
	got := map[string]string{}
	for range 3 {
		line := h.recv()
		got[gjson.Get(line, "id").Raw] = line
	}
	if msg := gjson.Get(got["1"], "error.message").Str; !strings.Contains(msg, "connection refused") {
		t.Errorf("initialize answered %s, want its cause in the message", got["1"])
	}
	for _, id := range []string{"2", "3"} {
		msg := gjson.Get(got[id], "error.message").Str
		if !strings.Contains(msg, "initialize failed") || !strings.Contains(msg, "connection refused") {
			t.Errorf("held request %s answered %s, want a message naming the failed initialize and its cause", id, got[id])
		}
	}
	// Nothing more is written until the editor tries again, and then it works.
	h.current = nil
	if got := h.initialize(); gjson.Get(got, "result.protocolVersion").Int() != 1 {
		t.Errorf("initialize after the failure answered %s", got)
	}
}

func TestUnknownMethodsAndNotificationsReachTheAgent(t *testing.T) {
	h := newHarness(t, nil)
	h.initialize()
	h.send(`{"jsonrpc":"2.0","id":"u","method":"session/set_title","params":{"sessionId":"s","title":"t"}}`)
	req := h.agentRecv()
	if gjson.Get(req, "method").Str != "session/set_title" || gjson.Get(req, "params.title").Str != "t" {
		t.Fatalf("agent got %s", req)
	}
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(req, "id").Raw + `,"error":{"code":-32601,"message":"no such method here","data":{"x":1}}}`)
	if got := h.recv(); got != `{"jsonrpc":"2.0","id":"u","error":{"code":-32601,"message":"no such method here","data":{"x":1}}}` {
		t.Errorf("editor got %s, want the agent's own error", got)
	}
	h.send(`{"jsonrpc":"2.0","method":"auth/ping","params":{"x":[1]}}`)
	if got := h.agentRecv(); got != `{"jsonrpc":"2.0","method":"auth/ping","params":{"x":[1]}}` {
		t.Errorf("agent got %s, want the notification untouched", got)
	}
	// A null result of a method ACP does not define is the agent's business.
	h.send(`{"jsonrpc":"2.0","id":"n","method":"auth/status","params":{}}`)
	req = h.agentRecv()
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(req, "id").Raw + `,"result":null}`)
	if got := h.recv(); got != `{"jsonrpc":"2.0","id":"n","result":null}` {
		t.Errorf("editor got %s", got)
	}
}

func TestDuplicateInFlightIDIsRefused(t *testing.T) {
	h := newHarness(t, nil)
	h.initialize()
	h.send(`{"jsonrpc":"2.0","id":7,"method":"_x/slow","params":{}}`)
	first := h.agentRecv()
	h.send(`{"jsonrpc":"2.0","id":7,"method":"_x/other","params":{}}`)
	got := h.recv()
	if gjson.Get(got, "error.code").Int() != -32600 || !strings.Contains(gjson.Get(got, "error.message").Str, "already in use") {
		t.Fatalf("duplicate answered %s", got)
	}
	// The duplicate never reached the agent; $/cancel_request reaches the first.
	h.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":7}}`)
	if c := h.agentRecv(); gjson.Get(c, "params.requestId").Raw != gjson.Get(first, "id").Raw {
		t.Errorf("agent got %s, want the cancel of the first request", c)
	}
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(first, "id").Raw + `,"result":{"ok":1}}`)
	if got := h.recv(); got != `{"jsonrpc":"2.0","id":7,"result":{"ok":1}}` {
		t.Errorf("first request answered %s", got)
	}
	// Once answered, the id may be used again.
	h.send(`{"jsonrpc":"2.0","id":7,"method":"_x/again","params":{}}`)
	if req := h.agentRecv(); gjson.Get(req, "method").Str != "_x/again" {
		t.Errorf("agent got %s", req)
	}
}

// Every cancelled prompt gets its own grace: a prompt cancelled while an
// earlier cancel's grace timer runs used to get no answer at all. Two
// prompts of one session are pending at once only with the one-turn rule
// off (by default the second is rejected, see TestOneTurn_*), so it is off
// here.
func TestCancelGrace_SecondCancelDuringGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Durations stay under the harness's 5 s waits, which run on the
		// bubble's fake clock too.
		h := newHarness(t, func(b *bridge.Bridge) {
			b.CancelGrace = 3 * time.Second
			b.OneTurn = bridge.OneTurnOff
		})
		h.initialize()
		sid := h.newSession("1")
		prompt := func(id int) {
			h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"%s","prompt":[]}}`, id, sid))
			h.agentRecv()
		}
		cancel := func() {
			h.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"` + sid + `"}}`)
			h.agentRecv()
		}
		start := time.Now()
		prompt(2)
		cancel()
		time.Sleep(time.Second) // inside the first grace period
		prompt(3)
		cancel()
		first := h.recv()
		if first != `{"jsonrpc":"2.0","id":2,"result":{"stopReason":"cancelled"}}` || time.Since(start) != 3*time.Second {
			t.Fatalf("after %v: %s", time.Since(start), first)
		}
		second := h.recv()
		if second != `{"jsonrpc":"2.0","id":3,"result":{"stopReason":"cancelled"}}` || time.Since(start) != 4*time.Second {
			t.Errorf("after %v: %s, want prompt 3 answered 3 s after its own cancel", time.Since(start), second)
		}
	})
}

func TestRequestTimeout_Synthetic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, func(b *bridge.Bridge) { b.RequestTimeout = 3 * time.Second })
		h.initialize()
		start := time.Now()
		h.send(`{"jsonrpc":"2.0","id":5,"method":"session/list","params":{}}`)
		h.agentRecv()
		got := h.recv()
		if time.Since(start) != 3*time.Second {
			t.Errorf("answered after %v, want 3s", time.Since(start))
		}
		if msg := gjson.Get(got, "error.message").Str; !strings.Contains(msg, "did not answer session/list within 3s") {
			t.Errorf("timeout answered %s", got)
		}
		// The agent is asked to stop working on it.
		if c := h.agentRecv(); gjson.Get(c, "method").Str != "$/cancel_request" {
			t.Errorf("agent got %s", c)
		}
	})
}

// A lost link is dialled again for the next request that needs it, and the
// agent behind the new link is initialized again before that request.
func TestLinkComesBack(t *testing.T) {
	h := newHarness(t, nil)
	h.initialize()
	sid := h.newSession("1")
	h.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"` + sid + `","prompt":[]}}`)
	h.agentRecv()
	h.agent().die(errors.New("agent WebSocket ws://127.0.0.1:9/acp closed: 1006 (abnormal closure)"))
	got := h.recv()
	if msg := gjson.Get(got, "error.message").Str; gjson.Get(got, "id").Raw != "2" || !strings.Contains(msg, "1006") {
		t.Fatalf("running prompt answered %s, want the cause in the message", got)
	}
	// The old session is gone with the link, and says so.
	h.send(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"` + sid + `","prompt":[]}}`)
	got = h.recv()
	if msg := gjson.Get(got, "error.message").Str; !strings.Contains(msg, "was lost") || !strings.Contains(msg, "start a new session") {
		t.Errorf("prompt on the lost session answered %s", got)
	}
	// A new session dials the agent again; initialize goes first.
	h.current = nil
	h.send(`{"jsonrpc":"2.0","id":4,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	initReq := h.agentRecv()
	if gjson.Get(initReq, "method").Str != "initialize" {
		t.Fatalf("new link got %s first, want initialize", initReq)
	}
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(initReq, "id").Raw + `,"result":{"protocolVersion":1}}`)
	newReq := h.agentRecv()
	if gjson.Get(newReq, "method").Str != "session/new" {
		t.Fatalf("new link got %s, want session/new", newReq)
	}
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(newReq, "id").Raw + `,"result":{"sessionId":"s2"}}`)
	if got := h.recv(); gjson.Get(got, "result.sessionId").Str != "s2" {
		t.Errorf("session/new on the new link answered %s", got)
	}
}

func TestDialBackoff_Synthetic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var dials []time.Time
		h := newHarness(t, func(b *bridge.Bridge) {
			b.ReconnectBackoff = 500 * time.Millisecond
			b.ReconnectBackoffMax = 2 * time.Second
			b.Dial = func(ctx context.Context, s bridge.Spawn) (bridge.Link, error) {
				dials = append(dials, time.Now())
				return nil, errors.New("agent unreachable at ws://127.0.0.1:9/acp: connection refused")
			}
		})
		for i := range 5 {
			h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":1}}`, i))
			if got := h.recv(); !strings.Contains(got, "connection refused") {
				t.Fatalf("initialize %d answered %s", i, got)
			}
		}
		// Waits before dials 2..5: ~0.5s, ~1s, ~2s, ~2s (±20% jitter).
		want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 2 * time.Second}
		for i, w := range want {
			gap := dials[i+1].Sub(dials[i])
			if gap < w*8/10 || gap > w*12/10 {
				t.Errorf("wait before dial %d = %v, want %v ±20%%", i+2, gap, w)
			}
		}
	})
}

// Pretty-printed agent frames (newlines inside one WebSocket message) reach
// the editor as one line each, and the repair is counted and tapped.
func TestMultiLineFrameCompacted(t *testing.T) {
	var notes []string
	var mu sync.Mutex
	h := newHarness(t, func(b *bridge.Bridge) {
		b.Tap = func(ev bridge.TapEvent) {
			if ev.Hop == bridge.BridgeHop {
				mu.Lock()
				notes = append(notes, ev.Note)
				mu.Unlock()
			}
		}
	})
	h.initialize()
	sid := h.newSession("1")
	h.agentSend("{\n  \"jsonrpc\": \"2.0\",\n  \"method\": \"session/update\",\n  \"params\": {\n    \"sessionId\": \"" + sid + "\",\n    \"update\": {\"sessionUpdate\": \"agent_message_chunk\", \"content\": {\"type\": \"text\", \"text\": \"a\\nb\"}}\n  }\n}")
	got := h.recv()
	want := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"` + sid + `","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a\nb"}}}}`
	if got != want {
		t.Errorf("editor got  %s\nwant %s", got, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(notes) != 1 || notes[0] != string(bridge.RepairMultiLineFrames) {
		t.Errorf("tap notes = %v", notes)
	}
}

// The tap sees every message on both hops, in order, with its direction.
func TestTap_BothHops(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	h := newHarness(t, func(b *bridge.Bridge) {
		b.Tap = func(ev bridge.TapEvent) {
			dir := "out"
			if ev.Inbound {
				dir = "in"
			}
			mu.Lock()
			seen = append(seen, fmt.Sprintf("%s %s %s", ev.Hop, dir, gjson.GetBytes(ev.Message, "method").Str))
			mu.Unlock()
		}
	})
	h.initialize()
	mu.Lock()
	defer mu.Unlock()
	want := []string{"editor in initialize", "agent out initialize", "agent in ", "editor out "}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("tap saw %q, want %q", seen, want)
	}
}

func TestOnSession_Events(t *testing.T) {
	var mu sync.Mutex
	var events []string
	h := newHarness(t, func(b *bridge.Bridge) {
		b.OnSession = func(ev bridge.SessionEvent) {
			mu.Lock()
			events = append(events, fmt.Sprintf("%d:%s", ev.Kind, ev.Session))
			mu.Unlock()
		}
	})
	h.initialize()
	sid := h.newSession("1")
	h.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"` + sid + `","prompt":[]}}`)
	req := h.agentRecv()
	h.agentSend(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"` + sid + `","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}}`)
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(req, "id").Raw + `,"result":{"stopReason":"end_turn"}}`)
	h.recv()
	h.recv()
	mu.Lock()
	defer mu.Unlock()
	want := fmt.Sprint([]string{
		fmt.Sprintf("%d:%s", bridge.SessionOpened, sid), fmt.Sprintf("%d:%s", bridge.SessionPrompt, sid),
		fmt.Sprintf("%d:%s", bridge.SessionUpdate, sid), fmt.Sprintf("%d:%s", bridge.SessionTurnEnded, sid),
	})
	if fmt.Sprint(events) != want {
		t.Errorf("events %v, want %v", events, want)
	}
}

// countingReader counts the bytes the engine has read from the editor.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// stuckLink is an agent that answers initialize and then stops reading.
type stuckLink struct {
	*memLink
	unstick chan struct{}
	wrote   atomic.Int64
}

func (s *stuckLink) Write(ctx context.Context, frame []byte) error {
	if s.wrote.Add(1) > 1 {
		select {
		case <-s.unstick:
		case <-s.closed:
			return errors.New("closed")
		}
	}
	return s.memLink.Write(ctx, frame)
}

// An agent that stops reading makes the engine stop reading the editor
// once the agent's queue is over its bound, instead of growing without end.
func TestBoundedQueue_AgentNotReading(t *testing.T) {
	before := countGoroutines()
	t.Cleanup(func() { checkGoroutines(t, before) })
	const bound = 64 << 10
	agent := &stuckLink{memLink: newMemLink(), unstick: make(chan struct{})}
	inR, inW := io.Pipe()
	in := &countingReader{r: inR}
	outR, outW := io.Pipe()
	newTr, _ := acp.Dialect.Configure(nil)
	b := &bridge.Bridge{
		Dialect:       acp.Dialect,
		NewTranslator: newTr,
		QueueBytes:    bound,
		Dial:          func(context.Context, bridge.Spawn) (bridge.Link, error) { return agent, nil },
	}
	served := make(chan error, 1)
	go func() { served <- b.Serve(context.Background(), in, outW); outW.Close() }()
	out := bufio.NewReader(outR)
	io.WriteString(inW, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`+"\n")
	req := <-agent.toAgent
	agent.fromAgent <- []byte(`{"jsonrpc":"2.0","id":` + gjson.GetBytes(req, "id").Raw + `,"result":{"protocolVersion":1}}`)
	if _, err := out.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	payload := strings.Repeat("x", 4<<10)
	const n = 200 // 800 KiB, far over the bound
	writing := make(chan struct{})
	go func() {
		defer close(writing)
		for i := range n {
			if _, err := fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":%d,"method":"_x/big","params":{"p":"%s"}}`+"\n", i+1, payload); err != nil {
				return
			}
		}
	}()
	// Wait until the engine stops taking input.
	var last int64 = -1
	for stable := 0; stable < 5; {
		time.Sleep(20 * time.Millisecond)
		if cur := in.n.Load(); cur == last {
			stable++
		} else {
			last, stable = cur, 0
		}
	}
	// What the engine read: the queue's bound, plus a message over it, plus
	// the reader's 64 KiB buffer and one line in flight.
	if max := int64(bound + 4<<10 + 64<<10 + 2*(4<<10+100)); last > max {
		t.Errorf("engine read %d bytes from the editor while the agent was stuck, want at most %d", last, max)
	}
	select {
	case <-writing:
		t.Fatal("the editor could write everything: no backpressure")
	default:
	}
	// Unstick the agent: everything flows.
	close(agent.unstick)
	go func() {
		for {
			select {
			case <-agent.toAgent:
			case <-agent.closed:
				return
			}
		}
	}()
	<-writing
	inW.Close()
	go io.Copy(io.Discard, out)
	if err := <-served; err != nil {
		t.Errorf("Serve = %v", err)
	}
	agent.Close()
}

// End of input ends the bridge within 3 s even while the editor has
// stopped reading stdout and the agent floods it.
func TestShutdown_StdinEOFWithStalledEditor(t *testing.T) {
	t.Run("line then flood", func(t *testing.T) { stdinEOFWithStalledEditor(t, true) })
	// The loop is stuck writing to the stalled editor before the line
	// comes: the reader must still see the end of the input behind it.
	t.Run("flood then line", func(t *testing.T) { stdinEOFWithStalledEditor(t, false) })
}

func stdinEOFWithStalledEditor(t *testing.T, lineFirst bool) {
	before := countGoroutines()
	t.Cleanup(func() { checkGoroutines(t, before) })
	inR, inW := io.Pipe()
	outR, outW := io.Pipe() // nobody reads outR after the handshake
	defer outR.Close()
	newTr, _ := acp.Dialect.Configure(nil)
	agent := newMemLink()
	b := &bridge.Bridge{
		Dialect:       acp.Dialect,
		NewTranslator: newTr,
		QueueBytes:    64 << 10,
		Dial:          func(context.Context, bridge.Spawn) (bridge.Link, error) { return agent, nil },
	}
	served := make(chan error, 1)
	go func() { served <- b.Serve(context.Background(), inR, outW) }()
	out := bufio.NewReader(outR)
	io.WriteString(inW, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`+"\n")
	req := <-agent.toAgent
	agent.fromAgent <- []byte(`{"jsonrpc":"2.0","id":` + gjson.GetBytes(req, "id").Raw + `,"result":{"protocolVersion":1}}`)
	if _, err := out.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	flooding := make(chan struct{})
	go func() {
		defer close(flooding)
		for i := 0; ; i++ {
			select {
			case agent.fromAgent <- fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"%d"}}}}`, i):
			case <-agent.closed:
				return
			}
		}
	}()
	pending := func() { fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":1,"method":"_x/pending","params":{}}`+"\n") }
	if lineFirst {
		pending()
	}
	time.Sleep(200 * time.Millisecond) // let the flood fill every queue
	if !lineFirst {
		pending()
	}
	start := time.Now()
	inW.Close()
	select {
	case <-served:
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after stdin closed: a stalled editor kept the bridge alive")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("shutdown took %v, want under 3 s", d)
	}
	<-flooding
}

// A request that is valid but for bytes that are not UTF-8 is answered
// -32700 under its own id, not null, so the editor's call does not hang.
func TestInvalidUTF8_AnsweredUnderItsID(t *testing.T) {
	h := newHarness(t, nil)
	h.send("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"_x\",\"params\":{\"text\":\"caf\xc3\"}}")
	if got := h.recv(); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":7,"error":{"code":-32700`) || !strings.Contains(got, "UTF-8") {
		t.Errorf("got %s", got)
	}
	// Bad bytes in the id itself: the id cannot be trusted.
	h.send("{\"jsonrpc\":\"2.0\",\"id\":\"a\xff\",\"method\":\"_x\"}")
	if got := h.recv(); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700`) {
		t.Errorf("got %s", got)
	}
}

// An agent whose initialize answer shows it speaks another dialect is named
// the dialect that fits, in the error's message.
func TestInitialize_WrongDialectNamed(t *testing.T) {
	for _, tc := range []struct{ answer, want string }{
		{`{"protocolVersion":"0.0.9","isAuthenticated":true}`, "use --dialect acp-v0"},
		{`{"agentCapabilities":{}}`, "pick its dialect with --dialect"},
	} {
		h := newHarness(t, nil)
		h.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
		req := h.agentRecv()
		h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(req, "id").Raw + `,"result":` + tc.answer + `}`)
		got := h.recv()
		if msg := gjson.Get(got, "error.message").Str; !strings.Contains(msg, tc.want) {
			t.Errorf("agent answering %s: initialize answered %s, want a message with %q", tc.answer, got, tc.want)
		}
		h.close()
	}
}

// An agent that forbids a repeated initialize (an ACP v2 agent behind the
// version negotiator, a server that allows one per connection) refuses the
// editor's: the editor gets the first answer again, never the refusal, and
// the connection goes on.
func TestInitialize_RepeatedRefusedByTheAgentIsAnswered(t *testing.T) {
	h := newHarness(t, nil)
	h.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
	req := h.agentRecv()
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(req, "id").Raw + `,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true},"agentInfo":{"name":"fake-agent"}}}`)
	first := h.recv()
	h.send(`{"jsonrpc":"2.0","id":"again","method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
	req = h.agentRecv()
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(req, "id").Raw + `,"error":{"code":-32600,"message":"initialize must not be repeated"}}`)
	got := h.recv()
	if gjson.Get(got, "id").Raw != `"again"` || gjson.Get(got, "error").Exists() || gjson.Get(got, "result").Raw != gjson.Get(first, "result").Raw {
		t.Errorf("a repeated initialize the agent refused was answered %s; want the first answer %s", got, gjson.Get(first, "result").Raw)
	}
	h.newSession("5") // still serving
}
