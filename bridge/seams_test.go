package bridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/acp-bridge/acp-bridge/translate/acp"
	"github.com/hashicorp/hcl/v2"
	"github.com/tidwall/gjson"
)

// quiet is a toy per-session dialect for the engine's seams: it answers
// initialize itself (no control link), builds its agent's command line from
// session/new, and ends a turn after 2 s without a frame from the agent (a
// silence rule, with time only as data: Timer outputs and Msg.At).
type quiet struct {
	sid     string
	prompt  translate.Ref
	last    time.Time // when the agent last spoke in this turn
	events  *[]string
	eventMu *sync.Mutex
}

const silence = 2 * time.Second

func (q *quiet) note(s string) {
	q.eventMu.Lock()
	*q.events = append(*q.events, s)
	q.eventMu.Unlock()
}

func (q *quiet) BuildSpawn(m translate.Msg) (translate.Spawn, error) {
	model := gjson.GetBytes(m.Body, "_meta.model").Str
	if model == "" {
		return translate.Spawn{}, fmt.Errorf("no model in _meta")
	}
	return translate.Spawn{Argv: []string{"--model", model, "--session-id", m.Session}, Append: true}, nil
}

func (q *quiet) FromEditor(m translate.Msg) ([]translate.Out, error) {
	switch m.Kind {
	case translate.LinkUp:
		q.note("link-up")
		return nil, nil
	case translate.LinkDown:
		q.note("link-down")
		return nil, nil
	case translate.Tick:
		if q.prompt == 0 || m.At.Sub(q.last) < silence {
			return nil, nil
		}
		ref := q.prompt
		q.prompt = 0
		return []translate.Out{{Kind: translate.Reply, Ref: ref, Body: json.RawMessage(`{"stopReason":"end_turn"}`)}}, nil
	}
	switch m.Method {
	case "initialize":
		return []translate.Out{{Kind: translate.Reply, Ref: m.Ref, Body: json.RawMessage(`{"protocolVersion":1,"agentInfo":{"name":"quiet"}}`)}}, nil
	case "session/new":
		q.sid = m.Session
		return []translate.Out{
			{Kind: translate.Frame, Body: json.RawMessage(`{"hello":true}`)},
			{Kind: translate.Reply, Ref: m.Ref, Body: json.RawMessage(`{"sessionId":"` + m.Session + `"}`)},
		}, nil
	case "session/prompt":
		q.prompt, q.last = m.Ref, m.At
		return []translate.Out{
			{Kind: translate.Frame, Body: json.RawMessage(`{"say":"go"}`)},
			{Kind: translate.Timer, Delay: silence},
		}, nil
	}
	if m.Kind == translate.Request {
		return []translate.Out{{Kind: translate.Fail, Ref: m.Ref, Body: translate.Errorf(translate.CodeMethodNotFound, "quiet has no %s", m.Method).JSON()}}, nil
	}
	return nil, nil
}

func (q *quiet) FromAgent(f []byte) ([]translate.Out, error) {
	return nil, fmt.Errorf("the engine must call FromAgentAt")
}

