//go:build !linux

package nbio

import "os"

// GrowPipe does nothing where pipes cannot be resized (F_SETPIPE_SZ is
// Linux's), and reports false.
func GrowPipe(f *os.File, size int) bool { return false }
