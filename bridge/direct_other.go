//go:build !unix

package bridge

import (
	"io"

	"github.com/acp-bridge/acp-bridge/internal/nbio"
)

// directWriter is nil where non-blocking writes are not offered: the
// editor writer's goroutine writes everything. (nbio serves no system
// here, so there is no nb.)
func directWriter(io.Writer, *nbio.File) func([]byte) (int, error) { return nil }
