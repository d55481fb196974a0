package legacy_test

import (
	"syscall"
	"testing"
)

// stdoutPipeSize returns the capacity of the pipe on fd 1 (F_GETPIPE_SZ),
// -1 when it cannot be told.
func stdoutPipeSize() int {
	n, _, errno := syscall.Syscall(syscall.SYS_FCNTL, 1, 1032, 0)
	if errno != 0 {
		return -1
	}
	return int(n)
}

// The child's stdout pipe holds 256 KiB, not Linux's default 64: an agent
// faster than a new bridge's first turn then runs ahead instead of
// stalling on a full pipe and waiting to be woken. Asked of the child
// itself, on the pipe it writes to.
func TestProcessStdoutPipeGrown(t *testing.T) {
	p, _ := startChild(t, "pipesize", nil)
	var got struct{ StdoutPipe int }
	readJSON(t, p, &got)
	if got.StdoutPipe < 256<<10 {
		t.Errorf("the child's stdout pipe holds %d bytes, want at least 256 KiB", got.StdoutPipe)
	}
}
