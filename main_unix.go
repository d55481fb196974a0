//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly || aix

package main

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
// linux/riscv64 lack it), so dup2 is syscall.Dup3 on Linux (main_dup3.go) and
// syscall.Dup2 elsewhere (main_dup2.go). Systems with neither (solaris,
// illumos, windows, …) use the no-op in main_other.go.
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
	return os.NewFile(uintptr(fd), "/dev/stdout (ACP)"), nil
}
