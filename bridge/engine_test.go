package bridge_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/translate/acp"
	"github.com/tidwall/gjson"
)

// memLink is an in-memory agent link: the test plays the agent through
// toAgent (frames the bridge wrote) and fromAgent (frames it will read).
type memLink struct {
	toAgent   chan []byte
	fromAgent chan []byte
	closed    chan struct{}
	once      sync.Once
	readErr   error
}

func newMemLink() *memLink {
	return &memLink{toAgent: make(chan []byte, 4096), fromAgent: make(chan []byte, 4096), closed: make(chan struct{})}
}

func (m *memLink) Read(ctx context.Context) ([]byte, error) {
	select {
	case f := <-m.fromAgent:
		return f, nil
	case <-m.closed:
		if m.readErr != nil {
			return nil, m.readErr
		}
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (m *memLink) Write(ctx context.Context, frame []byte) error {
	select {
	case m.toAgent <- frame:
		return nil
	case <-m.closed:
		return errors.New("closed")
	}
}

func (m *memLink) Close() error {
	m.once.Do(func() { close(m.closed) })
	return nil
}

// die simulates the agent dropping the connection.
func (m *memLink) die(err error) {
	m.readErr = err
	m.Close()
}

// harness runs a Bridge over pipes with the acp relay and memLinks.
type harness struct {
	bridge  *bridge.Bridge // as configured, before Serve
	t       *testing.T
	in      *io.PipeWriter
	out     *bufio.Reader
	links   chan *memLink
	served  chan error
	cancel  context.CancelFunc
	current *memLink
	drain   io.Reader // the editor's output, drained when the test ends
	closed  bool
}

func newLineReader(r io.Reader) *bufio.Reader { return bufio.NewReader(r) }

func countGoroutines() int { return runtime.NumGoroutine() }

// close ends the editor's input and waits for Serve to return nil. Only the
// first call does anything.
func (h *harness) close() {
	h.t.Helper()
	if h.closed {
		return
	}
	h.closed = true
	h.in.Close()
	go io.Copy(io.Discard, h.drain)
	select {
	case err := <-h.served:
		if err != nil {
			h.t.Errorf("Serve = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		h.t.Error("Serve did not return after stdin closed")
	}
}

func newHarness(t *testing.T, configure func(*bridge.Bridge)) *harness {
	t.Helper()
	before := runtime.NumGoroutine()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	h := &harness{t: t, in: inW, out: bufio.NewReader(outR), links: make(chan *memLink, 16), served: make(chan error, 1)}
	newTr, diags := acp.Dialect.Configure(nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	b := &bridge.Bridge{
		Dialect:       acp.Dialect,
		NewTranslator: newTr,
		Dial: func(ctx context.Context, s bridge.Spawn) (bridge.Link, error) {
			l := newMemLink()
			h.links <- l
			return l, nil
		},
		AgentName:   "fake",
		Version:     "test",
		CancelGrace: 200 * time.Millisecond,
	}
	if configure != nil {
		configure(b)
	}
	h.bridge = b
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() {
		h.served <- b.Serve(ctx, inR, outW)
		outW.Close()
	}()
	h.drain = outR
	t.Cleanup(func() {
		h.close()
		cancel()
		checkGoroutines(t, before)
	})
	return h
}

func checkGoroutines(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for runtime.NumGoroutine() > before+1 { // +1: the pipe drain in Cleanup
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			t.Errorf("goroutines leaked: %d before, %d after\n%s", before, runtime.NumGoroutine(), buf[:n])
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (h *harness) send(line string) {
	h.t.Helper()
	if _, err := io.WriteString(h.in, line+"\n"); err != nil {
		h.t.Fatalf("writing to the bridge: %v", err)
	}
}

// recv returns the next line the bridge writes to the editor.
func (h *harness) recv() string {
	h.t.Helper()
	type result struct {
		s   string
		err error
	}
	ch := make(chan result, 1)
	go func() {
		s, err := h.out.ReadString('\n')
		ch <- result{s, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			h.t.Fatalf("reading from the bridge: %v", r.err)
		}
		return strings.TrimSuffix(r.s, "\n")
	case <-time.After(5 * time.Second):
		h.t.Fatal("timed out waiting for the bridge to write to the editor")
	}
	return ""
}

// agent returns the link dialed most recently (waiting for it).
func (h *harness) agent() *memLink {
	h.t.Helper()
	select {
	case l := <-h.links:
		h.current = l
	default:
		if h.current == nil {
			select {
			case l := <-h.links:
				h.current = l
			case <-time.After(5 * time.Second):
				h.t.Fatal("no agent link dialed")
			}
		}
	}
	return h.current
}

// agentRecv returns the next frame the bridge sent to the agent.
func (h *harness) agentRecv() string {
	h.t.Helper()
	select {
	case f := <-h.agent().toAgent:
		return string(f)
	case <-time.After(5 * time.Second):
		h.t.Fatal("timed out waiting for a frame to the agent")
	}
	return ""
}

func (h *harness) agentSend(frame string) { h.agent().fromAgent <- []byte(frame) }

// initialize performs the handshake and returns the editor's answer.
func (h *harness) initialize() string {
	h.t.Helper()
	h.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true,"writeTextFile":true}}}}`)
	req := h.agentRecv()
	id := gjson.Get(req, "id").Raw
	h.agentSend(`{"jsonrpc":"2.0","id":` + id + `,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true},"agentInfo":{"name":"fake-agent","version":"9"},"_meta":{"x.dev/k":1}}}`)
	return h.recv()
}

func TestInitialize_KeepsAgentInfoAndMeta(t *testing.T) {
	h := newHarness(t, nil)
	got := h.initialize()
	for path, want := range map[string]string{
		"id":                                   "0",
		"result.protocolVersion":               "1",
		"result.agentInfo.name":                `"fake-agent"`,
		"result.agentCapabilities.loadSession": "true",
		"result._meta.x\\.dev/k":               "1",
		"result._meta.acp-bridge.name":         `"acp-bridge"`,
		"result._meta.acp-bridge.dialect":      `"acp"`,
		"result._meta.acp-bridge.agent":        `"fake"`,
		"result.authMethods":                   "[]",
	} {
		if r := gjson.Get(got, path).Raw; r != want {
			t.Errorf("%s = %s, want %s\nline: %s", path, r, want, got)
		}
	}
}

func TestInitialize_AsksAgentForV1(t *testing.T) {
	h := newHarness(t, nil)
	h.send(`{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":2,"_meta":{"keep":true}}}`)
	req := h.agentRecv()
	if v := gjson.Get(req, "params.protocolVersion").Raw; v != "1" {
		t.Errorf("agent asked for version %s, want 1: %s", v, req)
	}
	if !gjson.Get(req, "params._meta.keep").Bool() {
		t.Errorf("_meta lost on the way to the agent: %s", req)
	}
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(req, "id").Raw + `,"result":{"protocolVersion":2}}`)
	got := h.recv()
	if gjson.Get(got, "error.code").Int() != -32603 || gjson.Get(got, "id").Raw != `"i"` {
		t.Errorf("agent answering v2 should fail initialize with -32603, got %s", got)
	}
}

func TestEditorIDsComeBackExactly(t *testing.T) {
	h := newHarness(t, nil)
	h.initialize()
	for _, id := range []string{`0`, `"abc"`, `-5`, `9007199254740993`, `"0"`, `1.5`} {
		h.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"_x/echo","params":{"a":[1,2,{"_meta":null}]}}`)
		req := h.agentRecv()
		if p := gjson.Get(req, "params").Raw; p != `{"a":[1,2,{"_meta":null}]}` {
			t.Errorf("params changed on the way: %s", p)
		}
		h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(req, "id").Raw + `,"result":{"echo":` + id + `}}`)
		got := h.recv()
		if want := `{"jsonrpc":"2.0","id":` + id + `,"result":{"echo":` + id + `}}`; got != want {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	}
}

func TestErrors(t *testing.T) {
	h := newHarness(t, nil)
	for _, tc := range []struct{ in, want string }{
		{`not json`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700`},
		{`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/"}}`, `{"jsonrpc":"2.0","id":1,"error":{"code":-32600`},
		{`[{"jsonrpc":"2.0","id":1,"method":"initialize"}]`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600`},
		{`{"jsonrpc":"2.0","id":7}`, `{"jsonrpc":"2.0","id":7,"error":{"code":-32600`},
		{`{"jsonrpc":"1.0","id":8,"method":"initialize","params":{"protocolVersion":1}}`, `{"jsonrpc":"2.0","id":8,"error":{"code":-32600`},
		{`{"jsonrpc":"2.0","id":9,"method":"initialize","params":{}}`, `{"jsonrpc":"2.0","id":9,"error":{"code":-32602`},
	} {
		h.send(tc.in)
		if got := h.recv(); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s\n got  %s\n want %s…", tc.in, got, tc.want)
		}
	}
	h.send(`{"jsonrpc":"2.0","method":"no/such_notification"}`)
	h.initialize()
	for _, tc := range []struct{ in, want string }{
		{`{"jsonrpc":"2.0","id":"p","method":"session/prompt","params":{"sessionId":"s"}}`, `{"jsonrpc":"2.0","id":"p","error":{"code":-32602`},
		{`{"jsonrpc":"2.0","id":"c","method":"session/new","params":{"cwd":"relative","mcpServers":[]}}`, `{"jsonrpc":"2.0","id":"c","error":{"code":-32602`},
	} {
		h.send(tc.in)
		if got := h.recv(); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s\n got  %s\n want %s…", tc.in, got, tc.want)
		}
	}
}

// newSession creates a session and returns its id.
func (h *harness) newSession(editorID string) string {
	h.t.Helper()
	h.send(`{"jsonrpc":"2.0","id":` + editorID + `,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	req := h.agentRecv()
	sid := fmt.Sprintf("s-%s", gjson.Get(req, "id").Raw)
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(req, "id").Raw + `,"result":{"sessionId":"` + sid + `"}}`)
	if got := h.recv(); gjson.Get(got, "result.sessionId").Str != sid {
		h.t.Fatalf("session/new answer = %s", got)
	}
	return sid
}

func TestPrompt_UpdatesBeforeResponseInOrder(t *testing.T) {
	h := newHarness(t, nil)
	h.initialize()
	sid := h.newSession("1")
	h.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"` + sid + `","prompt":[{"type":"text","text":"hi"}]}}`)
	req := h.agentRecv()
	const n = 500
	for i := range n {
		h.agentSend(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"%s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"%d"}}}}`, sid, i))
	}
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(req, "id").Raw + `,"result":{"stopReason":"end_turn"}}`)
	for i := range n {
		got := h.recv()
		if txt := gjson.Get(got, "params.update.content.text").Str; txt != fmt.Sprint(i) {
			t.Fatalf("update %d = %s", i, got)
		}
	}
	if got := h.recv(); got != `{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}` {
		t.Errorf("prompt answer = %s", got)
	}
}

func TestAgentRequest_RoundTripWithOwnIDs(t *testing.T) {
	h := newHarness(t, nil)
	h.initialize()
	sid := h.newSession("1")
	h.agentSend(`{"jsonrpc":"2.0","id":"perm-0","method":"session/request_permission","params":{"sessionId":"` + sid + `","toolCall":{"toolCallId":"t"},"options":[]}}`)
	call := h.recv()
	editorSideID := gjson.Get(call, "id").Raw
	if editorSideID == `"perm-0"` {
		t.Errorf("agent's id leaked to the editor hop: %s", call)
	}
	h.send(`{"jsonrpc":"2.0","id":` + editorSideID + `,"result":{"outcome":{"outcome":"cancelled"}}}`)
	if got := h.agentRecv(); got != `{"jsonrpc":"2.0","id":"perm-0","result":{"outcome":{"outcome":"cancelled"}}}` {
		t.Errorf("agent got %s", got)
	}
}

func TestCancelRequest_TranslatedPerHop(t *testing.T) {
	h := newHarness(t, nil)
	h.initialize()
	h.send(`{"jsonrpc":"2.0","id":"slow","method":"_x/slow","params":{}}`)
	req := h.agentRecv()
	h.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"slow"}}`)
	got := h.agentRecv()
	if want := `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":` + gjson.Get(req, "id").Raw + `}}`; got != want {
		t.Errorf("agent got %s, want %s", got, want)
	}
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(req, "id").Raw + `,"error":{"code":-32800,"message":"Request cancelled"}}`)
	if got := h.recv(); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":"slow","error":{"code":-32800`) {
		t.Errorf("editor got %s", got)
	}
}

