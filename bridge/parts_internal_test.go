package bridge

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// The engine's parts reach the core through one small interface each, and
// one another through small interfaces too, never through the engine
// (ARCHITECTURE.md, "The engine's parts"). A part's files are those that
// declare its type or a method on it, found by parsing the package: a new
// file of a part is checked as soon as it has a method of the part. The
// rule, checked here:
//
//   - a part's files name neither the engine type nor another part's type,
//     so a part can hold neither an *engine nor another part, nor reach
//     their fields and methods around an interface;
//   - a part's struct has exactly one field of its core interface (parts)
//     and at most one field of each interface it reaches another part
//     through (peers), and no field of any other part's interface;
//   - every one of these interfaces is declared in the files of the part
//     that uses it;
//   - each has its compile-time assertion, var _ X = (*impl)(nil): the core
//     interfaces in hooks.go with impl the engine, a peer interface
//     anywhere in the package with impl the part named in peers;
//   - the engine has no method named as a peer interface's: those are the
//     other part's operations, not pass-throughs of the core.
var parts = map[string]string{ // part type → the interface it reaches the core through
	"durableSessions": "sessionHooks",
	"supervisor":      "linkHooks",
	"v2editor":        "v2Hooks",
}

// peers are the interfaces a part reaches other parts through, each with
// the part that implements it.
var peers = map[string][]peer{
	"durableSessions": {
		{iface: "linkOpener", impl: "supervisor"},
		{iface: "v2Turns", impl: "v2editor"},
	},
	"supervisor": {
		{iface: "v2Links", impl: "v2editor"},
	},
}

type peer struct{ iface, impl string }

