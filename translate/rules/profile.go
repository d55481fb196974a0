package rules

import (
	"path"
	"sort"
	"strings"
	"time"

	"github.com/acp-bridge/acp-bridge/internal/hcldecode"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// envelope is how requests and replies are framed on the agent hop.
type envelope int

const (
	envNone        envelope = iota // plain JSON frames; replies matched by rules
	envJSONRPC                     // JSON-RPC 2.0; replies matched by id
	envJSONRPCLite                 // the same without the "jsonrpc" member
)

// Profile is a compiled rule profile: a dialect described in HCL.
type Profile struct {
	// Name is what --dialect selects.
	Name string
	// Summary is the one-line description for `acp-bridge dialects`.
	Summary string
	// PerSession: the agent holds one conversation per connection.
	PerSession bool
	// NoHistory: history_preamble = false, the agent's protocol has no
	// chat history (commands, jobs): a new agent session for an existing
	// transcript is not primed with it.
	NoHistory bool
	// Source is the profile's HCL text when it came from a file (empty for
	// a block decoded from a configuration file).
	Source []byte
	// Env looks up the environment variables the profile's env() calls
	// read; it is called when the dialect is configured, never while
	// translating. nil means every variable is unset.
	Env func(string) (string, bool)

	envelope  envelope
	route     []string
	connect   *connectRule
	heartbeat *heartbeatRule
	silence   time.Duration
	silenceTo string
	// quiet is how long a turn may go without a frame any rule matched
	// before the engine is told (a typo in a match hangs a turn); giveUp,
	// when set, is how long before the turn is failed.
	quiet, giveUp time.Duration
	// turnKey, when set, names the turn a frame belongs to: the value at
	// its frame path equals the value at its sent path of the frame the
	// turn's prompt was sent as.
	turnKey  *turnKey
	cancel   *cancelRule
	errors   []*errorRule
	requests map[string]*requestRule
	events   []*rule
	// envNames maps each env() variable to whether it is required.
	envNames map[string]bool
	declared hcl.Range
}

type connectRule struct {
	send          []node
	expect        *match
	reject        *match
	rejectMessage node
}

type heartbeatRule struct {
	every time.Duration
	send  []node
	reply *match
}

type cancelRule struct {
	send []node
	// ack, when set, is how the agent acknowledges a stop; grace is how
	// long it has to before the bridge reports the stop unacknowledged,
	// zero for the engine's cancel grace (translate.Msg.Grace).
	ack   *match
	grace time.Duration
}

// turnKey is turn { key }: the path where the agent's frames name their
// turn, and what a turn's own value is: the value at sent in the frame its
// prompt was sent as, or, when kept is set, the value an event keeps for
// the turn under that name (an id the agent assigns).
type turnKey struct {
	frame, sent, kept string
}

type errorRule struct {
	match   *match
	message node
	code    node
}

type requestRule struct {
	method      string // the ACP method
	agentMethod string // JSON-RPC envelopes: the agent's method
	params      node
	send        []node
	notify      bool
	reply       *rule
}

// rule is an event rule or a request's reply rule.
type rule struct {
	name         string
	match        *match
	correlate    string
	keep         []keepItem
	result       node
	send         []node
	updates      []update
	finalMessage node
	// endTurn, when set, ends the turn with the stop reason it evaluates
	// to: a constant checked at load, or an expression over the frame
	// whose value is checked when it ends a turn.
	endTurn    node
	fail       node
	tool       *toolRule
	permission *permissionRule
	// keepalive: the event's frames (pings) say nothing of a turn, so they
	// never count toward the turn's quiet and give_up.
	keepalive bool
}

type keepItem struct {
	name, path string
}

// update is one session/update a rule emits: a shorthand chunk (kind set,
// n the text) or a whole update object (kind "").
type update struct {
	kind string
	n    node
}

type toolRule struct {
	open, close, quiet                              bool
	key, name, title, kind, input, rawInput, output node
	rawOutput, status                               node
}

type permissionRule struct {
	title          node
	options        node
	allow          []node
	reject         []node
	cancelled      []node
	rejectEndsTurn bool
	// reportWait is how long a refusal that ends the turn waits for the
	// agent's report of the refused call before it answers the prompt
	// (reject_report_wait; 0: it answers at once).
	reportWait time.Duration
}

// --- the HCL schema ------------------------------------------------------------

type rawProfile struct {
	Summary    *hcl.Attribute `hcl:"summary,optional"`
	PerSession *hcl.Attribute `hcl:"per_session,optional"`
	// HistoryPreamble: false when the agent's protocol has no chat history.
	HistoryPreamble *hcl.Attribute `hcl:"history_preamble,optional"`
	Envelope        *hcl.Attribute `hcl:"envelope,optional"`
	Route           *hcl.Attribute `hcl:"route,optional"`
	Connect         *rawConnect    `hcl:"connect,block"`
	Heartbeat       *rawHeartbeat  `hcl:"heartbeat,block"`
	Turn            *rawTurn       `hcl:"turn,block"`
	Cancel          *rawCancel     `hcl:"cancel,block"`
	Errors          []*rawError    `hcl:"error,block"`
	Requests        []*rawRequest  `hcl:"request,block"`
	Events          []*rawEvent    `hcl:"event,block"`
}

type rawConnect struct {
	Send          *hcl.Attribute `hcl:"send,optional"`
	Expect        *hcl.Attribute `hcl:"expect,optional"`
	Reject        *hcl.Attribute `hcl:"reject,optional"`
	RejectMessage *hcl.Attribute `hcl:"reject_message,optional"`
}

type rawHeartbeat struct {
	Every *hcl.Attribute `hcl:"every"`
	Send  *hcl.Attribute `hcl:"send"`
	Reply *hcl.Attribute `hcl:"reply,optional"`
}

type rawTurn struct {
	Key     *hcl.Attribute `hcl:"key,optional"`
	Silence *hcl.Attribute `hcl:"silence,optional"`
	Stop    *hcl.Attribute `hcl:"stop,optional"`
	Quiet   *hcl.Attribute `hcl:"quiet,optional"`
	GiveUp  *hcl.Attribute `hcl:"give_up,optional"`
}

type rawCancel struct {
	Send  *hcl.Attribute `hcl:"send,optional"`
	Ack   *hcl.Attribute `hcl:"ack,optional"`
	Grace *hcl.Attribute `hcl:"grace,optional"`
}

type rawError struct {
	Match   *hcl.Attribute `hcl:"match"`
	Message *hcl.Attribute `hcl:"message"`
	Code    *hcl.Attribute `hcl:"code,optional"`
}

type rawRequest struct {
	Method      string         `hcl:"method,label"`
	AgentMethod *hcl.Attribute `hcl:"method,optional"`
	Params      *hcl.Attribute `hcl:"params,optional"`
	Send        *hcl.Attribute `hcl:"send,optional"`
	Notify      *hcl.Attribute `hcl:"notify,optional"`
	Reply       *rawReply      `hcl:"reply,block"`
	DefRange    hcl.Range      `hcl:",def_range"`
}

type rawReply struct {
	Rest     hcl.Body  `hcl:",remain"`
	DefRange hcl.Range `hcl:",def_range"`
}

type rawEvent struct {
	Name     string    `hcl:"name,label"`
	Rest     hcl.Body  `hcl:",remain"`
	DefRange hcl.Range `hcl:",def_range"`
}

type rawRule struct {
	Match        *hcl.Attribute `hcl:"match,optional"`
	Correlate    *hcl.Attribute `hcl:"correlate,optional"`
	Keep         *hcl.Attribute `hcl:"keep,optional"`
	Result       *hcl.Attribute `hcl:"result,optional"`
	Send         *hcl.Attribute `hcl:"send,optional"`
	Message      *hcl.Attribute `hcl:"message,optional"`
	Thought      *hcl.Attribute `hcl:"thought,optional"`
	UserMessage  *hcl.Attribute `hcl:"user_message,optional"`
	Plan         *hcl.Attribute `hcl:"plan,optional"`
	Update       *hcl.Attribute `hcl:"update,optional"`
	FinalMessage *hcl.Attribute `hcl:"final_message,optional"`
	EndTurn      *hcl.Attribute `hcl:"end_turn,optional"`
	Fail         *hcl.Attribute `hcl:"fail,optional"`
	Keepalive    *hcl.Attribute `hcl:"keepalive,optional"`
	Tool         *rawTool       `hcl:"tool,block"`
	Permission   *rawPermission `hcl:"permission,block"`
}

type rawTool struct {
	Open      *hcl.Attribute `hcl:"open,optional"`
	Close     *hcl.Attribute `hcl:"close,optional"`
	Quiet     *hcl.Attribute `hcl:"quiet,optional"`
	Key       *hcl.Attribute `hcl:"key,optional"`
	Name      *hcl.Attribute `hcl:"name,optional"`
	Title     *hcl.Attribute `hcl:"title,optional"`
	Kind      *hcl.Attribute `hcl:"kind,optional"`
	Input     *hcl.Attribute `hcl:"input,optional"`
	RawInput  *hcl.Attribute `hcl:"raw_input,optional"`
	Output    *hcl.Attribute `hcl:"output,optional"`
	RawOutput *hcl.Attribute `hcl:"raw_output,optional"`
	Status    *hcl.Attribute `hcl:"status,optional"`
}

type rawPermission struct {
	Title          *hcl.Attribute `hcl:"title,optional"`
	Options        *hcl.Attribute `hcl:"options,optional"`
	Allow          *hcl.Attribute `hcl:"allow,optional"`
	Reject         *hcl.Attribute `hcl:"reject,optional"`
	Cancelled      *hcl.Attribute `hcl:"cancelled,optional"`
	RejectEndsTurn *hcl.Attribute `hcl:"reject_ends_turn,optional"`
	// RejectReportWait: how long the turn's end waits after a refusal for
	// the agent's report of the refused call.
	RejectReportWait *hcl.Attribute `hcl:"reject_report_wait,optional"`
}

// Methods a profile may declare a request block for.
var knownMethods = map[string]bool{
	"initialize": true, "authenticate": true, "session/new": true, "session/prompt": true,
	"session/close": true, "session/load": true, "session/resume": true, "session/set_mode": true,
}

var stopReasons = map[string]bool{"end_turn": true, "max_tokens": true, "max_turn_requests": true, "refusal": true, "cancelled": true}

// Parse compiles a profile file. The dialect's name is the file's base name
// without its extension; filename also names the source in diagnostics.
func Parse(filename string, src []byte) (*Profile, hcl.Diagnostics) {
	f, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, diags
	}
	name := strings.TrimSuffix(path.Base(filename), path.Ext(filename))
	p, more := Decode(name, f.Body)
	diags = append(diags, more...)
	if p != nil {
		p.Source = src
	}
	return p, diags
}

