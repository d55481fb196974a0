//go:build !unix

package legacy

import (
	"errors"
	"syscall"
)

const canTryWrite = false

// writeOnce is not available here: TryWrite then takes nothing.
func writeOnce(syscall.RawConn, []byte) (int, error) {
	return 0, errors.New("no non-blocking writes on this system")
}

func nonblocking(syscall.RawConn) bool { return false }