func TestCancelGrace_BridgeAnswersCancelledAndDropsLateUpdates(t *testing.T) {
	h := newHarness(t, nil)
	h.initialize()
	sid := h.newSession("1")
	h.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"` + sid + `","prompt":[]}}`)
	req := h.agentRecv()
	// The engine starts the grace when it forwards the cancel, after it
	// is sent here: measured from here, the answer can come no sooner.
	start := time.Now()
	h.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"` + sid + `"}}`)
	if got := h.agentRecv(); gjson.Get(got, "method").Str != "session/cancel" {
		t.Fatalf("agent got %s", got)
	}
	if got := h.recv(); got != `{"jsonrpc":"2.0","id":2,"result":{"stopReason":"cancelled"}}` {
		t.Fatalf("editor got %s", got)
	}
	if d, grace := time.Since(start), h.bridge.CancelGrace; d < grace {
		t.Errorf("answered %v after the cancel was sent, before the %v grace period", d, grace)
	}
	if got := h.agentRecv(); gjson.Get(got, "method").Str != "$/cancel_request" {
		t.Errorf("agent should be told to drop the abandoned prompt, got %s", got)
	}
	// Late update and late answer are dropped; the next turn flows normally.
	h.agentSend(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"` + sid + `","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"late"}}}}`)
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(req, "id").Raw + `,"result":{"stopReason":"end_turn"}}`)
	h.agentSend(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"` + sid + `","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"fresh"}}}}`)
	if got := h.recv(); gjson.Get(got, "params.update.content.text").Str != "fresh" {
		t.Errorf("editor got %s, want the fresh update only", got)
	}
}