// Decode compiles a profile from an HCL body: a file's, or the body of a
// dialect "name" { … } block in a configuration file. Every problem comes
// back as a diagnostic with the source range it is about.
func Decode(name string, body hcl.Body) (*Profile, hcl.Diagnostics) {
	var raw rawProfile
	diags := hcldecode.DecodeBody(body, nil, &raw)
	if diags.HasErrors() {
		return nil, diags
	}
	c := &compiler{kept: map[string]hcl.Range{}, turnKept: map[string]hcl.Range{}}
	p := &Profile{Name: name, requests: map[string]*requestRule{}, declared: body.MissingItemRange()}
	d := c.profile(p, &raw)
	diags = append(diags, d...)
	for _, u := range c.keptUses {
		if _, ok := c.kept[u.name]; !ok {
			diags = append(diags, diag(u.rng, "Unknown session value",
				"session.%s is not kept by any reply; a reply keeps values with keep = { %s = \"path\" }.", u.name, u.name))
		}
	}
	for _, u := range c.turnKeptUses {
		if _, ok := c.turnKept[u.name]; !ok {
			diags = append(diags, diag(u.rng, "Unknown turn value",
				"turn.%s is not kept by any event; an event keeps a value of its turn with keep = { %s = \"path\" }, and turn.sent.PATH reads the prompt's frame.", u.name, u.name))
		}
	}
	if p.route != nil {
		if _, ok := c.kept["agent_session"]; !ok {
			diags = append(diags, diag(raw.Route.Range, "Route without agent_session",
				"route compares the paths' values with session.agent_session, but no reply keeps agent_session."))
		}
	}
	p.envNames = c.envNames
	if diags.HasErrors() {
		return nil, diags
	}
	return p, diags
}

