package rules

import (
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/acp-bridge/acp-bridge/docs"
)

// docs/profiles.md is the rule language's reference (and what `acp-bridge
// dialects doc` prints). These tests keep it current: everything the
// compiler accepts is documented there, and its complete examples compile.

// Every attribute and block name of the HCL schema appears in the
// reference as code.
func TestDocsProfiles_DocumentsEverySchemaName(t *testing.T) {
	names := map[string]bool{}
	var walk func(reflect.Type)
	walk = func(ty reflect.Type) {
		for ty.Kind() == reflect.Pointer || ty.Kind() == reflect.Slice {
			ty = ty.Elem()
		}
		if ty.Kind() != reflect.Struct || !strings.HasPrefix(ty.Name(), "raw") {
			return
		}
		for i := range ty.NumField() {
			f := ty.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("hcl"), ",")
			if name != "" && !strings.Contains(f.Tag.Get("hcl"), ",label") {
				names[name] = true
			}
			walk(f.Type)
		}
	}
	for _, raw := range []any{rawProfile{}, rawRule{}} {
		walk(reflect.TypeOf(raw))
	}
	if len(names) < 40 {
		t.Fatalf("found only %d schema names; the walk over the raw* types is broken", len(names))
	}
	for name := range names {
		if !documents(name) {
			t.Errorf("docs/profiles.md does not document the attribute or block %q", name)
		}
	}
}

// Every variable, state test, request method and stop reason the compiler
// knows appears in the reference.
func TestDocsProfiles_DocumentsEveryName(t *testing.T) {
	var want []string
	for name := range rootNames {
		want = append(want, name)
	}
	for name := range statePaths {
		want = append(want, name)
	}
	for name := range knownMethods {
		want = append(want, name)
	}
	for name := range stopReasons {
		want = append(want, name)
	}
	for _, name := range want {
		if !documents(name) {
			t.Errorf("docs/profiles.md does not mention %q", name)
		}
	}
}

// Every template function the compiler knows (it lists them when asked for
// one it does not) is documented as a call.
func TestDocsProfiles_DocumentsEveryFunction(t *testing.T) {
	_, diags := Parse("fn.hcl", []byte("request \"session/prompt\" {\n  send = { x = nosuchfunction() }\n}\n"))
	msg := diags.Error()
	_, list, ok := strings.Cut(msg, "templates have ")
	if !ok {
		t.Fatalf("the unknown-function diagnostic no longer lists the functions: %s", msg)
	}
	fns := regexp.MustCompile(`[a-z]+`).FindAllString(strings.ReplaceAll(list, " and ", ", "), -1)
	if len(fns) < 5 {
		t.Fatalf("read only %v from %q", fns, list)
	}
	for _, fn := range fns {
		if !strings.Contains(docs.Profiles, "`"+fn+"(") {
			t.Errorf("docs/profiles.md does not document the function %s()", fn)
		}
	}
}

// The reference's hcl blocks are complete profiles, and they compile.
func TestDocsProfiles_ExamplesCompile(t *testing.T) {
	blocks := regexp.MustCompile("(?s)```hcl\n(.*?)```").FindAllStringSubmatch(docs.Profiles, -1)
	if len(blocks) == 0 {
		t.Fatal("docs/profiles.md has no ```hcl example")
	}
	for i, b := range blocks {
		if _, diags := Parse("docs-example.hcl", []byte(b[1])); diags.HasErrors() {
			t.Errorf("docs/profiles.md's hcl example %d does not compile: %s", i+1, diags.Error())
		}
	}
}

// documents reports whether the reference shows name as code (`name`, or
// `name.attribute` for a variable), as a quoted name, or as the start of an
// assignment or block in a code example.
func documents(name string) bool {
	for _, form := range []string{"`" + name + "`", "`" + name + ".", "\"" + name + "\""} {
		if strings.Contains(docs.Profiles, form) {
			return true
		}
	}
	return regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(name) + `\s*(=|\{|,|"[^"]*"\s*\{)`).MatchString(docs.Profiles)
}
