package v2front

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acp-bridge/acp-bridge/translate/acpschema"
	"github.com/tidwall/gjson"
)

var update = flag.Bool("update", false, "rewrite the golden transcripts in testdata")

// A transcript is a sequence of lines: "editor MSG" is a message the v2
// editor sends, "engine MSG" one the engine writes for the editor; each is
// followed by what the Front made of it: "> editor MSG", "> engine MSG" and
// "> note NAME DETAIL". Lines starting with # are comments. The test feeds
// the inputs, rewrites the outputs and compares; -update writes them back.
func TestGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) == 0 {
		t.Fatal("no transcripts in testdata")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			got := run(t, src)
			if *update {
				if err := os.WriteFile(file, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if !bytes.Equal(got, src) {
				t.Errorf("transcript differs (go test -update to rewrite, then read the diff):\n%s", diff(string(src), string(got)))
			}
		})
	}
}

// run replays the inputs of a transcript and returns it with the Front's
// outputs. Every message for the editor is checked against the v2 schema,
// and every editor request must be answered exactly once.
func run(t *testing.T, src []byte) []byte {
	t.Helper()
	v := newChecker(t)
	f := New()
	var b bytes.Buffer
	for i, line := range strings.Split(strings.TrimRight(string(src), "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "> "):
			continue // regenerated
		case strings.HasPrefix(line, "editor "):
			b.WriteString(line + "\n")
			msg := []byte(strings.TrimPrefix(line, "editor "))
			v.editorSent(msg)
			write(&b, v, f.FromEditor(msg))
		case strings.HasPrefix(line, "engine "):
			b.WriteString(line + "\n")
			write(&b, v, f.FromEngine([]byte(strings.TrimPrefix(line, "engine "))))
		case line == "" || strings.HasPrefix(line, "#"):
			b.WriteString(line + "\n")
		default:
			t.Fatalf("line %d: not a transcript line: %q", i+1, line)
		}
	}
	v.finish()
	return b.Bytes()
}

func write(b *bytes.Buffer, v *checker, outs []Out) {
	for _, o := range outs {
		switch o.To {
		case ToEditor:
			v.toEditor(o.Frame)
			fmt.Fprintf(b, "> editor %s\n", o.Frame)
		case ToEngine:
			fmt.Fprintf(b, "> engine %s\n", o.Frame)
		case Note:
			fmt.Fprintf(b, "> note %s %s\n", o.Name, o.Detail)
		}
	}
}

// checker validates what a v2 editor receives.
type checker struct {
	t       testing.TB
	schema  *acpschema.Schema
	methods map[string]string // editor request id → method, while unanswered
	order   []string
}

func newChecker(t testing.TB) *checker {
	s, err := acpschema.LoadSchemaV2()
	if err != nil {
		t.Fatal(err)
	}
	return &checker{t: t, schema: s, methods: map[string]string{}}
}

func (c *checker) editorSent(msg []byte) {
	r := gjson.ParseBytes(msg)
	if r.Get("method").Exists() && r.Get("id").Exists() {
		c.methods[r.Get("id").Raw] = r.Get("method").Str
		c.order = append(c.order, r.Get("id").Raw)
	}
}

func (c *checker) toEditor(msg []byte) {
	c.t.Helper()
	for _, p := range c.schema.ValidateToClient(msg, c.methods[gjson.GetBytes(msg, "id").Raw]) {
		c.t.Errorf("v2 editor got %s\n  %s", msg, p)
	}
	r := gjson.ParseBytes(msg)
	if !r.Get("method").Exists() && r.Get("id").Exists() {
		delete(c.methods, r.Get("id").Raw)
	}
}

// finish reports editor requests never answered: a transcript ends with
// every request answered.
func (c *checker) finish() {
	for _, id := range c.order {
		if m, ok := c.methods[id]; ok {
			c.t.Errorf("editor request %s (%s) never answered", id, m)
		}
	}
}

func diff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n- %s\n+ %s\n", i+1, wl, gl)
		}
	}
	return b.String()
}
