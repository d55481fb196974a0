// Package hcldecode decodes HCL bodies into Go structs by their fields'
// hcl tags, as package gohcl does, for the part of gohcl's tag language
// acp-bridge's configuration and dialect profiles use: attr and optional
// (into *hcl.Attribute, hcl.Expression or any type gocty decodes), label, block
// (a struct, a pointer to one, or a slice of either), remain and body
// (into hcl.Body), and def_range.
//
// Why not gohcl: it imports its encoder's package, hclwrite, which imports
// github.com/google/go-cmp, whose package initializers compile regular
// expressions over Unicode classes at every start of the binary: 2.4 ms
// of each spawn on a 2-CPU VM, for an encoder acp-bridge never calls. An
// editor waits for that on every agent it starts.
//
// Behaviour follows gohcl where a configuration can see it: the same
// schema (attributes and blocks in name order; an attribute is required
// only when its field is neither optional, a pointer nor an
// hcl.Expression), so the same diagnostics from hcl.Body.Content; the
// same "Duplicate X block" and "Missing X block" errors; a missing
// hcl.Expression attribute is a null expression at the body's missing
// item range; and a value that does not convert is "Unsuitable value
// type".
package hcldecode

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/gocty"
)

// DecodeBody decodes body into the struct val points to, evaluating
// expressions with ctx (nil: constants only). A struct with no tagged
// fields refuses any content, which is how a dialect says it takes no
// options. It panics on a tag or field type it does not support: that is
// a programming error, found by any test that decodes the struct.
func DecodeBody(body hcl.Body, ctx *hcl.EvalContext, val any) hcl.Diagnostics {
	rv := reflect.ValueOf(val)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("hcldecode: target must be a pointer to a struct, not %T", val))
	}
	return decodeStruct(body, ctx, rv.Elem())
}

var (
	attributeType  = reflect.TypeFor[*hcl.Attribute]()
	expressionType = reflect.TypeFor[hcl.Expression]()
	bodyType       = reflect.TypeFor[hcl.Body]()
	rangeType      = reflect.TypeFor[hcl.Range]()
	stringType     = reflect.TypeFor[string]()
)

// fields is what a struct's hcl tags say, by field index (-1: none).
type fields struct {
	attrs    []attrField // in name order
	blocks   []namedField
	labels   []namedField // in field order: the block's labels in turn
	remain   int
	body     int
	defRange int
}

type namedField struct {
	name  string
	index int
}

type attrField struct {
	namedField
	optional bool
}

func tagsOf(t reflect.Type) fields {
	f := fields{remain: -1, body: -1, defRange: -1}
	for i := range t.NumField() {
		field := t.Field(i)
		tag, ok := field.Tag.Lookup("hcl")
		if !ok {
			continue
		}
		name, kind, _ := strings.Cut(tag, ",")
		if kind == "" {
			kind = "attr"
		}
		want := func(types ...reflect.Type) {
			if !slices.Contains(types, field.Type) {
				panic(fmt.Sprintf("hcldecode: %s.%s: tag %q on a %s", t, field.Name, tag, field.Type))
			}
		}
		switch kind {
		case "attr", "optional":
			f.attrs = append(f.attrs, attrField{namedField{name, i}, kind == "optional"})
		case "block":
			if blockStruct(field.Type).Kind() != reflect.Struct {
				panic(fmt.Sprintf("hcldecode: %s.%s: block tag on a %s, not a struct", t, field.Name, field.Type))
			}
			f.blocks = append(f.blocks, namedField{name, i})
		case "label":
			want(stringType)
			f.labels = append(f.labels, namedField{name, i})
		case "remain":
			want(bodyType)
			f.remain = i
		case "body":
			want(bodyType)
			f.body = i
		case "def_range":
			want(rangeType)
			f.defRange = i
		default:
			panic(fmt.Sprintf("hcldecode: %s.%s: tag kind %q is not supported", t, field.Name, kind))
		}
	}
	slices.SortFunc(f.attrs, func(a, b attrField) int { return strings.Compare(a.name, b.name) })
	slices.SortFunc(f.blocks, func(a, b namedField) int { return strings.Compare(a.name, b.name) })
	return f
}