// scopes of the places a template can stand.
var (
	scopeConnect = scope{where: "a connect or heartbeat block (no frame, params or prompt there)"}
	scopeRequest = scope{params: true, prompt: true, where: "a request's frames"}
	scopeRule    = scope{frame: true, params: true, tool: true, turn: true, where: "a rule"}
	scopeCancel  = scope{params: true, tool: true, turn: true, where: "a cancel block"}
	// scopeMatch is what a rule's match values can read; scopeConnectMatch
	// a connect or heartbeat match's, which belong to no turn.
	scopeMatch        = scope{turn: true, where: "a match"}
	scopeConnectMatch = scope{where: "a connect or heartbeat match (no turn there)"}
)

func (c *compiler) profile(p *Profile, raw *rawProfile) hcl.Diagnostics {
	var diags hcl.Diagnostics
	if raw.Summary != nil {
		p.Summary, diags = constString(raw.Summary, diags)
	}
	if raw.PerSession != nil {
		v, d := raw.PerSession.Expr.Value(nil)
		if d.HasErrors() || v.IsNull() || v.Type() != cty.Bool {
			diags = append(diags, diag(raw.PerSession.Expr.Range(), "Invalid per_session", "per_session is true or false."))
		} else {
			p.PerSession = v.True()
		}
	}
	if raw.HistoryPreamble != nil {
		v, d := raw.HistoryPreamble.Expr.Value(nil)
		if d.HasErrors() || v.IsNull() || v.Type() != cty.Bool {
			diags = append(diags, diag(raw.HistoryPreamble.Expr.Range(), "Invalid history_preamble", "history_preamble is true or false."))
		} else {
			p.NoHistory = v.False()
		}
	}
	if raw.Envelope != nil {
		var s string
		s, diags = constString(raw.Envelope, diags)
		switch s {
		case "none":
		case "jsonrpc":
			p.envelope = envJSONRPC
		case "jsonrpc-lite":
			p.envelope = envJSONRPCLite
		default:
			diags = append(diags, diag(raw.Envelope.Expr.Range(), "Invalid envelope",
				"envelope is \"none\" (plain JSON frames), \"jsonrpc\" or \"jsonrpc-lite\" (JSON-RPC without the jsonrpc member); got %q.", s))
		}
	}
	if raw.Route != nil {
		v, d := raw.Route.Expr.Value(nil)
		if d.HasErrors() || v.IsNull() || !(v.Type().IsTupleType() || v.Type().IsListType()) {
			diags = append(diags, diag(raw.Route.Expr.Range(), "Invalid route", "route is a list of gjson paths where events name the agent's session id."))
		} else {
			p.route = []string{}
			for it := v.ElementIterator(); it.Next(); {
				_, ev := it.Element()
				if ev.IsNull() || ev.Type() != cty.String {
					diags = append(diags, diag(raw.Route.Expr.Range(), "Invalid route", "route holds strings."))
					continue
				}
				if err := checkPath(ev.AsString()); err != nil {
					diags = append(diags, diag(raw.Route.Expr.Range(), "Invalid gjson path", "%q: %v.", ev.AsString(), err))
				}
				p.route = append(p.route, ev.AsString())
			}
		}
	}
	if raw.Connect != nil {
		cr := &connectRule{}
		var d hcl.Diagnostics
		if raw.Connect.Send != nil {
			cr.send, d = c.frames(raw.Connect.Send, scopeConnect)
			diags = append(diags, d...)
		}
		cr.expect, diags = c.optMatch(raw.Connect.Expect, scopeConnectMatch, diags)
		cr.reject, diags = c.optMatch(raw.Connect.Reject, scopeConnectMatch, diags)
		if raw.Connect.RejectMessage != nil {
			cr.rejectMessage, d = c.template(raw.Connect.RejectMessage.Expr, scope{frame: true, where: "reject_message"})
			diags = append(diags, d...)
		}
		if cr.reject != nil && cr.expect == nil {
			diags = append(diags, diag(raw.Connect.Reject.Range, "Reject without expect", "reject only means something while the bridge waits for the expect frame; add expect."))
		}
		p.connect = cr
	}
	if raw.Heartbeat != nil {
		hb := &heartbeatRule{}
		var d hcl.Diagnostics
		hb.every, diags = duration(raw.Heartbeat.Every, diags)
		hb.send, d = c.frames(raw.Heartbeat.Send, scopeConnect)
		diags = append(diags, d...)
		hb.reply, diags = c.optMatch(raw.Heartbeat.Reply, scopeConnectMatch, diags)
		p.heartbeat = hb
	}
	p.quiet = defaultQuiet
	if raw.Turn != nil {
		if raw.Turn.Silence != nil {
			p.silence, diags = duration(raw.Turn.Silence, diags)
			p.silenceTo = "end_turn"
		}
		if raw.Turn.Stop != nil {
			if raw.Turn.Silence == nil {
				diags = append(diags, diag(raw.Turn.Stop.Range, "stop without silence",
					"stop is the reason a turn ends with when it falls silent; set silence too."))
			}
			p.silenceTo, diags = stopReason(raw.Turn.Stop, diags)
		}
		if raw.Turn.Quiet != nil {
			p.quiet, diags = duration(raw.Turn.Quiet, diags)
		}
		if raw.Turn.GiveUp != nil {
			p.giveUp, diags = duration(raw.Turn.GiveUp, diags)
		}
		if raw.Turn.Key != nil {
			p.turnKey, diags = c.turnKey(raw.Turn.Key, diags)
		}
	}
	if raw.Cancel != nil {
		p.cancel = &cancelRule{}
		if raw.Cancel.Send != nil {
			var d hcl.Diagnostics
			p.cancel.send, d = c.frames(raw.Cancel.Send, scopeCancel)
			diags = append(diags, d...)
		}
		p.cancel.ack, diags = c.optMatch(raw.Cancel.Ack, scopeMatch, diags)
		if raw.Cancel.Grace != nil {
			p.cancel.grace, diags = duration(raw.Cancel.Grace, diags)
		}
		switch {
		case raw.Cancel.Ack != nil && raw.Cancel.Send == nil:
			diags = append(diags, diag(raw.Cancel.Ack.Range, "ack without send",
				"ack is how the agent acknowledges the stop that send sends; without send nothing is sent to acknowledge."))
		case raw.Cancel.Grace != nil && raw.Cancel.Ack == nil:
			diags = append(diags, diag(raw.Cancel.Grace.Range, "grace without ack",
				"grace is how long the agent has to acknowledge a stop; say how it does with ack = { … }."))
		}
	}
	for _, re := range raw.Errors {
		er := &errorRule{}
		var d hcl.Diagnostics
		er.match, d = c.compileMatch(re.Match.Expr, scopeMatch)
		diags = append(diags, d...)
		er.message, d = c.template(re.Message.Expr, scopeRule)
		diags = append(diags, d...)
		if re.Code != nil {
			er.code, d = c.template(re.Code.Expr, scopeRule)
			diags = append(diags, d...)
		}
		p.errors = append(p.errors, er)
	}
	for _, rr := range raw.Requests {
		diags = append(diags, c.request(p, rr)...)
	}
	seen := map[string]hcl.Range{}
	for _, re := range raw.Events {
		if first, dup := seen[re.Name]; dup {
			diags = append(diags, diag(re.DefRange, "Duplicate event", "An event named %q was already declared at %s.", re.Name, first))
		}
		seen[re.Name] = re.DefRange
		r, d := c.rule(re.Name, re.Rest, re.DefRange, false, false)
		diags = append(diags, d...)
		if r != nil {
			if r.match == nil {
				diags = append(diags, diag(re.DefRange, "Event without match", "Event %q needs a match = { … } saying which frames it handles.", re.Name))
			}
			p.events = append(p.events, r)
		}
	}
	if _, ok := p.requests["session/prompt"]; !ok {
		diags = append(diags, diag(p.declared, "No session/prompt request",
			"A profile must say how a prompt is sent: request \"session/prompt\" { … }."))
	}
	return diags
}

