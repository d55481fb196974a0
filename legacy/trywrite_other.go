//go:build !unix

package legacy

import (
	"errors"
	"syscall"
)

const canTryWrite = false

// onceWriter is not available here: TryWrite takes nothing.
type onceWriter struct{}

func newOnceWriter(syscall.RawConn) *onceWriter { return nil }

func (*onceWriter) write([]byte) (int, error) {
	return 0, errors.New("no non-blocking writes on this system")
}

func nonblocking(syscall.RawConn) bool { return false }
