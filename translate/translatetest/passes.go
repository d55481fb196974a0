package translatetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/acp-bridge/acp-bridge/translate"
)

// A Chooser makes a history's choices: a seeded *rand.Rand from
// math/rand/v2, or fuzz bytes (see ByteChooser).
type Chooser interface {
	// IntN returns a choice in [0, n).
	IntN(n int) int
}

// ByteChooser makes choices from fuzz bytes, one byte a choice; once the
// bytes are used up every choice is 0 and Exhausted reports true.
type ByteChooser struct {
	b []byte
	i int
}

// NewByteChooser returns a Chooser reading b.
func NewByteChooser(b []byte) *ByteChooser { return &ByteChooser{b: b} }

// IntN implements Chooser.
func (c *ByteChooser) IntN(n int) int {
	if c.i >= len(c.b) {
		c.i++
		return 0
	}
	v := int(c.b[c.i])
	c.i++
	return v % n
}

// Exhausted reports whether every byte was used.
func (c *ByteChooser) Exhausted() bool { return c.i > len(c.b) }

// PassesConfig is one run of CheckPasses.
type PassesConfig struct {
	// New returns a fresh translator in the state the engine creates it in
	// (SetEditorProtocol called, for instance). It must implement
	// translate.UpdatePasser.
	New func() translate.Translator
	// Steps is the length of the history; Window how many inputs after a
	// chunk the twins' outputs are compared for.
	Steps, Window int
	// V2 lets the agent answer initialize as an ACP v2 agent would.
	V2 bool
}

// PassesStats says what a run of CheckPasses covered.
type PassesStats struct {
	// Checked counts the (state, chunk) pairs checked: states in which
	// PassesUpdates(sid) was true, each with one random plain chunk of sid.
	Checked int
	// True and False count the PassesUpdates answers seen, over every step
	// and session id.
	True, False int
	// Inputs counts the inputs fed by what they were; Outputs the outputs of
	// the main history by kind (notes by their repair's name).
	Inputs, Outputs map[string]int
}

// Add adds o's counts to s.
func (s *PassesStats) Add(o PassesStats) {
	s.Checked += o.Checked
	s.True += o.True
	s.False += o.False
	if s.Inputs == nil {
		s.Inputs, s.Outputs = map[string]int{}, map[string]int{}
	}
	for k, v := range o.Inputs {
		s.Inputs[k] += v
	}
	for k, v := range o.Outputs {
		s.Outputs[k] += v
	}
}

// passSessions are the session ids of a history: the agent opens the
// first three (one not ASCII), "zz" never (its updates are another
// connection's, or early).
var passSessions = []string{"s1", "s2", "s3/é ☕", "zz"}

// passInput is one input of a history: an editor message or an agent frame.
type passInput struct {
	label string
	msg   translate.Msg // when frame is nil
	frame []byte
}

func (in passInput) String() string {
	if in.frame != nil {
		return fmt.Sprintf("agent> %s", in.frame)
	}
	return fmt.Sprintf("editor %s ref=%d %s %s %s", in.label, in.msg.Ref, in.msg.Method, in.msg.Body, in.msg.Error)
}

// feed gives in to tr as the engine would: agent frames parsed with
// ParseEnvelope and handed to FromAgentEnvelope when tr takes envelopes.
// Both the message and the frame are copied: a translator may keep and
// rewrite what it is given.
func feed(tr translate.Translator, in passInput) ([]translate.Out, error) {
	if in.frame == nil {
		m := in.msg
		m.Body = clone(m.Body)
		m.Error = clone(m.Error)
		return tr.FromEditor(m)
	}
	f := clone(in.frame)
	if et, ok := tr.(translate.EnvelopeTranslator); ok {
		env, perr := translate.ParseEnvelope(f)
		return et.FromAgentEnvelope(f, &env, perr)
	}
	return tr.FromAgent(f)
}

