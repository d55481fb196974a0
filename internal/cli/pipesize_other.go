//go:build !linux

package cli

// widenPipe is a no-op where pipes cannot be resized (F_SETPIPE_SZ is
// Linux's).
func widenPipe(fd int) {}
