package main

// The layering test lives at the module's root because its rules are the
// whole module's (ARCHITECTURE.md, "The layers and who may import whom"):
// they speak of main, the toolkit, tests and tools as much as of the wire
// package, and a reader looks for them beside go.mod rather than inside
// one of the packages they constrain.

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/acp-bridge/acp-bridge"

// A layer is a list of patterns of module-relative package paths: "bridge"
// is that package alone, "translate/..." translate and every package below
// it, "..." every package, and "" the module's root (main).
type layer []string

func (l layer) has(pkg string) bool {
	for _, p := range l {
		switch {
		case p == "...":
			return true
		case strings.HasSuffix(p, "/..."):
			root := strings.TrimSuffix(p, "/...")
			if pkg == root || strings.HasPrefix(pkg, root+"/") {
				return true
			}
		case p == pkg:
			return true
		}
	}
	return false
}

// A rule says what the packages of from (but those of exempt) may import
// of the module: only what allow names, when allow is not nil, and never
// what deny names.
type rule struct {
	text         string // the rule as ARCHITECTURE.md states it
	from, exempt layer
	allow, deny  layer // allow empty but not nil: nothing at all
}

// leaves are the small packages that import nothing of the module. The
// wire tree is a leaf too, but for its own subpackages.
var leaves = layer{"internal/clock", "internal/pipesize", "internal/buildinfo", "internal/hcldecode", "bridge/tap"}

// toolkit is the conformance runs, traces and replay.
var toolkit = layer{"toolkit/..."}

// engine is the engine and the packages it is made of, which must not
// depend on how the bridge is launched, served or inspected.
var engine = layer{"bridge", "bridge/store", "bridge/localfs", "bridge/config", "bridge/tap"}

var rules = []rule{
	{
		text:  "the wire tree imports nothing of the module but itself",
		from:  layer{"internal/wire/..."},
		allow: layer{"internal/wire/..."},
	},
	{
		text:  "a leaf imports nothing of the module",
		from:  leaves,
		allow: layer{},
	},
	{
		text:  "translate/... imports only translate/..., internal/wire/... and internal/hcldecode",
		from:  layer{"translate/..."},
		allow: layer{"translate/...", "internal/wire/...", "internal/hcldecode"},
	},
	{
		text:  "legacy imports only internal/wire/... and the internal leaves",
		from:  layer{"legacy"},
		allow: append(layer{"internal/wire/..."}, leaves...),
	},
	{
		text: "the engine never imports the transports, the toolkit, the launcher, the server, the demo or the command line",
		from: engine,
		deny: append(layer{"legacy", "bridge/launch", "bridge/remote", "bridge/demo", "internal/cli"}, toolkit...),
	},
	{
		text: "the toolkit never imports the engine's root package (it taps the engine through bridge/tap)",
		from: toolkit,
		deny: layer{"bridge"},
	},
	{
		text:   "nothing but main imports internal/cli",
		from:   layer{"..."},
		exempt: layer{""},
		deny:   layer{"internal/cli"},
	},
	{
		text:   "nothing imports tests/... but tests/...",
		from:   layer{"..."},
		exempt: layer{"tests/..."},
		deny:   layer{"tests/..."},
	},
	{
		text:   "nothing imports tools/... but tools/...",
		from:   layer{"..."},
		exempt: layer{"tools/..."},
		deny:   layer{"tools/..."},
	},
}

// exceptions are edges the rules refuse but the tree still has, each with
// the reason it is tolerated. An exception no edge needs any more is an
// error too, so that it is deleted rather than left to excuse a new one.
var exceptions = []struct{ from, to, why string }{}

// broken returns the text of each rule the edge from → to breaks (both
// module-relative).
func broken(from, to string) []string {
	var out []string
	for _, r := range rules {
		if !r.from.has(from) || r.exempt.has(from) {
			continue
		}
		if r.allow != nil && !r.allow.has(to) || r.deny.has(to) {
			out = append(out, r.text)
		}
	}
	return out
}

