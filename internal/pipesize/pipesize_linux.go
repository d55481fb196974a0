// Package pipesize grows a pipe's kernel buffer where the system allows it.
//
// A pipe holds 64 KiB on Linux by default. The bridge reads its child
// agent's stdout and writes the editor's stdout through pipes; a larger
// buffer lets a burst of updates pass in fewer reads and writes, and the
// kernel takes the memory page by page as the pipe fills and gives it back
// as it drains.
package pipesize

import (
	"os"

	"golang.org/x/sys/unix"
)

// Grow gives the pipe f at least size bytes of capacity, and reports
// whether it has them. It is best effort: the kernel refuses sizes above
// /proc/sys/fs/pipe-max-size, and any growth once the user's pipes hold
// more than their limit; the pipe then keeps its size, which works, only
// slower. f that is not a pipe is left as it is.
func Grow(f *os.File, size int) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	grown := false
	rc.Control(func(fd uintptr) {
		n, err := unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0)
		if err != nil { // not a pipe
			return
		}
		if n < size {
			n, err = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, size)
		}
		grown = err == nil && n >= size
	})
	return grown
}
