package early

import (
	"syscall"
	"testing"
)

// The early agent's stdout pipe has the room legacy.Command.Start gives
// a child's (childPipeBytes), as if the bridge had started it.
func TestStartGrowsStdoutPipe(t *testing.T) {
	p := start([]string{"sh", "-c", "exec sleep 30"})
	if p == nil {
		t.Skip("no sh(1) to start")
	}
	defer func() {
		p.Stdin.Close()
		syscall.Kill(-p.Proc.Pid, syscall.SIGKILL)
		p.Proc.Wait()
	}()
	rc, err := p.Stdout.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n uintptr
	rc.Control(func(fd uintptr) { n, _, _ = syscall.Syscall(syscall.SYS_FCNTL, fd, 1032 /* F_GETPIPE_SZ */, 0) })
	if n < 256<<10 {
		t.Errorf("the early agent's stdout pipe holds %d bytes, want at least 256 KiB", n)
	}
}
