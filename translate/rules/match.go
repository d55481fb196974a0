// Matches: a rule's conditions on a frame (or the bridge's state),
// compiled at load time, and how a frame is tested against them.

package rules

import (
	"sort"
	"strconv"
	"strings"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/tidwall/gjson"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

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
