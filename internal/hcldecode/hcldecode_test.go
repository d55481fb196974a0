package hcldecode_test

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/acp-bridge/acp-bridge/internal/hcldecode"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// The targets cover every tag kind and field type the package supports,
// in the shapes acp-bridge's configuration and profiles use them.
type (
	root struct {
		Name   string            `hcl:"name"`
		Count  int               `hcl:"count,optional"`
		On     bool              `hcl:"on,optional"`
		Args   []string          `hcl:"args,optional"`
		Env    map[string]string `hcl:"env,optional"`
		Raw    *hcl.Attribute    `hcl:"raw"`
		Expr   hcl.Expression    `hcl:"expr,optional"`
		Agents []*agent          `hcl:"agent,block"`
		Shim   *shim             `hcl:"shim,block"`
		Pairs  []pair            `hcl:"pair,block"`
	}
	agent struct {
		Name     string         `hcl:"name,label"`
		Command  []string       `hcl:"command,optional"`
		URL      *hcl.Attribute `hcl:"url,optional"`
		Body     hcl.Body       `hcl:",body"`
		DefRange hcl.Range      `hcl:",def_range"`
		Opts     *options       `hcl:"options,block"`
	}
	options struct {
		Rest hcl.Body `hcl:",remain"`
	}
	shim struct {
		Off  []string `hcl:"off,optional"`
		Rest hcl.Body `hcl:",remain"`
	}
	pair struct {
		A    string    `hcl:"a,label"`
		B    string    `hcl:"b,label"`
		V    *int      `hcl:"v,optional"`
		Need needed    `hcl:"need,block"`
		At   hcl.Range `hcl:",def_range"`
	}
	needed struct {
		X string `hcl:"x,optional"`
	}
	none   struct{}
	remain struct {
		Kind string   `hcl:"kind,optional"`
		Rest hcl.Body `hcl:",remain"`
	}
)

var targets = []func() any{
	func() any { return &root{} },
	func() any { return &agent{} },
	func() any { return &pair{} },
	func() any { return &none{} },
	func() any { return &remain{} },
}

var seeds = []string{
	``,
	`name = "x"`,
	`name = "x"
count = "3"
on = true
args = ["a", 1, true]
env = { A = "b" }
raw = 1 + 2
expr = upper("x")
agent "a" {
  command = ["x"]
  url = "ws://h"
  options { anything = 1 }
}
agent "b" {}
shim { off = ["x"] 
  extra = 2 }
pair "a" "b" {
  v = 3
  need { x = "y" }
}
`,
	`name = 1
count = "x"
on = "maybe"
args = "a"`,
	`name = null
args = null
count = null`,
	`shim {}
shim {}`,
	`pair "a" "b" {}`,
	`pair "a" {}`,
	`agent {}`,
	`agent "a" "b" {}`,
	`unknown = 1
agent "a" { nope = 2 }`,
	`name = var.x`,
	`name = "x"
name = "y"`,
	`agent "a" { options {} 
options {} }`,
	`command = ["a", null]`,
	`kind = "k"
other = 1
block "x" { y = 1 }`,
	`args = [["a"]]
env = { A = ["b"] }`,
	`v = 1.5`,
	`count = 1.5
on = 0`,
}

// FuzzDecodeAsGohcl decodes every parsed body into every target with both
// packages, and requires the same values and the same diagnostics: the
// class "hcldecode behaves unlike gohcl", which every configuration error
// message and every decoded option depend on.
func FuzzDecodeAsGohcl(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	ctx := &hcl.EvalContext{Variables: map[string]cty.Value{"var": cty.ObjectVal(map[string]cty.Value{"x": cty.StringVal("v")})}}
	f.Fuzz(func(t *testing.T, src string) {
		file, diags := hclsyntax.ParseConfig([]byte(src), "f.hcl", hcl.InitialPos)
		if diags.HasErrors() {
			return
		}
		for _, newTarget := range targets {
			for _, ctx := range []*hcl.EvalContext{nil, ctx} {
				want, got := newTarget(), newTarget()
				wantDiags := gohcl.DecodeBody(file.Body, ctx, want)
				gotDiags := hcldecode.DecodeBody(file.Body, ctx, got)
				if w, g := diagStrings(wantDiags), diagStrings(gotDiags); !slices.Equal(w, g) {
					t.Fatalf("%T from %q: diagnostics\n got %q\nwant %q (gohcl)", want, src, g, w)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("%T from %q:\n got %#v\nwant %#v (gohcl)", want, src, got, want)
				}
			}
		}
	})
}

// diagStrings is diags as sorted strings: gohcl decodes attributes and
// blocks in its maps' order, so only the set is the same.
func diagStrings(diags hcl.Diagnostics) []string {
	var s []string
	for _, d := range diags {
		s = append(s, fmt.Sprintf("%d %s: %s @%v ctx %v", d.Severity, d.Summary, d.Detail, d.Subject, d.Context))
	}
	slices.Sort(s)
	return s
}

// A struct without tags takes no content: how a dialect says it has no
// options. (Also checked against gohcl by the fuzz target's seeds.)
func TestDecodeBody_NoFieldsRefusesContent(t *testing.T) {
	file, _ := hclsyntax.ParseConfig([]byte("x = 1\n"), "f.hcl", hcl.InitialPos)
	diags := hcldecode.DecodeBody(file.Body, nil, &none{})
	if !diags.HasErrors() || diags[0].Summary != "Unsupported argument" {
		t.Fatalf("diagnostics %v, want Unsupported argument", diags)
	}
}