func (c *compiler) request(p *Profile, rr *rawRequest) hcl.Diagnostics {
	var diags hcl.Diagnostics
	if !knownMethods[rr.Method] {
		names := make([]string, 0, len(knownMethods))
		for m := range knownMethods {
			names = append(names, m)
		}
		sort.Strings(names)
		return hcl.Diagnostics{diag(rr.DefRange, "Unsupported request",
			"A profile can declare requests for %s; not %q.", strings.Join(names, ", "), rr.Method)}
	}
	if _, dup := p.requests[rr.Method]; dup {
		return hcl.Diagnostics{diag(rr.DefRange, "Duplicate request", "request %q is declared twice.", rr.Method)}
	}
	req := &requestRule{method: rr.Method}
	if rr.Method == "session/load" || rr.Method == "session/resume" {
		// The session they reopen is named by the editor; on a shared link
		// that id is the agent's own (session.agent_session).
		c.kept["agent_session"] = rr.DefRange
	}
	var d hcl.Diagnostics
	if rr.AgentMethod != nil {
		if p.envelope == envNone {
			diags = append(diags, diag(rr.AgentMethod.Range, "method without a JSON-RPC envelope",
				"method and params build a JSON-RPC request; this profile has envelope = \"none\", so write the frame with send."))
		}
		req.agentMethod, diags = constString(rr.AgentMethod, diags)
	}
	if rr.Params != nil {
		if rr.AgentMethod == nil {
			diags = append(diags, diag(rr.Params.Range, "params without method", "params is the params of the JSON-RPC request named by method."))
		}
		req.params, d = c.template(rr.Params.Expr, scopeRequest)
		diags = append(diags, d...)
	}
	if rr.Send != nil {
		req.send, d = c.frames(rr.Send, scopeRequest)
		diags = append(diags, d...)
	}
	if rr.Notify != nil {
		v, d := rr.Notify.Expr.Value(nil)
		if d.HasErrors() || v.IsNull() || v.Type() != cty.Bool {
			diags = append(diags, diag(rr.Notify.Expr.Range(), "Invalid notify", "notify is true or false."))
		} else {
			req.notify = v.True()
		}
	}
	if rr.Reply != nil {
		isPrompt := rr.Method == "session/prompt"
		req.reply, d = c.rule("reply", rr.Reply.Rest, rr.Reply.DefRange, true, isPrompt)
		diags = append(diags, d...)
		if req.reply != nil && p.envelope == envNone && req.reply.match == nil && req.reply.correlate == "" {
			diags = append(diags, diag(rr.Reply.DefRange, "Reply cannot be recognised",
				"Without a JSON-RPC envelope a reply needs match = { … }, correlate = \"path\", or both."))
		}
		if req.reply != nil && p.envelope != envNone && (req.reply.match != nil || req.reply.correlate != "") && req.agentMethod != "" {
			diags = append(diags, diag(rr.Reply.DefRange, "Reply already correlated",
				"With a JSON-RPC envelope the reply to method is recognised by its id; drop match and correlate."))
		}
		if req.notify {
			diags = append(diags, diag(rr.Reply.DefRange, "Reply to a notification", "notify = true sends no id, so nothing can reply."))
		}
	}
	if req.agentMethod == "" && len(req.send) == 0 && rr.Method == "session/prompt" {
		diags = append(diags, diag(rr.DefRange, "Prompt sends nothing", "request \"session/prompt\" needs send (or method and params)."))
	}
	p.requests[rr.Method] = req
	return diags
}

