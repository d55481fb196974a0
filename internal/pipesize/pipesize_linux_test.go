package pipesize

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func pipeSize(t *testing.T, f *os.File) int {
	t.Helper()
	n, err := unix.FcntlInt(f.Fd(), unix.F_GETPIPE_SZ, 0)
	if err != nil {
		t.Fatalf("F_GETPIPE_SZ: %v", err)
	}
	return n
}

func TestGrow(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if !Grow(w, 256<<10) {
		t.Fatal("Grow(256 KiB) = false on a new pipe")
	}
	if got := pipeSize(t, r); got < 256<<10 {
		t.Errorf("the pipe holds %d bytes after Grow(256 KiB)", got)
	}
	// A pipe that already holds more keeps its size.
	if !Grow(r, 128<<10) {
		t.Error("Grow(128 KiB) = false on a pipe that holds 256 KiB")
	}
	if got := pipeSize(t, w); got < 256<<10 {
		t.Errorf("Grow(128 KiB) shrank the pipe to %d bytes", got)
	}
	// Not a pipe: nothing done, false.
	f, err := os.Create(filepath.Join(t.TempDir(), "file"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if Grow(f, 256<<10) {
		t.Error("Grow = true on a regular file")
	}
}
