//go:build !linux

package nbio_test

import (
	"os"
	"testing"

	"github.com/acp-bridge/acp-bridge/internal/nbio"
)

func TestOpen_ElsewhereNothing(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if nbio.OpenFile(r) != nil || nbio.OpenFile(w) != nil {
		t.Fatal("OpenFile served a pipe where nbio serves nothing")
	}
}