// rule compiles an event rule, or a reply rule (reply true).
func (c *compiler) rule(name string, body hcl.Body, decl hcl.Range, reply, prompt bool) (*rule, hcl.Diagnostics) {
	var raw rawRule
	diags := hcldecode.DecodeBody(body, nil, &raw)
	if diags.HasErrors() {
		return nil, diags
	}
	r := &rule{name: name}
	var d hcl.Diagnostics
	r.match, diags = c.optMatch(raw.Match, scopeMatch, diags)
	notHere := func(a *hcl.Attribute, what string) {
		if a != nil {
			diags = append(diags, diag(a.Range, "Not allowed here", "%s", what))
		}
	}
	if !reply {
		notHere(raw.Correlate, "correlate belongs in a request's reply block.")
		notHere(raw.Result, "result belongs in a request's reply block.")
	}
	if reply && !prompt {
		notHere(raw.EndTurn, "end_turn belongs in events and in the reply of session/prompt.")
		notHere(raw.FinalMessage, "final_message belongs in events and in the reply of session/prompt.")
	}
	if raw.Correlate != nil {
		r.correlate, diags = constString(raw.Correlate, diags)
		if r.correlate != "" {
			if err := checkPath(r.correlate); err != nil {
				diags = append(diags, diag(raw.Correlate.Expr.Range(), "Invalid gjson path", "%q: %v.", r.correlate, err))
			}
		}
	}
	if raw.Keep != nil {
		obj, ok := raw.Keep.Expr.(*hclsyntax.ObjectConsExpr)
		if !ok {
			diags = append(diags, diag(raw.Keep.Expr.Range(), "Invalid keep", "keep is an object of names and the gjson paths of the frame they are read from: { agent_session = \"data.sessionId\" }."))
		} else {
			for _, item := range obj.Items {
				k, dk := constKey(item.KeyExpr)
				diags = append(diags, dk...)
				v, dv := item.ValueExpr.Value(nil)
				if dv.HasErrors() || v.IsNull() || v.Type() != cty.String {
					diags = append(diags, diag(item.ValueExpr.Range(), "Invalid keep", "keep's values are gjson paths (strings)."))
					continue
				}
				switch {
				case reply && (k == "id" || k == "cwd"):
					diags = append(diags, diag(item.KeyExpr.Range(), "Reserved name", "session.%s is the bridge's own; keep the value under another name.", k))
				case !reply && k == "sent":
					diags = append(diags, diag(item.KeyExpr.Range(), "Reserved name", "turn.sent is the frame the prompt was sent as; keep the value under another name."))
				case strings.Contains(k, "."):
					diags = append(diags, diag(item.KeyExpr.Range(), "Invalid keep", "kept values have flat names, such as run_id; not %q.", k))
				}
				if err := checkPath(v.AsString()); err != nil {
					diags = append(diags, diag(item.ValueExpr.Range(), "Invalid gjson path", "%q: %v.", v.AsString(), err))
				}
				if reply {
					c.kept[k] = item.KeyExpr.Range()
				} else {
					c.turnKept[k] = item.KeyExpr.Range()
				}
				r.keep = append(r.keep, keepItem{name: k, path: v.AsString()})
			}
		}
	}
	tmpl := func(a *hcl.Attribute) node {
		if a == nil {
			return nil
		}
		n, d := c.template(a.Expr, scopeRule)
		diags = append(diags, d...)
		return n
	}
	r.result = tmpl(raw.Result)
	if raw.Send != nil {
		r.send, d = c.frames(raw.Send, scopeRule)
		diags = append(diags, d...)
	}
	for _, u := range []struct {
		a    *hcl.Attribute
		kind string
	}{{raw.Thought, "agent_thought_chunk"}, {raw.Message, "agent_message_chunk"}, {raw.UserMessage, "user_message_chunk"}, {raw.Plan, "plan"}} {
		if n := tmpl(u.a); n != nil {
			r.updates = append(r.updates, update{kind: u.kind, n: n})
		}
	}
	if raw.Update != nil {
		ns, d := c.frames(raw.Update, scopeRule)
		diags = append(diags, d...)
		for _, n := range ns {
			r.updates = append(r.updates, update{n: n})
		}
	}
	r.finalMessage = tmpl(raw.FinalMessage)
	if raw.EndTurn != nil {
		r.endTurn, diags = c.stopReasonExpr(raw.EndTurn, diags)
	}
	r.fail = tmpl(raw.Fail)
	if raw.Tool != nil {
		t := raw.Tool
		tr := &toolRule{}
		tr.open, diags = optBool(t.Open, diags)
		tr.close, diags = optBool(t.Close, diags)
		tr.quiet, diags = optBool(t.Quiet, diags)
		tr.key, tr.name, tr.title, tr.kind = tmpl(t.Key), tmpl(t.Name), tmpl(t.Title), tmpl(t.Kind)
		tr.input, tr.rawInput, tr.output, tr.rawOutput, tr.status = tmpl(t.Input), tmpl(t.RawInput), tmpl(t.Output), tmpl(t.RawOutput), tmpl(t.Status)
		r.tool = tr
	}
	if raw.Permission != nil {
		pr := &permissionRule{rejectEndsTurn: true, reportWait: defaultRejectReportWait}
		rp := raw.Permission
		pr.title, pr.options = tmpl(rp.Title), tmpl(rp.Options)
		for _, f := range []struct {
			a   *hcl.Attribute
			dst *[]node
		}{{rp.Allow, &pr.allow}, {rp.Reject, &pr.reject}, {rp.Cancelled, &pr.cancelled}} {
			if f.a != nil {
				*f.dst, d = c.frames(f.a, scopeRule)
				diags = append(diags, d...)
			}
		}
		if rp.RejectEndsTurn != nil {
			pr.rejectEndsTurn, diags = optBool(rp.RejectEndsTurn, diags)
		}
		if a := rp.RejectReportWait; a != nil {
			pr.reportWait, diags = waitDuration(a, diags)
			if !pr.rejectEndsTurn {
				diags = append(diags, diag(a.Range, "reject_report_wait without reject_ends_turn",
					"reject_report_wait is how long a refusal that ends the turn waits for the agent's report of the refused call; with reject_ends_turn = false the turn ends by the agent's own end rule. Remove one of them."))
			}
		}
		if r.endTurn != nil || r.fail != nil {
			diags = append(diags, diag(decl, "Permission ends nothing", "A rule that asks for permission keeps the turn open; it cannot also end_turn or fail."))
		}
		r.permission = pr
	}
	if reply {
		notHere(raw.Keepalive, "keepalive belongs in events: a reply is the answer to a request.")
	} else if raw.Keepalive != nil {
		r.keepalive, diags = optBool(raw.Keepalive, diags)
		if r.keepalive && (r.endTurn != nil || r.fail != nil || r.permission != nil) {
			diags = append(diags, diag(raw.Keepalive.Range, "Keepalive ends nothing", "A keepalive event says its frames are not a turn's; it cannot also end_turn, fail or ask for permission."))
		}
	}
	return r, diags
}