// TestLayering lists every package's imports, for each operating system
// the bridge is built for (a file of one may import what the others' do
// not), and fails on each import of the module that a rule forbids. Only
// what a package links is checked: a test may reach further (the fake
// agents of tests/fakeagent, say).
func TestLayering(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to list the packages with")
	}
	used := make([]bool, len(exceptions))
	seen := map[string]bool{}
	for _, goos := range []string{"linux", "windows", "darwin"} {
		for from, imports := range moduleImports(t, goos) {
			for _, to := range imports {
				why := broken(from, to)
				if len(why) == 0 || seen[from+" "+to] {
					continue
				}
				seen[from+" "+to] = true
				excused := false
				for i, e := range exceptions {
					if e.from == from && e.to == to {
						used[i], excused = true, true
					}
				}
				if excused {
					continue
				}
				for _, w := range why {
					t.Errorf("%s imports %s (GOOS=%s), which breaks the rule: %s", show(from), show(to), goos, w)
				}
			}
		}
	}
	for i, e := range exceptions {
		if !used[i] {
			t.Errorf("the exception %s → %s (%s) excuses no import any more: delete it", show(e.from), show(e.to), e.why)
		}
	}
}

// show names a module-relative path in a message.
func show(pkg string) string {
	if pkg == "" {
		return "main (the module's root)"
	}
	return pkg
}

// moduleImports returns, for each of the module's packages as built for
// goos, its imports of the module's packages, all module-relative.
func moduleImports(t *testing.T, goos string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./...")
	cmd.Env = append(os.Environ(), "GOOS="+goos)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list for GOOS=%s: %v\n%s", goos, err, stderr.Bytes())
	}
	rel := func(path string) (string, bool) {
		if path == module {
			return "", true
		}
		p, ok := strings.CutPrefix(path, module+"/")
		return p, ok
	}
	graph := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		from, ok := rel(fields[0])
		if !ok {
			continue
		}
		graph[from] = nil
		for _, imp := range fields[1:] {
			if to, ok := rel(imp); ok {
				graph[from] = append(graph[from], to)
			}
		}
	}
	if len(graph) < 10 {
		t.Fatalf("go list for GOOS=%s found %d packages of the module; is the test running at its root?", goos, len(graph))
	}
	return graph
}

// The rules catch what they are meant to, and let pass what is allowed,
// whatever packages the tree holds today.
func TestLayeringRules(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		ok       bool
	}{
		{"internal/wire/ndjson", "internal/wire/slab", true},
		{"internal/wire", "translate", false},
		{"internal/wire/ndjson", "internal/clock", false},
		{"internal/clock", "internal/wire", false},
		{"bridge/tap", "bridge", false},
		{"translate/acp", "internal/hcldecode", true},
		{"translate/acp", "internal/wire", true},
		{"translate/rules", "bridge/store", false},
		{"translate", "internal/clock", false},
		{"legacy", "internal/wire/ndjson", true},
		{"legacy", "internal/pipesize", true},
		{"legacy", "bridge/ndjson", false},
		{"legacy", "translate", false},
		{"bridge", "legacy", false},
		{"bridge", "internal/wire/reclaim", true},
		{"bridge/store", "internal/cli", false},
		{"bridge/config", "bridge/launch", false},
		{"bridge", "toolkit/trace", false},
		{"bridge/launch", "legacy", true},
		{"toolkit/trace", "bridge/tap", true},
		{"toolkit/check", "legacy", true},
		{"toolkit/trace", "bridge", false},
		{"", "internal/cli", true},
		{"bridge/demo", "internal/cli", false},
		{"tests", "tests/fakeagent", true},
		{"toolkit/check", "tests/fakeagent/flawed", false},
		{"tools/release", "internal/buildinfo", true},
		{"internal/cli", "tools/release", false},
	} {
		if got := len(broken(tc.from, tc.to)) == 0; got != tc.ok {
			t.Errorf("%s → %s allowed = %v, want %v (rules broken: %q)", show(tc.from), show(tc.to), got, tc.ok, broken(tc.from, tc.to))
		}
	}
}

// productLimit is the most lines a product Go file may have: issue 51 asks
// for none over about 800, and the slack lets a file that reached the
// limit take a small fix before it must be split.
const productLimit = 850

// TestProductFilesStaySmall fails naming each product Go file (not a test,
// not under tests/, tools/ or a testdata/ directory) longer than
// productLimit lines, so that a newcomer finds a concern by a file's name
// rather than inside a file of several.
func TestProductFilesStaySmall(t *testing.T) {
	checked := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") ||
				path == "tests" || path == "tools" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		checked++
		lines := bytes.Count(data, []byte("\n"))
		if len(data) > 0 && data[len(data)-1] != '\n' {
			lines++
		}
		if lines > productLimit {
			t.Errorf("%s has %d lines, more than %d: split it by concern into files of the same package, each named for what it holds (ARCHITECTURE.md, \"Where each concern lives\")", filepath.ToSlash(path), lines, productLimit)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking the module: %v", err)
	}
	if checked < 50 {
		t.Fatalf("found %d product Go files; is the test running at the module's root?", checked)
	}
}
