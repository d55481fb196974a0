package rules

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/acp-bridge/acp-bridge/internal/wire"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/tidwall/gjson"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// A template is an HCL expression compiled once, at load time, into a small
// tree that builds JSON by appending bytes. Only literals, quoted templates,
// object and tuple constructors, variable references and the functions
// below are accepted; anything else is a load-time error, as is a variable
// the rule cannot see.

type vkind uint8

const (
	vAbsent vkind = iota // nothing: an object member with this value is left out
	vRaw                 // raw holds one JSON value
	vStr                 // str holds a string, to be quoted
)

// value is what a template node evaluates to.
type value struct {
	kind vkind
	raw  []byte
	str  string
}

func rawValue(b []byte) value { return value{kind: vRaw, raw: b} }
func strValue(s string) value { return value{kind: vStr, str: s} }
func (v value) absent() bool  { return v.kind == vAbsent }
func (v value) isNull() bool  { return v.kind == vRaw && string(v.raw) == "null" }
func (v value) missing() bool { return v.kind == vAbsent || v.isNull() }

// text is the string form of v: a string's contents, any other JSON value's
// text, "" for absent.
func (v value) text() string {
	switch v.kind {
	case vStr:
		return v.str
	case vRaw:
		if len(v.raw) > 0 && v.raw[0] == '"' {
			return gjson.ParseBytes(v.raw).Str
		}
		if string(v.raw) == "null" {
			return ""
		}
		return string(v.raw)
	}
	return ""
}

// appendJSON appends v as JSON (null when absent).
func (v value) appendJSON(b []byte) []byte {
	switch v.kind {
	case vStr:
		return wire.AppendString(b, v.str)
	case vRaw:
		return append(b, v.raw...)
	}
	return append(b, "null"...)
}

// appendTextJSON appends v as a JSON string: a JSON string as it came,
// anything else quoted from its text form.
func (v value) appendTextJSON(b []byte) []byte {
	if v.kind == vRaw && len(v.raw) > 0 && v.raw[0] == '"' {
		return append(b, v.raw...)
	}
	return wire.AppendString(b, v.text())
}

// evalEnv is what templates read while one input is handled.
type evalEnv struct {
	frame   []byte // the agent frame (events, replies); nil otherwise
	params  []byte // the editor request's params; nil otherwise
	prompt  string // the prompt's text (session/prompt)
	sess    *session
	turn    *turn // the turn the input belongs to, if any
	tool    *tool
	id      uint64
	now     time.Time
	envVars map[string]string
	locals  []local
	// frameParams is the frame's JSON-RPC params when known: paths under
	// params are looked up from there.
	frameParams []byte
}

type node interface {
	eval(e *evalEnv) value
}

// root names the variables a template may read.
type root uint8

const (
	rFrame root = iota + 1
	rParams
	rPrompt
	rSession
	rTool
	rID
	rNow
	rTurn
	// rTurnKept is turn.NAME, a value an event kept (not a root name of
	// its own: it is written turn.NAME).
	rTurnKept
)

var rootNames = map[string]root{
	"frame": rFrame, "params": rParams, "prompt": rPrompt, "session": rSession,
	"tool": rTool, "id": rID, "now": rNow, "turn": rTurn,
}

// scope says which roots a template may read where it stands.
type scope struct {
	frame, params, prompt, tool bool
	// turn: turn.sent can be read (every place but a request's own frames
	// and the connection's).
	turn bool
	// where names the place for error messages ("an event rule").
	where string
}

// compiler compiles templates and collects what the profile declares.
type compiler struct {
	// kept are the session values some reply keeps (session.NAME).
	kept map[string]hcl.Range
	// keptUses are session.NAME references, checked once all keeps are known.
	keptUses []keptUse
	// turnKept and turnKeptUses are the same for turn values, which
	// events keep (turn.NAME).
	turnKept     map[string]hcl.Range
	turnKeptUses []keptUse
	// envNames are the env() variables the profile reads.
	envNames map[string]bool
	// locals are the variables of the enclosing for expressions.
	locals []string
}

type keptUse struct {
	name string
	rng  hcl.Range
}

func diag(rng hcl.Range, summary, format string, args ...any) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: fmt.Sprintf(format, args...), Subject: rng.Ptr()}
}