// render turns one call's outputs and error into text that compares equal
// exactly when they do. The dangling-permissions rule withdraws a turn's
// pending permission requests in map order: such a run of withdrawals is
// sorted, every other output keeps its place.
func render(outs []translate.Out, err error) []string {
	r := make([]string, 0, len(outs)+1)
	for _, o := range outs {
		// (Not fmt: this runs for every output of every replay.)
		r = append(r, "kind="+strconv.Itoa(int(o.Kind))+" ref="+strconv.FormatUint(uint64(o.Ref), 10)+
			" method="+o.Method+" session="+o.Session+" delay="+o.Delay.String()+
			" body="+string(o.Body)+" params="+strconv.Itoa(len(o.Params))+":"+string(o.Params))
	}
	for i := 0; i+2 < len(outs); {
		j := i
		for j+2 < len(outs) && outs[j].Kind == translate.Note && outs[j].Method == "dangling-permissions" &&
			outs[j+1].Kind == translate.Frame && outs[j+2].Kind == translate.CancelCall {
			j += 3
		}
		if j == i {
			i++
			continue
		}
		triples := make([]string, 0, (j-i)/3)
		for k := i; k < j; k += 3 {
			triples = append(triples, strings.Join(r[k:k+3], "\n"))
		}
		sort.Strings(triples)
		copy(r[i:j], strings.Split(strings.Join(triples, "\n"), "\n"))
		i = j
	}
	if err != nil {
		r = append(r, "error: "+err.Error())
	}
	return r
}

// passModel is what the generator knows of the link, learnt from the main
// translator's outputs: the requests each side has not had answered.
type passModel struct {
	nextRef translate.Ref
	editor  []translate.Ref // editor requests not answered yet
	toAgent []agentRequest  // requests the translator sent the agent, unanswered
	calls   []translate.Ref // the translator's calls to the editor, unanswered
	own     []int           // ids of the agent's requests not answered by the translator
	nextOwn int             // the agent's next request id
	at      time.Time       // the clock
}

type agentRequest struct {
	id     json.RawMessage
	method string
	params json.RawMessage
}