// frames compiles a frame or a list of frames; a for expression yields
// one frame per element.
func (c *compiler) frames(a *hcl.Attribute, sc scope) ([]node, hcl.Diagnostics) {
	if f, ok := a.Expr.(*hclsyntax.ForExpr); ok {
		n, diags := c.template(f, sc)
		return []node{&spreadNode{n}}, diags
	}
	if t, ok := a.Expr.(*hclsyntax.TupleConsExpr); ok {
		var out []node
		var diags hcl.Diagnostics
		for _, e := range t.Exprs {
			n, d := c.template(e, sc)
			diags = append(diags, d...)
			out = append(out, n)
		}
		return out, diags
	}
	n, diags := c.template(a.Expr, sc)
	return []node{n}, diags
}

func (c *compiler) optMatch(a *hcl.Attribute, sc scope, diags hcl.Diagnostics) (*match, hcl.Diagnostics) {
	if a == nil {
		return nil, diags
	}
	m, d := c.compileMatch(a.Expr, sc)
	return m, append(diags, d...)
}

func optBool(a *hcl.Attribute, diags hcl.Diagnostics) (bool, hcl.Diagnostics) {
	if a == nil {
		return false, diags
	}
	v, d := a.Expr.Value(nil)
	if d.HasErrors() || v.IsNull() || v.Type() != cty.Bool {
		return false, append(diags, diag(a.Expr.Range(), "Invalid "+a.Name, "%s is true or false.", a.Name))
	}
	return v.True(), diags
}