// template compiles expr.
func (c *compiler) template(expr hcl.Expression, sc scope) (node, hcl.Diagnostics) {
	switch x := expr.(type) {
	case *hclsyntax.LiteralValueExpr:
		return literal(x.Val, x.Range())
	case *hclsyntax.TemplateExpr:
		if x.IsStringLiteral() {
			v, diags := x.Value(nil)
			if diags.HasErrors() {
				return nil, diags
			}
			return literal(v, x.Range())
		}
		var parts []node
		var diags hcl.Diagnostics
		for _, p := range x.Parts {
			n, d := c.template(p, sc)
			diags = append(diags, d...)
			parts = append(parts, n)
		}
		return &concatNode{parts: parts}, diags
	case *hclsyntax.TemplateWrapExpr:
		n, diags := c.template(x.Wrapped, sc)
		return &concatNode{parts: []node{n}}, diags
	case *hclsyntax.ObjectConsExpr:
		o := &objectNode{}
		var diags hcl.Diagnostics
		seen := map[string]bool{}
		for _, item := range x.Items {
			k, d := constKey(item.KeyExpr)
			diags = append(diags, d...)
			if d.HasErrors() {
				continue
			}
			if seen[k] {
				diags = append(diags, diag(item.KeyExpr.Range(), "Duplicate key", "The key %q appears twice in this object.", k))
			}
			seen[k] = true
			n, d := c.template(item.ValueExpr, sc)
			diags = append(diags, d...)
			o.keys = append(o.keys, string(wire.AppendString(nil, k)))
			o.vals = append(o.vals, n)
		}
		return o, diags
	case *hclsyntax.TupleConsExpr:
		a := &arrayNode{}
		var diags hcl.Diagnostics
		for _, item := range x.Exprs {
			n, d := c.template(item, sc)
			diags = append(diags, d...)
			a.items = append(a.items, n)
		}
		return a, diags
	case *hclsyntax.ScopeTraversalExpr:
		return c.traversal(x.Traversal, x.Range(), sc)
	case *hclsyntax.FunctionCallExpr:
		return c.call(x, sc)
	case *hclsyntax.ParenthesesExpr:
		return c.template(x.Expression, sc)
	case *hclsyntax.ForExpr:
		return c.forExpr(x, sc)
	case *hclsyntax.ConditionalExpr:
		cond, diags := c.template(x.Condition, sc)
		yes, d := c.template(x.TrueResult, sc)
		diags = append(diags, d...)
		no, d := c.template(x.FalseResult, sc)
		return &condNode{cond: cond, yes: yes, no: no}, append(diags, d...)
	case *hclsyntax.BinaryOpExpr:
		if x.Op != hclsyntax.OpEqual && x.Op != hclsyntax.OpNotEqual {
			break
		}
		l, diags := c.template(x.LHS, sc)
		r, d := c.template(x.RHS, sc)
		return &eqNode{l: l, r: r, not: x.Op == hclsyntax.OpNotEqual}, append(diags, d...)
	}
	return nil, hcl.Diagnostics{diag(expr.Range(), "Unsupported expression",
		"A template may hold literals, quoted strings with ${…}, objects, lists, [for v in list : … if a == b], a == b ? x : y, variables (frame, params, prompt, session, turn, tool, id, now) and the functions env, map, join, default, string and tojson; this expression is none of those.")}
}

func constKey(expr hcl.Expression) (string, hcl.Diagnostics) {
	v, diags := expr.Value(nil)
	if diags.HasErrors() {
		return "", hcl.Diagnostics{diag(expr.Range(), "Invalid key", "Object keys must be constant strings.")}
	}
	if v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
		return "", hcl.Diagnostics{diag(expr.Range(), "Invalid key", "Object keys must be constant strings.")}
	}
	return v.AsString(), nil
}

func literal(v cty.Value, rng hcl.Range) (node, hcl.Diagnostics) {
	if v.IsNull() {
		return &constNode{}, nil
	}
	if v.Type() == cty.String {
		return &constNode{v: strValue(v.AsString())}, nil
	}
	b, err := ctyjson.Marshal(v, v.Type())
	if err != nil {
		return nil, hcl.Diagnostics{diag(rng, "Invalid literal", "%v", err)}
	}
	return &constNode{v: rawValue(b)}, nil
}

// forExpr compiles [for v in LIST : EXPR] and [for i, v in LIST : EXPR if
// COND]: a list built from each element of a JSON array.
func (c *compiler) forExpr(x *hclsyntax.ForExpr, sc scope) (node, hcl.Diagnostics) {
	if x.KeyExpr != nil {
		return nil, hcl.Diagnostics{diag(x.Range(), "Unsupported expression", "A for expression builds a list here: [for v in list : …], not an object.")}
	}
	coll, diags := c.template(x.CollExpr, sc)
	for _, name := range []string{x.KeyVar, x.ValVar} {
		if _, clash := rootNames[name]; clash {
			return nil, append(diags, diag(x.Range(), "Invalid loop variable", "%q is a template variable already; name the loop variable otherwise.", name))
		}
	}
	c.locals = append(c.locals, x.KeyVar, x.ValVar)
	defer func() { c.locals = c.locals[:len(c.locals)-2] }()
	body, d := c.template(x.ValExpr, sc)
	diags = append(diags, d...)
	n := &forNode{coll: coll, keyVar: x.KeyVar, valVar: x.ValVar, body: body}
	if x.CondExpr != nil {
		n.cond, d = c.template(x.CondExpr, sc)
		diags = append(diags, d...)
	}
	return n, diags
}

