//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly || aix

package procs

import "syscall"

// StdinPollable reports whether stdin is a pipe or a socket: what the
// stdio relay polls (editorInput in internal/cli) and then runs on one P.
func StdinPollable() bool {
	var st syscall.Stat_t
	if err := syscall.Fstat(0, &st); err != nil {
		return false
	}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFIFO, syscall.S_IFSOCK:
		return true
	}
	return false
}