func constString(a *hcl.Attribute, diags hcl.Diagnostics) (string, hcl.Diagnostics) {
	v, d := a.Expr.Value(nil)
	if d.HasErrors() || v.IsNull() || v.Type() != cty.String {
		return "", append(diags, diag(a.Expr.Range(), "Invalid "+a.Name, "%s must be a constant string.", a.Name))
	}
	return v.AsString(), diags
}

// defaultCancelGrace is how long the agent has to acknowledge a stop when
// neither the cancel block nor the engine (translate.Msg.Grace) says: the
// engine's own default.
const defaultCancelGrace = 5 * time.Second

// turnKey compiles turn { key = "path" } (the same path in the agent's
// frames and in the prompt's frame), key = { frame = "path", sent = "path" },
// or key = { frame = "path", turn = "NAME" }, where NAME is a value an
// event keeps for the turn (turn.NAME).
func (c *compiler) turnKey(a *hcl.Attribute, diags hcl.Diagnostics) (*turnKey, hcl.Diagnostics) {
	bad := func() (*turnKey, hcl.Diagnostics) {
		return nil, append(diags, diag(a.Expr.Range(), "Invalid key",
			"key is the gjson path where the agent's frames name their turn, compared with the same path of the frame the prompt was sent as: key = \"chat_id\"; or, when the two differ, key = { frame = \"data.chat\", sent = \"chat_id\" }; or, for an id the agent assigns and an event keeps, key = { frame = \"run\", turn = \"run\" }."))
	}
	v, d := a.Expr.Value(nil)
	if d.HasErrors() || v.IsNull() {
		return bad()
	}
	k := &turnKey{}
	switch {
	case v.Type() == cty.String:
		k.frame, k.sent = v.AsString(), v.AsString()
	case v.Type().IsObjectType():
		ty := v.Type()
		if len(ty.AttributeTypes()) != 2 || !ty.HasAttribute("frame") || ty.HasAttribute("sent") == ty.HasAttribute("turn") {
			return bad()
		}
		f := v.GetAttr("frame")
		if f.IsNull() || f.Type() != cty.String {
			return bad()
		}
		k.frame = f.AsString()
		if ty.HasAttribute("turn") {
			return c.keptTurnKey(a.Expr, k, v.GetAttr("turn"), diags)
		}
		s := v.GetAttr("sent")
		if s.IsNull() || s.Type() != cty.String {
			return bad()
		}
		k.sent = s.AsString()
	default:
		return bad()
	}
	for _, p := range []string{k.frame, k.sent} {
		if err := checkPath(p); err != nil {
			diags = append(diags, diag(a.Expr.Range(), "Invalid gjson path", "%q: %v.", p, err))
		}
	}
	return k, diags
}

