package bridge

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// The engine's parts reach the core through one small interface each, not
// through the engine (ARCHITECTURE.md, "The engine's parts"): a part's
// files never name the engine type, so a part can neither hold an *engine
// nor reach the core's fields and methods around its interface. A part's
// files are those that declare its type or a method on it, found by
// parsing the package: a new file of a part is checked as soon as it has a
// method of the part.
var parts = map[string]string{ // part type → the interface it uses
	"durableSessions": "sessionHooks",
	"supervisor":      "linkHooks",
	"v2editor":        "v2Hooks",
}

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
	for part, hooks := range parts {
		var own []string // the part's files
		hooksIn, fields := "", 0
		for name, f := range files {
			mine := false
			for _, decl := range f.Decls {
				switch d := decl.(type) {
				case *ast.FuncDecl:
					if d.Recv != nil && receiverType(d.Recv.List[0].Type) == part {
						mine = true
					}
				case *ast.GenDecl:
					for _, spec := range d.Specs {
						ts, ok := spec.(*ast.TypeSpec)
						if !ok {
							continue
						}
						switch ts.Name.Name {
						case part:
							mine = true
							for _, fl := range ts.Type.(*ast.StructType).Fields.List {
								if id, ok := fl.Type.(*ast.Ident); ok && id.Name == hooks {
									fields++
								}
							}
						case hooks:
							hooksIn = name
						}
					}
				}
			}
			if mine {
				own = append(own, name)
			}
		}
		sort.Strings(own)
		if len(own) == 0 {
			t.Fatalf("no file declares %s or a method on it", part)
		}
		if fields != 1 {
			t.Errorf("%s has %d fields of type %s; want one: the part reaches the core through it", part, fields, hooks)
		}
		if hooksIn == "" || !slices.Contains(own, hooksIn) {
			t.Errorf("%s is declared in %q, not in one of %s's own files %v", hooks, hooksIn, part, own)
		}
		for _, name := range own {
			ast.Inspect(files[name], func(n ast.Node) bool {
				if id, ok := n.(*ast.Ident); ok && id.Name == "engine" {
					t.Errorf("%s: %s's file names the engine type; reach the core through %s instead", fset.Position(id.Pos()), part, hooks)
				}
				return true
			})
		}
		t.Logf("%s (%s): %s", part, hooks, strings.Join(own, ", "))
	}
	// The engine implements every part's interface (and the compiler
	// checks it where the assertion is written, hooks.go); make sure the
	// assertion stays.
	src, err := os.ReadFile("hooks.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, hooks := range parts {
		if !regexp.MustCompile(`\b_\s+` + hooks + `\s+=\s+\(\*engine\)\(nil\)`).Match(src) {
			t.Errorf("hooks.go does not assert that *engine implements %s", hooks)
		}
	}
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
