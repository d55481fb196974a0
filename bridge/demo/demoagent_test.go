package demo

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/tidwall/gjson"
)

// legacyPeer is the bridge's side of a conversation with the demo agent,
// driven by hand so that every frame can be checked.
type legacyPeer struct {
	t      *testing.T
	ws     *websocket.Conn
	nextID int // the peer's own request ids
	// agentIDs are the ids of the agent's requests, in order.
	agentIDs []int64
}

func dialAgent(t *testing.T, a *Agent) *legacyPeer {
	t.Helper()
	srv := httptest.NewServer(a)
	t.Cleanup(func() {
		a.Close()
		srv.Close()
	})
	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	ws, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatalf("dialing the demo agent: %v", err)
	}
	t.Cleanup(func() { ws.Close() })
	return &legacyPeer{t: t, ws: ws, nextID: 100}
}

// send writes one frame.
func (p *legacyPeer) send(frame string) {
	p.t.Helper()
	if err := p.ws.WriteMessage(websocket.TextMessage, []byte(frame)); err != nil {
		p.t.Fatalf("writing %s: %v", frame, err)
	}
}

// request sends a request with the next id and returns that id.
func (p *legacyPeer) request(method, params string) int {
	p.t.Helper()
	id := p.nextID
	p.nextID++
	frame := `{"jsonrpc":"2.0","id":` + itoa(id) + `,"method":"` + method + `"`
	if params != "" {
		frame += `,"params":` + params
	}
	p.send(frame + "}")
	return id
}

// read returns the next frame, checking that it is a JSON-RPC 2.0 message
// and, for the agent's requests, that their ids count up from 0.
func (p *legacyPeer) read() gjson.Result {
	p.t.Helper()
	p.ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	typ, frame, err := p.ws.ReadMessage()
	if err != nil {
		p.t.Fatalf("reading from the demo agent: %v", err)
	}
	if typ != websocket.TextMessage {
		p.t.Fatalf("frame type = %d, want a text frame", typ)
	}
	if !json.Valid(frame) {
		p.t.Fatalf("frame %q is not JSON (the agent must send no banner)", frame)
	}
	r := gjson.ParseBytes(frame)
	if v := r.Get("jsonrpc").Str; v != "2.0" {
		p.t.Fatalf("frame %s: jsonrpc = %q, want 2.0", frame, v)
	}
	if r.Get("method").Exists() {
		// Every agent message is a request with an id (legacy-formats.md §1.2).
		id := r.Get("id")
		if id.Type != gjson.Number {
			p.t.Fatalf("agent request %s has no numeric id", frame)
		}
		if want := int64(len(p.agentIDs)); id.Int() != want {
			p.t.Fatalf("agent request %s: id = %d, want %d (ids count from 0)", frame, id.Int(), want)
		}
		p.agentIDs = append(p.agentIDs, id.Int())
	}
	return r
}