func TestLinkLost_AnswersEveryPendingRequest(t *testing.T) {
	h := newHarness(t, nil)
	h.initialize()
	sid := h.newSession("1")
	h.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"` + sid + `","prompt":[]}}`)
	h.send(`{"jsonrpc":"2.0","id":3,"method":"_x/slow","params":{}}`)
	h.agentRecv()
	h.agentRecv()
	h.agentSend(`{"jsonrpc":"2.0","id":"p","method":"session/request_permission","params":{"sessionId":"` + sid + `","toolCall":{"toolCallId":"t"},"options":[]}}`)
	call := h.recv()
	h.agent().die(errors.New("agent process exited: exit status 3"))
	got := map[string]string{}
	for range 3 {
		line := h.recv()
		if gjson.Get(line, "method").Str == "$/cancel_request" {
			got["cancel"] = gjson.Get(line, "params.requestId").Raw
			continue
		}
		got[gjson.Get(line, "id").Raw] = line
	}
	for _, id := range []string{"2", "3"} {
		if gjson.Get(got[id], "error.code").Int() != -32603 || !strings.Contains(got[id], "exit status 3") {
			t.Errorf("request %s answered %q, want -32603 naming the cause", id, got[id])
		}
	}
	if got["cancel"] != gjson.Get(call, "id").Raw {
		t.Errorf("editor not told to drop the agent's permission request: %v", got)
	}
	h.send(`{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":"` + sid + `","prompt":[]}}`)
	if line := h.recv(); gjson.Get(line, "error.code").Int() != -32603 {
		t.Errorf("request after the link was lost: %s", line)
	}
}

