package acp_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/acp-bridge/acp-bridge/translate/acp"
	"github.com/tidwall/gjson"
)

// TestShim_SeveralPromptsOpenModel drives the shim with seeded random
// interleavings of prompts, updates, permission requests, answers, cancels
// and quiet-period ticks in front of a model of an agent that queues
// prompts (claude-agent-acp's promptQueueing): it works its open prompts in
// the order they came, streams the oldest one's updates and answers it,
// and answers every open prompt "cancelled" after a session/cancel. Such an
// agent is compliant, so every rule that reasons about "the turn" must
// leave it alone: every update of every turn reaches the editor, in order,
// before that turn's answer; every prompt is answered once, "cancelled"
// exactly when the editor cancelled it; no permission request of an open
// turn is withdrawn; and no rule reports a repair.
func TestShim_SeveralPromptsOpenModel(t *testing.T) {
	for _, c := range []struct {
		name string
		opt  acp.ShimOptions
	}{
		{"default", acp.ShimOptions{}},
		{"quiet 50ms", acp.ShimOptions{Quiet: 50 * time.Millisecond}},
		{"no hold", acp.ShimOptions{Quiet: -1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			for seed := range uint64(400) {
				if !runTurnsModel(t, seed, c.opt) {
					return // one seed's story is enough to read
				}
			}
		})
	}
}

// modelTurn is a prompt the model agent has open.
type modelTurn struct {
	n         int             // the prompt's number, in the order sent
	agentID   json.RawMessage // its id on the agent hop
	sent      int             // updates sent so far
	cancelled bool            // the editor cancelled it
	asking    bool            // its permission request is pending
}

// turnsModel is one run: the shim, the model agent and what the editor got.
type turnsModel struct {
	t       *testing.T
	seed    uint64
	shim    *acp.Shim
	rng     *rand.Rand
	story   []string // what happened, for the failure message
	nextRef translate.Ref
	turns   []*modelTurn          // open at the agent, oldest first
	byRef   map[translate.Ref]int // prompt refs to their numbers
	sentTo  map[int]int           // updates the agent sent per prompt
	cancels map[int]bool          // prompts the editor cancelled
	asks    map[translate.Ref]int // permission Calls the editor has, by prompt
	got     map[int][]string      // update texts the editor got, per prompt
	answers map[int]string        // stop reasons the editor got
	timer   bool                  // a quiet-period Tick is due
	lastOut []byte                // the last frame the shim sent the agent
	failed  bool
}

func runTurnsModel(t *testing.T, seed uint64, opt acp.ShimOptions) bool {
	m := &turnsModel{t: t, seed: seed, shim: acp.NewShim(opt), rng: rand.New(rand.NewPCG(seed, 52)),
		byRef: map[translate.Ref]int{}, sentTo: map[int]int{}, cancels: map[int]bool{},
		asks: map[translate.Ref]int{}, got: map[int][]string{}, answers: map[int]string{}}
	m.editorRequest("initialize", `{"protocolVersion":1,"clientCapabilities":{}}`)
	m.agent(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1,"agentCapabilities":{"_meta":{"claudeCode":{"promptQueueing":true}}}}}`, gjson.GetBytes(m.lastOut, "id").Raw))
	m.editorRequest("session/new", `{"cwd":"/w","mcpServers":[]}`)
	m.agent(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"sessionId":"s"}}`, gjson.GetBytes(m.lastOut, "id").Raw))
	prompts := 0
	for step := 0; step < 80 && !m.failed; step++ {
		switch r := m.rng.IntN(100); {
		case r < 18 && len(m.turns) < 4:
			m.prompt(prompts)
			prompts++
		case r < 55 && len(m.turns) > 0 && !m.turns[0].asking:
			m.update(m.turns[0])
		case r < 62 && len(m.turns) > 0 && !m.turns[0].asking:
			m.ask(m.turns[0])
		case r < 70 && len(m.asks) > 0:
			m.allow()
		case r < 82 && len(m.turns) > 0 && !m.turns[0].asking:
			m.answer()
		case r < 87 && len(m.turns) > 0:
			m.cancel()
		case r < 92:
			m.agent(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"available_commands_update","availableCommands":[]}}}`)
		case m.timer:
			m.tick()
		}
	}
	for len(m.turns) > 0 && !m.failed {
		for len(m.asks) > 0 {
			m.allow()
		}
		m.answer()
	}
	for m.timer && !m.failed {
		m.tick()
	}
	for n := range prompts {
		if m.failed {
			break
		}
		want := make([]string, m.sentTo[n])
		for i := range want {
			want[i] = fmt.Sprintf("p%d-%d", n, i)
		}
		stop, answered := m.answers[n]
		switch {
		case !answered:
			m.fail("prompt %d was never answered", n)
		case !slices.Equal(m.got[n], want):
			m.fail("prompt %d: the editor got updates %q before its answer, the agent sent %q", n, m.got[n], want)
		case stop != map[bool]string{true: "cancelled", false: "end_turn"}[m.cancels[n]]:
			m.fail("prompt %d answered %q (cancelled by the editor: %v)", n, stop, m.cancels[n])
		}
	}
	return !m.failed
}

func (m *turnsModel) fail(format string, args ...any) {
	if m.failed {
		return
	}
	m.failed = true
	m.t.Errorf("seed %d: %s\nwhat happened:\n  %s", m.seed, fmt.Sprintf(format, args...), strings.Join(m.story, "\n  "))
}

func (m *turnsModel) editorRequest(method, params string) translate.Ref {
	m.nextRef++
	outs, err := m.shim.FromEditor(translate.Msg{Kind: translate.Request, Ref: m.nextRef, Method: method, Body: json.RawMessage(params)})
	m.take(outs, err)
	return m.nextRef
}

func (m *turnsModel) prompt(n int) {
	m.story = append(m.story, fmt.Sprintf("editor: prompt %d", n))
	ref := m.nextRef + 1
	m.byRef[ref] = n
	m.editorRequest("session/prompt", `{"sessionId":"s","prompt":[{"type":"text","text":"go"}]}`)
	if gjson.GetBytes(m.lastOut, "method").Str != "session/prompt" {
		m.fail("prompt %d did not reach the agent (last frame %s)", n, m.lastOut)
		return
	}
	m.turns = append(m.turns, &modelTurn{n: n, agentID: json.RawMessage(gjson.GetBytes(m.lastOut, "id").Raw)})
}

func (m *turnsModel) update(turn *modelTurn) {
	text := fmt.Sprintf("p%d-%d", turn.n, turn.sent)
	turn.sent++
	m.sentTo[turn.n] = turn.sent
	m.story = append(m.story, "agent: update "+text)
	m.agent(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + text + `"}}}}`)
}