func (q *quiet) FromAgentAt(f []byte, at time.Time) ([]translate.Out, error) {
	// The agent's words arrive as plain text; each restarts the silence.
	q.last = at
	text := gjson.GetBytes(f, "text").Str
	return []translate.Out{
		{Kind: translate.Forward, Method: "session/update", Session: q.sid, Body: json.RawMessage(
			`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"` + q.sid + `","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + text + `"}}}}`)},
		{Kind: translate.Timer, Delay: silence},
	}, nil
}

func TestSeams_NoControlLinkSpawnBuilderTimerForward(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var events []string
		var spawns []bridge.Spawn
		dials := make(chan *memLink, 4)
		ids := 0
		b := &bridge.Bridge{
			Dialect: translate.Dialect{Name: "quiet", PerSession: true, NoControlLink: true},
			NewTranslator: func() translate.Translator {
				return &quiet{events: &events, eventMu: &mu}
			},
			Dial: func(ctx context.Context, s bridge.Spawn) (bridge.Link, error) {
				mu.Lock()
				spawns = append(spawns, s)
				mu.Unlock()
				l := newMemLink()
				dials <- l
				return l, nil
			},
			NewSessionID: func() string { ids++; return fmt.Sprintf("s-%d", ids) },
		}
		b.Dialect.Configure = func(hcl.Body) (func() translate.Translator, hcl.Diagnostics) { return b.NewTranslator, nil }
		h := serve(t, b)
		defer h.close()

		h.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
		if got := h.recv(); gjson.Get(got, "result.agentInfo.name").Str != "acp-bridge" {
			t.Fatalf("initialize answered %s", got)
		}
		select {
		case <-dials:
			t.Fatal("a dialect without a control link dialled for initialize")
		default:
		}

		// The spawn is built by the dialect; a bad request is refused before dialling.
		h.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`)
		if got := h.recv(); !strings.Contains(gjson.Get(got, "error.message").Str, "no model in _meta") {
			t.Fatalf("session/new without a model answered %s", got)
		}
		h.send(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/w","mcpServers":[],"_meta":{"model":"m1"}}}`)
		if got := h.recv(); gjson.Get(got, "result.sessionId").Str != "s-2" {
			t.Fatalf("session/new answered %s", got)
		}
		agent := <-dials
		mu.Lock()
		sp := spawns[0]
		mu.Unlock()
		if sp.Cwd != "/w" || sp.Session != "s-2" || strings.Join(sp.Command.Argv, " ") != "--model m1 --session-id s-2" || !sp.Command.Append {
			t.Errorf("spawn = %+v", sp)
		}
		// Frames queued before the connection came up go out after LinkUp.
		if f := <-agent.toAgent; string(f) != `{"hello":true}` {
			t.Errorf("agent got %s", f)
		}

		// A turn with no end marker ends after 2 s of silence.
		start := time.Now()
		h.send(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s-2","prompt":[]}}`)
		<-agent.toAgent
		time.Sleep(time.Second)
		agent.fromAgent <- []byte(`{"text":"hi"}`)
		if got := h.recv(); got != `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-2","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}` {
			t.Errorf("forwarded update = %s", got)
		}
		if got := h.recv(); got != `{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}` || time.Since(start) != time.Second+silence {
			t.Errorf("after %v: %s, want end_turn %v after the agent's last frame", time.Since(start), got, silence)
		}
		agent.die(fmt.Errorf("gone"))
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if got := strings.Join(events, ","); got != "link-up,link-down" {
			t.Errorf("link events = %s", got)
		}
	})
}

// bindAgentB configures a Bridge whose BindSession sends the sessions
// pick chooses to "agent-b", an ACP agent whose links are handed to the
// test on links as they are dialled.
func bindAgentB(links chan<- *memLink, pick func(params []byte) bool) func(*bridge.Bridge) {
	return func(b *bridge.Bridge) {
		newTr, _ := acp.Dialect.Configure(nil)
		b.BindSession = func(method string, params []byte) (bridge.Binding, bool) {
			if !pick(params) {
				return bridge.Binding{}, false
			}
			return bridge.Binding{Dialect: acp.Dialect, NewTranslator: newTr, Name: "agent-b",
				Dial: func(context.Context, bridge.Spawn) (bridge.Link, error) {
					l := newMemLink()
					links <- l
					return l, nil
				}}, true
		}
	}
}

