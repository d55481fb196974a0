// Compiling a decoded profile: its blocks, requests and rules, each
// checked now so that a mistake is a load-time error with its position.

package rules

import (
	"sort"
	"strings"

	"github.com/acp-bridge/acp-bridge/internal/hcldecode"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

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