func TestRequestTimeout(t *testing.T) {
	h := newHarness(t, func(b *bridge.Bridge) { b.RequestTimeout = 100 * time.Millisecond })
	h.initialize()
	h.send(`{"jsonrpc":"2.0","id":5,"method":"session/list","params":{}}`)
	h.agentRecv()
	if got := h.recv(); gjson.Get(got, "error.code").Int() != -32603 || gjson.Get(got, "id").Raw != "5" {
		t.Errorf("editor got %s", got)
	}
}

func TestNotificationsNeverAnswered(t *testing.T) {
	h := newHarness(t, nil)
	h.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"x"}}`)
	h.send(`{"jsonrpc":"2.0","method":"_unknown/thing"}`)
	h.send(`{"jsonrpc":"2.0","method":"session/cancel","params":"bad"}`)
	h.send(`{"jsonrpc":"2.0","id":1,"method":"_x","params":{}}`)
	if got := h.recv(); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":1,"error"`) {
		t.Errorf("first line written = %s, want the answer to id 1 only", got)
	}
}

func TestTooLongLine_AnsweredAndServingContinues(t *testing.T) {
	h := newHarness(t, func(b *bridge.Bridge) { b.MaxMessage = 1024 })
	h.send(`{"jsonrpc":"2.0","id":42,"method":"session/prompt","params":{"x":"` + strings.Repeat("a", 4096) + `"}}`)
	if got := h.recv(); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":42,"error":{"code":-32600`) {
		t.Errorf("got %s", got)
	}
	h.initialize()
}