// BindSession puts a session on another agent: its own link, dialled with
// that agent's dialer, initialized first, and known by the id that agent
// chose; other sessions stay on the default agent's shared link.
func TestSeams_BindSessionPicksAnotherAgent(t *testing.T) {
	other := make(chan *memLink, 2)
	h := newHarness(t, bindAgentB(other, func(params []byte) bool { return gjson.GetBytes(params, "_meta.agent").Str == "b" }))
	h.initialize()
	sidA := h.newSession("1") // the default agent
	h.send(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[],"_meta":{"agent":"b"}}}`)
	b := <-other
	init := <-b.toAgent
	if gjson.GetBytes(init, "method").Str != "initialize" {
		t.Fatalf("agent b got %s first, want initialize", init)
	}
	b.fromAgent <- []byte(`{"jsonrpc":"2.0","id":` + gjson.GetBytes(init, "id").Raw + `,"result":{"protocolVersion":1}}`)
	req := <-b.toAgent
	if gjson.GetBytes(req, "method").Str != "session/new" {
		t.Fatalf("agent b got %s", req)
	}
	b.fromAgent <- []byte(`{"jsonrpc":"2.0","id":` + gjson.GetBytes(req, "id").Raw + `,"result":{"sessionId":"b-1"}}`)
	if got := h.recv(); gjson.Get(got, "result.sessionId").Str != "b-1" {
		t.Fatalf("session/new on agent b answered %s", got)
	}
	// Prompts follow their session's agent.
	h.send(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"b-1","prompt":[]}}`)
	if p := <-b.toAgent; gjson.GetBytes(p, "params.sessionId").Str != "b-1" {
		t.Errorf("agent b got %s", p)
	}
	h.send(`{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":"` + sidA + `","prompt":[]}}`)
	if p := h.agentRecv(); gjson.Get(p, "params.sessionId").Str != sidA {
		t.Errorf("the default agent got %s", p)
	}
	// Agent b's loss is named after it and fails only its own turn.
	b.die(errors.New("agent b went away"))
	got := h.recv()
	if gjson.Get(got, "id").Raw != "3" || gjson.Get(got, "error.data.agent").Str != "agent-b" {
		t.Errorf("turn on agent b answered %s", got)
	}
}

// A link the engine opens for a session gets its initialize and nothing
// else until that initialize is answered: agents built on the official
// SDKs refuse every request before it. When the agent refuses the
// initialize, the request that waited is answered with the agent's words
// and never sent.
func TestSeams_NewLinkGetsNothingBeforeItsInitializeIsAnswered(t *testing.T) {
	other := make(chan *memLink, 2)
	h := newHarness(t, bindAgentB(other, func([]byte) bool { return true }))
	h.initialize()
	for i, refuse := range []bool{false, true} {
		id := fmt.Sprint(10 + i)
		h.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
		b := <-other
		init := <-b.toAgent
		if gjson.GetBytes(init, "method").Str != "initialize" {
			t.Fatalf("the new link got %s first, want initialize", init)
		}
		select {
		case early := <-b.toAgent:
			t.Fatalf("the new link got %s before its initialize was answered", early)
		case <-time.After(150 * time.Millisecond):
		}
		if refuse {
			b.fromAgent <- []byte(`{"jsonrpc":"2.0","id":` + gjson.GetBytes(init, "id").Raw + `,"error":{"code":-32603,"message":"no credentials"}}`)
			got := h.recv()
			if gjson.Get(got, "id").Raw != id || !strings.Contains(gjson.Get(got, "error.message").Str, "no credentials") {
				t.Fatalf("session/new behind a refused initialize answered %s", got)
			}
			select {
			case f := <-b.toAgent:
				t.Fatalf("the link whose initialize failed was sent %s", f)
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		b.fromAgent <- []byte(`{"jsonrpc":"2.0","id":` + gjson.GetBytes(init, "id").Raw + `,"result":{"protocolVersion":1}}`)
		req := <-b.toAgent
		if gjson.GetBytes(req, "method").Str != "session/new" {
			t.Fatalf("after initialize the link got %s, want session/new", req)
		}
		b.fromAgent <- []byte(`{"jsonrpc":"2.0","id":` + gjson.GetBytes(req, "id").Raw + `,"result":{"sessionId":"b-1"}}`)
		if got := h.recv(); gjson.Get(got, "result.sessionId").Str != "b-1" {
			t.Fatalf("session/new answered %s", got)
		}
	}
}
