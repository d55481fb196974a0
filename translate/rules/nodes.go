// The nodes a compiled template is made of, and how each evaluates to a
// value by appending JSON bytes.

package rules

import (
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/tidwall/gjson"
)

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
