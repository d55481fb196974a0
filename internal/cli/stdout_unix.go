//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly || aix

package cli

import (
	"fmt"
	"os"
	"syscall"
)

// reserveStdout makes fd 1 the ACP stream's alone. It duplicates fd 1 to a
// new close-on-exec descriptor, returned for the editor writer, and then
// points fd 1 at stderr, so that a stray fmt.Print or a library writing to
// os.Stdout lands in the log instead of corrupting the ACP stream (peers.md:
// logs on stdout broke clients). Panics already go to fd 2.
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
	if isPipe(fd) {
		widenPipe(fd)
	}
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

// isPipe reports whether fd is a pipe.
func isPipe(fd int) bool {
	var st syscall.Stat_t
	return syscall.Fstat(fd, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFIFO
}

// editorInput returns stdin for serving, pollable as the ACP stream is
// when it is a pipe or a socket (polled). Then the thread that waits for
// the editor is the one that waits for the agent, in one epoll_wait, and
// the relay runs on one P (relayProcs): a read blocked in the kernel
// would hold that P until sysmon took it back, 20 µs to 10 ms later,
// and every answer from the agent would wait for it (the echo's p50 went
// from 110 to 280 µs).
func editorInput() (in *os.File, polled bool) {
	return pollable(0, "/dev/stdin")
}