func (c *compiler) isLocal(name string) bool {
	for _, l := range c.locals {
		if l != "" && l == name {
			return true
		}
	}
	return false
}

// traversal compiles a variable reference such as frame.data.sessionId.
func (c *compiler) traversal(tr hcl.Traversal, rng hcl.Range, sc scope) (node, hcl.Diagnostics) {
	name := tr.RootName()
	if c.isLocal(name) {
		path, d := traversalPath(tr, rng)
		if d != nil {
			return nil, d
		}
		if path != "" {
			if err := checkPath(path); err != nil {
				return nil, hcl.Diagnostics{diag(rng, "Invalid gjson path", "%s.%s: %v.", name, path, err)}
			}
		}
		return &localNode{name: name, path: path}, nil
	}
	r, ok := rootNames[name]
	if !ok {
		return nil, hcl.Diagnostics{diag(rng, "Unknown variable",
			"There is no variable named %q; templates can read frame, params, prompt, session, turn, tool, id and now.", name)}
	}
	path, d := traversalPath(tr, rng)
	if d != nil {
		return nil, d
	}
	needPath := func(what string) hcl.Diagnostics {
		if path == "" {
			return hcl.Diagnostics{diag(rng, "Incomplete reference", "%s needs a path, such as %s.", name, what)}
		}
		if err := checkPath(path); err != nil {
			return hcl.Diagnostics{diag(rng, "Invalid gjson path", "%s.%s: %v.", name, path, err)}
		}
		return nil
	}
	var allowed bool
	switch r {
	case rFrame:
		allowed = sc.frame
		if d := needPath("frame.data.content"); d != nil {
			return nil, d
		}
	case rParams:
		allowed = sc.params
		if d := needPath("params.cwd"); d != nil {
			return nil, d
		}
	case rPrompt:
		allowed = sc.prompt
		if path != "text" && path != "blocks" {
			return nil, hcl.Diagnostics{diag(rng, "Unknown variable", "prompt has the attributes prompt.text (the prompt's text blocks joined, resource links as paths) and prompt.blocks (the ACP content blocks as they came).")}
		}
	case rTool:
		allowed = sc.tool
		switch path {
		case "id", "name", "title", "input", "output":
		default:
			return nil, hcl.Diagnostics{diag(rng, "Unknown variable", "tool has the attributes id, name, title, input and output; not %q.", path)}
		}
	case rSession:
		allowed = true
		switch path {
		case "id", "cwd":
		case "":
			return nil, hcl.Diagnostics{diag(rng, "Incomplete reference", "session needs an attribute: session.id, session.cwd, or a value a reply keeps.")}
		default:
			if strings.Contains(path, ".") {
				return nil, hcl.Diagnostics{diag(rng, "Invalid reference", "session.%s: session values are flat names.", path)}
			}
			c.keptUses = append(c.keptUses, keptUse{name: path, rng: rng})
		}
	case rTurn:
		// Both of turn's forms check the scope themselves, each with
		// its own advice, and return.
		sent, ok := strings.CutPrefix(path, "sent.")
		if !ok && path != "" && path != "sent" && !strings.Contains(path, ".") {
			if !sc.turn {
				return nil, hcl.Diagnostics{diag(rng, "Variable not available here",
					"turn cannot be read in %s: turn values are read by the rules, matches and cancel of a turn.", sc.where)}
			}
			c.turnKeptUses = append(c.turnKeptUses, keptUse{name: path, rng: rng})
			return &refNode{root: rTurnKept, path: path}, nil
		}
		if !ok || sent == "" {
			return nil, hcl.Diagnostics{diag(rng, "Unknown variable",
				"turn has turn.sent.PATH (the value at a gjson path of the frame the turn's prompt was sent as, such as turn.sent.chat_id) and turn.NAME (a value an event kept).")}
		}
		if err := checkPath(sent); err != nil {
			return nil, hcl.Diagnostics{diag(rng, "Invalid gjson path", "turn.sent.%s: %v.", sent, err)}
		}
		if !sc.turn {
			return nil, hcl.Diagnostics{diag(rng, "Variable not available here",
				"turn cannot be read in %s: turn.sent is the frame a prompt was sent as, read by the rules, matches and cancel of that turn.", sc.where)}
		}
		return &refNode{root: r, path: sent}, nil
	case rID, rNow:
		allowed = true
		if path != "" {
			return nil, hcl.Diagnostics{diag(rng, "Invalid reference", "%s has no attributes.", name)}
		}
	}
	if !allowed {
		return nil, hcl.Diagnostics{diag(rng, "Variable not available here",
			"%s cannot be read in %s.", name, sc.where)}
	}
	return &refNode{root: r, path: path}, nil
}

