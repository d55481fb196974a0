//go:build unix && !linux

package early

import "os"

// growPipe does nothing: only Linux grows pipes (see nbio.GrowPipe).
func growPipe(*os.File) {}