// keptTurnKey completes k with key = { …, turn = name }: name must be a
// value an event keeps, which Parse checks once every event is compiled.
func (c *compiler) keptTurnKey(expr hcl.Expression, k *turnKey, name cty.Value, diags hcl.Diagnostics) (*turnKey, hcl.Diagnostics) {
	rng := expr.Range()
	if obj, ok := expr.(*hclsyntax.ObjectConsExpr); ok {
		for _, item := range obj.Items {
			if key, d := constKey(item.KeyExpr); !d.HasErrors() && key == "turn" {
				rng = item.ValueExpr.Range()
			}
		}
	}
	if err := checkPath(k.frame); err != nil {
		diags = append(diags, diag(expr.Range(), "Invalid gjson path", "%q: %v.", k.frame, err))
	}
	if name.IsNull() || name.Type() != cty.String || name.AsString() == "" || name.AsString() == "sent" || strings.Contains(name.AsString(), ".") {
		return nil, append(diags, diag(rng, "Invalid key",
			"turn names a value an event keeps for the turn, as keep names it: keep = { run = \"data.run_id\" } is turn = \"run\". For a path of the prompt's frame write sent = \"path\" instead."))
	}
	k.kept = name.AsString()
	c.turnKeptUses = append(c.turnKeptUses, keptUse{name: k.kept, rng: rng})
	return k, diags
}

// defaultQuiet is how long a turn goes without a matched frame before the
// log says so: long enough for a slow model's first token.
const defaultQuiet = 30 * time.Second

func duration(a *hcl.Attribute, diags hcl.Diagnostics) (time.Duration, hcl.Diagnostics) {
	s, diags := constString(a, diags)
	if s == "" {
		return 0, diags
	}
	dur, err := time.ParseDuration(s)
	if err != nil || dur <= 0 {
		return 0, append(diags, diag(a.Expr.Range(), "Invalid "+a.Name, "%s is a positive duration such as \"1500ms\" or \"30s\"; got %q.", a.Name, s))
	}
	return dur, diags
}

// waitDuration is duration that also takes "0s" (no wait).
func waitDuration(a *hcl.Attribute, diags hcl.Diagnostics) (time.Duration, hcl.Diagnostics) {
	s, diags := constString(a, diags)
	if s == "" {
		return 0, diags
	}
	dur, err := time.ParseDuration(s)
	if err != nil || dur < 0 {
		return 0, append(diags, diag(a.Expr.Range(), "Invalid "+a.Name, "%s is a duration such as \"500ms\", or \"0s\" for none; got %q.", a.Name, s))
	}
	return dur, diags
}

// defaultRejectReportWait is how long a refusal that ends the turn waits
// for the agent's report of the refused call: long enough for an agent
// that answers the refusal at once (a local process, a socket), short
// enough that a person who said no is not kept waiting.
const defaultRejectReportWait = 500 * time.Millisecond

// stopReasonExpr compiles an event's end_turn: a stop reason, or an
// expression whose value is one (map(frame.reason, { length =
// "max_tokens" }, "end_turn"), frame.done == true ? "end_turn" :
// "refusal"). Every constant it can yield is checked now; a value read
// from the frame is checked when the rule ends a turn.
func (c *compiler) stopReasonExpr(a *hcl.Attribute, diags hcl.Diagnostics) (node, hcl.Diagnostics) {
	n, d := c.template(a.Expr, scopeRule)
	diags = append(diags, d...)
	if d.HasErrors() {
		return nil, diags
	}
	for _, v := range constStops(n) {
		if v.kind != vStr || !stopReasons[v.str] { // (literal strings are vStr)
			got := string(v.appendJSON(nil))
			if v.absent() {
				got = "null"
			}
			diags = append(diags, diag(a.Expr.Range(), "Invalid stop reason",
				"%s is one of end_turn, max_tokens, max_turn_requests, refusal, cancelled, or an expression whose every value is one; it can be %s.", a.Name, got))
		}
	}
	return n, diags
}

// constStops returns the constants a stop reason expression can evaluate
// to: a constant, a map's table values and default, either branch of a
// condition, default's alternatives. Values read from a frame are left
// to the run-time check.
func constStops(n node) []value {
	switch x := n.(type) {
	case *constNode:
		return []value{x.v}
	case *mapNode:
		var out []value
		keys := make([]string, 0, len(x.table))
		for k := range x.table {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = append(out, x.table[k])
		}
		if x.def != nil {
			out = append(out, constStops(x.def)...)
		}
		return out
	case *condNode:
		return append(constStops(x.yes), constStops(x.no)...)
	case *defaultNode:
		var out []value
		for _, a := range x.alts {
			if c, ok := a.(*constNode); ok && !c.v.missing() && c.v.text() == "" {
				continue // an empty constant is skipped by default itself
			}
			out = append(out, constStops(a)...)
		}
		return out
	}
	return nil
}

func stopReason(a *hcl.Attribute, diags hcl.Diagnostics) (string, hcl.Diagnostics) {
	s, diags := constString(a, diags)
	if s != "" && !stopReasons[s] {
		diags = append(diags, diag(a.Expr.Range(), "Invalid stop reason",
			"%s is one of end_turn, max_tokens, max_turn_requests, refusal, cancelled; got %q.", a.Name, s))
	}
	return s, diags
}