// traversalPath turns the steps after a variable's name into a gjson path.
func traversalPath(tr hcl.Traversal, rng hcl.Range) (string, hcl.Diagnostics) {
	var parts []string
	for _, step := range tr[1:] {
		switch s := step.(type) {
		case hcl.TraverseAttr:
			parts = append(parts, s.Name)
		case hcl.TraverseIndex:
			switch {
			case s.Key.Type() == cty.String:
				// A string index is a raw gjson path fragment: frame["a.b|c"].
				parts = append(parts, s.Key.AsString())
			case s.Key.Type() == cty.Number:
				bf := s.Key.AsBigFloat()
				n, _ := bf.Int64()
				parts = append(parts, strconv.FormatInt(n, 10))
			default:
				return "", hcl.Diagnostics{diag(rng, "Invalid index", "An index must be a number or a string.")}
			}
		default:
			return "", hcl.Diagnostics{diag(rng, "Invalid reference", "Unsupported traversal step.")}
		}
	}
	path := strings.Join(parts, ".")
	return path, nil
}

// call compiles one of the template functions.
func (c *compiler) call(x *hclsyntax.FunctionCallExpr, sc scope) (node, hcl.Diagnostics) {
	rng := x.Range()
	argc := func(min, max int) hcl.Diagnostics {
		if len(x.Args) < min || len(x.Args) > max {
			want := strconv.Itoa(min)
			if max > min {
				want = fmt.Sprintf("%d to %d", min, max)
			}
			return hcl.Diagnostics{diag(rng, "Wrong number of arguments", "%s takes %s arguments; got %d.", x.Name, want, len(x.Args))}
		}
		return nil
	}
	args := func(from int) ([]node, hcl.Diagnostics) {
		var out []node
		var diags hcl.Diagnostics
		for _, a := range x.Args[from:] {
			n, d := c.template(a, sc)
			diags = append(diags, d...)
			out = append(out, n)
		}
		return out, diags
	}
	switch x.Name {
	case "env":
		if d := argc(1, 2); d != nil {
			return nil, d
		}
		n := &envNode{}
		for i, a := range x.Args {
			v, d := a.Value(nil)
			if d.HasErrors() || v.IsNull() || v.Type() != cty.String {
				return nil, hcl.Diagnostics{diag(a.Range(), "Invalid env argument", "env takes constant strings: env(\"NAME\") or env(\"NAME\", \"default\").")}
			}
			if i == 0 {
				n.name = v.AsString()
			} else {
				def := v.AsString()
				n.def = &def
			}
		}
		if c.envNames == nil {
			c.envNames = map[string]bool{}
		}
		c.envNames[n.name] = n.def == nil
		return n, nil
	case "map":
		if d := argc(2, 3); d != nil {
			return nil, d
		}
		obj, ok := x.Args[1].(*hclsyntax.ObjectConsExpr)
		if !ok {
			return nil, hcl.Diagnostics{diag(x.Args[1].Range(), "Invalid map table", "map's second argument is an object of constant values: map(frame.kind, { shell = \"execute\" }, \"other\").")}
		}
		m := &mapNode{table: map[string]value{}}
		var diags hcl.Diagnostics
		for _, item := range obj.Items {
			k, d := constKey(item.KeyExpr)
			diags = append(diags, d...)
			v, d := item.ValueExpr.Value(nil)
			if d.HasErrors() {
				diags = append(diags, diag(item.ValueExpr.Range(), "Invalid map table", "map's table holds constant values."))
				continue
			}
			lit, d := literal(v, item.ValueExpr.Range())
			diags = append(diags, d...)
			if lit != nil {
				m.table[k] = lit.(*constNode).v
			}
		}
		n, d := c.template(x.Args[0], sc)
		diags = append(diags, d...)
		m.x = n
		if len(x.Args) == 3 {
			m.def, d = c.template(x.Args[2], sc)
			diags = append(diags, d...)
		}
		return m, diags
	case "join":
		if d := argc(2, 2); d != nil {
			return nil, d
		}
		a, diags := args(0)
		return &joinNode{x: a[0], sep: a[1]}, diags
	case "default":
		if d := argc(2, 8); d != nil {
			return nil, d
		}
		a, diags := args(0)
		return &defaultNode{alts: a}, diags
	case "string":
		if d := argc(1, 1); d != nil {
			return nil, d
		}
		a, diags := args(0)
		return &concatNode{parts: a}, diags
	case "tojson":
		if d := argc(1, 1); d != nil {
			return nil, d
		}
		a, diags := args(0)
		return &tojsonNode{x: a[0]}, diags
	}
	return nil, hcl.Diagnostics{diag(x.NameRange, "Unknown function",
		"There is no function %q; templates have env, map, join, default, string and tojson.", x.Name)}
}
