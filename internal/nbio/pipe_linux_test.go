package nbio

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func pipeSize(t *testing.T, f *os.File) int {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n uintptr
	var errno syscall.Errno
	rc.Control(func(fd uintptr) { n, _, errno = syscall.Syscall(syscall.SYS_FCNTL, fd, fGetPipeSize, 0) })
	if errno != 0 {
		t.Fatalf("F_GETPIPE_SZ: %v", errno)
	}
	return int(n)
}

func TestGrowPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if !GrowPipe(w, 256<<10) {
		t.Fatal("GrowPipe(256 KiB) = false on a new pipe")
	}
	if got := pipeSize(t, r); got < 256<<10 {
		t.Errorf("the pipe holds %d bytes after GrowPipe(256 KiB)", got)
	}
	// A pipe that already holds more keeps its size.
	if !GrowPipe(r, 128<<10) {
		t.Error("GrowPipe(128 KiB) = false on a pipe that holds 256 KiB")
	}
	if got := pipeSize(t, w); got < 256<<10 {
		t.Errorf("GrowPipe(128 KiB) shrank the pipe to %d bytes", got)
	}
	// Not a pipe: nothing done, false.
	f, err := os.Create(filepath.Join(t.TempDir(), "file"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if GrowPipe(f, 256<<10) {
		t.Error("GrowPipe = true on a regular file")
	}
}