func TestInitialize_RetryAfterAgentUnreachable(t *testing.T) {
	h := newHarness(t, nil)
	h.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	h.agentRecv()
	h.agent().die(errors.New("connection refused"))
	if got := h.recv(); gjson.Get(got, "error.code").Int() != -32603 || !strings.Contains(got, "connection refused") {
		t.Fatalf("initialize answered %s", got)
	}
	h.current = nil // the retry dials a new link
	if got := h.initialize(); gjson.Get(got, "result.protocolVersion").Int() != 1 {
		t.Errorf("retried initialize answered %s", got)
	}
}

func TestInitialize_PipelinedRequestsAreHeldInOrder(t *testing.T) {
	h := newHarness(t, nil)
	h.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	h.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	h.send(`{"jsonrpc":"2.0","id":2,"method":"_x/after","params":{}}`)
	req := h.agentRecv()
	if gjson.Get(req, "method").Str != "initialize" {
		t.Fatalf("agent got %s first", req)
	}
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(req, "id").Raw + `,"result":{"protocolVersion":1}}`)
	if got := h.recv(); gjson.Get(got, "id").Raw != "0" || gjson.Get(got, "error").Exists() {
		t.Fatalf("initialize answered %s", got)
	}
	if got := h.agentRecv(); gjson.Get(got, "method").Str != "session/new" {
		t.Errorf("held session/new not relayed first: %s", got)
	}
	if got := h.agentRecv(); gjson.Get(got, "method").Str != "_x/after" {
		t.Errorf("held request not relayed in order: %s", got)
	}
}