// blockStruct is the struct a block field holds: T of T, *T, []T or []*T.
func blockStruct(t reflect.Type) reflect.Type {
	if t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func (f fields) schema(t reflect.Type) *hcl.BodySchema {
	s := &hcl.BodySchema{}
	for _, a := range f.attrs {
		ft := t.Field(a.index).Type
		s.Attributes = append(s.Attributes, hcl.AttributeSchema{
			Name:     a.name,
			Required: !a.optional && ft.Kind() != reflect.Pointer && ft != expressionType,
		})
	}
	for _, b := range f.blocks {
		var labels []string
		for _, l := range tagsOf(blockStruct(t.Field(b.index).Type)).labels {
			labels = append(labels, l.name)
		}
		s.Blocks = append(s.Blocks, hcl.BlockHeaderSchema{Type: b.name, LabelNames: labels})
	}
	return s
}

func decodeStruct(body hcl.Body, ctx *hcl.EvalContext, v reflect.Value) hcl.Diagnostics {
	t := v.Type()
	f := tagsOf(t)
	schema := f.schema(t)
	var content *hcl.BodyContent
	var rest hcl.Body
	var diags hcl.Diagnostics
	if f.remain >= 0 {
		content, rest, diags = body.PartialContent(schema)
	} else {
		content, diags = body.Content(schema)
	}
	if content == nil {
		return diags
	}
	if f.body >= 0 {
		v.Field(f.body).Set(reflect.ValueOf(&body).Elem())
	}
	if f.remain >= 0 {
		v.Field(f.remain).Set(reflect.ValueOf(&rest).Elem())
	}
	for _, a := range f.attrs {
		field := v.Field(a.index)
		attr := content.Attributes[a.name]
		switch {
		case field.Type() == attributeType:
			if attr != nil {
				field.Set(reflect.ValueOf(attr))
			}
		case field.Type() == expressionType:
			var expr hcl.Expression
			if attr != nil {
				expr = attr.Expr
			} else {
				// (Absent: null, for the caller to handle in cty's terms.)
				expr = hcl.StaticExpr(cty.NullVal(cty.DynamicPseudoType), body.MissingItemRange())
			}
			field.Set(reflect.ValueOf(&expr).Elem())
		case attr != nil:
			diags = append(diags, decodeValue(attr.Expr, ctx, field)...)
		}
	}
	byType := content.Blocks.ByType()
	for _, b := range f.blocks {
		diags = append(diags, decodeBlocks(body, byType[b.name], b.name, ctx, v.Field(b.index))...)
	}
	return diags
}

// decodeBlocks decodes the blocks of one type into field.
func decodeBlocks(body hcl.Body, blocks hcl.Blocks, name string, ctx *hcl.EvalContext, field reflect.Value) hcl.Diagnostics {
	t := field.Type()
	if t.Kind() == reflect.Slice {
		if len(blocks) == 0 {
			return nil // (the field is left as it is)
		}
		s := reflect.MakeSlice(t, len(blocks), len(blocks))
		var diags hcl.Diagnostics
		for i, b := range blocks {
			diags = append(diags, decodeBlock(b, ctx, s.Index(i))...)
		}
		field.Set(s)
		return diags
	}
	switch {
	case len(blocks) > 1:
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  fmt.Sprintf("Duplicate %s block", name),
			Detail:   fmt.Sprintf("Only one %s block is allowed. Another was defined at %s.", name, blocks[0].DefRange),
			Subject:  &blocks[1].DefRange,
		}}
	case len(blocks) == 0 && t.Kind() == reflect.Pointer:
		return nil
	case len(blocks) == 0:
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  fmt.Sprintf("Missing %s block", name),
			Detail:   fmt.Sprintf("A %s block is required.", name),
			Subject:  body.MissingItemRange().Ptr(),
		}}
	}
	return decodeBlock(blocks[0], ctx, field)
}

// decodeBlock decodes b into v, a struct or a pointer to one (allocated
// when nil).
func decodeBlock(b *hcl.Block, ctx *hcl.EvalContext, v reflect.Value) hcl.Diagnostics {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		v = v.Elem()
	}
	diags := decodeStruct(b.Body, ctx, v)
	f := tagsOf(v.Type())
	for i, l := range b.Labels {
		v.Field(f.labels[i].index).SetString(l)
	}
	if f.defRange >= 0 {
		v.Field(f.defRange).Set(reflect.ValueOf(b.DefRange))
	}
	return diags
}

// decodeValue evaluates expr into field, converted to the cty type that
// field's Go type implies.
func decodeValue(expr hcl.Expression, ctx *hcl.EvalContext, field reflect.Value) hcl.Diagnostics {
	val, diags := expr.Value(ctx)
	want, err := gocty.ImpliedType(field.Addr().Interface())
	if err != nil {
		panic(fmt.Sprintf("hcldecode: a %s cannot hold an attribute: %v", field.Type(), err))
	}
	if val, err = convert.Convert(val, want); err == nil {
		err = gocty.FromCtyValue(val, field.Addr().Interface())
	}
	if err != nil {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Unsuitable value type",
			Detail:   "Unsuitable value: " + err.Error(),
			Subject:  expr.StartRange().Ptr(),
			Context:  expr.Range().Ptr(),
		})
	}
	return diags
}