func (m *turnsModel) ask(turn *modelTurn) {
	m.story = append(m.story, fmt.Sprintf("agent: permission request for prompt %d", turn.n))
	turn.asking = true
	m.agent(fmt.Sprintf(`{"jsonrpc":"2.0","id":"perm-%d","method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"t%d"},"options":[{"optionId":"ok","name":"Allow","kind":"allow_once"}]}}`, turn.n, turn.n))
}

// allow answers the oldest permission request the editor holds; after a
// cancel the editor answers "cancelled", as ACP has it do.
func (m *turnsModel) allow() {
	var ref translate.Ref
	for r := range m.asks {
		if ref == 0 || r < ref {
			ref = r
		}
	}
	n := m.asks[ref]
	delete(m.asks, ref)
	outcome := `{"outcome":{"outcome":"selected","optionId":"ok"}}`
	if m.cancels[n] {
		outcome = `{"outcome":{"outcome":"cancelled"}}`
	}
	m.story = append(m.story, fmt.Sprintf("editor: answers prompt %d's permission request", n))
	outs, err := m.shim.FromEditor(translate.Msg{Kind: translate.Response, Ref: ref, Body: json.RawMessage(outcome)})
	m.take(outs, err)
	if id := gjson.GetBytes(m.lastOut, "id").Str; id != fmt.Sprintf("perm-%d", n) {
		m.fail("the agent got %s for prompt %d's permission answer", m.lastOut, n)
		return
	}
	for _, turn := range m.turns {
		if turn.n == n {
			turn.asking = false
		}
	}
}

func (m *turnsModel) answer() {
	turn := m.turns[0]
	m.turns = m.turns[1:]
	stop := "end_turn"
	if turn.cancelled {
		stop = "cancelled"
	}
	m.story = append(m.story, fmt.Sprintf("agent: answers prompt %d %s", turn.n, stop))
	m.agent(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"stopReason":%q}}`, turn.agentID, stop))
}

func (m *turnsModel) cancel() {
	m.story = append(m.story, "editor: session/cancel")
	for _, turn := range m.turns {
		turn.cancelled = true
		m.cancels[turn.n] = true
	}
	outs, err := m.shim.FromEditor(translate.Msg{Kind: translate.Notification, Method: "session/cancel", Body: json.RawMessage(`{"sessionId":"s"}`)})
	m.take(outs, err)
}

func (m *turnsModel) tick() {
	m.story = append(m.story, "tick")
	m.timer = false
	outs, err := m.shim.FromEditor(translate.Msg{Kind: translate.Tick})
	m.take(outs, err)
}

func (m *turnsModel) agent(frame string) {
	outs, err := m.shim.FromAgent([]byte(frame))
	m.take(outs, err)
}

// take plays the editor's side of the shim's outputs.
func (m *turnsModel) take(outs []translate.Out, err error) {
	if err != nil {
		m.fail("translator error: %v", err)
		return
	}
	for _, o := range outs {
		switch o.Kind {
		case translate.Frame:
			m.lastOut = o.Body
		case translate.Timer:
			m.timer = true
		case translate.Note:
			m.fail("the shim repaired a compliant stream: %s: %s", o.Method, o.Body)
		case translate.CancelCall:
			m.fail("the shim withdrew permission request %d of prompt %d, whose turn is open", o.Ref, m.asks[o.Ref])
		case translate.Call:
			m.asks[o.Ref] = m.turns[0].n
		case translate.Reply, translate.Fail:
			n, ok := m.byRef[o.Ref]
			if !ok {
				continue // initialize, session/new
			}
			if _, twice := m.answers[n]; twice {
				m.fail("prompt %d answered twice", n)
			}
			m.answers[n] = gjson.GetBytes(o.Body, "stopReason").Str
			m.story = append(m.story, fmt.Sprintf("  editor got: prompt %d's answer %s", n, o.Body))
		case translate.Forward, translate.Notify:
			body := o.Body
			if o.Kind == translate.Forward {
				body = []byte(gjson.GetBytes(body, "params").Raw)
			}
			text := gjson.GetBytes(body, "update.content.text").Str
			if text == "" {
				continue
			}
			var n int
			fmt.Sscanf(text, "p%d-", &n)
			if _, over := m.answers[n]; over {
				m.fail("update %s reached the editor after prompt %d's answer", text, n)
			}
			m.got[n] = append(m.got[n], text)
			m.story = append(m.story, "  editor got: "+text)
		}
	}
}