func newPassModel() *passModel {
	return &passModel{nextRef: 1, nextOwn: 100, at: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

// learn updates the model with what in was and what the translator made of
// it.
func (m *passModel) learn(in passInput, outs []translate.Out) {
	if in.frame == nil {
		switch in.msg.Kind {
		case translate.Request:
			m.editor = append(m.editor, in.msg.Ref)
		case translate.Response:
			m.calls = slices.DeleteFunc(m.calls, func(r translate.Ref) bool { return r == in.msg.Ref })
		case translate.LinkDown:
			// The engine answered every editor request routed to the link;
			// the agent's side starts afresh.
			*m = passModel{nextRef: m.nextRef, nextOwn: m.nextOwn, at: m.at}
		}
	} else {
		env, _ := translate.ParseEnvelope(in.frame)
		if env.IsResponse() {
			m.toAgent = slices.DeleteFunc(m.toAgent, func(r agentRequest) bool { return string(r.id) == string(env.ID) })
		}
	}
	for _, o := range outs {
		switch o.Kind {
		case translate.Reply, translate.Fail:
			m.editor = slices.DeleteFunc(m.editor, func(r translate.Ref) bool { return r == o.Ref })
		case translate.Call:
			m.calls = append(m.calls, o.Ref)
		case translate.CancelCall:
			m.calls = slices.DeleteFunc(m.calls, func(r translate.Ref) bool { return r == o.Ref })
		case translate.Frame:
			env, perr := translate.ParseEnvelope(o.Body)
			if perr != nil {
				continue
			}
			switch {
			case env.IsRequest():
				m.toAgent = append(m.toAgent, agentRequest{id: clone(env.ID), method: env.Method, params: clone(env.Params)})
			case env.IsResponse():
				id := int(gjson.ParseBytes(env.ID).Int())
				m.own = slices.DeleteFunc(m.own, func(n int) bool { return n == id })
			}
		}
	}
}

// pick returns one of xs.
func pick[T any](c Chooser, xs ...T) T { return xs[c.IntN(len(xs))] }

// next generates the next input from the model's state.
func (m *passModel) next(c Chooser, cfg PassesConfig, first bool) passInput {
	if first {
		return m.request("initialize", m.initParams(c))
	}
	switch r := c.IntN(100); {
	case r < 22:
		return m.agentUpdate(c)
	case r < 40 && len(m.toAgent) > 0:
		return m.agentAnswer(c, cfg)
	case r < 51:
		sid := pick(c, passSessions...)
		return m.request("session/prompt", fmt.Sprintf(`{"sessionId":%q,"prompt":[{"type":"text","text":"hi"}]}`, sid))
	case r < 55:
		return m.request("session/new", `{"cwd":"/w","mcpServers":[]}`)
	case r < 60:
		return m.request(pick(c, "session/load", "session/resume", "session/fork"),
			fmt.Sprintf(`{"sessionId":%q,"cwd":"/w","mcpServers":[]}`, pick(c, passSessions...)))
	case r < 64:
		return passInput{label: "session/cancel", msg: translate.Msg{Kind: translate.Notification, Method: "session/cancel",
			Body: json.RawMessage(fmt.Sprintf(`{"sessionId":%q}`, pick(c, passSessions...))), At: m.at, Grace: 5 * time.Second}}
	case r < 66:
		return m.request(pick(c, "session/set_mode", "_x/ext", "authenticate", "initialize"),
			pick(c, `{"sessionId":"s1","modeId":"ask"}`, `{}`, m.initParams(c)))
	case r < 72 && len(m.calls) > 0:
		ref := pick(c, m.calls...)
		if c.IntN(4) == 0 {
			return passInput{label: "response error", msg: translate.Msg{Kind: translate.Response, Ref: ref, At: m.at,
				Error: json.RawMessage(`{"code":-32603,"message":"no"}`)}}
		}
		return passInput{label: "response", msg: translate.Msg{Kind: translate.Response, Ref: ref, At: m.at,
			Body: json.RawMessage(pick(c, `{"outcome":{"outcome":"selected","optionId":"a"}}`, `{"outcome":{"outcome":"cancelled"}}`, `null`, `{"content":"x"}`))}}
	case r < 75 && len(m.editor) > 0:
		k := pick(c, translate.CancelRequest, translate.Abandon)
		return passInput{label: map[translate.Kind]string{translate.CancelRequest: "cancel-request", translate.Abandon: "abandon"}[k],
			msg: translate.Msg{Kind: k, Ref: pick(c, m.editor...), At: m.at, Grace: time.Second}}
	case r < 83:
		m.at = m.at.Add(time.Duration(c.IntN(60)) * time.Millisecond)
		return passInput{label: "tick", msg: translate.Msg{Kind: translate.Tick, At: m.at}}
	case r < 85:
		return passInput{label: "link-up", msg: translate.Msg{Kind: translate.LinkUp, At: m.at}}
	case r < 86:
		return passInput{label: "link-down", msg: translate.Msg{Kind: translate.LinkDown, At: m.at,
			Error: json.RawMessage(`{"code":-32603,"message":"agent link lost"}`)}}
	case r < 93:
		return m.agentRequest(c)
	default:
		return m.agentOther(c)
	}
}

func (m *passModel) initParams(c Chooser) string {
	return pick(c,
		`{"protocolVersion":1,"clientCapabilities":{}}`,
		`{"protocolVersion":1,"clientCapabilities":{"terminal":true,"fs":{"readTextFile":true}}}`,
		`{"protocolVersion":1,"clientCapabilities":{"elicitation":{"form":{}}}}`)
}

func (m *passModel) request(method, params string) passInput {
	ref := m.nextRef
	m.nextRef++
	return passInput{label: method, msg: translate.Msg{Kind: translate.Request, Ref: ref, Method: method, Body: json.RawMessage(params), At: m.at}}
}

func agentFrame(label, f string) passInput { return passInput{label: label, frame: []byte(f)} }

// plainChunk returns a text chunk of sid in the compact form the SDKs
// write, a translate.PlainChunk.
func plainChunk(c Chooser, sid string) []byte {
	kind := pick(c, "agent_message_chunk", "agent_thought_chunk", "user_message_chunk")
	text := pick(c, "a", "", "Hello, world", `say \"hi\"\n`, `caf\u00e9 ☕`, `}}}}`, `\\`, strings.Repeat("x", 300))
	return []byte(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":{"sessionUpdate":%q,"content":{"type":"text","text":"%s"}}}}`, sid, kind, text))
}

// sid picks the session of an agent frame: mostly one of a prompt the
// agent has open, as an agent's updates and requests are, else any.
func (m *passModel) sid(c Chooser) string {
	var open []string
	for _, r := range m.toAgent {
		if r.method == "session/prompt" {
			open = append(open, gjson.GetBytes(r.params, "sessionId").Str)
		}
	}
	if len(open) > 0 && c.IntN(3) != 0 {
		return pick(c, open...)
	}
	return pick(c, passSessions...)
}

// agentUpdate is a session/update of any kind and shape, valid or not.
func (m *passModel) agentUpdate(c Chooser) passInput {
	sid := m.sid(c)
	switch c.IntN(16) {
	case 0, 1, 2, 3, 4, 5:
		return passInput{label: "update plain chunk", frame: plainChunk(c, sid)}
	case 6:
		return agentFrame("update chunk, spaced", fmt.Sprintf(`{"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": %q, "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "b"}}}}`, sid))
	case 7:
		return agentFrame("update chunk, image", fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"image","data":"AA==","mimeType":"image/png"}}}}`, sid))
	case 8:
		return agentFrame("update chunk, invalid content", fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":{"sessionUpdate":"agent_thought_chunk","content":"text"}}}`, sid))
	case 9:
		return agentFrame("update snake_case", fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"session_id":%q,"update":{"session_update":"agent_message_chunk","content":{"type":"text","text":"c"}}}}`, sid))
	case 10:
		return agentFrame("update without jsonrpc", fmt.Sprintf(`{"method":"session/update","params":{"sessionId":%q,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"d"}}}}`, sid))
	case 11:
		return agentFrame("update tool_call", fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":%s}}`, sid, pick(c,
			`{"sessionUpdate":"tool_call","toolCallId":"t1","title":"ls","kind":"execute","status":"pending"}`,
			`{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"completed"}`,
			`{"sessionUpdate":"tool_call","title":"no id"}`,
			`{"sessionUpdate":"plan","entries":[{"content":"x","priority":"high","status":"pending"}]}`)))
	case 12:
		return agentFrame("update between turns", fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":%s}}`, sid, pick(c,
			`{"sessionUpdate":"available_commands_update","availableCommands":[]}`,
			`{"sessionUpdate":"current_mode_update","currentModeId":"ask"}`,
			`{"sessionUpdate":"usage_update","used":null,"size":100}`,
			`{"sessionUpdate":"session_info_update","title":"t"}`)))
	case 13:
		return agentFrame("update unstable variant", fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":{"sessionUpdate":"state_update","state":"idle"}}}`, sid))
	case 14:
		return agentFrame("update unroutable", pick(c,
			`{"jsonrpc":"2.0","method":"session/update","params":{"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"e"}}}}`,
			`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1"}}`))
	default:
		return agentFrame("update malformed", pick(c,
			`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk"`,
			`not json`, `[1,2]`, `{"jsonrpc":"2.0","method":"session/update","params":7}`))
	}
}

