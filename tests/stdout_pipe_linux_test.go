package tests

import (
	"syscall"
	"testing"
	"time"
)

// The bridge gives the pipe it writes the ACP stream to 256 KiB of
// capacity (Linux's default is 64 KiB): a stream faster than its editor
// then meets a full pipe a fraction as often, and pays a fraction of the
// short writes, waits in epoll and wake-ups. Checked on the built binary
// as an editor starts it, with a pipe for stdout.
func TestStdout_PipeWidened(t *testing.T) {
	t.Parallel()
	tr := ChildTransport("acp")
	agent := tr.Start(t)
	b := StartBridge(t, agent.Args, agent.Env, nil)
	b.WriteLine(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
	b.Next(10 * time.Second)
	rc, err := b.outR.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var size uintptr
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		const fGetPipeSz = 1032 // F_GETPIPE_SZ, fcntl(2)
		size, _, errno = syscall.Syscall(syscall.SYS_FCNTL, fd, fGetPipeSz, 0)
	}); err != nil || errno != 0 {
		t.Fatalf("reading the pipe's capacity: %v %v", err, errno)
	}
	if size < 256<<10 {
		t.Errorf("the bridge's stdout pipe holds %d bytes, want at least 256 KiB", size)
	}
}
