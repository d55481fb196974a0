//go:build unix

package bridge

import (
	"io"
	"os"
	"syscall"

	"github.com/acp-bridge/acp-bridge/internal/nbio"
)

// directWriter returns a function that writes to w once without blocking,
// when w is a file in non-blocking mode (the editor's pipe or socket as
// the CLI opens it); else nil. A write the stream cannot take at once
// returns what it took (possibly nothing) and no error. nb, when not nil,
// is nbio's File over w, which makes the write.
func directWriter(w io.Writer, nb *nbio.File) func([]byte) (int, error) {
	if nb != nil {
		return nb.TryWrite
	}
	f, ok := w.(*os.File)
	if !ok {
		return nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	nonblocking := false
	if rc.Control(func(fd uintptr) {
		flags, _, errno := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
		nonblocking = errno == 0 && flags&syscall.O_NONBLOCK != 0
	}) != nil || !nonblocking {
		return nil
	}
	return func(b []byte) (int, error) {
		var n int
		var werr error
		err := rc.Write(func(fd uintptr) bool {
			n, werr = syscall.Write(int(fd), b)
			return true // one attempt: never wait for the stream
		})
		if n < 0 {
			n = 0
		}
		if werr == syscall.EAGAIN {
			werr = nil
		}
		if err != nil {
			return n, err
		}
		return n, werr
	}
}