// agentAnswer answers one of the requests the translator sent the agent,
// as the method calls for, or not quite.
func (m *passModel) agentAnswer(c Chooser, cfg PassesConfig) passInput {
	req := pick(c, m.toAgent...)
	id := string(req.id)
	res := func(r string) passInput {
		return agentFrame("answer "+req.method, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, id, r))
	}
	if c.IntN(10) == 0 {
		return agentFrame("answer odd", pick(c,
			fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32000,"message":"boom"}}`, id),
			fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{},"error":{"code":1,"message":"both"}}`, id),
			fmt.Sprintf(`{"jsonrpc":"2.0","id":%s}`, id),
			fmt.Sprintf(`{"id":%s,"result":null}`, id),
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"Method not found"}}`,
			`{"jsonrpc":"2.0","id":999,"result":{}}`))
	}
	switch req.method {
	case "initialize":
		answers := []string{`{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}`, `{"protocolVersion":"1","agentCapabilities":{}}`,
			`{"protocolVersion":2,"agentCapabilities":{}}`}
		if cfg.V2 {
			answers = append(answers, `{"protocolVersion":2,"info":{"name":"a","version":"1"},"capabilities":{"session":{}}}`,
				`{"protocolVersion":2,"info":{"name":"a","version":"1"},"capabilities":{"session":{}}}`)
		}
		if c.IntN(5) == 0 {
			return agentFrame("answer initialize error", fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"unsupported version"}}`, id))
		}
		return res(pick(c, answers...))
	case "session/new", "session/resume", "session/fork":
		sid := pick(c, passSessions[:3]...)
		if req.method != "session/new" {
			if s := gjson.GetBytes(req.params, "sessionId").Str; s != "" {
				sid = s
			}
		}
		return res(pick(c, fmt.Sprintf(`{"sessionId":%q}`, sid), fmt.Sprintf(`{"sessionId":%q,"modes":null}`, sid), `null`))
	case "session/prompt":
		return res(pick(c, `{"stopReason":"end_turn"}`, `{"stopReason":"end_turn"}`, `{"stopReason":"cancelled"}`,
			`{"stopReason":"canceled"}`, `{"stopReason":"bogus"}`, `null`, `{"stopReason":"end_turn","_meta":{"x":1}}`))
	case "session/load":
		return res(pick(c, `{}`, `null`))
	}
	if c.IntN(2) == 0 {
		return agentFrame("answer "+req.method+" error", fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":%s,"message":"Method not found: %s"}}`,
			id, pick(c, "-32601", "-32603"), req.method))
	}
	return res(pick(c, `{}`, `null`))
}

