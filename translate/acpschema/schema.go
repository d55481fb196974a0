// Package acpschema validates ACP v1 messages against the protocol's
// official JSON Schema, embedded: pure (bytes in, problems out), for the
// compliance shim on the relay's path and for acp-bridge check.
package acpschema

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
)

// schemaJSON is the stable ACP v1 schema (schema/SOURCE.md says where it
// comes from).
//
//go:embed schema/acp-v1.json
var schemaJSON []byte

// Schema validates ACP messages against the embedded ACP v1 JSON Schema.
// It implements the subset of JSON Schema 2020-12 the ACP schema uses:
// $ref into $defs, type, properties, required, additionalProperties,
// allOf/anyOf/oneOf/not, const, enum, items, minimum and maximum. Format,
// descriptions and the x-* annotations are ignored. Unknown members are
// allowed wherever the schema allows them, as it does almost everywhere.
type Schema struct {
	defs map[string]any
	// by method: params of agent→client requests and notifications, and
	// results of client→agent requests.
	agentRequests      map[string]string
	agentNotifications map[string]string
	results            map[string]string
}

var (
	schemaOnce sync.Once
	schemaVal  *Schema
	schemaErr  error
)

// LoadSchema returns the embedded schema, compiled once.
func LoadSchema() (*Schema, error) {
	schemaOnce.Do(func() { schemaVal, schemaErr = parseSchema(schemaJSON, v1Defs) })
	return schemaVal, schemaErr
}

// v1Defs are the $defs a v1 schema must have.
var v1Defs = []string{"Error", "RequestId", "SessionNotification", "PromptResponse"}

func parseSchema(doc []byte, must []string) (*Schema, error) {
	var root map[string]any
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	if err := d.Decode(&root); err != nil {
		return nil, fmt.Errorf("ACP schema: %w", err)
	}
	defs, _ := root["$defs"].(map[string]any)
	s := &Schema{defs: defs, agentRequests: map[string]string{}, agentNotifications: map[string]string{}, results: map[string]string{}}
	// Each request, response and notification type names its method and
	// the side that handles it: x-side "client" requests and notifications
	// are the ones an agent sends; x-side "agent" responses answer the
	// client's requests.
	for name, v := range defs {
		def, _ := v.(map[string]any)
		method, _ := def["x-method"].(string)
		side, _ := def["x-side"].(string)
		switch {
		case method == "":
		case side == "client" && strings.HasSuffix(name, "Request"):
			s.agentRequests[method] = name
		case (side == "client" || side == "protocol") && strings.HasSuffix(name, "Notification"):
			// "protocol" notifications ($/cancel_request) go both ways.
			s.agentNotifications[method] = name
		case side == "agent" && strings.HasSuffix(name, "Response"):
			s.results[method] = name
		}
	}
	for _, name := range must {
		if defs[name] == nil {
			return nil, fmt.Errorf("ACP schema: no $defs/%s", name)
		}
	}
	return s, nil
}

// ResultDef names the $defs type of method's result, "" when the schema has
// none (extension methods).
func (s *Schema) ResultDef(method string) string { return s.results[method] }

// RequestDef names the params type of an agent→client request.
func (s *Schema) RequestDef(method string) string { return s.agentRequests[method] }

// NotificationDef names the params type of an agent→client notification.
func (s *Schema) NotificationDef(method string) string { return s.agentNotifications[method] }

// Validate checks raw JSON against $defs/def and returns the problems, each
// naming the failing field by its path ("update.content: want object, got
// string"); nil when it conforms.
func (s *Schema) Validate(def string, raw []byte) []string {
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return []string{"not JSON: " + err.Error()}
	}
	return s.ValidateValue(def, v)
}

// ValidateValue is Validate for a decoded value (numbers as json.Number).
func (s *Schema) ValidateValue(def string, v any) []string {
	sch, ok := s.defs[def]
	if !ok {
		return []string{fmt.Sprintf("the schema has no type %s", def)}
	}
	errs := s.validate(sch, v, "", 0)
	var out []string
	for _, e := range errs {
		out = append(out, e.String())
	}
	return out
}

