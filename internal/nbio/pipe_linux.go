package nbio

import (
	"os"
	"syscall"
)

// Fcntl commands of Linux's <fcntl.h> that package syscall lacks.
const (
	fSetPipeSize = 1031 // F_SETPIPE_SZ
	fGetPipeSize = 1032 // F_GETPIPE_SZ
)

// GrowPipe gives the pipe f at least size bytes of capacity (Linux's
// default is 64 KiB), and reports whether it has them. It is best
// effort: the kernel refuses sizes above /proc/sys/fs/pipe-max-size, and
// any growth once the user's pipes hold more than their limit; the pipe
// then keeps its size, which works, only slower. The kernel takes the
// memory page by page as the pipe fills and gives it back as it drains.
func GrowPipe(f *os.File, size int) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	grown := false
	rc.Control(func(fd uintptr) {
		n, _, errno := syscall.Syscall(syscall.SYS_FCNTL, fd, fGetPipeSize, 0)
		if errno != 0 { // not a pipe
			return
		}
		if int(n) < size {
			n, _, errno = syscall.Syscall(syscall.SYS_FCNTL, fd, fSetPipeSize, uintptr(size))
		}
		grown = errno == 0 && int(n) >= size
	})
	return grown
}
