//go:build unix

package legacy

import (
	"syscall"

	"github.com/acp-bridge/acp-bridge/internal/nbio"
)

// canTryWrite says non-blocking writes work here.
const canTryWrite = true

// onceWriter makes one non-blocking write at a time to a pollable (so
// non-blocking) file or socket. syscall.RawConn.Write takes a function;
// made afresh for each write, it and what it captures cost three
// allocations per write, so it is made once, here.
type onceWriter struct {
	nb  *nbio.File // where nbio serves the descriptor; then the rest is unused
	rc  syscall.RawConn
	b   []byte
	n   int
	err error
	do  func(fd uintptr) bool
}

func newOnceWriter(rc syscall.RawConn) *onceWriter {
	w := &onceWriter{rc: rc}
	w.do = w.writeFD
	return w
}

func (w *onceWriter) writeFD(fd uintptr) bool {
	w.n, w.err = syscall.Write(int(fd), w.b)
	return true // one attempt: never wait
}

// write makes one attempt to write b and returns how much it took: 0 and
// no error when the stream takes nothing now. One caller at a time.
func (w *onceWriter) write(b []byte) (int, error) {
	if w.nb != nil {
		return w.nb.TryWrite(b)
	}
	w.b = b
	err := w.rc.Write(w.do)
	n, werr := w.n, w.err
	w.b, w.n, w.err = nil, 0, nil
	if err != nil {
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
// onceWriter needs (Go's poller puts pipes and sockets in it).
func nonblocking(rc syscall.RawConn) bool {
	ok := false
	err := rc.Control(func(fd uintptr) {
		flags, _, errno := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
		ok = errno == 0 && flags&syscall.O_NONBLOCK != 0
	})
	return err == nil && ok
}