func TestTooLongLine_IDAfterPayloadStillAnswered(t *testing.T) {
	h := newHarness(t, func(b *bridge.Bridge) { b.MaxMessage = 1024 })
	// The id is the last member: it is recovered from the line's end.
	h.send(`{"jsonrpc":"2.0","method":"session/prompt","params":{"x":"` + strings.Repeat("a", 4096) + `"},"id":43}`)
	if got := h.recv(); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":43,"error":{"code":-32600`) {
		t.Errorf("got %s", got)
	}
	// An "id" at the end of a nested object is not the request's.
	h.send(`{"jsonrpc":"2.0","method":"x","params":{"x":"` + strings.Repeat("a", 4096) + `","id":5}}`)
	if got := h.recv(); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600`) {
		t.Errorf("got %s", got)
	}
}

func TestCancelGrace_OnlyTheAbandonedTurnEndsDropping(t *testing.T) {
	h := newHarness(t, func(b *bridge.Bridge) { b.RequestTimeout = 100 * time.Millisecond })
	h.initialize()
	sid := h.newSession("1")
	h.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"` + sid + `","prompt":[]}}`)
	prompt := h.agentRecv()
	h.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"` + sid + `"}}`)
	h.agentRecv() // session/cancel
	if got := h.recv(); got != `{"jsonrpc":"2.0","id":2,"result":{"stopReason":"cancelled"}}` {
		t.Fatalf("editor got %s", got)
	}
	h.agentRecv() // $/cancel_request for the abandoned prompt
	// Another request times out and its late answer arrives: that must
	// not end the dropping of the abandoned turn's updates.
	h.send(`{"jsonrpc":"2.0","id":3,"method":"session/list","params":{}}`)
	list := h.agentRecv()
	if got := h.recv(); gjson.Get(got, "id").Raw != "3" || gjson.Get(got, "error.code").Int() != -32603 {
		t.Fatalf("editor got %s", got)
	}
	h.agentRecv() // $/cancel_request for the timed-out list
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(list, "id").Raw + `,"result":{"sessions":[]}}`)
	update := func(text string) {
		h.agentSend(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"` + sid + `","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + text + `"}}}}`)
	}
	update("late")
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(prompt, "id").Raw + `,"result":{"stopReason":"cancelled"}}`)
	update("fresh")
	if got := h.recv(); gjson.Get(got, "params.update.content.text").Str != "fresh" {
		t.Errorf("editor got %s, want only the update after the turn ended", got)
	}
}

func TestCancelGrace_SessionTheEngineDidNotSeeCreated(t *testing.T) {
	h := newHarness(t, nil)
	h.initialize()
	h.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"forked-1","prompt":[]}}`)
	h.agentRecv()
	h.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"forked-1"}}`)
	h.agentRecv()
	if got := h.recv(); got != `{"jsonrpc":"2.0","id":2,"result":{"stopReason":"cancelled"}}` {
		t.Errorf("editor got %s", got)
	}
}

func TestShutdown_EditorNotReadingDoesNotHang(t *testing.T) {
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
		Dial:          func(context.Context, bridge.Spawn) (bridge.Link, error) { return agent, nil },
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- b.Serve(ctx, inR, outW) }()
	out := bufio.NewReader(outR)
	io.WriteString(inW, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`+"\n")
	req := <-agent.toAgent
	agent.fromAgent <- []byte(`{"jsonrpc":"2.0","id":` + gjson.GetBytes(req, "id").Raw + `,"result":{"protocolVersion":1}}`)
	if _, err := out.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	// The agent floods updates the editor never reads, then requests pile up.
	for i := range 2000 {
		agent.fromAgent <- fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"%d"}}}}`, i)
	}
	go func() {
		for i := range 50 {
			fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":%d,"method":"_x","params":{}}`+"\n", i+1)
		}
	}()
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	cancel()
	select {
	case err := <-served:
		if err == nil {
			t.Errorf("Serve = nil, want an error saying the editor stopped reading")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return: a stalled editor kept the bridge alive")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("shutdown took %v, want under 3 s", d)
	}
	inW.Close()
}
