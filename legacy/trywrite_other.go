//go:build !unix

package legacy

import (
	"errors"
	"syscall"

	"github.com/acp-bridge/acp-bridge/internal/nbio"
)

const canTryWrite = false

// onceWriter is not available here: TryWrite takes nothing. (nb is
// always nil: nbio serves Linux only.)
type onceWriter struct{ nb *nbio.File }

func newOnceWriter(syscall.RawConn) *onceWriter { return nil }

func (*onceWriter) write([]byte) (int, error) {
	return 0, errors.New("no non-blocking writes on this system")
}

func nonblocking(syscall.RawConn) bool { return false }