func TestPartsReachTheCoreThroughTheirInterface(t *testing.T) {
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*ast.File{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = f
	}

	// The package's declarations: where each type is declared, each
	// interface's methods, each struct, the engine's methods, and the
	// assertions var _ X = (*T)(nil).
	declaredIn := map[string]string{}
	ifaces := map[string][]string{}
	structs := map[string]*ast.StructType{}
	methodsOf := map[string][]string{}
	type assertion struct{ iface, impl, file string }
	var asserts []assertion
	for name, f := range files {
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv != nil {
					r := receiverType(d.Recv.List[0].Type)
					methodsOf[r] = append(methodsOf[r], d.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						declaredIn[s.Name.Name] = name
						switch x := s.Type.(type) {
						case *ast.InterfaceType:
							for _, m := range x.Methods.List {
								for _, id := range m.Names {
									ifaces[s.Name.Name] = append(ifaces[s.Name.Name], id.Name)
								}
							}
						case *ast.StructType:
							structs[s.Name.Name] = x
						}
					case *ast.ValueSpec:
						if a, ok := asserted(s); ok {
							asserts = append(asserts, assertion{a[0], a[1], name})
						}
					}
				}
			}
		}
	}
	assertedIn := func(iface, impl string) []string {
		var in []string
		for _, a := range asserts {
			if a.iface == iface && a.impl == impl {
				in = append(in, a.file)
			}
		}
		return in
	}
	// Every interface a part may hold a field of, with the parts that may.
	allowed := map[string]string{}
	for part, hooks := range parts {
		allowed[hooks] = part
		for _, p := range peers[part] {
			allowed[p.iface] = part
		}
	}

	for part, hooks := range parts {
		var own []string // the part's files
		for name := range files {
			if declaredIn[part] == name || slices.ContainsFunc(files[name].Decls, func(decl ast.Decl) bool {
				d, ok := decl.(*ast.FuncDecl)
				return ok && d.Recv != nil && receiverType(d.Recv.List[0].Type) == part
			}) {
				own = append(own, name)
			}
		}
		sort.Strings(own)
		st := structs[part]
		if len(own) == 0 || st == nil {
			t.Fatalf("no file declares the struct %s", part)
		}

		// Its fields of the parts' interfaces.
		fields := map[string]int{}
		for _, fl := range st.Fields.List {
			id, ok := fl.Type.(*ast.Ident)
			if !ok || allowed[id.Name] == "" {
				continue
			}
			n := len(fl.Names)
			if n == 0 {
				n = 1 // embedded
			}
			fields[id.Name] += n
		}
		if fields[hooks] != 1 {
			t.Errorf("%s has %d fields of type %s; want one: the part reaches the core through it", part, fields[hooks], hooks)
		}
		mine := []string{hooks}
		for _, p := range peers[part] {
			mine = append(mine, p.iface)
			if fields[p.iface] > 1 {
				t.Errorf("%s has %d fields of type %s; want at most one: the part reaches %s through it", part, fields[p.iface], p.iface, p.impl)
			}
		}
		for iface := range fields {
			if !slices.Contains(mine, iface) {
				t.Errorf("%s holds a %s, %s's interface; a part holds its own interfaces only", part, iface, allowed[iface])
			}
		}

		// Where its interfaces are declared, and their assertions.
		for _, iface := range mine {
			if in := declaredIn[iface]; !slices.Contains(own, in) {
				t.Errorf("%s is declared in %q, not in one of %s's own files %v", iface, in, part, own)
			}
		}
		if !slices.Contains(assertedIn(hooks, "engine"), "hooks.go") {
			t.Errorf("hooks.go does not assert that *engine implements %s (var _ %s = (*engine)(nil))", hooks, hooks)
		}
		for _, p := range peers[part] {
			if len(assertedIn(p.iface, p.impl)) == 0 {
				t.Errorf("nothing asserts that *%s implements %s (var _ %s = (*%s)(nil))", p.impl, p.iface, p.iface, p.impl)
			}
			if len(ifaces[p.iface]) == 0 {
				t.Errorf("%s declares no methods", p.iface)
			}
			for _, m := range ifaces[p.iface] {
				if slices.Contains(methodsOf["engine"], m) {
					t.Errorf("*engine has a method %s, of %s: %s reaches %s through it directly, not through the engine", m, p.iface, part, p.impl)
				}
			}
			if len(assertedIn(p.iface, "engine")) > 0 {
				t.Errorf("something asserts that *engine implements %s, %s's interface", p.iface, p.impl)
			}
		}

		// What its files name.
		for _, name := range own {
			ast.Inspect(files[name], func(n ast.Node) bool {
				id, ok := n.(*ast.Ident)
				if !ok {
					return true
				}
				if id.Name == "engine" {
					t.Errorf("%s: %s's file names the engine type; reach the core through %s instead", fset.Position(id.Pos()), part, hooks)
				} else if _, other := parts[id.Name]; other && id.Name != part {
					t.Errorf("%s: %s's file names another part's type, %s; reach it through an interface of %s's own", fset.Position(id.Pos()), part, id.Name, part)
				}
				return true
			})
		}
		sizes := []string{}
		for _, iface := range mine {
			sizes = append(sizes, fmt.Sprintf("%s %d", iface, len(ifaces[iface])))
		}
		t.Logf("%s (%s methods): %s", part, strings.Join(sizes, ", "), strings.Join(own, ", "))
	}
}

// asserted reads var _ X = (*T)(nil) as X, T.
func asserted(s *ast.ValueSpec) ([2]string, bool) {
	if len(s.Names) != 1 || s.Names[0].Name != "_" || len(s.Values) != 1 {
		return [2]string{}, false
	}
	x, ok := s.Type.(*ast.Ident)
	if !ok {
		return [2]string{}, false
	}
	call, ok := s.Values[0].(*ast.CallExpr)
	if !ok || len(call.Args) != 1 {
		return [2]string{}, false
	}
	if nilID, ok := call.Args[0].(*ast.Ident); !ok || nilID.Name != "nil" {
		return [2]string{}, false
	}
	paren, ok := call.Fun.(*ast.ParenExpr)
	if !ok {
		return [2]string{}, false
	}
	star, ok := paren.X.(*ast.StarExpr)
	if !ok {
		return [2]string{}, false
	}
	impl, ok := star.X.(*ast.Ident)
	if !ok {
		return [2]string{}, false
	}
	return [2]string{x.Name, impl.Name}, true
}

// receiverType is the name of a method receiver's type.
func receiverType(x ast.Expr) string {
	if star, ok := x.(*ast.StarExpr); ok {
		x = star.X
	}
	if id, ok := x.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}
