package launch

import (
	"os"
	"testing"
)

// Progress is for terminals only: a pipe or /dev/null (a character device,
// but not a terminal) gets none, and a nil Progress does nothing.
func TestNewProgressNotTerminal(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if p := NewProgress(w); p != nil {
		t.Error("NewProgress(pipe) is not nil")
	}
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if p := NewProgress(null); p != nil {
		t.Error("NewProgress(/dev/null) is not nil")
	}
	var p *Progress
	p.Step("x %d", 1)
	p.Clear()
}
