package rules

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/acp-bridge/acp-bridge/internal/wire"
	"github.com/acp-bridge/acp-bridge/translate"
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

// --- nodes ------------------------------------------------------------------

type constNode struct{ v value }

func (n *constNode) eval(*evalEnv) value { return n.v }

type refNode struct {
	root root
	path string
}

// String writes n as a profile writes it.
func (n *refNode) String() string {
	if n.root == rTurnKept {
		return "turn." + n.path
	}
	for name, r := range rootNames {
		if r != n.root {
			continue
		}
		switch {
		case n.root == rTurn:
			return "turn.sent." + n.path
		case n.path != "":
			return name + "." + n.path
		}
		return name
	}
	return "?"
}

func (n *refNode) eval(e *evalEnv) value {
	switch n.root {
	case rFrame:
		if e.frameParams != nil && strings.HasPrefix(n.path, "params.") {
			return gjsonValue(e.frameParams, n.path[len("params."):])
		}
		return gjsonValue(e.frame, n.path)
	case rParams:
		return gjsonValue(e.params, n.path)
	case rTurn:
		if e.turn == nil || e.turn.ex == nil {
			return value{}
		}
		return gjsonValue(e.turn.ex.sent, n.path)
	case rTurnKept:
		if e.turn == nil {
			return value{}
		}
		if v, ok := e.turn.kept[n.path]; ok {
			return rawValue(v)
		}
		return value{}
	case rPrompt:
		if n.path == "blocks" {
			return gjsonValue(e.params, "prompt")
		}
		return strValue(e.prompt)
	case rID:
		return rawValue(strconv.AppendUint(nil, e.id, 10))
	case rNow:
		return strValue(e.now.UTC().Format(time.RFC3339Nano))
	case rSession:
		if e.sess == nil {
			return value{}
		}
		switch n.path {
		case "id":
			return strValue(e.sess.id)
		case "cwd":
			if e.sess.cwd == "" {
				return value{}
			}
			return strValue(e.sess.cwd)
		}
		if v, ok := e.sess.kept[n.path]; ok {
			return rawValue(v)
		}
		return value{}
	case rTool:
		t := e.tool
		if t == nil {
			return value{}
		}
		switch n.path {
		case "id":
			return strValue(t.id)
		case "name":
			return strValue(t.name)
		case "title":
			return strValue(t.title)
		case "input":
			return strValue(t.input.String())
		case "output":
			return strValue(t.output.String())
		}
	}
	return value{}
}

func gjsonValue(doc []byte, path string) value {
	if doc == nil {
		return value{}
	}
	if raw, found, handled := rawLookup(doc, path); handled {
		if !found {
			return value{}
		}
		return rawValue(raw)
	}
	r := get(doc, path)
	if !r.Exists() {
		return value{}
	}
	return rawValue(bytesOf(r.Raw))
}

// get reads a gjson path of doc without copying: the results borrow doc,
// which translators may keep (the engine never reuses a frame or a Body),
// and are only ever copied into new buffers.
func get(doc []byte, path string) gjson.Result {
	return gjson.Get(unsafe.String(unsafe.SliceData(doc), len(doc)), path)
}

