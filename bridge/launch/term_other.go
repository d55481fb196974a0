//go:build !linux && !darwin && !freebsd && !netbsd && !openbsd && !dragonfly

package launch

import "os"

// isTerminal reports whether f is a character device, the best guess
// without a terminal attributes request.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
