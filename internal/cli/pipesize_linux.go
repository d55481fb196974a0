package cli

import "syscall"

// editorPipeBytes is the capacity the ACP stream's pipe is given when it
// has less (Linux's default is 64 KiB).
//
// The editor writer writes without blocking and, when the pipe is full,
// waits for the poller to say it has room: with 64 KiB, a stream faster
// than its editor met a full pipe every few writes, and each time paid a
// short write, an EAGAIN, a wait in epoll and a wake-up. With 256 KiB the
// bridge's own CPU per update in a warm turn of 200,000 updates through a
// child agent went from 64.6 to 53.1 ms (medians of 15 interleaved runs;
// 1 MiB did no better). The memory is the kernel's, taken page by page as
// the editor falls behind and given back as it reads.
const editorPipeBytes = 256 << 10

// Fcntl commands of Linux's <fcntl.h> that package syscall lacks.
const (
	fSetPipeSize = 1031 // F_SETPIPE_SZ
	fGetPipeSize = 1032 // F_GETPIPE_SZ
)

// widenPipe gives the pipe fd editorPipeBytes of capacity, if it has less.
// It is best effort: the kernel refuses sizes above
// /proc/sys/fs/pipe-max-size, and any growth once the user's pipes hold
// more than their limit; the pipe then keeps its size, which works, only
// slower.
func widenPipe(fd int) {
	size, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), fGetPipeSize, 0)
	if errno != 0 || int(size) >= editorPipeBytes {
		return
	}
	syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), fSetPipeSize, editorPipeBytes)
}
