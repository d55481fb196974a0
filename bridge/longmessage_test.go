package bridge_test

import (
	"fmt"
	"runtime/metrics"
	"strings"
	"testing"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/bridge/store"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/acp-bridge/acp-bridge/translate/acp"
	"github.com/acp-bridge/acp-bridge/translate/acpv2"
	"github.com/tidwall/gjson"
)

// One long message, streamed as 20,000 chunks, costs the same per chunk at
// its end as at its start on every path through the engine: the v1 relay
// (behind the shim), a v1 editor in front of a v2 agent (acpv2), a v2
// editor in front of a v1 agent (the front), a v2 editor relayed to a v2
// agent, and a v2 editor translated to a v2 agent (front and acpv2); each
// with the store recording the turn and a replay of it afterwards. Work
// per chunk that grows with the message (text joined by copying, a
// message re-encoded whole) makes the bytes allocated per window of
// chunks grow with the window's place in the message; that, not the
// clock, is what fails here. Where it grows, the stream stops at the first
// window that shows it, so a quadratic path fails in well under a second
// of its quadratic cost.
func TestLongMessage_LinearOnEveryPath(t *testing.T) {
	for _, p := range []struct {
		name          string
		editor, agent int
		relayV2       bool // a v2 editor's frames relayed to the v2 agent
	}{
		{"v1 editor, v1 agent", 1, 1, false},
		{"v1 editor, v2 agent", 1, 2, false},
		{"v2 editor, v1 agent", 2, 1, false},
		{"v2 editor, v2 agent relayed", 2, 2, true},
		{"v2 editor, v2 agent translated", 2, 2, false},
	} {
		t.Run(p.name, func(t *testing.T) {
			st, err := store.Open(store.Options{Dir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			h := newHarness(t, func(b *bridge.Bridge) {
				b.Sessions = &bridge.Durable{Store: st}
				v1, _ := acp.Dialect.Configure(nil)
				switch {
				case p.agent == 2 && p.relayV2:
					b.NewTranslator = func() translate.Translator { return acpv2.NewNegotiator(2, v1) }
				case p.agent == 2:
					// Forced through the front and acpv2: a v2 agent
					// the engine speaks v1 to.
					b.NewTranslator = func() translate.Translator { return acpv2.New() }
				}
			})
			lm := &longMessage{h: h, t: t, editor: p.editor, agent: p.agent}
			lm.open()
			lm.turn()
			lm.replay()
		})
	}
}

// The message: chunks of a 64-byte text, in windows of 1,000.
const (
	longChunks = 20000
	longWindow = 1000
)

var longText = strings.Repeat("abcdefgh", 8)

// longMessage drives one path of TestLongMessage_LinearOnEveryPath.
type longMessage struct {
	h             *harness
	t             *testing.T
	editor, agent int
	sid           string
	nextID        int
}

func (lm *longMessage) id() int { lm.nextID++; return lm.nextID }

// open initializes and opens a session.
func (lm *longMessage) open() {
	h := lm.h
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`
	if lm.editor == 2 {
		init = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":2,"info":{"name":"e","version":"1"},"capabilities":{}}}`
	}
	h.send(init)
	req := h.agentRecv()
	answer := `{"protocolVersion":1,"agentCapabilities":{}}`
	if lm.agent == 2 {
		answer = `{"protocolVersion":2,"info":{"name":"a","version":"1"},"capabilities":{}}`
	}
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(req, "id").Raw + `,"result":` + answer + `}`)
	if got := h.recv(); gjson.Get(got, "error").Exists() {
		lm.t.Fatalf("initialize: %s", got)
	}
	h.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	req = h.agentRecv()
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(req, "id").Raw + `,"result":{"sessionId":"agent-s"}}`)
	for {
		got := h.recv()
		if gjson.Get(got, "id").Raw == "1" {
			lm.sid = gjson.Get(got, "result.sessionId").Str
			if lm.sid == "" {
				lm.t.Fatalf("session/new: %s", got)
			}
			return
		}
	}
}