// answerNull answers an agent request with a null result, as the legacy
// protocol's void methods are answered.
func (p *legacyPeer) answerNull(r gjson.Result) {
	p.t.Helper()
	p.send(`{"jsonrpc":"2.0","id":` + r.Get("id").Raw + `,"result":null}`)
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func TestAgent_InitializeAndFilesTurn(t *testing.T) {
	var mu sync.Mutex
	var tapped []string
	a := &Agent{Tap: func(dir Direction, frame []byte) {
		mu.Lock()
		defer mu.Unlock()
		prefix := "in "
		if dir == FromAgent {
			prefix = "out "
		}
		tapped = append(tapped, prefix+string(frame))
	}}
	p := dialAgent(t, a)

	id := p.request("initialize", `{"protocolVersion":"0.0.9"}`)
	r := p.read()
	if got, want := r.Raw, `{"jsonrpc":"2.0","id":`+itoa(id)+`,"result":{"protocolVersion":"0.0.9","isAuthenticated":true}}`; got != want {
		t.Fatalf("initialize answer = %s, want %s", got, want)
	}

	id = p.request("authenticate", "")
	if r := p.read(); r.Raw != `{"jsonrpc":"2.0","id":`+itoa(id)+`,"result":null}` {
		t.Fatalf("authenticate answer = %s, want a null result", r.Raw)
	}

	turn := p.request("sendUserMessage", `{"chunks":[{"text":"list the files"}]}`)
	var kinds []string
	var toolCallID int64 = 7 // the bridge chooses tool-call ids (legacy-formats.md §1.5)
	for {
		r := p.read()
		if !r.Get("method").Exists() {
			if r.Get("id").Int() != int64(turn) {
				t.Fatalf("answer %s: want the answer to sendUserMessage id %d", r.Raw, turn)
			}
			if res := r.Get("result"); !res.Exists() || res.Type != gjson.Null {
				t.Fatalf("sendUserMessage answer = %s, want a null result (the end of the turn)", r.Raw)
			}
			break
		}
		method := r.Get("method").Str
		switch method {
		case "streamAssistantMessageChunk":
			c := r.Get("params.chunk")
			switch {
			case c.Get("thought").Exists():
				kinds = append(kinds, "thought")
			case c.Get("text").Exists():
				kinds = append(kinds, "text")
			default:
				t.Fatalf("chunk %s has neither text nor thought", r.Raw)
			}
			p.answerNull(r)
		case "requestToolCallConfirmation":
			kinds = append(kinds, method)
			params := r.Get("params")
			if params.Get("icon").Str != "terminal" || params.Get("confirmation.type").Str != "execute" ||
				params.Get("confirmation.command").Str != "ls -la" || params.Get("confirmation.rootCommand").Str != "ls" {
				t.Fatalf("confirmation request %s: want an execute confirmation of `ls -la` with icon terminal", r.Raw)
			}
			p.send(`{"jsonrpc":"2.0","id":` + r.Get("id").Raw + `,"result":{"id":7,"outcome":"allow"}}`)
		case "updateToolCall":
			kinds = append(kinds, method)
			params := r.Get("params")
			if params.Get("toolCallId").Int() != toolCallID || params.Get("status").Str != "finished" ||
				params.Get("content.type").Str != "markdown" || !strings.Contains(params.Get("content.markdown").Str, "README.md") {
				t.Fatalf("tool update %s: want tool call 7 finished with the markdown listing", r.Raw)
			}
			p.answerNull(r)
		default:
			t.Fatalf("unexpected agent request %s", r.Raw)
		}
	}
	got := strings.Join(kinds, ",")
	want := "thought,text,text,text,text,requestToolCallConfirmation,updateToolCall,thought,text,text,text"
	if got != want {
		t.Errorf("turn = %s, want %s", got, want)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(tapped) == 0 || !strings.HasPrefix(tapped[0], `in {"jsonrpc":"2.0","id":100,"method":"initialize"`) {
		t.Errorf("first tapped frame = %.80q, want the received initialize", tapped[0])
	}
	if len(tapped) < 2 || !strings.HasPrefix(tapped[1], `out {"jsonrpc":"2.0","id":100,"result"`) {
		t.Errorf("second tapped frame = %.80q, want the sent initialize answer", tapped[1])
	}
}

func TestAgent_CancelMidTurn(t *testing.T) {
	p := dialAgent(t, &Agent{})

	// Nothing running: Gemini's captured error (legacy-formats.md §1.4).
	id := p.request("cancelSendMessage", "")
	want := `{"jsonrpc":"2.0","id":` + itoa(id) + `,"error":{"code":-32603,"message":"Internal error","data":{"details":"Not currently generating"}}}`
	if r := p.read(); r.Raw != want {
		t.Fatalf("idle cancel answer = %s, want %s", r.Raw, want)
	}

	turn := p.request("sendUserMessage", `{"chunks":[{"text":"count slowly to 20"}]}`)
	for i := 0; i < 3; i++ {
		r := p.read()
		if r.Get("method").Str != "streamAssistantMessageChunk" {
			t.Fatalf("frame %d = %s, want a streamed chunk", i, r.Raw)
		}
		p.answerNull(r)
	}
	cancel := p.request("cancelSendMessage", "")
	// Chunks already in flight may come first; then the cancel's null and
	// the captured abort error on the pending sendUserMessage, in that order.
	var answers []string
	for len(answers) < 2 {
		r := p.read()
		if r.Get("method").Exists() {
			if len(answers) > 0 {
				t.Fatalf("agent request %s after answering the cancel", r.Raw)
			}
			p.answerNull(r)
			continue
		}
		answers = append(answers, r.Raw)
	}
	wantCancel := `{"jsonrpc":"2.0","id":` + itoa(cancel) + `,"result":null}`
	wantAbort := `{"jsonrpc":"2.0","id":` + itoa(turn) + `,"error":{"code":-32603,"message":"Internal error","data":{"details":"This operation was aborted"}}}`
	if answers[0] != wantCancel || answers[1] != wantAbort {
		t.Fatalf("answers after the cancel =\n%s\n%s\nwant\n%s\n%s", answers[0], answers[1], wantCancel, wantAbort)
	}
	if n := len(p.agentIDs); n >= slowCount {
		t.Errorf("agent sent %d chunks: the cancel did not stop the turn", n)
	}

	// The conversation goes on: a new turn works after the cancel.
	id = p.request("cancelSendMessage", "")
	if r := p.read(); !strings.Contains(r.Raw, "Not currently generating") || r.Get("id").Int() != int64(id) {
		t.Fatalf("cancel after the aborted turn = %s, want the not-generating error", r.Raw)
	}
}

func TestAgent_RejectSendsNoToolUpdate(t *testing.T) {
	p := dialAgent(t, &Agent{})
	turn := p.request("sendUserMessage", `{"chunks":[{"text":"list the files"}]}`)
	var methods []string
	for {
		r := p.read()
		if !r.Get("method").Exists() {
			if r.Get("id").Int() != int64(turn) || r.Get("result").Type != gjson.Null || !r.Get("result").Exists() {
				t.Fatalf("turn answer = %s, want a null result", r.Raw)
			}
			break
		}
		methods = append(methods, r.Get("method").Str)
		if r.Get("method").Str == "requestToolCallConfirmation" {
			p.send(`{"jsonrpc":"2.0","id":` + r.Get("id").Raw + `,"result":{"id":1,"outcome":"reject"}}`)
			continue
		}
		p.answerNull(r)
	}
	// Like Gemini after a rejection: no updateToolCall at all
	// (legacy-formats.md §1.4, "Rejection").
	for _, m := range methods {
		if m == "updateToolCall" {
			t.Fatalf("agent sent updateToolCall after a rejection: %v", methods)
		}
	}
	if methods[len(methods)-1] != "streamAssistantMessageChunk" {
		t.Errorf("turn = %v, want it to end with a text chunk", methods)
	}
}

func TestAgent_UnknownMethodAndNewTurnAbortsOld(t *testing.T) {
	p := dialAgent(t, &Agent{})
	id := p.request("session/new", `{}`)
	if r := p.read(); r.Get("id").Int() != int64(id) || r.Get("error.code").Int() != -32601 {
		t.Fatalf("unknown method answer = %s, want -32601", r.Raw)
	}

	first := p.request("sendUserMessage", `{"chunks":[{"text":"count slowly"}]}`)
	if r := p.read(); r.Get("method").Str != "streamAssistantMessageChunk" {
		t.Fatalf("frame = %s, want a chunk", r.Raw)
	}
	second := p.request("sendUserMessage", `{"chunks":[{"text":"slow again"}]}`)
	// Gemini silently aborts the running turn (legacy-formats.md §1.4): the
	// first message fails with the abort error, then the second streams.
	for {
		r := p.read()
		if r.Get("method").Exists() {
			p.answerNull(r)
			continue
		}
		if r.Get("id").Int() != int64(first) || r.Get("error.data.details").Str != "This operation was aborted" {
			t.Fatalf("answer = %s, want the abort error for sendUserMessage %d", r.Raw, first)
		}
		break
	}
	cancel := p.request("cancelSendMessage", "")
	var ids []int64
	for len(ids) < 2 {
		r := p.read()
		if r.Get("method").Exists() {
			p.answerNull(r)
			continue
		}
		ids = append(ids, r.Get("id").Int())
	}
	if ids[0] != int64(cancel) || ids[1] != int64(second) {
		t.Fatalf("answer ids = %v, want [%d %d]", ids, cancel, second)
	}
}

func TestAgent_CloseEndsConversations(t *testing.T) {
	a := &Agent{}
	p := dialAgent(t, a)
	p.request("sendUserMessage", `{"chunks":[{"text":"count slowly"}]}`)
	p.read()
	done := make(chan struct{})
	go func() {
		a.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return with a conversation running")
	}
	p.ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		if _, _, err := p.ws.ReadMessage(); err != nil {
			if ne, ok := err.(interface{ Timeout() bool }); ok && ne.Timeout() {
				t.Fatal("connection still open after Close")
			}
			break
		}
	}
}
