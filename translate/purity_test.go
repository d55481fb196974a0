package translate

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// -update rewrites golden transcripts in the dialect packages (see package
// translatetest). It is defined here too so that
// `go test ./translate/... -update` does not fail in this package, which has
// no transcripts; the guard leaves it to translatetest when both are linked.
var _ = func() bool {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden transcripts (no-op in package translate)")
	}
	return true
}()

// bannedImports are packages a translator must not use: translators are pure
// state machines fed by the engine (ARCHITECTURE.md, "translate is pure"), so no I/O, no
// logging, no clocks, no randomness. Time comes in as input (Msg.At, and
// durations in Timer outputs), so package time may be imported for its types,
// but nothing that reads the clock or waits (see clockFuncs).
var bannedImports = map[string]bool{
	"os":           true,
	"net":          true,
	"net/http":     true,
	"os/exec":      true,
	"io/fs":        true,
	"io/ioutil":    true,
	"syscall":      true,
	"log":          true,
	"log/slog":     true,
	"math/rand":    true,
	"math/rand/v2": true,
	"crypto/rand":  true,
}

// clockFuncs are the functions of package time that read the clock or wait.
var clockFuncs = map[string]bool{
	"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true,
	"AfterFunc": true, "NewTimer": true, "NewTicker": true, "Tick": true,
}

// bannedPrefixes extend bannedImports to whole trees that only do I/O.
var bannedPrefixes = []string{"os/", "net/http/", "syscall/", "golang.org/x/sys/"}

// TestPurity parses every non-test Go file under translate/ and fails on a go
// statement, a banned import or a call to time.Now. Test files are exempt, and
// so is translate/translatetest: it is test support (imported only by
// _test.go files) and must read and rewrite golden files.
func TestPurity(t *testing.T) {
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != "." && (name == "testdata" || name == "translatetest" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		checked++
		for _, p := range impurities(fset, f) {
			t.Error(p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("no Go files checked; is the test running in translate/?")
	}
}

// impurities returns one message per violation in f.
func impurities(fset *token.FileSet, f *ast.File) []string {
	var problems []string
	report := func(pos token.Pos, format string, args ...any) {
		problems = append(problems, fset.Position(pos).String()+": "+fmt.Sprintf(format, args...))
	}
	timeNames := map[string]bool{} // local names of the time package
	for _, imp := range f.Imports {
		path, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			continue
		}
		if isBanned(path) {
			report(imp.Pos(), "import of %q: translators do no I/O, logging, clock reads or randomness", path)
		}
		if path == "time" {
			name := "time"
			if imp.Name != nil {
				name = imp.Name.Name
			}
			timeNames[name] = true
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			report(n.Pos(), "go statement: translators start no goroutines")
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok || !clockFuncs[sel.Sel.Name] {
				break
			}
			if x, ok := sel.X.(*ast.Ident); ok && timeNames[x.Name] {
				report(n.Pos(), "call to time.%s: time reaches a translator as input", sel.Sel.Name)
			}
		}
		return true
	})
	return problems
}

func isBanned(path string) bool {
	if bannedImports[path] {
		return true
	}
	for _, p := range bannedPrefixes {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

func TestImpurities(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string // substrings, one per expected problem
	}{
		{"pure", `package p
import ("encoding/json"; "net/url"; "path/filepath")
var _ = json.Valid
var _ = url.Parse
var _ = filepath.Join`, nil},
		{"go statement", `package p
func f() { go f() }`, []string{"go statement"}},
		{"banned imports", `package p
import ("os"; "net"; "net/http"; "os/exec"; "io/fs"; "io/ioutil"; "syscall"; "log"; "math/rand"; "crypto/rand"; "os/signal")`,
			[]string{`"os"`, `"net"`, `"net/http"`, `"os/exec"`, `"io/fs"`, `"io/ioutil"`, `"syscall"`, `"log"`, `"math/rand"`, `"crypto/rand"`, `"os/signal"`}},
		{"time.Now under an alias", `package p
import clock "time"
var _ = clock.Now()`, []string{"call to time.Now"}},
		{"timers", `package p
import "time"
var _ = time.AfterFunc(time.Second, nil)
var _ = time.Since(time.Time{})`, []string{"call to time.AfterFunc", "call to time.Since"}},
		{"time as data", `package p
import "time"
var _ time.Duration = 2 * time.Second
var _ = time.Time{}.Add(time.Second)`, nil},
		{"Now of another package is fine", `package p
type c struct{}
func (c) Now() int { return 0 }
var x c
var _ = x.Now()`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, "x.go", tt.src, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			got := impurities(fset, f)
			if len(got) != len(tt.want) {
				t.Fatalf("impurities = %q, want %d problems", got, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d = %q, want it to mention %s", i, got[i], w)
				}
			}
		})
	}
}
