//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly || aix

package cli

import (
	"fmt"
	"os"
	"syscall"

	"github.com/acp-bridge/acp-bridge/internal/pipesize"
)

// editorPipeBytes is the capacity the ACP stream's pipe is given when it
// has less (Linux's default is 64 KiB). The editor writer writes without
// blocking and, when the pipe is full, waits for the poller to say it has
// room: with 64 KiB, a stream faster than its editor met a full pipe every
// few writes, and each time paid a short write, an EAGAIN, a wait in epoll
// and a wake-up. With 256 KiB, the bridge's own CPU for a warm turn of
// 200,000 updates through a child agent went from 61.6 to 52.9 ms
// (medians of 15 interleaved runs; the naive relay's 47.3), over a
// WebSocket from 86.9 to 76.3 ms (8 runs); 1 MiB did no better.
const editorPipeBytes = 256 << 10

// reserveStdout makes fd 1 the ACP stream's alone. It duplicates fd 1 to a
// new close-on-exec descriptor, returned for the editor writer, and then
// points fd 1 at stderr, so that a stray fmt.Print or a library writing to
// os.Stdout lands in the log instead of corrupting the ACP stream (agents
// that log on stdout break their clients). Panics already go to fd 2.
//
// It uses package syscall because golang.org/x/sys is not a dependency:
// syscall.Dup2 does not exist on every architecture (linux/arm64 and
// linux/riscv64 lack it), so dup2 is syscall.Dup3 on Linux (dup3.go) and
// syscall.Dup2 elsewhere (dup2.go). Systems with neither (solaris,
// illumos, windows, …) use the no-op in stdout_other.go.
func reserveStdout() (*os.File, error) {
	// Hold ForkLock so that no child is forked between Dup and
	// CloseOnExec and inherits the ACP stream.
	syscall.ForkLock.RLock()
	fd, err := syscall.Dup(1)
	if err == nil {
		syscall.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, fmt.Errorf("dup stdout: %w", err)
	}
	if err := dup2(2, 1); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("point stdout at stderr: %w", err)
	}
	out, _ := pollable(fd, "/dev/stdout (ACP)")
	pipesize.Grow(out, editorPipeBytes)
	return out, nil
}

// pollable returns fd as an *os.File in non-blocking mode when it is a pipe
// or a socket (polled), so that Go's poller serves it and read and write
// deadlines work: the bridge can then stop a read of stdin or a write to an
// editor that no longer reads, instead of leaving a goroutine blocked for
// good. A terminal or a regular file is left as it is (non-blocking mode on
// a shared terminal would leak into the shell after the bridge exits).
func pollable(fd int, name string) (f *os.File, polled bool) {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err == nil {
		switch st.Mode & syscall.S_IFMT {
		case syscall.S_IFIFO, syscall.S_IFSOCK:
			if syscall.SetNonblock(fd, true) == nil {
				return os.NewFile(uintptr(fd), name), true
			}
		}
	}
	return os.NewFile(uintptr(fd), name), false
}

// editorInput returns stdin for serving, pollable when it is a pipe or a
// socket (polled), so that Go's poller serves it and a read deadline can
// stop a read of an editor that went away. A polled stdin is what lets the
// relay run on one P (relayProcs): a read blocked in the kernel would hold
// that P.
func editorInput() (in *os.File, polled bool) {
	return pollable(0, "/dev/stdin")
}