type schemaError struct {
	path, msg string
	// konst is the wanted value of a failed const (a variant's
	// discriminator), hasConst says it is set.
	konst    any
	hasConst bool
	// wantType is the wanted type of a failed "type", got what was there.
	wantType, got string
}

func (e schemaError) String() string {
	if e.path == "" {
		return e.msg
	}
	return e.path + ": " + e.msg
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func typeOf(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		if !strings.ContainsAny(v.String(), ".eE") {
			return "integer"
		}
		if f, err := v.Float64(); err == nil && f == math.Trunc(f) {
			return "integer"
		}
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func typeMatches(want, got string) bool {
	return want == got || (want == "number" && got == "integer")
}

func show(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 60 {
		return string(b[:57]) + "..."
	}
	return string(b)
}

func (s *Schema) validate(sch any, v any, path string, depth int) []schemaError {
	if depth > 64 {
		return []schemaError{{path: path, msg: "schema nesting too deep"}}
	}
	switch sch := sch.(type) {
	case bool:
		if !sch {
			return []schemaError{{path: path, msg: "not allowed here"}}
		}
		return nil
	case map[string]any:
		return s.validateObject(sch, v, path, depth)
	}
	return nil
}

func (s *Schema) validateObject(sch map[string]any, v any, path string, depth int) []schemaError {
	var errs []schemaError
	if ref, ok := sch["$ref"].(string); ok {
		name := strings.TrimPrefix(ref, "#/$defs/")
		target, ok := s.defs[name]
		if !ok {
			return []schemaError{{path: path, msg: "schema reference " + ref + " not found"}}
		}
		errs = append(errs, s.validate(target, v, path, depth+1)...)
	}
	got := typeOf(v)
	switch t := sch["type"].(type) {
	case string:
		if !typeMatches(t, got) {
			return append(errs, schemaError{path: path, msg: fmt.Sprintf("want %s, got %s %s", t, got, show(v)), wantType: t, got: got + " " + show(v)})
		}
	case []any:
		ok := false
		var names []string
		for _, x := range t {
			n, _ := x.(string)
			names = append(names, n)
			ok = ok || typeMatches(n, got)
		}
		if !ok {
			return append(errs, schemaError{path: path, msg: fmt.Sprintf("want %s, got %s %s", strings.Join(names, " or "), got, show(v))})
		}
	}
	if c, ok := sch["const"]; ok && !equal(c, v) {
		errs = append(errs, schemaError{path: path, msg: fmt.Sprintf("want %s, got %s", show(c), show(v)), konst: c, hasConst: true})
	}
	if e, ok := sch["enum"].([]any); ok {
		found := false
		for _, x := range e {
			found = found || equal(x, v)
		}
		if !found {
			errs = append(errs, schemaError{path: path, msg: fmt.Sprintf("%s is not one of %s", show(v), show(e))})
		}
	}
	if n, ok := v.(json.Number); ok {
		f, _ := n.Float64()
		if m, ok := sch["minimum"].(json.Number); ok {
			if mf, _ := m.Float64(); f < mf {
				errs = append(errs, schemaError{path: path, msg: fmt.Sprintf("%s is below the minimum %s", n, m)})
			}
		}
		if m, ok := sch["maximum"].(json.Number); ok {
			if mf, _ := m.Float64(); f > mf {
				errs = append(errs, schemaError{path: path, msg: fmt.Sprintf("%s is above the maximum %s", n, m)})
			}
		}
	}
	if obj, ok := v.(map[string]any); ok {
		props, _ := sch["properties"].(map[string]any)
		if req, ok := sch["required"].([]any); ok {
			for _, r := range req {
				name, _ := r.(string)
				if _, ok := obj[name]; !ok {
					errs = append(errs, schemaError{path: join(path, name), msg: "required field missing"})
				}
			}
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if p, ok := props[k]; ok {
				errs = append(errs, s.validate(p, obj[k], join(path, k), depth+1)...)
			} else if ap, ok := sch["additionalProperties"]; ok {
				errs = append(errs, s.validate(ap, obj[k], join(path, k), depth+1)...)
			}
		}
	}
	if arr, ok := v.([]any); ok {
		if items, ok := sch["items"]; ok {
			for i, x := range arr {
				errs = append(errs, s.validate(items, x, fmt.Sprintf("%s[%d]", path, i), depth+1)...)
			}
		}
	}
	if all, ok := sch["allOf"].([]any); ok {
		for _, sub := range all {
			errs = append(errs, s.validate(sub, v, path, depth+1)...)
		}
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		branches, ok := sch[kw].([]any)
		if !ok {
			continue
		}
		var best []schemaError
		matched := 0
		discPath, discOK := "", true // every variant failed on one discriminator
		var discWant []string
		typeOK := true // every variant failed on its type alone
		var types []string
		for _, b := range branches {
			be := s.validate(b, v, path, depth+1)
			if len(be) == 0 {
				matched++
				continue
			}
			if len(be) == 1 && be[0].wantType != "" && be[0].path == path {
				if !slices.Contains(types, be[0].wantType) {
					types = append(types, be[0].wantType)
				}
			} else {
				typeOK = false
			}
			if c, ok := constFailure(be); ok && (discPath == "" || discPath == c.path) {
				discPath = c.path
				discWant = append(discWant, show(c.konst))
			} else {
				discOK = false
			}
			if best == nil || closer(be, best) {
				best = be
			}
		}
		switch {
		case matched == 0 && typeOK && len(types) > 0:
			errs = append(errs, schemaError{path: path, msg: fmt.Sprintf("want %s, got %s", strings.Join(types, " or "), typeOf(v)+" "+show(v))})
		case matched == 0 && discOK && discPath != "" && len(discWant) > 1:
			errs = append(errs, schemaError{path: discPath, msg: fmt.Sprintf("%s is not one of %s", show(lookup(v, strings.TrimPrefix(strings.TrimPrefix(discPath, path), "."))), strings.Join(discWant, ", "))})
		case matched == 0 && best != nil:
			errs = append(errs, best...)
		case matched > 1 && kw == "oneOf":
			errs = append(errs, schemaError{path: path, msg: fmt.Sprintf("matches %d variants, oneOf wants exactly one", matched)})
		}
	}
	if not, ok := sch["not"]; ok && len(s.validate(not, v, path, depth+1)) == 0 {
		errs = append(errs, schemaError{path: path, msg: "matches a schema it must not match"})
	}
	return errs
}

// closer reports whether branch errors a describe a nearer miss than b: the
// variant that got further into the value (a deeper failing path, so its
// discriminating const matched) is the one the value was meant to be.
func closer(a, b []schemaError) bool {
	da, db := maxDepth(a), maxDepth(b)
	if da != db {
		return da > db
	}
	return len(a) < len(b)
}

func maxDepth(es []schemaError) int {
	m := 0
	for _, e := range es {
		d := strings.Count(e.path, ".") + strings.Count(e.path, "[") + 1
		if e.path == "" {
			d = 0
		}
		if e.hasConst { // a failed discriminator const
			d--
		}
		m = max(m, d)
	}
	return m
}

// constFailure returns the const failure among a variant's errors.
func constFailure(es []schemaError) (schemaError, bool) {
	for _, e := range es {
		if e.hasConst {
			return e, true
		}
	}
	return schemaError{}, false
}

// lookup follows a dotted path of object keys into v.
func lookup(v any, path string) any {
	if path == "" {
		return v
	}
	for _, k := range strings.Split(path, ".") {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}

func equal(a, b any) bool {
	if an, ok := a.(json.Number); ok {
		bn, ok := b.(json.Number)
		if !ok {
			return false
		}
		af, _ := an.Float64()
		bf, _ := bn.Float64()
		return af == bf
	}
	ab, _ := json.Marshal(a)
	bb, _ := json.Marshal(b)
	return bytes.Equal(ab, bb)
}
