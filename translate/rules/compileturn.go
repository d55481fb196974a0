// Compiling what a profile says of a turn: its key, its durations and
// their defaults (quiet, cancel grace, reject report wait), and its stop
// reasons, every constant one checked at load time.

package rules

import (
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

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
