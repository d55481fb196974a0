//go:build unix

package legacy

import "syscall"

// canTryWrite says writeOnce works here.
const canTryWrite = true

// writeOnce makes one non-blocking write of b to rc (a pollable, so
// non-blocking, file or socket) and returns how much it took: 0 and no
// error when the stream takes nothing now.
func writeOnce(rc syscall.RawConn, b []byte) (int, error) {
	var n int
	var werr error
	if err := rc.Write(func(fd uintptr) bool {
		n, werr = syscall.Write(int(fd), b)
		return true // one attempt: never wait
	}); err != nil {
		return 0, err
	}
	if werr == syscall.EAGAIN {
		return 0, nil
	}
	if n < 0 {
		n = 0
	}
	return n, werr
}

// nonblocking reports whether rc's descriptor is in non-blocking mode, as
// writeOnce needs (Go's poller puts pipes and sockets in it).
func nonblocking(rc syscall.RawConn) bool {
	ok := false
	err := rc.Control(func(fd uintptr) {
		flags, _, errno := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
		ok = errno == 0 && flags&syscall.O_NONBLOCK != 0
	})
	return err == nil && ok
}
