//go:build linux

package bridge

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/acp-bridge/acp-bridge/internal/nbio"
)

// TestEditorStreams_NbioWhereItServes: Serve reads and writes the editor's
// pipes through nbio, and the direct writes go through the same File; a
// regular file (a recorded session replayed, a log) is used as it is.
func TestEditorStreams_NbioWhereItServes(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	in, out, nb := editorStreams(r, w)
	if _, ok := in.(*nbio.File); !ok {
		t.Errorf("a pipe for stdin is read through %T, not nbio", in)
	}
	if nf, ok := out.(*nbio.File); !ok || nf != nb || nb == nil {
		t.Errorf("a pipe for stdout is written through %T (nb %p), not nbio's one File", out, nb)
	}
	if directWriter(w, nb) == nil {
		t.Error("no direct writer for a non-blocking pipe")
	}

	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in, out, nb = editorStreams(f, f)
	if in != any(f) || out != any(f) || nb != nil {
		t.Errorf("a regular file became %T and %T", in, out)
	}
}