// turn prompts, streams the message from the agent and reads it all on
// the editor's side, measuring as it goes.
func (lm *longMessage) turn() {
	h := lm.h
	h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"go"}]}}`, lm.id(), lm.sid))
	prompt := h.agentRecv()
	asid := gjson.Get(prompt, "params.sessionId").Str
	chunk := fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":%q}}}}`, asid, longText)
	var head, tail []string
	pid := gjson.Get(prompt, "id").Raw
	if lm.agent == 2 {
		chunk = fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":{"sessionUpdate":"agent_message_chunk","messageId":"m-1","content":{"type":"text","text":%q}}}}`, asid, longText)
		head = []string{
			`{"jsonrpc":"2.0","id":` + pid + `,"result":{"messageId":"u-1"}}`,
			`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"` + asid + `","update":{"sessionUpdate":"state_update","state":"running"}}}`,
		}
		tail = []string{`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"` + asid + `","update":{"sessionUpdate":"state_update","state":"idle","stopReason":"end_turn"}}}`}
	} else {
		tail = []string{`{"jsonrpc":"2.0","id":` + pid + `,"result":{"stopReason":"end_turn"}}`}
	}
	stop := make(chan struct{})
	defer close(stop)
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		link := h.agent()
		send := func(f string) bool {
			select {
			case link.fromAgent <- []byte(f):
				return true
			case <-stop:
				return false
			}
		}
		for _, f := range head {
			if !send(f) {
				return
			}
		}
		for range longChunks {
			if !send(chunk) {
				return
			}
		}
		for _, f := range tail {
			if !send(f) {
				return
			}
		}
	}()
	lm.measure("streamed", func(line string) bool {
		if lm.editor == 2 {
			return gjson.Get(line, "params.update.state").Str == "idle"
		}
		return gjson.Get(line, "result.stopReason").Exists()
	})
	<-fed
}

// replay opens the session again with its history replayed from the
// store, measuring the replay as the turn was.
func (lm *longMessage) replay() {
	id := lm.id()
	if lm.editor == 2 {
		lm.h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/resume","params":{"sessionId":%q,"cwd":"/tmp","replayFrom":{"type":"start"}}}`, id, lm.sid))
	} else {
		lm.h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/load","params":{"sessionId":%q,"cwd":"/tmp","mcpServers":[]}}`, id, lm.sid))
	}
	lm.measure("replayed", func(line string) bool {
		if gjson.Get(line, "id").Int() != int64(id) || gjson.Get(line, "method").Exists() {
			return false
		}
		if gjson.Get(line, "error").Exists() {
			lm.t.Fatalf("the replay's request failed: %s", line)
		}
		return true
	})
}

// measure reads the editor's lines until end says the last came, and
// counts the bytes allocated (by the whole process) per window of the
// message's chunks. Linear work per chunk allocates about the same in
// every window, in lumps (batches, buffers handed over) that even out
// over half a message; work that grows with the message allocates more
// in each window than the one before. Two bounds tell them apart: no
// window may allocate more than windowBudget, which work that copies the
// message so far passes within its first thousand chunks, and the second
// half of the message may not have cost more than twice the first.
func (lm *longMessage) measure(what string, end func(string) bool) {
	t := lm.t
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	allocated := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	var text int
	var windows []uint64
	from := allocated()
	for {
		line := lm.h.recv()
		if end(line) {
			break
		}
		u := gjson.Get(line, "params.update")
		if kind := u.Get("sessionUpdate").Str; kind != "agent_message_chunk" {
			continue
		}
		before := text / len(longText)
		text += len(u.Get("content.text").Str)
		if text/len(longText)/longWindow == before/longWindow {
			continue
		}
		now := allocated()
		spent := now - from
		from = now
		windows = append(windows, spent)
		if spent > windowBudget {
			t.Fatalf("%s: chunks %d to %d allocated %d MiB, more than the %d MiB a window of linear work stays well under: per-chunk work grows with the message",
				what, (len(windows)-1)*longWindow, len(windows)*longWindow, spent>>20, windowBudget>>20)
		}
	}
	if want := longChunks * len(longText); text != want {
		t.Fatalf("%s: the editor got %d bytes of the message's text, want %d", what, text, want)
	}
	// The first window pays for warming up (buffers grown once).
	var first, second uint64
	half := len(windows) / 2
	for i, w := range windows[1:] {
		if i+1 < half {
			first += w
		} else {
			second += w
		}
	}
	// Per window: the first half has one window fewer.
	first, second = first/uint64(half-1), second/uint64(len(windows)-half)
	if second > 2*first {
		t.Errorf("%s: the second half of the message allocated %d KiB a window, %.1f times the first half's %d KiB: per-chunk work grows with the message",
			what, second>>10, float64(second)/float64(first), first>>10)
	}
	t.Logf("%s: %d KiB a window in the first half, %d KiB in the second", what, first>>10, second>>10)
}

// windowBudget bounds what one window of longWindow chunks may allocate:
// 32 KiB a 64-byte chunk, several times what the paths take (1 to 9 MiB a
// window) and far below what copying a message of a thousand chunks or
// more for each chunk takes (64 KiB a chunk and growing).
const windowBudget = 32 << 20