// bytesOf views a string borrowed from a frame as bytes, read-only.
func bytesOf(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// concatNode is a quoted template: always a string.
type concatNode struct{ parts []node }

func (n *concatNode) eval(e *evalEnv) value {
	if len(n.parts) == 1 {
		v := n.parts[0].eval(e)
		if v.kind == vStr {
			return v
		}
		return strValue(v.text())
	}
	var b strings.Builder
	for _, p := range n.parts {
		b.WriteString(p.eval(e).text())
	}
	return strValue(b.String())
}

type objectNode struct {
	keys []string // JSON-quoted
	vals []node
}

func (n *objectNode) eval(e *evalEnv) value {
	b := make([]byte, 0, 64)
	b = append(b, '{')
	first := true
	for i, k := range n.keys {
		v := n.vals[i].eval(e)
		if v.absent() {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, k...)
		b = append(b, ':')
		b = v.appendJSON(b)
	}
	return rawValue(append(b, '}'))
}

type arrayNode struct{ items []node }

func (n *arrayNode) eval(e *evalEnv) value {
	b := []byte{'['}
	first := true
	for _, it := range n.items {
		v := it.eval(e)
		if v.absent() {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = v.appendJSON(b)
	}
	return rawValue(append(b, ']'))
}

// forNode builds a list from the elements of a JSON array.
type forNode struct {
	coll           node
	keyVar, valVar string
	body, cond     node
}

func (n *forNode) eval(e *evalEnv) value {
	coll := n.coll.eval(e)
	b := []byte{'['}
	if coll.kind == vRaw && len(coll.raw) > 0 && coll.raw[0] == '[' {
		saved := len(e.locals)
		i := 0
		first := true
		gjson.ParseBytes(coll.raw).ForEach(func(_, el gjson.Result) bool {
			e.locals = append(e.locals[:saved], local{n.keyVar, strconv.AppendInt(nil, int64(i), 10)}, local{n.valVar, []byte(el.Raw)})
			i++
			if n.cond != nil {
				if c := n.cond.eval(e); !(c.kind == vRaw && string(c.raw) == "true") {
					return true
				}
			}
			v := n.body.eval(e)
			if v.absent() {
				return true
			}
			if !first {
				b = append(b, ',')
			}
			first = false
			b = v.appendJSON(b)
			return true
		})
		e.locals = e.locals[:saved]
	}
	return rawValue(append(b, ']'))
}

// eqNode is a == b or a != b, compared as JSON values.
type eqNode struct {
	l, r node
	not  bool
}

func (n *eqNode) eval(e *evalEnv) value {
	a, b := n.l.eval(e), n.r.eval(e)
	eq := a.absent() == b.absent()
	if eq && !a.absent() {
		eq = sameJSON(gjson.ParseBytes(a.appendJSON(nil)), gjson.ParseBytes(b.appendJSON(nil)))
	}
	if eq != n.not {
		return rawValue([]byte("true"))
	}
	return rawValue([]byte("false"))
}

// condNode is cond ? yes : no: yes when cond is the JSON value true (a
// comparison, or a frame's boolean), else no.
type condNode struct{ cond, yes, no node }

func (n *condNode) eval(e *evalEnv) value {
	if v := n.cond.eval(e); v.kind == vRaw && string(v.raw) == "true" {
		return n.yes.eval(e)
	}
	return n.no.eval(e)
}

// local is one loop variable's current value.
type local struct {
	name string
	raw  []byte
}

type localNode struct{ name, path string }

func (n *localNode) eval(e *evalEnv) value {
	for i := len(e.locals) - 1; i >= 0; i-- {
		if l := e.locals[i]; l.name == n.name {
			if n.path == "" {
				return rawValue(l.raw)
			}
			return gjsonValue(l.raw, n.path)
		}
	}
	return value{}
}

type envNode struct {
	name string
	def  *string
}

func (n *envNode) eval(e *evalEnv) value {
	if v, ok := e.envVars[n.name]; ok {
		return strValue(v)
	}
	if n.def != nil {
		return strValue(*n.def)
	}
	return value{}
}

type mapNode struct {
	x     node
	table map[string]value
	def   node
}

func (n *mapNode) eval(e *evalEnv) value {
	x := n.x.eval(e)
	if v, ok := n.table[x.text()]; ok && !x.absent() {
		return v
	}
	if n.def != nil {
		return n.def.eval(e)
	}
	return x
}

type joinNode struct{ x, sep node }

func (n *joinNode) eval(e *evalEnv) value {
	x := n.x.eval(e)
	if x.kind != vRaw || len(x.raw) == 0 || x.raw[0] != '[' {
		return x
	}
	sep := n.sep.eval(e).text()
	var b strings.Builder
	i := 0
	gjson.ParseBytes(x.raw).ForEach(func(_, v gjson.Result) bool {
		if i > 0 {
			b.WriteString(sep)
		}
		i++
		b.WriteString(v.String())
		return true
	})
	return strValue(b.String())
}

type defaultNode struct{ alts []node }

func (n *defaultNode) eval(e *evalEnv) value {
	var v value
	for _, a := range n.alts {
		v = a.eval(e)
		if !v.missing() && v.text() != "" {
			return v
		}
	}
	return v
}

type tojsonNode struct{ x node }

func (n *tojsonNode) eval(e *evalEnv) value {
	v := n.x.eval(e)
	if v.absent() {
		return v
	}
	return strValue(string(v.appendJSON(nil)))
}

// --- matches ------------------------------------------------------------------

// cond is one condition of a match: the value at a gjson path of the frame
// (or of the bridge's state, for paths starting with $) equals one of want,
// is absent (absent), or exists with any value (present).
type cond struct {
	path    string
	state   string // "$tool.open", "$tool.output", "$turn.running"
	absent  bool
	present bool
	want    []gjson.Result
	// ref, when set, is a variable whose value the path must equal
	// (session.NAME, turn.sent.PATH).
	ref node
}

// match is a compiled match object; all conditions must hold.
type match struct {
	conds []cond
}

var statePaths = map[string]bool{"$tool.open": true, "$tool.output": true, "$turn.running": true}

// compileMatch compiles { path = value, … }: value is a literal, a list of
// literals (any of them), null (the path must be absent), or a variable
// (session.NAME, turn.sent.PATH where sc allows it): equal to its value
// when the frame arrives, and never equal while it has none.
func (c *compiler) compileMatch(expr hcl.Expression, sc scope) (*match, hcl.Diagnostics) {
	obj, ok := expr.(*hclsyntax.ObjectConsExpr)
	if !ok {
		return nil, hcl.Diagnostics{diag(expr.Range(), "Invalid match",
			"A match is an object of gjson paths and the values they must hold: { type = \"prompt_response\", \"data.status\" = \"completed\" }.")}
	}
	m := &match{}
	var diags hcl.Diagnostics
	for _, item := range obj.Items {
		k, d := constKey(item.KeyExpr)
		if d.HasErrors() {
			diags = append(diags, d...)
			continue
		}
		cd := cond{path: k}
		if strings.HasPrefix(k, "$") {
			if !statePaths[k] {
				diags = append(diags, diag(item.KeyExpr.Range(), "Unknown state", "%s is not a state a match can test; there are $tool.open, $tool.output and $turn.running.", k))
				continue
			}
			cd.state, cd.path = k, ""
		} else if err := checkPath(k); err != nil {
			diags = append(diags, diag(item.KeyExpr.Range(), "Invalid gjson path", "%q: %v.", k, err))
			continue
		}
		if tr, ok := item.ValueExpr.(*hclsyntax.ScopeTraversalExpr); ok {
			switch name := tr.Traversal.RootName(); {
			case name == "present" && len(tr.Traversal) == 1:
				cd.present = true
				m.conds = append(m.conds, cd)
				continue
			case name == "absent" && len(tr.Traversal) == 1:
				cd.absent = true
				m.conds = append(m.conds, cd)
				continue
			case name == "session" || name == "turn":
				n, d := c.traversal(tr.Traversal, tr.Range(), sc)
				if d.HasErrors() {
					diags = append(diags, d...)
					continue
				}
				cd.ref = n
				m.conds = append(m.conds, cd)
				continue
			}
		}
		v, d := item.ValueExpr.Value(nil)
		if d.HasErrors() {
			diags = append(diags, diag(item.ValueExpr.Range(), "Invalid match value", "Match values are constants (a string, number, bool, a list of those (any of them), present or absent (null)), or %s.", sc.matchVars()))
			continue
		}
		add := func(v cty.Value) {
			b, err := ctyjson.Marshal(v, v.Type())
			if err != nil {
				diags = append(diags, diag(item.ValueExpr.Range(), "Invalid match value", "%v", err))
				return
			}
			cd.want = append(cd.want, gjson.ParseBytes(b))
		}
		switch {
		case v.IsNull():
			cd.absent = true
		case v.Type().IsTupleType() || v.Type().IsListType():
			for it := v.ElementIterator(); it.Next(); {
				_, ev := it.Element()
				add(ev)
			}
		default:
			add(v)
		}
		m.conds = append(m.conds, cd)
	}
	sort.SliceStable(m.conds, func(i, j int) bool { return m.conds[i].state == "" && m.conds[j].state != "" })
	return m, diags
}

// state is what the $ conditions of a match read.
type matchState interface {
	stateValue(name string) gjson.Result
}

// matchEnv is what a match's variables read: the session and turn of the
// frame being matched.
func matchEnv(st matchState) *evalEnv {
	s, ok := st.(*state)
	if !ok || s == nil {
		return &evalEnv{}
	}
	return &evalEnv{sess: s.sess, turn: s.turn}
}

// matchVars names the variables a match can compare against in sc.
func (sc scope) matchVars() string {
	if sc.turn {
		return "a variable: session.NAME, turn.sent.PATH or turn.NAME"
	}
	return "session.NAME"
}

// envOfState returns the envelope st carries, if any.
func envOfState(st matchState) *translate.Envelope {
	if s, ok := st.(*state); ok && s != nil {
		return s.env
	}
	return nil
}

// String writes m as a profile writes it: { path = value, … }.
func (m *match) String() string {
	parts := make([]string, 0, len(m.conds))
	for _, c := range m.conds {
		path := c.path
		if c.state != "" {
			path = c.state
		}
		switch {
		case c.absent:
			parts = append(parts, strconv.Quote(path)+" = null")
		case c.present:
			parts = append(parts, strconv.Quote(path)+" = (any value)")
		case c.ref != nil:
			parts = append(parts, strconv.Quote(path)+" = "+c.ref.(*refNode).String())
		case len(c.want) == 1:
			parts = append(parts, strconv.Quote(path)+" = "+c.want[0].Raw)
		default:
			raws := make([]string, len(c.want))
			for i, w := range c.want {
				raws[i] = w.Raw
			}
			parts = append(parts, strconv.Quote(path)+" = ["+strings.Join(raws, ", ")+"]")
		}
	}
	return "{ " + strings.Join(parts, ", ") + " }"
}

func (m *match) matches(frame []byte, st matchState) bool {
	for i := range m.conds {
		c := &m.conds[i]
		var got gjson.Result
		if c.state != "" {
			got = st.stateValue(c.state)
		} else {
			got = envGet(envOfState(st), frame, c.path)
		}
		if c.absent {
			if got.Exists() {
				return false
			}
			continue
		}
		if !got.Exists() {
			return false
		}
		if c.present {
			continue
		}
		if c.ref != nil {
			want := c.ref.eval(matchEnv(st))
			if want.missing() || !sameValue(got, gjson.ParseBytes(want.appendJSON(nil))) {
				return false
			}
			continue
		}
		ok := false
		for _, w := range c.want {
			if sameJSON(got, w) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// sameValue is sameJSON, except that a number and a string with the same
// text are the same: an id sent as 3 and echoed as "3" (or the other way
// round) names the same turn, as turn { key } compares it.
func sameValue(a, b gjson.Result) bool {
	if (a.Type == gjson.String && b.Type == gjson.Number) || (a.Type == gjson.Number && b.Type == gjson.String) {
		return a.String() == b.String()
	}
	return sameJSON(a, b)
}

func sameJSON(a, b gjson.Result) bool {
	if a.Type != b.Type {
		return false
	}
	switch a.Type {
	case gjson.String:
		return a.Str == b.Str
	case gjson.Number:
		return a.Num == b.Num
	case gjson.True, gjson.False, gjson.Null:
		return true
	}
	return a.Raw == b.Raw
}