// agentRequest is a request of the agent's to the editor.
func (m *passModel) agentRequest(c Chooser) passInput {
	sid := m.sid(c)
	id := m.nextOwn
	m.nextOwn++
	m.own = append(m.own, id)
	switch c.IntN(8) {
	case 0, 1, 6, 7:
		return agentFrame("request session/request_permission", fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/request_permission","params":{"sessionId":%q,"toolCall":{"toolCallId":"t1"},"options":[{"optionId":"a","name":"Allow","kind":"allow_once"}]}}`, id, sid))
	case 2:
		return agentFrame("request terminal/create", fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"terminal/create","params":{"sessionId":%q,"command":"ls"}}`, id, sid))
	case 3:
		return agentFrame("request elicitation/create", fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"elicitation/create","params":{"sessionId":%q,"mode":"form","message":"?"}}`, id, sid))
	case 4:
		return agentFrame("request fs/read_text_file", fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"fs/read_text_file","params":{"session_id":%q,"path":"/w/a"}}`, id, sid))
	default:
		return agentFrame("request malformed", fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"_x/ask","params":1}`, id))
	}
}

// agentOther is any other agent frame: cancels of its own requests,
// notifications of other methods.
func (m *passModel) agentOther(c Chooser) passInput {
	if len(m.own) > 0 && c.IntN(2) == 0 {
		return agentFrame("$/cancel_request", fmt.Sprintf(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":%d}}`, pick(c, m.own...)))
	}
	return agentFrame("notification other", pick(c, `{"jsonrpc":"2.0","method":"_x/notice","params":{}}`, `{"jsonrpc":"2.0","method":"_x/notice"}`))
}

// twin is a translator replayed from the main history, told one plain chunk
// the main one was not, and compared with it for a window of inputs.
type twin struct {
	tr   translate.Translator
	left int
	at   int // the history's length when it was made
	f    []byte
}

// CheckPasses runs one seeded history against cfg.New's translator and
// checks its translate.UpdatePasser promise at every step: for each session
// id whose PassesUpdates is true, a twin replayed from the same history is
// fed a random plain chunk of that session, which must come back as exactly
// one Forward of the chunk's bytes; then both are fed the history's next
// cfg.Window inputs, and every output and PassesUpdates answer must be the
// same (the chunk changed nothing a later call reads). The replay itself must
// reproduce the main translator's outputs (translators are deterministic).
// The error tells the history up to the failure.
func CheckPasses(c Chooser, cfg PassesConfig) (PassesStats, error) {
	st := PassesStats{Inputs: map[string]int{}, Outputs: map[string]int{}}
	main := cfg.New()
	if _, ok := main.(translate.UpdatePasser); !ok {
		return st, fmt.Errorf("%T is not a translate.UpdatePasser", main)
	}
	m := newPassModel()
	var hist []passInput
	var rendered [][]string // the main translator's outputs per input
	var twins []*twin
	story := func(format string, args ...any) error {
		var b strings.Builder
		for i, in := range hist {
			fmt.Fprintf(&b, "%3d %s\n", i, in)
		}
		return fmt.Errorf("after %d inputs:\n%s\n%s", len(hist), b.String(), fmt.Sprintf(format, args...))
	}
	for step := 0; step < cfg.Steps; step++ {
		if bc, ok := c.(*ByteChooser); ok && bc.Exhausted() {
			break
		}
		in := m.next(c, cfg, step == 0)
		hist = append(hist, in)
		st.Inputs[in.label]++
		outs, err := feed(main, in)
		r := render(outs, err)
		rendered = append(rendered, r)
		for _, o := range outs {
			if o.Kind == translate.Note {
				st.Outputs["note "+o.Method]++
			} else {
				st.Outputs[kindName(o.Kind)]++
			}
		}
		m.learn(in, outs)
		passes := passAnswers(main)
		for _, tw := range twins {
			touts, terr := feed(tw.tr, in)
			if tr := render(touts, terr); !slices.Equal(tr, r) {
				return st, story("the twin fed the plain chunk %s after input %d differs on input %d:\nwith the chunk: %s\nwithout:        %s",
					tw.f, tw.at-1, len(hist)-1, strings.Join(tr, "\n                "), strings.Join(r, "\n                "))
			}
			if tp := passAnswers(tw.tr); !slices.Equal(tp, passes) {
				return st, story("the twin fed the plain chunk %s after input %d answers PassesUpdates %v on input %d, the main translator %v",
					tw.f, tw.at-1, tp, len(hist)-1, passes)
			}
			tw.left--
		}
		twins = slices.DeleteFunc(twins, func(tw *twin) bool { return tw.left <= 0 })
		for i, sid := range passSessions {
			if !passes[i] {
				st.False++
				continue
			}
			st.True++
			tw, err := replay(cfg, hist, rendered)
			if err != nil {
				return st, story("%v", err)
			}
			f := plainChunk(c, sid)
			env, perr := translate.ParseEnvelope(f)
			if perr != nil || !translate.PlainChunk(&env) {
				return st, story("the generator's chunk %s is not a translate.PlainChunk (%v)", f, perr)
			}
			touts, terr := tw.(translate.EnvelopeTranslator).FromAgentEnvelope(clone(f), &env, nil)
			if why := promised(touts, terr, f, env.Params, sid); why != "" {
				return st, story("PassesUpdates(%q) is true, but FromAgentEnvelope of the plain chunk\n%s\nreturned %s:\n%s",
					sid, f, why, strings.Join(render(touts, terr), "\n"))
			}
			if tp := passAnswers(tw); !slices.Equal(tp, passes) {
				return st, story("after the plain chunk %s PassesUpdates answers %v, without it %v", f, tp, passes)
			}
			st.Checked++
			twins = append(twins, &twin{tr: tw, left: cfg.Window, at: len(hist), f: f})
		}
	}
	return st, nil
}

// replay makes a fresh translator and feeds it the history, checking that
// it answers as the main translator did.
func replay(cfg PassesConfig, hist []passInput, rendered [][]string) (translate.Translator, error) {
	tr := cfg.New()
	for i, in := range hist {
		outs, err := feed(tr, in)
		// The kinds only: rendering every output of every replay would
		// cost more than the replay. A difference in the rest shows as the
		// twin's outputs differing from the main translator's.
		n := len(outs)
		if err != nil {
			n++
		}
		if n != len(rendered[i]) {
			return nil, fmt.Errorf("replayed, input %d gives %d outputs, not %d as at first (the translator is not deterministic):\nfirst: %s",
				i, n, len(rendered[i]), strings.Join(rendered[i], "\n       "))
		}
	}
	return tr, nil
}

// passAnswers is PassesUpdates of every session id of a history.
func passAnswers(tr translate.Translator) []bool {
	p := tr.(translate.UpdatePasser)
	a := make([]bool, len(passSessions))
	for i, sid := range passSessions {
		a[i] = p.PassesUpdates(sid)
	}
	return a
}

// promised returns what is wrong with outs as the result of a plain chunk
// f of session sid whose params are params, or "".
func promised(outs []translate.Out, err error, f, params []byte, sid string) string {
	switch {
	case err != nil:
		return "an error"
	case len(outs) != 1:
		return fmt.Sprintf("%d outputs", len(outs))
	}
	o := outs[0]
	switch {
	case o.Kind != translate.Forward:
		return "another kind of output than a Forward"
	case o.Method != "session/update":
		return "a Forward of another method"
	case !bytes.Equal(o.Body, f):
		return "a Forward of other bytes"
	case !bytes.Equal(o.Params, params):
		return "a Forward with other params"
	case o.Session != sid:
		return "a Forward of another session"
	}
	return ""
}

func kindName(k translate.Kind) string {
	switch k {
	case translate.Reply:
		return "reply"
	case translate.Fail:
		return "fail"
	case translate.Notify:
		return "notify"
	case translate.Call:
		return "call"
	case translate.CancelCall:
		return "cancel-call"
	case translate.Frame:
		return "frame"
	case translate.Forward:
		return "forward"
	case translate.Timer:
		return "timer"
	}
	return fmt.Sprintf("kind %d", k)
}

// FormatStats renders s for a test log: the pairs checked, the answers
// seen, and what the histories were made of.
func FormatStats(s PassesStats) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d (state, chunk) pairs checked with PassesUpdates true; answers true %d, false %d\ninputs:", s.Checked, s.True, s.False)
	for _, k := range sortedKeys(s.Inputs) {
		fmt.Fprintf(&b, " %s=%d;", k, s.Inputs[k])
	}
	b.WriteString("\noutputs:")
	for _, k := range sortedKeys(s.Outputs) {
		fmt.Fprintf(&b, " %s=%d;", k, s.Outputs[k])
	}
	return b.String()
}

func sortedKeys(m map[string]int) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
